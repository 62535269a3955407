"""The AUC of the histogram protocol: binned empirical AUC or the plausible ROC-GLM through the edges, with noise."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..roc.auc import auc_ci_batch
from .auc import (
    check_sigma,
    histogram_auc,
    histogram_auc_noise_variance,
    histogram_delong_variance,
    histogram_rocglm,
    histogram_rocglm_noise_variance,
)
from .grid import check_counts, consistent_counts

__all__ = [
    "PLAUSIBLE_SDS",
    "ESTIMATORS",
    "DEFAULT_ESTIMATOR",
    "DEFAULT_TAIL_SIGMAS",
    "AucEstimates",
    "histogram_point_auc",
    "histogram_auc_estimates",
]

ESTIMATORS = ("rocglm", "empirical")
DEFAULT_ESTIMATOR = "rocglm"
# ROC points with fewer than this many noise SDs of estimated patients on either side are not fitted.
DEFAULT_TAIL_SIGMAS = 5.0
# A ROC-GLM fit further than the binning bound plus this many SDs (sampling + noise) from the binned
# empirical AUC is not used.
PLAUSIBLE_SDS = 3.0


class AucEstimates(NamedTuple):
    """The AUC part of a histogram validation for one or many histograms (arrays with one entry per row).

    ``estimator`` says per row which estimate ``auc`` is (``"rocglm"``, or ``"empirical"`` where the
    ROC-GLM could not be fitted or was not asked for); ``variance`` is sampling plus noise.
    """

    counts0: np.ndarray
    counts1: np.ndarray
    auc: np.ndarray
    variance: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    defined: np.ndarray
    estimator: np.ndarray
    auc_empirical: np.ndarray
    variance_empirical: np.ndarray
    sampling_variance: np.ndarray
    rocglm_params: np.ndarray
    rocglm_auc: np.ndarray
    rocglm_noise_variance: np.ndarray
    rocglm_points: np.ndarray


def _plausible_rocglm(c0, c1, auc_emp, var_emp, tail):
    """The ROC-GLM through the edges of consistent counts, its AUC NaN where it is not plausible: not
    converged, not increasing (``gamma2 <= 0``) or further from the binned empirical AUC than its binning
    bound (half the share of within-bin pairs) plus ``PLAUSIBLE_SDS`` SDs (few, noisy edges can give a
    wild binormal line)."""
    glm = histogram_rocglm(c0, c1, tail_count=tail)
    auc = glm.auc.copy()
    # The binned AUC counts within-bin pairs one half, so the unbinned AUC lies within half their share of it.
    within = 0.5 * (c0 * c1).sum(-1) / (c0.sum(-1) * c1.sum(-1))
    with np.errstate(invalid="ignore"):
        plausible = glm.converged & (glm.params[:, 1] > 0) & (
            np.abs(auc - auc_emp) <= within + PLAUSIBLE_SDS * np.sqrt(var_emp))
    auc[~plausible] = np.nan
    return glm.params, auc, glm.points


def histogram_point_auc(counts0, counts1, *, sigma: float, estimator: str = DEFAULT_ESTIMATOR,
                        tail_sigmas: float = DEFAULT_TAIL_SIGMAS) -> np.ndarray:
    """The AUC :func:`histogram_validation` reports, without its variance (no bootstrap), for consistent
    counts ``(R, B)`` with patients of both classes: the plausible ROC-GLM through the edges, else (and
    where a class holds fewer than two) the binned empirical AUC. For studies that need point estimates only."""
    sigma = check_sigma(sigma)
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    c0, c1 = check_counts(counts0, name="counts0"), check_counts(counts1, name="counts1", n_bins=np.shape(counts0)[-1])
    if c0.ndim != 2 or c0.shape != c1.shape:
        raise ValueError(f"counts0 and counts1 must both have shape (rows, bins), got {c0.shape} and {c1.shape}")
    auc_emp = np.asarray(histogram_auc(c0, c1))
    if estimator == "empirical":
        return auc_emp
    ok = (c0.sum(-1) >= 2) & (c1.sum(-1) >= 2)
    out = auc_emp.copy()
    if ok.any():
        var_emp = histogram_delong_variance(c0[ok], c1[ok]) + histogram_auc_noise_variance(c0[ok], c1[ok], sigma=sigma)
        _, auc_glm, _ = _plausible_rocglm(c0[ok], c1[ok], auc_emp[ok], var_emp,
                                          check_sigma(tail_sigmas, name="tail_sigmas") * sigma)
        out[ok] = np.where(np.isfinite(auc_glm), auc_glm, auc_emp[ok])
    return out


def histogram_auc_estimates(h0, h1, *, sigma: float, estimator: str = DEFAULT_ESTIMATOR,
                            tail_sigmas: float = DEFAULT_TAIL_SIGMAS, level: float = 0.95, noise_draws: int = 100,
                            seeds=None) -> AucEstimates:
    """AUC, variance and logit CI from summed noisy histograms, batched over rows ``(R, B)``.

    What :func:`histogram_validation` reports for one histogram, for many at once (the simulation study).
    Each row: counts made consistent; binned empirical AUC with DeLong (binned placement values) plus
    delta-method noise variance; the ROC-GLM through the edges with at least ``tail_sigmas * sigma``
    estimated patients of each class on either side, its noise variance by a parametric bootstrap
    (``noise_draws`` draws seeded by ``seeds[r]``, default ``r``); the reported AUC is the ``estimator``'s
    with variance DeLong plus its noise variance. The ROC-GLM is used only where it is plausible:
    converged, increasing (``gamma2 > 0``) and within the binning bound (half the share of within-bin
    pairs) plus ``PLAUSIBLE_SDS`` standard deviations of the binned empirical AUC (few, noisy edges can give
    a wild binormal line); elsewhere the empirical AUC is reported.
    Rows with fewer than two estimated patients of a class give NaN.
    """
    sigma = check_sigma(sigma)
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    tail_sigmas = check_sigma(tail_sigmas, name="tail_sigmas")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    raw0, raw1 = check_counts(h0, name="h0"), check_counts(h1, name="h1", n_bins=np.shape(h0)[-1])
    if raw0.ndim != 2 or raw0.shape != raw1.shape:
        raise ValueError(f"h0 and h1 must both have shape (rows, bins), got {raw0.shape} and {raw1.shape}")
    rows = raw0.shape[0]
    seeds = list(range(rows)) if seeds is None else list(seeds)
    if len(seeds) != rows:
        raise ValueError(f"seeds must give one seed per row ({rows}), got {len(seeds)}")
    c0, c1 = consistent_counts(raw0), consistent_counts(raw1)
    ok = (c0.sum(-1) >= 2) & (c1.sum(-1) >= 2)
    nan = np.full(rows, np.nan)
    auc_emp, sampling, var_emp = nan.copy(), nan.copy(), nan.copy()
    auc_emp[ok] = histogram_auc(c0[ok], c1[ok])
    sampling[ok] = histogram_delong_variance(c0[ok], c1[ok])
    var_emp[ok] = sampling[ok] + histogram_auc_noise_variance(c0[ok], c1[ok], sigma=sigma)
    params, auc_glm, points = np.full((rows, 2), np.nan), nan.copy(), np.zeros(rows, dtype=np.int64)
    var_glm = nan.copy()
    tail = tail_sigmas * sigma
    if estimator == "rocglm" and ok.any():
        params[ok], auc_glm[ok], points[ok] = _plausible_rocglm(c0[ok], c1[ok], auc_emp[ok], var_emp[ok], tail)
        fit = np.isfinite(auc_glm)
        if fit.any():
            var_glm[fit] = histogram_rocglm_noise_variance(c0[fit], c1[fit], sigma=sigma, draws=noise_draws,
                                                           seed=[seeds[i] for i in np.flatnonzero(fit)], tail_count=tail)
    use_glm = np.isfinite(auc_glm) & np.isfinite(var_glm)
    auc = np.where(use_glm, auc_glm, auc_emp)
    variance = np.where(use_glm, sampling + var_glm, var_emp)
    ci = auc_ci_batch(auc, np.where(np.isfinite(variance), variance, -1.0), level=level)
    used = np.where(use_glm, "rocglm", "empirical").astype(object)
    return AucEstimates(c0, c1, auc, variance, ci.lower, ci.upper, ci.defined, used, auc_emp, var_emp, sampling,
                        params, auc_glm, var_glm, points)
