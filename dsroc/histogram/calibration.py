"""Brier score and calibration from noisy histograms: binned Brier, merged-bin calibration curve, O/E, recalibration.

Counts are consistent per-class histograms ``(h0, h1)`` of shape ``(B,)``; each bin stands for its
representative score ``r_b`` (the midpoint by default). ``sigma`` is the noise SD of each summed cell.
Every variance is sampling variance plus the noise's variance (delta method), so intervals include the
privacy noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit
from scipy.stats import norm

from .auc import check_sigma

__all__ = [
    "MAX_SLOPE",
    "Estimate",
    "HistogramCalibrationCurve",
    "Recalibration",
    "histogram_brier",
    "scalar_brier",
    "histogram_calibration_curve",
    "calibration_in_the_large",
    "histogram_recalibration",
]


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its variance (sampling plus noise) and a normal confidence interval."""

    value: float
    variance: float
    lower: float
    upper: float

    @classmethod
    def normal(cls, value: float, variance: float, *, level: float) -> "Estimate":
        """``value +- z sqrt(variance)``."""
        z = norm.ppf(0.5 + level / 2.0)
        half = z * np.sqrt(max(variance, 0.0))
        return cls(float(value), float(variance), float(value - half), float(value + half))


def _check_level(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    return float(level)


def _one_histogram(h0, h1, representatives, *, per_class: bool = False):
    c0, c1 = np.asarray(h0, dtype=np.float64), np.asarray(h1, dtype=np.float64)
    r = np.asarray(representatives, dtype=np.float64)
    if per_class and r.ndim == 1:
        r = np.stack([r, r])
    if c0.ndim != 1 or c0.shape != c1.shape or r.shape != ((2,) if per_class else ()) + c0.shape:
        raise ValueError(f"h0, h1 and representatives must be 1-D of equal length, got {c0.shape}, {c1.shape}, {r.shape}")
    if not (np.isfinite(c0).all() and np.isfinite(c1).all()) or c0.min() < 0 or c1.min() < 0:
        raise ValueError("counts must be finite and non-negative (make noisy counts consistent first)")
    if not np.isfinite(r).all() or r.min() < 0.0 or r.max() > 1.0:
        raise ValueError("representatives must be probabilities in [0, 1] for Brier and calibration")
    if c0.sum() + c1.sum() <= 1:
        raise ValueError("the histograms hold fewer than two patients")
    return c0, c1, r


def histogram_brier(h0, h1, representatives, *, sigma: float, level: float = 0.95, within=None) -> Estimate:
    """Binned Brier score ``sum_b (h1_b ((1 - r1_b)^2 + v_b) + h0_b (r0_b^2 + v_b)) / n`` with sampling and noise variance.

    ``representatives`` is one score per bin ``r_b`` (both classes) or a ``(2, B)`` array of the negatives'
    and positives' mean scores per bin (from the score sums); ``within`` the variance of the scores within
    each bin ``v_b`` (default 0), which a patient's squared error adds to its class mean's.
    Sampling variance: ``var((y - r)^2) / n`` over the binned patients. Noise (delta method): the
    derivative with respect to ``h1_b`` is ``((1 - r1_b)^2 + v_b - BS) / n``, to ``h0_b`` ``(r0_b^2 + v_b - BS) / n``.
    """
    sigma, level = check_sigma(sigma), _check_level(level)
    c0, c1, r = _one_histogram(h0, h1, representatives, per_class=True)
    v = np.zeros(c0.shape) if within is None else np.asarray(within, dtype=np.float64)
    n = c0.sum() + c1.sum()
    e1, e0 = (1.0 - r[1]) ** 2 + v, r[0] ** 2 + v
    bs = float((c1 * e1 + c0 * e0).sum() / n)
    sampling = float((c1 * (e1 - bs) ** 2 + c0 * (e0 - bs) ** 2).sum() / (n - 1.0) / n)
    noise = float(sigma**2 * (((e1 - bs) ** 2).sum() + ((e0 - bs) ** 2).sum()) / n**2)
    return Estimate.normal(bs, sampling + noise, level=level)


def scalar_brier(sum_sq: float, n_hat: float, *, sigma_scalar: float, var_n: float, level: float = 0.95,
                 sampling_variance: float = 0.0) -> Estimate:
    """Unbinned Brier score from the noisy scalar release ``sum (y - p)^2`` (sensitivity 1) and the estimated ``n``.

    ``BS = S / n_hat``; noise variance by the delta method, ``(sigma_scalar^2 + BS^2 var_n) / n_hat^2``, where
    ``var_n`` is the noise variance of ``n_hat`` (``2 B sigma^2`` for the two summed histograms);
    ``sampling_variance`` (e.g. the binned one) is added.
    """
    level = _check_level(level)
    sigma_scalar, var_n = check_sigma(sigma_scalar, name="sigma_scalar"), check_sigma(var_n, name="var_n")
    if not (np.isfinite(sum_sq) and np.isfinite(n_hat) and n_hat > 1):
        raise ValueError(f"sum_sq must be finite and n_hat > 1, got {sum_sq}, {n_hat}")
    bs = float(np.clip(sum_sq / n_hat, 0.0, 1.0))
    noise = (sigma_scalar**2 + bs**2 * var_n) / n_hat**2
    return Estimate.normal(bs, noise + check_sigma(sampling_variance, name="sampling_variance"), level=level)


@dataclass(frozen=True)
class HistogramCalibrationCurve:
    """Calibration curve over merged bins.

    ``groups[i]`` is the ``(first, last)`` original bin of merged bin ``i``; ``count`` its estimated
    patients; ``observed`` the event rate with a Wald interval (``lower``, ``upper``, clipped to [0, 1])
    whose variance is the binomial one plus the noise's; ``predicted`` the count-weighted mean of the
    representatives. ``too_noisy`` marks merged bins that still fall short of ``min_count`` (only the
    last merged bin can).
    """

    groups: tuple
    count: np.ndarray
    observed: np.ndarray
    predicted: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    too_noisy: np.ndarray


def histogram_calibration_curve(h0, h1, representatives, *, sigma: float, min_count: float | None = None,
                                level: float = 0.95) -> HistogramCalibrationCurve:
    """Calibration curve from histograms: adjacent bins merged until their count supports a rate.

    Bins are merged from the lowest upwards until the merged estimated count reaches ``min_count``
    (default ``max(10, 10 sigma)``: the noise SD of a single bin's count is then at most 10 % of it);
    a short remainder at the top is merged into the bin below it. Observed rate ``o = h1 / (h0 + h1)``
    with variance ``o (1 - o) / m`` (binomial) plus ``k sigma^2 (h0^2 + h1^2) / m^4`` (noise, ``k`` the
    bins merged).
    """
    sigma, level = check_sigma(sigma), _check_level(level)
    c0, c1, r = _one_histogram(h0, h1, representatives)
    min_count = max(10.0, 10.0 * sigma) if min_count is None else check_sigma(min_count, name="min_count")
    total = c0 + c1
    groups, start, acc = [], 0, 0.0
    for b in range(total.size):
        acc += total[b]
        if acc >= min_count and acc > 0:
            groups.append([start, b])
            start, acc = b + 1, 0.0
    if start < total.size:
        if groups:
            groups[-1][1] = total.size - 1
        else:
            groups.append([0, total.size - 1])
    z = norm.ppf(0.5 + level / 2.0)
    rows = []
    for a, b in groups:
        m0, m1 = c0[a : b + 1].sum(), c1[a : b + 1].sum()
        m = m0 + m1
        k = b - a + 1
        if m <= 0:
            rows.append((0.0, np.nan, np.nan, np.nan, np.nan, True))
            continue
        o = m1 / m
        pred = float((total[a : b + 1] * r[a : b + 1]).sum() / m)
        var = o * (1 - o) / m + k * sigma**2 * (m0**2 + m1**2) / m**4
        half = z * np.sqrt(var)
        rows.append((m, o, pred, max(0.0, o - half), min(1.0, o + half), bool(m < min_count)))
    count, observed, predicted, lower, upper, noisy = (np.array(col) for col in zip(*rows))
    return HistogramCalibrationCurve(tuple(tuple(g) for g in groups), count, observed, predicted, lower, upper,
                                     noisy.astype(bool))


def calibration_in_the_large(observed: float, expected: float, *, var_observed: float, var_expected: float,
                             level: float = 0.95) -> Estimate:
    """Calibration-in-the-large ``O/E`` (observed over expected events) with a log-scale delta-method interval.

    From histograms: ``O = n1_hat``, ``E = sum_b (h0_b + h1_b) r_b``; from the scalar releases:
    ``O = sum y``, ``E = sum p``. The variances are those of ``O`` and ``E`` (sampling plus noise); the
    interval is ``exp(log(O/E) +- z sqrt(var_O/O^2 + var_E/E^2))`` and ``variance`` that of ``O/E``.
    """
    level = _check_level(level)
    if not (observed > 0 and expected > 0):
        raise ValueError(f"observed and expected events must be positive, got {observed} and {expected}")
    v_log = check_sigma(var_observed, name="var_observed") / observed**2 + check_sigma(var_expected, name="var_expected") / expected**2
    ratio = observed / expected
    z = norm.ppf(0.5 + level / 2.0)
    half = z * np.sqrt(v_log)
    return Estimate(float(ratio), float(ratio**2 * v_log), float(ratio * np.exp(-half)), float(ratio * np.exp(half)))


# A fitted calibration slope beyond this is quasi-separation of a few noisy bins, reported as no fit.
MAX_SLOPE = 50.0


@dataclass(frozen=True)
class Recalibration:
    """Logistic recalibration ``logit P(y = 1) = intercept + slope logit(r)`` fitted on the histograms.

    ``cov`` is the 2 x 2 covariance (sampling plus noise) of ``(intercept, slope)``; a perfectly
    calibrated model has intercept 0 and slope 1. ``intercept_range`` and ``slope_range`` (None: none) are a
    range the unbinned fit may lie in whatever the binning hides (:mod:`dsroc.histogram.slope`), ``range_cov``
    the covariance of its ends (default ``cov``); ``includes`` says what the intervals include.
    """

    intercept: float
    slope: float
    cov: np.ndarray
    converged: bool
    intercept_range: tuple | None = None
    slope_range: tuple | None = None
    includes: str = "sampling and the privacy noise"
    range_cov: np.ndarray | None = None

    def ci(self, *, level: float = 0.95) -> dict:
        """Intervals ``{"intercept": (lo, hi), "slope": (lo, hi)}``: the point's normal interval, or with a range
        the hull of that and the range widened by ``z`` of its ends' standard errors on either side."""
        z = norm.ppf(0.5 + _check_level(level) / 2.0)
        se = np.sqrt(np.diag(self.cov))
        se_range = se if self.range_cov is None else np.sqrt(np.diag(self.range_cov))
        out = {}
        for i, (name, value, bounds) in enumerate((("intercept", self.intercept, self.intercept_range),
                                                   ("slope", self.slope, self.slope_range))):
            lo, hi = value - z * se[i], value + z * se[i]
            if bounds is not None:
                lo, hi = min(lo, bounds[0] - z * se_range[i]), max(hi, bounds[1] + z * se_range[i])
            out[name] = (lo, hi)
        return out


def histogram_recalibration(h0, h1, representatives, *, sigma: float, max_iter: int = 50, tol: float = 1e-10,
                            regressor_variance=None) -> Recalibration:
    """Calibration intercept and slope from histograms: grouped logistic regression of ``h1_b`` events out of
    ``h0_b + h1_b`` on ``logit(r_b)``, by Newton-Raphson.

    Covariance: the inverse information (sampling) plus the noise's by the implicit-function delta method,
    ``sigma^2 I^-1 (sum_b x_b x_b' ((1 - mu_b)^2 + mu_b^2)) I^-1`` with ``x_b = (1, logit r_b)``, plus, where
    the representatives are noisy (within-bin means from noisy score sums) with ``regressor_variance[b]`` the
    variance of ``logit r_b``, ``I^-1 (sum_b g_b g_b' var_b) I^-1`` with ``g_b = dU/dx_b = (0, k_b - m_b mu_b) -
    m_b mu_b (1 - mu_b) slope x_b``, the score's derivative in the regressor.
    Representatives must lie strictly inside (0, 1). Without a finite estimate (separated bins, no
    convergence in ``max_iter`` steps, or a slope beyond ``MAX_SLOPE``) the intercept, slope and covariance are NaN and ``converged`` False.
    """
    sigma = check_sigma(sigma)
    c0, c1, r = _one_histogram(h0, h1, representatives)
    m = c0 + c1
    use = m > 0
    if r[use].min(initial=0.5) <= 0.0 or r[use].max(initial=0.5) >= 1.0:
        raise ValueError("representatives of occupied bins must lie strictly inside (0, 1) for the logit")
    x = np.column_stack([np.ones(use.sum()), logit(r[use])])
    k, m = c1[use], m[use]
    if np.unique(x[:, 1]).size < 2:
        raise ValueError("recalibration needs patients in at least two bins")
    theta = np.array([0.0, 1.0])
    converged = False
    for _ in range(max_iter):
        mu = expit(x @ theta)
        info = (x * (m * mu * (1 - mu))[:, None]).T @ x
        with np.errstate(all="ignore"):
            step = np.linalg.pinv(info) @ (x.T @ (k - m * mu))
        if not np.isfinite(step).all():
            break
        theta = theta + step
        if np.abs(step).max() < tol:
            converged = True
            break
    if not converged or abs(theta[1]) > MAX_SLOPE:
        # (Quasi-)separation: the events change from none to all across bins, and no finite MLE exists (a
        # slope beyond MAX_SLOPE is that drift stopped by the tolerance, not an estimate).
        return Recalibration(float("nan"), float("nan"), np.full((2, 2), np.nan), False)
    mu = expit(x @ theta)
    info = (x * (m * mu * (1 - mu))[:, None]).T @ x
    inv = np.linalg.pinv(info)
    middle = (x * ((1 - mu) ** 2 + mu**2)[:, None]).T @ x
    cov = inv + sigma**2 * inv @ middle @ inv
    if regressor_variance is not None:
        g = -(m * mu * (1 - mu) * theta[1])[:, None] * x
        g[:, 1] += k - m * mu
        cov = cov + inv @ ((g * np.asarray(regressor_variance, dtype=np.float64)[use][:, None]).T @ g) @ inv
    return Recalibration(float(theta[0]), float(theta[1]), cov, converged)
