"""Empirical AUC, placement values and the DeLong variance and confidence intervals, in O(n log n)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import expit, logit, ndtr, ndtri

from .._checks import as_scores, is_sorted, split_by_class
from .dyadic import DyadicCounts

__all__ = [
    "BatchCI",
    "bias_aware_critical_value",
    "SurvivorFunction",
    "placement_values",
    "empirical_auc",
    "delong_variance",
    "delong_variance_from_moments",
    "auc_ci",
    "auc_ci_batch",
    "auc_test",
]

_TIES = ("mid", "strict")
_MIN_CELLS = 1 << 16  # grid cells a survivor function may count in, beyond twice its values
_CI_METHODS = ("logit", "wald")


def check_ties(ties: str) -> None:
    """Refuse an unknown tie convention."""
    if ties not in _TIES:
        raise ValueError(f"ties must be one of {_TIES}, got {ties!r}")


def survivor_from_counts(less, less_equal, n_ref, ties: str):
    """``S(c)`` from the number of reference values below ``c`` and at most ``c`` (arrays broadcast).

    ``(#{ref > c} + 1/2 #{ref = c}) / n`` with ``ties="mid"``; ``#{ref > c} / n`` with ``"strict"``.
    """
    greater = n_ref - less_equal
    if ties == "strict":
        return greater / n_ref
    return (greater + 0.5 * (less_equal - less)) / n_ref


class SurvivorFunction:
    """Empirical survivor function of a reference sample, counted or sorted once and evaluated many times.

    ``S(c) = (#{ref > c} + 1/2 #{ref = c}) / n`` with ``ties="mid"`` (the Mann-Whitney convention, so
    that the AUC computed from placement values equals the empirical AUC exactly, ties included), or
    ``S(c) = #{ref > c} / n`` with ``ties="strict"`` (the paper's simulation code).

    Parameters
    ----------
    ref_scores : array_like
        The reference sample (finite values).
    """

    def __init__(self, ref_scores, *, name: str = "ref_scores"):
        ref = as_scores(ref_scores, name=name)
        self._n = ref.size
        # Released noisy scores lie on a power-of-two lattice: counted per grid cell, they need neither a sort
        # nor binary searches (the same integer counts). Other values are sorted: an O(n) check spares a sort
        # of sorted input, and a stable sort (a merge sort) merges ascending runs, such as pooled per-site
        # releases, in a few passes.
        self._grid = DyadicCounts.of(ref, max_cells=2 * ref.size + _MIN_CELLS)
        self._sorted = None if self._grid is not None else ref if is_sorted(ref) else np.sort(ref, kind="stable")

    @property
    def n(self) -> int:
        """Size of the reference sample."""
        return self._n

    @property
    def sorted_values(self) -> np.ndarray:
        """The reference sample, sorted ascending (built anew at each access when counted on a grid)."""
        return self._grid.sorted_values() if self._sorted is None else self._sorted

    def sorted_blocks(self, size: int = 1 << 18):
        """The reference sample in ascending order, in consecutive blocks of about ``size`` values (for hashing
        or writing it without holding a sorted copy)."""
        if self._sorted is None:
            yield from self._grid.sorted_blocks(size)
            return
        for start in range(0, self._n, size):
            yield self._sorted[start:start + size]

    def __call__(self, query_scores, *, ties: str = "mid") -> np.ndarray:
        """Evaluate the survivor function at ``query_scores``.

        On a grid every query is one look-up. Otherwise the queries are searched in ascending order (sorted
        first unless they already are): binary searches that move through the reference in one direction
        are several times faster than in random order at 10^6 values, and give the same results bit for bit.
        """
        check_ties(ties)
        q = as_scores(query_scores, name="query_scores")
        if self._grid is not None:
            return survivor_from_counts(*self._grid.counts(q), self.n, ties)
        order = None if is_sorted(q) else np.argsort(q)
        qs = q if order is None else q[order]
        less, less_equal = self._counts(qs)
        values = survivor_from_counts(less, less_equal, self.n, ties)
        if order is None:
            return values
        out = np.empty_like(values)
        out[order] = values
        return out

    def _counts(self, qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``#{ref < q}`` and ``#{ref <= q}`` for ascending queries: one binary search per query, and a
        second only for the queries equal to some reference value (the two counts differ only there)."""
        ref = self._sorted
        less = np.searchsorted(ref, qs, side="left")
        tied = ref[np.minimum(less, ref.size - 1)] == qs
        if not tied.any():
            return less, less
        less_equal = less.copy()
        less_equal[tied] = np.searchsorted(ref, qs[tied], side="right")
        return less, less_equal


def placement_values(ref_scores, query_scores, *, ties: str = "mid") -> np.ndarray:
    """Survivor function of ``ref_scores`` evaluated at ``query_scores``.

    With ``ref_scores`` the negatives and ``query_scores`` the positives this gives the positives'
    placement values ``PV0_i = S0(s1_i)`` (their false positive rates); the other way round the
    negatives' ``PV1_j = S1(s0_j)``.

    Parameters
    ----------
    ref_scores, query_scores : array_like
        Finite scores.
    ties : {"mid", "strict"}, default "mid"
        Tie convention, see :class:`SurvivorFunction`.

    Returns
    -------
    ndarray
        One value in [0, 1] per query score.
    """
    return SurvivorFunction(ref_scores)(query_scores, ties=ties)


def _class_placements(scores, labels, *, min_per_class: int = 1):
    s0, s1 = split_by_class(scores, labels, min_per_class=min_per_class)
    pv0 = placement_values(s0, s1)  # positives' FPRs
    pv1 = placement_values(s1, s0)  # negatives' TPRs
    return pv0, pv1


def empirical_auc(scores, labels) -> float:
    """Empirical AUC (the Mann-Whitney statistic with ties counted one half).

    Computed as the mean of the negatives' placement values ``PV1_j = S1(s0_j)`` in O(n log n).
    """
    _, pv1 = _class_placements(scores, labels)
    return float(pv1.mean())


def delong_variance_from_moments(*, var_pv0, n1, var_pv1, n0):
    """DeLong variance from the sample variances of the placement values.

    ``var(AUC) = var(PV1) / n0 + var(PV0) / n1`` (DeLong 1988; Sun and Xu 2014), where ``PV0`` are the
    ``n1`` positives' placement values and ``PV1`` the ``n0`` negatives'. Arguments may be arrays (one
    entry per data set); a float is returned for scalar input.
    """
    for name, value in (("n0", n0), ("n1", n1)):
        if np.any(np.asarray(value) < 2):
            raise ValueError(f"{name} must be at least 2 for a sample variance, got {value}")
    for name, value in (("var_pv0", var_pv0), ("var_pv1", var_pv1)):
        v = np.asarray(value, dtype=np.float64)
        if not (np.isfinite(v).all() and (v >= 0).all()):
            raise ValueError(f"{name} must be a finite non-negative variance, got {value}")
    result = np.asarray(var_pv1, dtype=np.float64) / n0 + np.asarray(var_pv0, dtype=np.float64) / n1
    return float(result) if result.ndim == 0 else result


def delong_variance(scores, labels) -> float:
    """DeLong variance of the empirical AUC, exact with ties, in O(n log n).

    Needs at least two negatives and two positives (sample variances).
    """
    pv0, pv1 = _class_placements(scores, labels, min_per_class=2)
    return delong_variance_from_moments(
        var_pv0=float(pv0.var(ddof=1)), n1=pv0.size, var_pv1=float(pv1.var(ddof=1)), n0=pv1.size
    )


class BatchCI(NamedTuple):
    """Confidence intervals for many AUCs; ``defined`` is False where the interval does not exist."""

    lower: np.ndarray
    upper: np.ndarray
    defined: np.ndarray


def _check_ci_options(level: float, method: str) -> None:
    if method not in _CI_METHODS:
        raise ValueError(f"method must be 'logit' or 'wald', got {method!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")


def bias_aware_critical_value(ratio, level: float = 0.95) -> np.ndarray:
    """Critical value ``c`` with ``Phi(c - t) - Phi(-c - t) = level`` for ``t = ratio`` (bias bound / SE).

    ``estimate +- c SE`` then covers with probability at least ``level`` whenever the estimate's bias is
    at most ``t SE`` (Armstrong & Kolesar 2020, fixed-length bias-aware interval); ``c`` is ``z`` at
    ``t = 0`` and about ``t + z_(level)`` (one-sided) for large ``t``. Solved by bisection, elementwise.
    """
    t = np.abs(np.asarray(ratio, dtype=np.float64))
    # c - t lies between the one-sided and the two-sided normal quantile; bisect on it (exact for any t).
    lo, hi = np.full_like(t, ndtri(level)), np.full_like(t, ndtri(0.5 + level / 2.0))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        low = ndtr(mid) - ndtr(-mid - 2.0 * t) < level
        lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
    return t + 0.5 * (lo + hi)


def auc_ci_batch(auc, variance, *, level: float = 0.95, method: str = "logit", bias=0.0) -> BatchCI:
    """Vectorised :func:`auc_ci`: the same intervals for arrays of AUCs and variances.

    Where :func:`auc_ci` raises (an AUC of exactly 0 or 1 with the logit method, or an invalid input),
    the bounds are NaN and ``defined`` is False, so that a caller can record why. ``bias`` (>= 0, per
    AUC) bounds the estimate's absolute bias: where positive, ``z`` becomes
    :func:`bias_aware_critical_value` of ``bias / SE`` (the same ratio on the logit scale).
    """
    _check_ci_options(level, method)
    a = np.asarray(auc, dtype=np.float64)
    v = np.asarray(variance, dtype=np.float64)
    b = np.asarray(bias, dtype=np.float64)
    if not (np.isfinite(b).all() and (b >= 0).all()):
        raise ValueError(f"bias must be a finite non-negative bound, got {bias}")
    defined = np.isfinite(a) & (a >= 0.0) & (a <= 1.0) & np.isfinite(v) & (v >= 0.0)
    z = ndtri(0.5 + level / 2.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(v)
        if np.any(b > 0):
            z = np.where(b > 0, bias_aware_critical_value(b / np.maximum(se, 1e-300), level), z)
        if method == "wald":
            lo, hi = np.maximum(0.0, a - z * se), np.minimum(1.0, a + z * se)
        else:
            defined &= (a > 0.0) & (a < 1.0)
            half = z * se / (a * (1.0 - a))
            centre = logit(a)
            lo, hi = expit(centre - half), expit(centre + half)
    return BatchCI(np.where(defined, lo, np.nan), np.where(defined, hi, np.nan), defined)


def auc_ci(auc: float, variance: float, *, level: float = 0.95, method: str = "logit") -> tuple[float, float]:
    """Confidence interval for an AUC.

    Parameters
    ----------
    auc : float
        Point estimate in [0, 1].
    variance : float
        Its variance (e.g. DeLong).
    level : float, default 0.95
        Confidence level in (0, 1).
    method : {"logit", "wald"}, default "logit"
        ``"logit"``: ``expit(logit(A) +- z sqrt(var) / (A (1 - A)))`` (Pepe 2003, p. 107), which stays in
        (0, 1) and is undefined at A in {0, 1}. ``"wald"``: ``A +- z sqrt(var)`` clipped to [0, 1]
        (pROC's DeLong interval).

    Returns
    -------
    (lower, upper) : tuple of float
    """
    _check_ci_options(level, method)
    if not (np.isfinite(auc) and 0.0 <= auc <= 1.0):
        raise ValueError(f"auc must lie in [0, 1], got {auc}")
    if not (np.isfinite(variance) and variance >= 0.0):
        raise ValueError(f"variance must be finite and non-negative, got {variance}")
    if method == "logit" and auc in (0.0, 1.0):
        raise ValueError(
            f"the logit CI is undefined at AUC = {auc:g} (logit is infinite); use method='wald' "
            "or report the AUC without a logit interval"
        )
    ci = auc_ci_batch(auc, variance, level=level, method=method)
    return float(ci.lower), float(ci.upper)


def auc_test(ci: tuple[float, float], a0: float) -> bool:
    """Test ``H0: AUC <= a0``: reject (return True) when the whole interval lies above ``a0``."""
    lower, upper = ci
    if not lower <= upper:
        raise ValueError(f"ci must be (lower, upper) with lower <= upper, got {ci}")
    if not 0.0 <= a0 <= 1.0:
        raise ValueError(f"a0 must lie in [0, 1], got {a0}")
    return bool(lower > a0)
