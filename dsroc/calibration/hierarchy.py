"""The calibration hierarchy (Van Calster et al. 2016/2019) from released calibration cells: O/E, intercept, slope, curve."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from .curve import CalibrationCurve
from ..histogram.calibration import Estimate, Recalibration, calibration_in_the_large, histogram_recalibration
from ..histogram.intercept import calibration_intercept

__all__ = ["CalibrationHierarchy", "calibration_hierarchy"]


@dataclass(frozen=True)
class CalibrationHierarchy:
    """Mean, weak and moderate calibration of a model over the released calibration cells.

    Attributes
    ----------
    n, observed, expected : float
        Patients, events and summed predictions in the released cells (withheld cells are not included).
    oe : Estimate
        Mean calibration: ``O/E`` with a log-scale interval (``var log(O/E) = (1 - O/n) / O``).
    intercept : Estimate
        Calibration-in-the-large: ``a`` of ``logit P(y=1) = a + logit(p)`` (slope fixed at 1); 0 is ideal.
    recalibration : Recalibration
        Weak calibration: ``(a, b)`` of ``logit P(y=1) = a + b logit(p)``; slope ``b`` = 1 is ideal.
    slope : Estimate
        The calibration slope ``b`` with its Wald interval.
    curve_lower, curve_upper : ndarray
        Moderate calibration: Wilson intervals of the observed proportion per aggregated bin (NaN where
        no site released the bin).
    level : float
        Confidence level of every interval.
    cells : int
        Number of (site, bin) cells the fits use; each cell stands for its patients at its mean prediction.
    """

    n: float
    observed: float
    expected: float
    oe: Estimate
    intercept: Estimate
    recalibration: Recalibration
    slope: Estimate
    curve_lower: np.ndarray
    curve_upper: np.ndarray
    level: float
    cells: int


def _cells(curve: CalibrationCurve) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Events, patients and mean prediction of every released (site, bin) cell."""
    k, m, r = [], [], []
    for site in curve.per_site.values():
        k.append(np.rint(site.observed * site.count))
        m.append(site.count)
        r.append(site.predicted)
    if not k:
        raise ValueError("the calibration curve holds no released cells")
    return (np.concatenate(k).astype(np.float64), np.concatenate(m).astype(np.float64),
            np.concatenate(r).astype(np.float64))


def _wilson(events: np.ndarray, n: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score intervals (no continuity correction) of ``events / n``, vectorised, in closed form."""
    z = float(ndtri(0.5 + level / 2.0))
    z2 = z * z
    centre = (events + z2 / 2.0) / (n + z2)
    half = z / (n + z2) * np.sqrt(events * (n - events) / n + z2 / 4.0)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def calibration_hierarchy(curve: CalibrationCurve, *, level: float = 0.95) -> CalibrationHierarchy:
    """Mean (O/E, calibration-in-the-large), weak (intercept and slope) and moderate (curve with intervals)
    calibration from the cells the sites released.

    The fits treat each released (site, bin) cell as its patients at the cell's mean prediction (the
    sites release no per-patient predictions); with narrow bins this approaches the patient-level
    logistic recalibration. Cells withheld as below q are left out of every statistic.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    k, m, r = _cells(curve)
    n, observed, expected = float(m.sum()), float(k.sum()), float(np.sum(m * r))
    if not 0 < observed < n:
        raise ValueError("the released cells hold no events or no non-events: calibration cannot be assessed")
    oe = calibration_in_the_large(observed, expected, var_observed=observed * (1.0 - observed / n), var_expected=0.0,
                                  level=level)
    intercept = calibration_intercept(k, m, r, level=level)
    recal = histogram_recalibration(m - k, k, r, sigma=0.0)
    lo, hi = recal.ci(level=level)["slope"]
    slope = Estimate(recal.slope, float(recal.cov[1, 1]), float(lo), float(hi))
    lower, upper = np.full(curve.count.size, np.nan), np.full(curve.count.size, np.nan)
    filled = curve.count > 0
    count = curve.count[filled].astype(np.float64)
    lower[filled], upper[filled] = _wilson(np.round(curve.observed[filled] * count), count, level)
    return CalibrationHierarchy(n, observed, expected, oe, intercept, recal, slope, lower, upper, float(level),
                                int(k.size))
