"""Kaplan-Meier survival of the events and of the censoring (reverse KM) at the time grid, with Greenwood variances.

Grouped times: a time bin holds continuous follow-up times whose order within the bin the release hides, so the
curves are the actuarial (life-table, Cutler-Ederer) estimates: the ``c_k`` patients censored within bin ``k``
were followed, on average, for half of it, and count one half at risk of its ``d_k`` events (``n_k - c_k / 2``
at risk); likewise the events count one half at risk of the censorings in the censoring KM ``G``
(``n_k - d_k / 2`` at risk of the ``c_k`` censorings). Counting every censored patient at risk of all of her
bin's events instead (the tied-times Kaplan-Meier) raised ``S`` at the horizon: the observed risk, and O/E, came
out 1-3 % low on 20 quantile time bins at 30-70 % censoring (the survival study); the life-table reading leaves
0.1 %. A bin holding events only or censorings only (one patient per bin, say) gets the Kaplan-Meier factor
exactly. Counts per time point are the cells summed over the score bins, clipped at zero; a hazard is 0 where
nobody is at risk and at most 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .counts import SurvivalHistogram, check_number

__all__ = ["SurvivalCurve", "kaplan_meier", "censoring_survival", "life_table", "check_level", "check_score_bins"]


def check_level(level) -> float:
    """Validate a confidence level: strictly between 0 and 1."""
    value = check_number(level, name="level")
    if not 0.0 < value < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    return value


def check_score_bins(hist: SurvivalHistogram, score_bins) -> slice:
    """The contiguous score bins ``(start, stop)`` (``0 <= start < stop <= J``) as a slice; ``None``: all."""
    n_bins = hist.shape[2]
    if score_bins is None:
        return slice(0, n_bins)
    try:
        start, stop = (int(v) for v in score_bins)
    except (TypeError, ValueError):
        raise ValueError(f"score_bins must be a pair (start, stop) of bin indices, got {score_bins!r}") from None
    if not 0 <= start < stop <= n_bins:
        raise ValueError(f"score_bins must satisfy 0 <= start < stop <= J = {n_bins}, got ({start}, {stop})")
    return slice(start, stop)


@dataclass(frozen=True)
class SurvivalCurve:
    """A product-limit curve at the time points ``t_1 < ... < t_K`` (a right-continuous step function).

    The arrays are ``(K,)``, or ``(..., K)`` for the curves of many histograms at once (:func:`life_table`).

    ``variance`` is Greenwood's ``S^2 sum d / (n (n - d))`` (0 once ``S`` is 0); ``lower``/``upper`` the
    pointwise log-log ("exponential Greenwood", as lifelines and R's ``conf.type = "log-log"``) interval
    ``S^exp(-+ z sqrt(sum d / (n (n - d))) / log S)``, equal to ``S`` where ``S`` is 0 or 1.
    """

    times: np.ndarray
    survival: np.ndarray
    variance: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    at_risk: np.ndarray
    events: np.ndarray

    def at(self, t) -> float:
        """``S(t)``: the value at the last time point ``<= t`` (1 before the first)."""
        k = int(np.searchsorted(self.times, float(t), side="right"))
        return 1.0 if k == 0 else float(self.survival[k - 1])

    def variance_at(self, t) -> float:
        """Greenwood variance of ``S(t)`` (0 before the first time point)."""
        k = int(np.searchsorted(self.times, float(t), side="right"))
        return 0.0 if k == 0 else float(self.variance[k - 1])

    @property
    def left_limits(self) -> np.ndarray:
        """``S(t_k-)``, the value just before each time point: ``(1, S(t_1), ..., S(t_{K-1}))``."""
        s = self.survival
        return np.concatenate([np.ones_like(s[..., :1]), s[..., :-1]], axis=-1)


def _product_limit(times, events, at_risk, level) -> SurvivalCurve:
    n = np.maximum(at_risk, 0.0)
    d = np.clip(events, 0.0, n)
    positive = n > 0.0
    hazard = np.divide(d, n, out=np.zeros_like(d), where=positive)
    survival = np.cumprod(1.0 - hazard, axis=-1)
    alive = n - d > 0.0
    terms = np.divide(d, n * (n - d), out=np.zeros_like(d), where=positive & alive)
    greenwood = np.cumsum(terms, axis=-1)
    variance = np.where(survival > 0.0, survival**2 * greenwood, 0.0)
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    inner = (survival > 0.0) & (survival < 1.0)
    log_s = np.log(np.where(inner, survival, 0.5))
    spread = np.exp(np.minimum(z * np.sqrt(greenwood) / np.abs(log_s), 700.0))  # beyond: S^spread is 0 anyway
    lower = np.where(inner, survival ** np.where(inner, spread, 1.0), survival)
    upper = np.where(inner, survival ** np.where(inner, 1.0 / spread, 1.0), survival)
    return SurvivalCurve(times=np.asarray(times, dtype=np.float64), survival=survival, variance=variance,
                         lower=lower, upper=upper, at_risk=n, events=d)


def life_table(counts, times, *, censoring: bool = False, level: float = 0.95) -> SurvivalCurve:
    """The life-table curve of cells ``counts`` ``(..., K, 2, J)`` at ``times``: the Kaplan-Meier ``S``, or the
    censoring survival ``G`` when ``censoring`` (see :func:`kaplan_meier` and :func:`censoring_survival`).

    Leading axes hold many histograms (the bootstrap's replicates), each curve along the last axis.
    """
    cells = np.maximum(np.sum(counts, axis=-1), 0.0)
    events, censored = cells[..., 1], cells[..., 0]
    at_risk = np.cumsum((events + censored)[..., ::-1], axis=-1)[..., ::-1]  # followed up to t_k: n_k = sum_{l >= k}
    if censoring:
        return _product_limit(times, censored, at_risk - 0.5 * np.minimum(events, at_risk), level)
    return _product_limit(times, events, at_risk - 0.5 * censored, level)


def kaplan_meier(hist: SurvivalHistogram, *, level: float = 0.95, score_bins=None) -> SurvivalCurve:
    """Kaplan-Meier estimate of the event-free survival ``S(t_k)`` with Greenwood variance.

    Parameters
    ----------
    hist : SurvivalHistogram
    level : float
        Confidence level of the pointwise log-log interval.
    score_bins : (int, int), optional
        ``(start, stop)``: the KM of the patients in score bins ``start .. stop-1`` only (a risk group).

    Returns
    -------
    SurvivalCurve
        ``S(t_k) = prod_{l <= k} (1 - d_l / (n_l - c_l / 2))`` with ``n_l`` the patients followed into bin ``l``
        and ``c_l`` those censored in it (the life-table estimate; ``at_risk`` holds ``n_l - c_l / 2``).
    """
    level = check_level(level)
    return life_table(hist.counts[:, :, check_score_bins(hist, score_bins)], hist.time_points, level=level)


def censoring_survival(hist: SurvivalHistogram, *, level: float = 0.95) -> SurvivalCurve:
    """Reverse Kaplan-Meier estimate of the censoring survival ``G(t_k) = P(C > t_k)``.

    ``G(t_k) = prod_{l <= k} (1 - c_l / (n_l - d_l / 2))``: the censorings are the events, and the ``d_l``
    events of bin ``l`` count one half at risk of its censorings (the life-table estimate). The IPC weights
    use ``G`` at a case's own time (:func:`dsroc.survival.discrimination.case_weights`) and ``G(t)`` for the
    controls at a horizon ``t``.

    Returns
    -------
    SurvivalCurve
        ``events`` holds the censorings, ``at_risk`` the ``n_l - d_l / 2``.
    """
    level = check_level(level)
    return life_table(hist.counts, hist.time_points, censoring=True, level=level)
