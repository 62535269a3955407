"""Calibration intercept and slope at a horizon from a survival histogram: a grouped proportional-hazards fit.

A predicted risk ``r`` of an event by ``t`` claims the cumulative hazard ``H(t | r) = -log(1 - r)``, that is
``log H(t | r) = x`` with ``x = log(-log(1 - r))`` (the complementary log-log of the risk). The released
cells give, per time bin ``k`` up to the horizon and score bin ``j``, the events ``d_kj`` among the ``n_kj``
patients still followed (events precede censorings in a bin), which is all the grouped-time proportional
hazards model of Prentice and Gloeckler (1978) needs:
``P(event in bin k | at risk, score bin j) = 1 - exp(-exp(alpha_k + b x_j))``, a binomial GLM with the
complementary log-log link, fitted here by Fisher scoring. Under it
``log H(t | x) = log(sum_{k: t_k <= t} exp(alpha_k)) + b x``, so

* the calibration slope is ``b`` (1 ideal; below 1 the predictions are too extreme), the discrete-time
  analogue of the Cox calibration slope on ``x`` (Crowson et al. 2016; Austin et al. 2020);
* the calibration intercept at ``t`` is ``a = log(sum_k exp(alpha_k))`` of the fit with ``b`` fixed at 1
  (``x`` as an offset): 0 ideal, positive when the observed cumulative hazard exceeds the predicted one.

``j`` runs over score bins, or over risk groups of contiguous score bins (fewer, larger cells: less noise per
cell); ``x_j`` is the complementary log-log of the mean predicted risk in it (from the released risk sums, else
the bins' midpoints), risks clipped to ``[1e-6, 1 - 1e-6]``. Noisy releases: the events and the numbers at risk
are the released sums as they are (unbiased), each then clipped into ``0 <= d <= n``; clipping every cell at zero
first would add phantom patients at risk to the sparse cells and flatten the slope. Time bins without events
leave the fit (their ``alpha_k`` is minus infinity, adding nothing to ``H``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .calibration import check_groups
from .counts import SurvivalHistogram

__all__ = ["GroupedCalibration", "grouped_calibration"]

_RISK_FLOOR = 1e-6


@dataclass(frozen=True)
class GroupedCalibration:
    """Calibration intercept (``b = 1``) and slope at ``horizon`` of the grouped proportional-hazards fit."""

    horizon: float
    intercept: float
    slope: float
    time_bins: int


def _group_cll(hist: SurvivalHistogram, bounds: np.ndarray) -> np.ndarray:
    n = np.add.reduceat(hist.counts.sum(axis=(0, 1)), bounds[:-1])
    sum_r, _ = hist.risk_sums()
    midpoints = hist.score_midpoints
    mid = np.array([midpoints[a:b].mean() for a, b in zip(bounds[:-1], bounds[1:])])
    mean = np.divide(np.add.reduceat(sum_r.sum(axis=(0, 1)), bounds[:-1]), n, out=mid.copy(), where=n > 0.0)
    mean = np.clip(mean, np.maximum(hist.score_edges[bounds[:-1]], _RISK_FLOOR),
                   np.minimum(hist.score_edges[bounds[1:]], 1.0 - _RISK_FLOOR))
    return np.log(-np.log1p(-mean))


def _fit(events, at_risk, x, *, free_slope: bool, max_iter: int = 100, tol: float = 1e-10):
    """Fisher scoring of ``alpha_k`` (and ``b`` when ``free_slope``; else ``b = 1``) on cells ``(k, j)``."""
    k_bins = events.shape[0]
    p_hat = np.clip(events.sum(axis=1) / at_risk.sum(axis=1), 1e-9, 1.0 - 1e-9)
    alpha = np.log(-np.log1p(-p_hat)) - np.average(x, weights=np.maximum(at_risk.sum(axis=0), 1e-12))
    b = 1.0
    for _ in range(max_iter):
        mu = np.exp(np.clip(alpha[:, None] + b * x[None, :], -700.0, 50.0))
        p = -np.expm1(-mu)
        p = np.maximum(p, 1e-300)
        score = mu * (events / p - at_risk)  # dl/deta
        weight = at_risk * mu * mu * (1.0 - p) / p  # Fisher information per cell
        u_alpha, i_alpha = score.sum(axis=1), weight.sum(axis=1)
        if free_slope:
            u = np.append(u_alpha, (score * x).sum())
            info = np.diag(np.append(i_alpha, (weight * x * x).sum()))
            info[:-1, -1] = info[-1, :-1] = (weight * x).sum(axis=1)
            try:
                step = np.linalg.solve(info, u)
            except np.linalg.LinAlgError:
                return None
            alpha, b = alpha + step[:-1], b + step[-1]
        else:
            if not (i_alpha > 0.0).all():
                return None
            step = u_alpha / i_alpha
            alpha = alpha + step
        if not (np.isfinite(alpha).all() and np.isfinite(b)):
            return None
        if np.max(np.abs(step)) < tol:
            return alpha, b
    return None


def grouped_calibration(hist: SurvivalHistogram, horizon, groups=None) -> GroupedCalibration:
    """Calibration intercept and slope at ``horizon`` by the grouped proportional-hazards fit (module docstring).

    Parameters
    ----------
    hist : SurvivalHistogram
        Its risks are predictions of an event by ``horizon``.
    horizon : float
        In ``(0, last finite time edge]``.
    groups : sequence of int, optional
        Risk groups as score-bin boundaries ``0 = b_0 < ... < b_G = J``; default every score bin its own.

    Returns
    -------
    GroupedCalibration
        NaN intercept and slope where the fit does not exist: no event before the horizon, a single group with
        patients (no slope), or no convergence (e.g. every patient at risk has the event in some bin).
    """
    kh = hist.horizon_index(horizon)
    bounds = np.arange(hist.shape[2] + 1) if groups is None else check_groups(hist, groups)
    cells = np.add.reduceat(hist.counts, bounds[:-1], axis=2)  # (K, 2, G)
    x = _group_cll(hist, bounds)
    at_risk = np.maximum(np.cumsum(cells.sum(axis=1)[::-1], axis=0)[::-1][:kh], 0.0)  # followed to bin k
    events = np.clip(cells[:kh, 1, :], 0.0, at_risk)
    used = events.sum(axis=1) > 0.0
    nan = GroupedCalibration(float(horizon), float("nan"), float("nan"), int(used.sum()))
    if not used.any():
        return nan
    events, at_risk = events[used], at_risk[used]
    with_patients = at_risk.sum(axis=0) > 0.0
    events, at_risk, x = events[:, with_patients], at_risk[:, with_patients], x[with_patients]
    fixed = _fit(events, at_risk, x, free_slope=False)
    free = _fit(events, at_risk, x, free_slope=True) if with_patients.sum() >= 2 else None
    intercept = float(np.log(np.exp(fixed[0]).sum())) if fixed is not None else float("nan")
    slope = float(free[1]) if free is not None else float("nan")
    return GroupedCalibration(float(horizon), intercept, slope, int(used.sum()))
