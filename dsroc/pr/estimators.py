"""AUCPR estimators and their confidence intervals (Boyd, Eng and Page 2013; Boyd 2014, ch. 4).

Point estimators work on :class:`dsroc.pr.space.PRPoints`, so they apply equally to raw scores and to
released counts (post-processing); the binormal estimator needs the class means and SDs. Intervals:
binomial and logit (n = n1), stratified percentile bootstrap and k-fold cross-validation.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
from scipy import integrate, stats
from scipy.special import expit, logit

from .._checks import check_rng, check_scores_labels, split_by_class
from .space import PRPoints, average_precision, pr_points

__all__ = [
    "ESTIMATORS",
    "INTERVALS",
    "AUCPRInterval",
    "recall_precision_extremes",
    "aucpr_lower_trapezoid",
    "aucpr_upper_trapezoid",
    "aucpr_interpolated",
    "aucpr_binormal",
    "aucpr_from_distributions",
    "aucpr",
    "aucpr_interval",
]

ESTIMATORS = ("lower_trapezoid", "upper_trapezoid", "interpolated", "average_precision", "binormal")
INTERVALS = ("binomial", "logit", "bootstrap", "cross_validation")
_AGGREGATES = ("max", "mean", "median")


class AUCPRInterval(NamedTuple):
    """A point estimate with its interval; ``method`` names the interval, ``n1`` the count it used."""

    estimate: float
    lower: float
    upper: float
    method: str
    level: float
    n1: float


def recall_precision_extremes(points: PRPoints, *, aggregate: str | None = None):
    """Distinct positive recalls ``r_i`` with the largest and smallest precision attained at each.

    Returns ``(recall, p_max, p_min)``, or ``(recall, p)`` with ``aggregate`` in {"max", "mean",
    "median"} (one precision per recall: the max, mean or median of the precisions at that recall).
    """
    keep = points.tp > 0
    tp, fp = points.tp[keep], points.fp[keep]
    recall, precision = tp / points.n1, tp / (tp + fp)
    if recall.size and (np.diff(tp) >= 0).all() and (np.diff(fp) >= 0).all():
        return _extremes_of_runs(recall, precision, aggregate)
    distinct, index = np.unique(recall, return_inverse=True)
    if aggregate is None:
        p_max = np.full(distinct.size, -np.inf)
        p_min = np.full(distinct.size, np.inf)
        np.maximum.at(p_max, index, precision)
        np.minimum.at(p_min, index, precision)
        return distinct, p_max, p_min
    if aggregate not in _AGGREGATES:
        raise ValueError(f"aggregate must be one of {_AGGREGATES}, got {aggregate!r}")
    if aggregate == "max":
        p = np.full(distinct.size, -np.inf)
        np.maximum.at(p, index, precision)
    elif aggregate == "mean":
        p = np.bincount(index, weights=precision) / np.bincount(index)
    else:
        order = np.lexsort((precision, index))  # by recall, then precision
        counts = np.bincount(index)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        sorted_p = precision[order]
        p = 0.5 * (sorted_p[starts + (counts - 1) // 2] + sorted_p[starts + counts // 2])
    return distinct, p


def _extremes_of_runs(recall, precision, aggregate):
    """:func:`recall_precision_extremes` of a ranking's points (tp and fp non-decreasing, as every curve
    of :mod:`dsroc.pr.space` is): each recall is one run of points along which the precision does not
    increase, so its first and last points are the extremes and its middle ones the median, in O(n)."""
    starts = np.flatnonzero(np.concatenate(([True], recall[1:] != recall[:-1])))
    ends = np.concatenate((starts[1:], [recall.size])) - 1
    distinct = recall[starts]
    if aggregate is None:
        return distinct, precision[starts], precision[ends]
    if aggregate not in _AGGREGATES:
        raise ValueError(f"aggregate must be one of {_AGGREGATES}, got {aggregate!r}")
    if aggregate == "max":
        return distinct, precision[starts]
    counts = ends - starts + 1
    if aggregate == "mean":
        return distinct, np.add.reduceat(precision, starts) / counts
    return distinct, 0.5 * (precision[starts + (counts - 1) // 2] + precision[starts + counts // 2])


def _trapezoid(points: PRPoints, *, upper: bool, first_segment: bool) -> float:
    r, p_max, p_min = recall_precision_extremes(points)
    left, right = (p_max, p_min) if upper else (p_min, p_max)
    area = float(np.sum(0.5 * (left[:-1] + right[1:]) * np.diff(r)))
    if first_segment:
        area += r[0] * (p_max[0] if upper else p_min[0])
    return area


def aucpr_lower_trapezoid(points: PRPoints, *, first_segment: bool = False) -> float:
    """Lower trapezoid ``sum_i (p_i^min + p_{i+1}^max) / 2 (r_{i+1} - r_i)`` (Boyd 2014, eq. 4.4).

    As printed it covers [r_1, 1]; ``first_segment=True`` adds ``r_1 p_1^min`` for [0, r_1].
    """
    return _trapezoid(points, upper=False, first_segment=first_segment)


def aucpr_upper_trapezoid(points: PRPoints, *, first_segment: bool = False) -> float:
    """Upper trapezoid with ``(p_i^max + p_{i+1}^min) / 2``: optimistic, for comparison only.

    ``first_segment=True`` adds ``r_1 p_1^max``.
    """
    return _trapezoid(points, upper=True, first_segment=first_segment)


def _dg_segment_areas(r1, p1, r2, p2) -> np.ndarray:
    """Area under the Davis-Goadrich interpolation ``p(r) = r / (a r + b)`` between two PR points."""
    d = r2 - r1
    with np.errstate(divide="ignore", invalid="ignore"):
        a = 1.0 + (1.0 - p2) * r2 / (p2 * d) - (1.0 - p1) * r1 / (p1 * d)
        b = (1.0 - p1) * r1 / p1 - (1.0 - p2) * r1 * r2 / (p2 * d) + (1.0 - p1) * r1**2 / (p1 * d)
        general = (a * r2 - b * np.log(a * r2 + b) - a * r1 + b * np.log(a * r1 + b)) / a**2
        linear = (r2**2 - r1**2) / (2.0 * b)
    return np.where(np.abs(a) < 1e-12, linear, general)


def aucpr_interpolated(points: PRPoints, *, aggregate: str = "median", first_segment: bool = False) -> float:
    """Davis-Goadrich interpolated AUCPR (Boyd 2014, Thm 4.1/4.2), one point per recall.

    Between consecutive recalls the precision follows ``p(r) = r / (a r + b)`` (the interpolation of
    the TP and FP counts). ``aggregate`` picks the point per recall: "median" (recommended), "mean" or
    "max" (biased up). ``first_segment=True`` adds [0, r_1] at the first point's precision.
    """
    r, p = recall_precision_extremes(points, aggregate=aggregate)
    area = float(np.sum(_dg_segment_areas(r[:-1], p[:-1], r[1:], p[1:])))
    if first_segment:
        area += r[0] * p[0]
    return area


def aucpr_from_distributions(negative, positive, prevalence: float) -> float:
    """True AUCPR of two score distributions (frozen ``scipy.stats`` objects) at a prevalence.

    ``int_0^1 pi t / (pi t + (1 - pi) FPR(t)) dt`` with ``FPR(t) = S0(S1^-1(t))``: the precision at recall t.
    """
    pi = float(prevalence)
    if not 0.0 < pi < 1.0:
        raise ValueError(f"prevalence must lie strictly between 0 and 1, got {prevalence!r}")

    def precision(t: float) -> float:
        fpr = negative.sf(positive.isf(t))
        return pi * t / (pi * t + (1.0 - pi) * fpr)

    return float(integrate.quad(precision, 0.0, 1.0, limit=200, epsabs=1e-11, epsrel=1e-10)[0])


def aucpr_binormal(scores, labels) -> float:
    """Binormal AUCPR estimate (Boyd 2014, section 4.2.4): fit a normal to each class (sample mean and SD)
    and integrate ``pi t / (pi t + (1 - pi) Phi((mu_x - mu_y)/sigma_x + (sigma_y/sigma_x) Phi^-1(t)))``,
    with ``pi = n1 / N`` (negatives x, positives y)."""
    s0, s1 = split_by_class(scores, labels, min_per_class=2)
    sd0, sd1 = float(s0.std(ddof=1)), float(s1.std(ddof=1))
    if sd0 <= 0 or sd1 <= 0:
        raise ValueError("the binormal estimator needs scores that vary within each class")
    pi = s1.size / (s0.size + s1.size)
    return aucpr_from_distributions(stats.norm(s0.mean(), sd0), stats.norm(s1.mean(), sd1), pi)


def _estimator(name: str, options: dict) -> Callable[[np.ndarray, np.ndarray], float]:
    if name not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {name!r}")
    if name == "binormal":
        if options:
            raise ValueError(f"the binormal estimator takes no options, got {sorted(options)}")
        return aucpr_binormal
    point_fn = {
        "lower_trapezoid": aucpr_lower_trapezoid,
        "upper_trapezoid": aucpr_upper_trapezoid,
        "interpolated": aucpr_interpolated,
        "average_precision": lambda pts: average_precision(points=pts),
    }[name]
    if name == "average_precision" and options:
        raise ValueError(f"average precision takes no options, got {sorted(options)}")
    return lambda s, y: point_fn(pr_points(s, y), **options)


def aucpr(scores, labels, *, estimator: str = "average_precision", **options) -> float:
    """AUCPR of scored data by one of :data:`ESTIMATORS` (options go to the estimator, e.g.
    ``aggregate="median"``, ``first_segment=True``)."""
    s, y = check_scores_labels(scores, labels)
    return float(_estimator(estimator, options)(s, y))


def aucpr_interval(scores, labels, *, estimator: str = "average_precision", method: str = "logit",
                   level: float = 0.95, rng: np.random.Generator | None = None, n_boot: int = 1000,
                   folds: int = 10, fold_se: bool = True, **options) -> AUCPRInterval:
    """Confidence interval for an AUCPR estimate (Boyd 2014, section 4.3).

    Parameters
    ----------
    method : {"binomial", "logit", "bootstrap", "cross_validation"}
        ``"binomial"``: ``theta +- z sqrt(theta (1 - theta) / n1)``; ``"logit"``:
        ``expit(logit(theta) +- z / sqrt(n1 theta (1 - theta)))``; ``"bootstrap"``: stratified (both
        classes resampled separately) percentile interval of ``n_boot`` replicates; ``"cross_validation"``:
        stratified ``folds``-fold estimates, ``mean +- z sd / sqrt(folds)`` (``fold_se=False``: ``+- z sd``).
    rng : numpy.random.Generator
        Required for the bootstrap and cross-validation.
    """
    if method not in INTERVALS:
        raise ValueError(f"method must be one of {INTERVALS}, got {method!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    s, y = check_scores_labels(scores, labels)
    fn = _estimator(estimator, options)
    theta = float(fn(s, y))
    n1 = int(y.sum())
    z = float(stats.norm.ppf(0.5 + level / 2.0))
    if method == "binomial":
        half = z * math.sqrt(max(theta * (1.0 - theta), 0.0) / n1)
        return AUCPRInterval(theta, theta - half, theta + half, method, level, n1)
    if method == "logit":
        if not 0.0 < theta < 1.0:
            raise ValueError(f"the logit interval is undefined at an estimate of {theta:g}")
        half = z / math.sqrt(n1 * theta * (1.0 - theta))
        return AUCPRInterval(theta, float(expit(logit(theta) - half)), float(expit(logit(theta) + half)), method, level, n1)
    rng = check_rng(rng)
    neg, pos = np.flatnonzero(y == 0), np.flatnonzero(y == 1)
    if method == "bootstrap":
        if isinstance(n_boot, bool) or int(n_boot) != n_boot or n_boot < 2:
            raise ValueError(f"n_boot must be an integer >= 2, got {n_boot!r}")
        reps = np.empty(int(n_boot))
        for b in range(int(n_boot)):
            idx = np.concatenate([rng.choice(neg, neg.size), rng.choice(pos, pos.size)])
            reps[b] = fn(s[idx], y[idx])
        lo, hi = np.quantile(reps, [0.5 - level / 2.0, 0.5 + level / 2.0])
        return AUCPRInterval(theta, float(lo), float(hi), method, level, n1)
    if isinstance(folds, bool) or int(folds) != folds or folds < 2:
        raise ValueError(f"folds must be an integer >= 2, got {folds!r}")
    folds = int(folds)
    if pos.size < folds or neg.size < folds:
        raise ValueError(f"cross-validation with {folds} folds needs at least {folds} positives and negatives")
    fold_of = np.empty(y.size, dtype=np.int64)
    for members in (neg, pos):  # stratified: each class dealt round-robin over the folds in random order
        fold_of[rng.permutation(members)] = np.arange(members.size) % folds
    values = np.array([fn(s[fold_of == k], y[fold_of == k]) for k in range(folds)])
    spread = values.std(ddof=1) / (math.sqrt(folds) if fold_se else 1.0)
    centre = float(values.mean())
    return AUCPRInterval(centre, centre - z * spread, centre + z * spread, method, level, n1)
