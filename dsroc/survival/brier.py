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
from .kaplan_meier import censoring_survival, kaplan_meier

__all__ = ["brier_score", "integrated_brier_score", "scaled_brier"]


def _brier_by_index(hist: SurvivalHistogram) -> np.ndarray:
    """``BS`` with the first ``kh`` time bins before the horizon, for ``kh = 0 .. K`` (shape ``(K + 1,)``)."""
    n = hist.counts
    total = n.sum()
    if not total > 0.0:
        raise ValueError("hist holds no patients (the counts sum to zero or less)")
    sum_r, sum_r2 = hist.risk_sums()
    case_sq = (n[:, 1] - 2.0 * sum_r[:, 1] + sum_r2[:, 1]).sum(axis=1)  # sum (1 - r)^2 per time bin
    cases = np.concatenate([[0.0], np.cumsum(case_weights(hist) * case_sq)])
    control_sq = np.concatenate([np.cumsum(sum_r2.sum(axis=(1, 2))[::-1])[::-1], [0.0]])  # sum r^2, bins >= kh
    return np.maximum((cases + _control_weights(hist) * control_sq) / total, 0.0)


def _control_weights(hist: SurvivalHistogram) -> np.ndarray:
    """``1 / G(t)`` with the first ``kh`` time bins before ``t``, for ``kh = 0 .. K`` (0 where ``G(t) = 0``)."""
    g = np.concatenate([[1.0], censoring_survival(hist).survival])
    return np.divide(1.0, g, out=np.zeros_like(g), where=g > 0.0)  # G(t) = 0: nobody is followed beyond t


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
    points, scores = hist.time_points[keep], _brier_by_index(hist)[keep + 1]
    return float(np.trapezoid(scores, points) / (points[-1] - points[0]))


def scaled_brier(hist: SurvivalHistogram, horizon) -> float:
    """Scaled Brier score ``1 - BS(t) / BS_0(t)``: the null model predicts the pooled KM risk ``1 - S(t)`` for all.

    ``BS_0`` is the same IPCW score with ``r_i = 1 - S_KM(t)`` for every patient; 1 is perfect, 0 no better
    than the null model, negative worse.
    """
    kh = hist.horizon_index(horizon)
    score = _brier_by_index(hist)[kh]
    n = hist.counts
    r0 = 1.0 - kaplan_meier(hist).at(horizon)
    cases = (case_weights(hist)[:kh] * n[:kh, 1].sum(axis=1)).sum()
    null = (cases * (1.0 - r0) ** 2 + _control_weights(hist)[kh] * n[kh:].sum() * r0**2) / n.sum()
    if not null > 0.0:
        raise ValueError(f"horizon {horizon!r}: the null model's Brier score is 0 (no events or no survivors)")
    return float(1.0 - score / null)
