"""Subgroups: every statistic per stratum from one stratified histogram release, and the differences between strata.

A stratified release splits every bin by the stratum of a covariate (a patient is in one cell of one
class, so the release has the sensitivity of a plain one). Each stratum's summed counts are an ordinary
histogram release of that stratum's patients, validated by :func:`dsroc.histogram_validation` with the
same per-cell noise; strata hold different patients and independent noise, so a difference between two
strata has the sum of their variances (sampling and noise).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from dsroc.histogram.estimates import DEFAULT_ESTIMATOR
from dsroc.histogram.validation import HistogramValidation, histogram_validation

__all__ = ["StratumDifference", "SubgroupAnalysis", "subgroup_analysis"]


@dataclass(frozen=True)
class StratumDifference:
    """``statistic`` of stratum ``stratum`` minus that of stratum ``reference``, with a normal interval.

    Attributes
    ----------
    statistic : {"AUC", "O/E"}
    stratum, reference : int
    difference, se : float
        The difference and its standard error (both strata's sampling and noise variances).
    ci : tuple of float
    p_value : float
        Two-sided test of no difference.
    """

    statistic: str
    stratum: int
    reference: int
    difference: float
    se: float
    ci: tuple[float, float]
    p_value: float


@dataclass(frozen=True)
class SubgroupAnalysis:
    """Each stratum's validation and the differences of its AUC and O/E from the first stratum's."""

    validations: tuple[HistogramValidation, ...]
    differences: tuple[StratumDifference, ...]


def _difference(statistic, k, a, va, b, vb, level) -> StratumDifference | None:
    if not all(np.isfinite(x) for x in (a, va, b, vb)):
        return None
    d, se = float(a - b), float(np.sqrt(va + vb))
    z = stats.norm.ppf(0.5 + level / 2)
    p = float(2 * stats.norm.sf(abs(d) / se)) if se > 0 else float(d == 0)
    return StratumDifference(statistic, k, 0, d, se, (d - z * se, d + z * se), p)


def subgroup_analysis(h0, h1, edges, *, sigma: float, estimator: str = DEFAULT_ESTIMATOR, level: float = 0.95,
                      sums0=None, sums1=None, sums_sigma=None, seed: int = 0) -> SubgroupAnalysis:
    """Validate every stratum of a stratified histogram release and compare each with the first.

    Parameters
    ----------
    h0, h1 : array_like, shape (B, S)
        Summed noisy counts of negatives and positives per bin (rows) and stratum (columns).
    edges : array_like, shape (B + 1,)
        The public grid.
    sigma : float
        Noise SD of each summed cell.
    estimator : {"rocglm", "empirical"}
        The AUC of each stratum (:func:`dsroc.histogram_validation`).
    level : float
        Confidence level of every interval.
    sums0, sums1 : array_like, shape (B, S), optional
        Summed noisy score sums per cell (in bin widths), of noise SD ``sums_sigma``.
    seed : int
        Seed of the ROC-GLM's noise bootstrap (stratum ``k`` uses ``seed + k``).
    """
    c0, c1 = np.asarray(h0, dtype=np.float64), np.asarray(h1, dtype=np.float64)
    if c0.ndim != 2 or c0.shape != c1.shape or c0.shape[1] < 2:
        raise ValueError(f"h0 and h1 must have the same shape (bins, strata) with at least 2 strata, got "
                         f"{c0.shape} and {c1.shape}")
    with_sums = sums0 is not None and sums1 is not None
    validations = []
    for k in range(c0.shape[1]):
        sums = {} if not with_sums else {"sums0": np.asarray(sums0)[:, k], "sums1": np.asarray(sums1)[:, k],
                                         "sums_sigma": sums_sigma}
        validations.append(histogram_validation(c0[:, k], c1[:, k], edges, sigma=sigma, estimator=estimator,
                                                level=level, seed=seed + k, **sums))
    differences = []
    ref = validations[0]
    for k, v in enumerate(validations[1:], start=1):
        differences.append(_difference("AUC", k, v.auc, v.auc_variance, ref.auc, ref.auc_variance, level))
        if v.oe is not None and ref.oe is not None:
            differences.append(_difference("O/E", k, v.oe.value, v.oe.variance, ref.oe.value, ref.oe.variance, level))
    return SubgroupAnalysis(tuple(validations), tuple(d for d in differences if d is not None))
