"""Calibration at a horizon from a survival histogram: observed (1 - KM) against mean predicted risk, by risk group.

A risk group is a run of contiguous score bins. Its observed risk is ``1 - S(t)`` of the Kaplan-Meier
of its patients (interval: the log-log Greenwood interval of ``S``, mirrored), its expected risk the mean
predicted risk of all its patients (from the risk sums, else the bin midpoints), and ``O/E`` their ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .counts import SurvivalHistogram
from .kaplan_meier import check_level, life_table

__all__ = ["ObservedExpected", "SurvivalCalibration", "calibration_at", "check_groups", "observed_expected"]


@dataclass(frozen=True)
class ObservedExpected:
    """Observed against expected risk at the horizon for the patients in score bins ``score_bins``.

    ``ratio`` is ``O/E``; its interval is ``O/E exp(-+ z sd(O) / O)`` (delta method on the log scale, the
    expected risk taken as fixed; ``sd(O)`` is Greenwood's). Bounds are NaN where ``O`` or ``E`` is 0;
    ``expected`` and ``ratio`` are NaN where the group's (noisy) number of patients is not positive.
    """

    score_bins: tuple[int, int]
    patients: float
    observed: float
    observed_lower: float
    observed_upper: float
    expected: float
    ratio: float
    ratio_lower: float
    ratio_upper: float


@dataclass(frozen=True)
class SurvivalCalibration:
    """Calibration at ``horizon``: one :class:`ObservedExpected` per risk group and one for all patients."""

    horizon: float
    groups: tuple[ObservedExpected, ...]
    overall: ObservedExpected


def check_groups(hist: SurvivalHistogram, groups) -> np.ndarray:
    """Validate risk-group boundaries: integer score-bin indices ``0 = b_0 < b_1 < ... < b_G = J``."""
    n_bins = hist.shape[2]
    b = np.asarray(groups)
    if b.ndim != 1 or b.size < 2 or b.dtype.kind not in "iu":
        raise ValueError(f"groups must be a 1-D sequence of integer score-bin boundaries, got {groups!r}")
    if b[0] != 0 or b[-1] != n_bins or np.any(np.diff(b) <= 0):
        raise ValueError(f"groups must increase strictly from 0 to J = {n_bins} (score-bin boundaries), got {b.tolist()}")
    return b.astype(np.int64)


def observed_expected(counts, sum_r, times, kh: int, start: int, stop: int, *, level: float = 0.95):
    """The Kaplan-Meier of score bins ``start .. stop-1``, their patients, observed and expected risk and
    ``O/E`` at the horizon (``kh`` time bins before it) from cells and risk sums ``(..., K, 2, J)``; the numbers
    ``(...)``, NaN as :class:`ObservedExpected` says."""
    km = life_table(counts[..., start:stop], times, level=level)
    observed = 1.0 - (np.ones_like(km.survival[..., 0]) if kh == 0 else km.survival[..., kh - 1])
    patients = counts[..., start:stop].sum(axis=(-3, -2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.where(patients > 0.0, np.clip(sum_r[..., start:stop].sum(axis=(-3, -2, -1)) / patients, 0.0,
                                                     1.0), np.nan)
        ratio = np.where(expected > 0.0, observed / expected, np.nan)
    return km, patients, observed, expected, ratio


def _observed_expected(hist, horizon, start, stop, level, z) -> ObservedExpected:
    bins = (int(start), int(stop))
    k = hist.horizon_index(horizon)
    km, patients, observed, expected, ratio = observed_expected(hist.counts, hist.risk_sums()[0], hist.time_points,
                                                                k, start, stop, level=level)
    s, s_lo, s_hi, var = (1.0, 1.0, 1.0, 0.0) if k == 0 else (km.survival[k - 1], km.lower[k - 1], km.upper[k - 1],
                                                               km.variance[k - 1])
    patients, observed, expected, ratio = float(patients), float(observed), float(expected), float(ratio)
    if observed > 0.0 and expected > 0.0:
        spread = np.exp(z * np.sqrt(var) / observed)
        ratio_lo, ratio_hi = ratio / spread, ratio * spread
    else:
        ratio_lo = ratio_hi = float("nan")
    return ObservedExpected(score_bins=bins, patients=patients, observed=observed, observed_lower=1.0 - float(s_hi),
                            observed_upper=1.0 - float(s_lo), expected=expected, ratio=float(ratio),
                            ratio_lower=float(ratio_lo), ratio_upper=float(ratio_hi))


def calibration_at(hist: SurvivalHistogram, horizon, groups, *, level: float = 0.95) -> SurvivalCalibration:
    """Observed risk ``1 - S_KM(t)`` against mean predicted risk, per risk group and overall, at ``horizon``.

    Parameters
    ----------
    hist : SurvivalHistogram
    horizon : float
        In ``(0, last finite time edge]``.
    groups : sequence of int
        Score-bin boundaries ``0 = b_0 < ... < b_G = J``: group ``g`` holds the bins ``b_g .. b_{g+1} - 1``.
    level : float
        Confidence level of the intervals.

    Returns
    -------
    SurvivalCalibration
        ``overall.ratio`` is ``O/E(t) = (1 - S_KM(t)) / mean predicted risk`` of the pooled patients.
    """
    level = check_level(level)
    hist.horizon_index(horizon)
    bounds = check_groups(hist, groups)
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    by_group = tuple(_observed_expected(hist, horizon, a, b, level, z) for a, b in zip(bounds[:-1], bounds[1:]))
    overall = _observed_expected(hist, horizon, 0, hist.shape[2], level, z)
    return SurvivalCalibration(horizon=float(horizon), groups=by_group, overall=overall)
