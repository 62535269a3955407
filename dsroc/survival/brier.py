"""Brier score for censored data from a survival histogram: Graf's IPCW score, its integral and the scaled score.

The histogram carries one predicted risk ``r`` per patient (of an event by the model's horizon), so the
score at any time ``t`` compares that one prediction with the status at ``t``; a model whose predictions
change with time needs one histogram per time. Squared errors come from the per-cell risk sums when the
histogram has them (exact), else from the bin midpoints (:meth:`SurvivalHistogram.risk_sums`).
"""

from __future__ import annotations

import numpy as np

from .counts import SurvivalHistogram, check_number
from .discrimination import case_weights
from .kaplan_meier import SurvivalCurve, censoring_survival, kaplan_meier

__all__ = ["brier_score", "integrated_brier_score", "scaled_brier", "brier_by_index", "control_weights",
           "integrated_by_index", "scaled_by_index"]


def brier_by_index(counts, risk_sums, case_w, control_w) -> np.ndarray:
    """``BS`` with the first ``kh`` time bins before the horizon, for ``kh = 0 .. K``: shape ``(..., K + 1)`` for
    cells ``(..., K, 2, J)``, their risk sums (``(sum r, sum r^2)``, same shape), the case weights ``(..., K)``
    and the control weights ``(..., K + 1)`` (:func:`control_weights`); NaN where the counts sum to 0 or less."""
    n = np.asarray(counts)
    total = n.sum(axis=(-3, -2, -1))
    sum_r, sum_r2 = risk_sums
    case_sq = (n[..., 1, :] - 2.0 * sum_r[..., 1, :] + sum_r2[..., 1, :]).sum(axis=-1)  # sum (1 - r)^2 per time bin
    zero = np.zeros_like(case_sq[..., :1])
    cases = np.concatenate([zero, np.cumsum(case_w * case_sq, axis=-1)], axis=-1)
    control_sq = np.concatenate([np.cumsum(sum_r2.sum(axis=(-2, -1))[..., ::-1], axis=-1)[..., ::-1], zero],
                                axis=-1)  # sum r^2, bins >= kh
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.maximum((cases + control_w * control_sq) / total[..., None], 0.0)
    return np.where(total[..., None] > 0.0, score, np.nan)


def _brier_by_index(hist: SurvivalHistogram) -> np.ndarray:
    if not hist.counts.sum() > 0.0:
        raise ValueError("hist holds no patients (the counts sum to zero or less)")
    return brier_by_index(hist.counts, hist.risk_sums(), case_weights(hist), _control_weights(hist))


def control_weights(censoring: SurvivalCurve) -> np.ndarray:
    """``1 / G(t)`` with the first ``kh`` time bins before ``t``, for ``kh = 0 .. K`` (0 where ``G(t) = 0``), from
    the censoring survival ``G`` (arrays ``(..., K)``; the weights ``(..., K + 1)``)."""
    s = censoring.survival
    g = np.concatenate([np.ones_like(s[..., :1]), s], axis=-1)
    return np.divide(1.0, g, out=np.zeros_like(g), where=g > 0.0)  # G(t) = 0: nobody is followed beyond t


def _control_weights(hist: SurvivalHistogram) -> np.ndarray:
    return control_weights(censoring_survival(hist))


def integrated_by_index(scores, times, keep) -> np.ndarray:
    """The trapezoidal mean of ``BS(t_k)`` over the time points ``keep`` (indices, at least two) from
    :func:`brier_by_index`'s ``scores`` ``(..., K + 1)``."""
    points = times[keep]
    return np.trapezoid(scores[..., keep + 1], points, axis=-1) / (points[-1] - points[0])


def scaled_by_index(scores, counts, survival, case_w, control_w, kh: int) -> np.ndarray:
    """``1 - BS(t) / BS_0(t)`` (:func:`scaled_brier`) with ``kh`` time bins before ``t`` from the scores of
    :func:`brier_by_index`, the cells and the Kaplan-Meier ``S`` ``(..., K)``; NaN where ``BS_0`` is 0."""
    n = np.asarray(counts)
    r0 = 1.0 - (np.ones_like(survival[..., 0]) if kh == 0 else survival[..., kh - 1])
    cases = (case_w[..., :kh] * n[..., :kh, 1, :].sum(axis=-1)).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        null = (cases * (1.0 - r0) ** 2 + control_w[..., kh] * n[..., kh:, :, :].sum(axis=(-3, -2, -1)) * r0**2) \
            / n.sum(axis=(-3, -2, -1))
        return np.where(null > 0.0, 1.0 - scores[..., kh] / null, np.nan)


def brier_score(hist: SurvivalHistogram, horizon) -> float:
    """Graf's IPCW Brier score at ``horizon`` (Graf et al. 1999; scikit-survival's ``brier_score``).

    ``BS(t) = (1/n) [sum_{T_i <= t, event} (1 - r_i)^2 / G(T_i-) + sum_{T_i > t} r_i^2 / G(t)]``; patients
    censored by ``t`` get weight 0 but count in ``n``.

    Parameters
    ----------
    hist : SurvivalHistogram
    horizon : float
        In ``(0, last finite time edge]``.
    """
    return float(_brier_by_index(hist)[hist.horizon_index(horizon)])


def integrated_brier_score(hist: SurvivalHistogram, tau, *, start=None) -> float:
    """Integrated Brier score over the grid's time points in ``[start, tau]`` by the trapezoidal rule.

    ``IBS = trapezoid(BS(t_k), t_k) / (t_last - t_first)`` over the time points ``t_k`` with
    ``start <= t_k <= tau`` (scikit-survival's ``integrated_brier_score`` evaluated at those points).
    ``start`` defaults to the first time point; at least two points must lie in the range.
    """
    kh = hist.horizon_index(tau, name="tau")
    keep = np.arange(kh)
    if start is not None:
        first = check_number(start, name="start")
        if not np.isfinite(first):
            raise ValueError(f"start must be a finite time or None, got {start!r}")
        keep = keep[hist.time_points[:kh] >= first]
    if keep.size < 2:
        raise ValueError(f"tau (with start): at least two time points must lie in [start, tau], got {keep.size}")
    return float(integrated_by_index(_brier_by_index(hist), hist.time_points, keep))


def scaled_brier(hist: SurvivalHistogram, horizon) -> float:
    """Scaled Brier score ``1 - BS(t) / BS_0(t)``: the null model predicts the pooled KM risk ``1 - S(t)`` for all.

    ``BS_0`` is the same IPCW score with ``r_i = 1 - S_KM(t)`` for every patient; 1 is perfect, 0 no better
    than the null model, negative worse.
    """
    kh = hist.horizon_index(horizon)
    curve = kaplan_meier(hist)
    value = float(scaled_by_index(_brier_by_index(hist), hist.counts, curve.survival, case_weights(hist),
                                  _control_weights(hist), kh))
    if np.isnan(value):
        raise ValueError(f"horizon {horizon!r}: the null model's Brier score is 0 (no events or no survivors)")
    return value
