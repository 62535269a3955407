"""Precision-recall space: PR points, average precision and the unachievable region (Boyd 2014, ch. 3).

A PR curve's points are the cumulative true and false positive counts at decreasing thresholds; the
same :class:`PRPoints` comes from raw scores (:func:`pr_points`), from released class-wise cumulative
counts such as noisy histograms (:func:`pr_points_from_counts`), so that every estimator in
:mod:`dsroc.pr.estimators` is post-processing of whatever was released. The minimum PR curve is the curve of
the ranking that puts every negative first; no ranking does worse (Boyd 2014, Thm 3.3).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import digamma

from .._checks import check_scores_labels, is_sorted, split_by_class

__all__ = [
    "PRPoints",
    "pr_points",
    "pr_points_by_class",
    "pr_points_from_counts",
    "average_precision",
    "average_precision_from_counts",
    "grouped_average_precision",
    "pr_min_precision",
    "pr_min_curve",
    "aucpr_min",
    "ap_min",
    "aucnpr",
]


class PRPoints(NamedTuple):
    """Cumulative counts of a ranking at decreasing thresholds (the first point is (0, 0)).

    ``tp[k]``, ``fp[k]``: positives and negatives scored at or above ``thresholds[k]`` (``thresholds[0]``
    is +inf). Counts may be non-integer (e.g. consistent noisy histograms). ``n1``, ``n0``: class totals.
    """

    tp: np.ndarray
    fp: np.ndarray
    thresholds: np.ndarray
    n1: float
    n0: float

    @property
    def recall(self) -> np.ndarray:
        """``tp / n1`` at every point."""
        return self.tp / self.n1

    @property
    def precision(self) -> np.ndarray:
        """``tp / (tp + fp)`` at every point (NaN where nothing is predicted positive)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.tp + self.fp > 0, self.tp / (self.tp + self.fp), np.nan)

    @property
    def prevalence(self) -> float:
        """``n1 / (n1 + n0)``."""
        return self.n1 / (self.n1 + self.n0)


def pr_points(scores, labels) -> PRPoints:
    """PR points of a scored sample: one point per distinct score (tied scores form one step).

    Without ties this is every prefix of the descending ranking (Boyd 2014, section 4.2).
    """
    return pr_points_by_class(*split_by_class(scores, labels))


def pr_points_by_class(negatives, positives) -> PRPoints:
    """:func:`pr_points` of the negatives' and the positives' scores (each class at least one finite score).

    Linear after sorting, and already sorted classes (e.g. pooled releases) are not sorted again.
    """
    s0, s1 = _ascending(negatives, "negatives"), _ascending(positives, "positives")
    n0, n1 = s0.size, s1.size
    # The distinct scores of both classes, ascending: each class's distinct scores, merged (a stable sort
    # of two sorted runs is a linear merge). Beyond the inputs only arrays of distinct scores are held,
    # which for released scores on a lattice are few.
    distinct = np.concatenate([_distinct(s0), _distinct(s1)])
    distinct.sort(kind="stable")
    distinct = _distinct(distinct)
    m = distinct.size
    thresholds = np.empty(m + 1)
    thresholds[0] = np.inf
    thresholds[1:] = distinct[::-1]
    # #{s >= c} at every distinct score c, descending: the class size less the scores strictly below c.
    tp, fp = np.empty(m + 1), np.empty(m + 1)
    tp[0] = fp[0] = 0.0
    tp[1:] = (n1 - np.searchsorted(s1, distinct, side="left"))[::-1]
    fp[1:] = (n0 - np.searchsorted(s0, distinct, side="left"))[::-1]
    return PRPoints(tp, fp, thresholds, float(n1), float(n0))


def _distinct(x: np.ndarray) -> np.ndarray:
    """The distinct values of an ascending array (the first of each run of equal values)."""
    if x.size < 2:
        return x
    new = np.empty(x.size, dtype=bool)
    new[0] = True
    np.not_equal(x[1:], x[:-1], out=new[1:])
    return x[new]


def _ascending(values, name: str) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError(f"{name} must be at least one finite score; both classes must be present")
    return x if is_sorted(x) else np.sort(x)


def pr_points_from_counts(h0, h1, edges=None) -> PRPoints:
    """PR points from class-wise counts per bin (bins in ascending score order), e.g. released histograms.

    The threshold of a point is the lower edge of the lowest bin it includes; each bin is one tie
    block. Counts must be finite and non-negative (make noisy histograms consistent first) and both
    classes need a positive total.

    Parameters
    ----------
    h0, h1 : array_like
        Negatives' and positives' counts per bin.
    edges : array_like, optional
        ``len(h0) + 1`` ascending bin edges; default ``0, 1, ..., len(h0)``.
    """
    c0, c1 = np.asarray(h0, dtype=np.float64), np.asarray(h1, dtype=np.float64)
    if c0.ndim != 1 or c0.shape != c1.shape or c0.size == 0:
        raise ValueError(f"h0 and h1 must be one-dimensional with the same length, got {c0.shape} and {c1.shape}")
    for name, c in (("h0", c0), ("h1", c1)):
        if not (np.isfinite(c).all() and (c >= 0).all()):
            raise ValueError(f"{name} must hold finite non-negative counts (make noisy histograms consistent first)")
        if c.sum() <= 0:
            raise ValueError(f"{name} must have a positive total; both classes must be present")
    e = np.arange(c0.size + 1, dtype=np.float64) if edges is None else np.asarray(edges, dtype=np.float64)
    if e.shape != (c0.size + 1,) or not (np.diff(e) > 0).all():
        raise ValueError(f"edges must be {c0.size + 1} strictly increasing values")
    tp = np.concatenate(([0.0], np.cumsum(c1[::-1])))
    fp = np.concatenate(([0.0], np.cumsum(c0[::-1])))
    return PRPoints(tp, fp, np.concatenate(([np.inf], e[:-1][::-1])), float(c1.sum()), float(c0.sum()))


def _ap_from_cumulative(tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """``sum`` over tie blocks of ``sum_{j=a+1}^{b} j / (j + f)``, along the last axis (cumulative counts from 0)."""
    a, b, f = tp[..., :-1], tp[..., 1:], fp[..., 1:]
    step = b - a
    sums = np.zeros(step.shape)
    # A block of one positive (every block without ties) is the term b / (b + f) itself, the digamma
    # difference psi(b + f + 1) - psi(b + f) = 1 / (b + f): the same number, without two digammas.
    one = step == 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        sums[one] = b[one] / (b[one] + f[one])
        many = (step > 0.0) & ~one
        if many.any():
            bm, am, fm = b[many], a[many], f[many]
            sums[many] = (bm - am) - fm * (digamma(bm + fm + 1.0) - digamma(am + fm + 1.0))
    return sums.sum(axis=-1)


def average_precision(scores=None, labels=None, *, points: PRPoints | None = None) -> float:
    """Average precision ``(1/n1) sum_j j / (j + s_j)`` (Boyd 2014 eq. 4.6; B15 M2).

    ``y_1 >= ... >= y_n1`` are the positives in descending order and ``s_j`` the number of negatives
    scored at or above ``y_j`` (a negative tied with a positive ranks above it). Give either scores and
    labels or released ``points``; within a tie block of ``points`` the sum over its positives is
    ``sum_{j=a+1}^{b} j / (j + f) = (b - a) - f (psi(b + f + 1) - psi(a + f + 1))``, which also
    interpolates non-integer (noisy, consistent) counts.
    """
    if points is None:
        points = pr_points(scores, labels)
    elif scores is not None or labels is not None:
        raise ValueError("give either scores and labels or points, not both")
    return float(_ap_from_cumulative(points.tp, points.fp) / points.n1)


def average_precision_from_counts(h0, h1):
    """Average precision from class-wise counts per bin (ascending score order), batched over leading axes.

    The batched form of ``average_precision(points=pr_points_from_counts(h0, h1))`` for arrays of shape
    ``(..., B)`` of consistent (finite, non-negative) counts; NaN where a row holds no positive.
    """
    c0, c1 = np.asarray(h0, dtype=np.float64), np.asarray(h1, dtype=np.float64)
    if c0.shape != c1.shape or c0.ndim < 1:
        raise ValueError(f"h0 and h1 must have the same shape (..., B), got {c0.shape} and {c1.shape}")
    if not (np.isfinite(c0).all() and np.isfinite(c1).all() and (c0 >= 0).all() and (c1 >= 0).all()):
        raise ValueError("h0 and h1 must hold finite non-negative counts (make noisy histograms consistent first)")
    zero = np.zeros(c0.shape[:-1] + (1,))
    tp = np.concatenate([zero, np.cumsum(c1[..., ::-1], axis=-1)], axis=-1)
    fp = np.concatenate([zero, np.cumsum(c0[..., ::-1], axis=-1)], axis=-1)
    n1 = tp[..., -1]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(n1 > 0, _ap_from_cumulative(tp, fp) / n1, np.nan)
    return float(out) if out.ndim == 0 else out


def grouped_average_precision(scores, labels, groups, *, n_groups: int) -> np.ndarray:
    """Average precision of many data sets at once (one sort), as :func:`average_precision` on each group.

    Sorting by (group, descending score, label) puts tied negatives before positives, so at each
    positive the running counts are its ``j`` and ``j + s_j``. NaN for a group without positives.
    """
    from ..roc.batch import check_groups

    s, y = check_scores_labels(scores, labels)
    g = check_groups(groups, s.size, n_groups)
    # Descending score within group: one float sort, then a stable (radix) sort of small group ids.
    order = np.argsort(-s)
    key = g[order].astype(np.int16) if n_groups <= np.iinfo(np.int16).max else g[order]
    order = order[np.argsort(key, kind="stable")]
    ss, gg = s[order], g[order]
    if np.any((ss[1:] == ss[:-1]) & (gg[1:] == gg[:-1])):  # ties: negatives before positives within a tie
        order = np.lexsort((y, -s, g))
    ys, gs = y[order].astype(np.float64), g[order]
    n1 = np.bincount(g, weights=y, minlength=n_groups)
    size = np.bincount(g, minlength=n_groups)
    start = np.concatenate(([0], np.cumsum(size)[:-1]))
    position = np.arange(1, s.size + 1) - start[gs]  # 1-based position within the group
    tp = np.cumsum(ys) - np.concatenate(([0.0], np.cumsum(n1)[:-1]))[gs]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(gs, weights=ys * tp / position, minlength=n_groups) / np.where(n1 > 0, n1, np.nan)


def _check_prevalence(prevalence) -> np.ndarray:
    pi = np.asarray(prevalence, dtype=np.float64)
    if not (np.isfinite(pi).all() and (pi >= 0).all() and (pi <= 1).all()):
        raise ValueError(f"prevalence must lie in [0, 1], got {prevalence!r}")
    return pi


def _check_recall_range(recall_range) -> tuple[float, float]:
    a, b = (float(v) for v in recall_range)
    if not (0.0 <= a < b <= 1.0):
        raise ValueError(f"recall_range must be (a, b) with 0 <= a < b <= 1, got {recall_range!r}")
    return a, b


def pr_min_precision(recall, prevalence):
    """Minimum achievable precision at ``recall``: ``pi r / (1 - pi + pi r)`` (Boyd 2014, Thm 3.3)."""
    pi = _check_prevalence(prevalence)
    r = np.asarray(recall, dtype=np.float64)
    if not (np.isfinite(r).all() and (r >= 0).all() and (r <= 1).all()):
        raise ValueError("recall must lie in [0, 1]")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(pi * r > 0, pi * r / (1.0 - pi + pi * r), 0.0)
    return float(out) if out.ndim == 0 else out


def pr_min_curve(prevalence: float, *, n_points: int = 201) -> tuple[np.ndarray, np.ndarray]:
    """The minimum PR curve (boundary of the unachievable region) on ``n_points`` equally spaced recalls.

    Returns
    -------
    (recall, precision) : ndarrays
    """
    if isinstance(n_points, bool) or int(n_points) != n_points or n_points < 2:
        raise ValueError(f"n_points must be an integer >= 2, got {n_points!r}")
    recall = np.linspace(0.0, 1.0, int(n_points))
    return recall, pr_min_precision(recall, float(_check_prevalence(prevalence)))


def aucpr_min(prevalence, *, recall_range=(0.0, 1.0)):
    """Area under the minimum PR curve (Boyd 2014, Thm 3.4; Cor. 3.6 for a recall range [a, b]).

    ``b - a + ((1 - pi) / pi) ln((pi (a - 1) + 1) / (pi (b - 1) + 1))``; on [0, 1]
    ``1 + (1 - pi) ln(1 - pi) / pi``. By convention 0 at pi = 0 and ``b - a`` at pi = 1.
    """
    pi = _check_prevalence(prevalence)
    a, b = _check_recall_range(recall_range)
    inner = np.clip(pi, 1e-300, 1.0 - 1e-16)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (b - a) + ((1.0 - inner) / inner) * (np.log1p(inner * (a - 1.0)) - np.log1p(inner * (b - 1.0)))
    out = np.where(pi <= 0.0, 0.0, np.where(pi >= 1.0, b - a, value))
    return float(out) if out.ndim == 0 else out


def ap_min(n1, n0) -> float:
    """Minimum average precision ``(1/n1) sum_{i=1}^{n1} i / (i + n0)`` (Boyd 2014, Thm 3.5).

    ``= (n1 - n0 (psi(n1 + n0 + 1) - psi(n0 + 1))) / n1``, which also takes non-integer counts (estimates
    from noisy histograms).
    """
    values = {}
    for name, v in (("n1", n1), ("n0", n0)):
        if isinstance(v, bool) or not (math.isfinite(float(v)) and float(v) >= 0):
            raise ValueError(f"{name} must be a finite non-negative count, got {v!r}")
        values[name] = float(v)
    n1, n0 = values["n1"], values["n0"]
    if n1 <= 0:
        raise ValueError(f"n1 must be positive, got {n1!r}")
    return float((n1 - n0 * (digamma(n1 + n0 + 1.0) - digamma(n0 + 1.0))) / n1)


def aucnpr(aucpr, prevalence, *, recall_range=(0.0, 1.0)):
    """Normalised AUCPR ``(AUCPR - AUCPR_MIN) / (AUCPR_MAX - AUCPR_MIN)`` (Boyd 2014, section 3.4).

    ``AUCPR_MAX`` is ``b - a`` for the recall range [a, b]. By convention 0 at pi = 0 and 1 at pi = 1.
    Compare AUCNPR, not AUCPR, across data sets (or sites) of different prevalence.
    """
    pi = _check_prevalence(prevalence)
    a, b = _check_recall_range(recall_range)
    value = np.asarray(aucpr, dtype=np.float64)
    if not np.isfinite(value).all():
        raise ValueError("aucpr must be finite")
    lo = aucpr_min(pi, recall_range=(a, b))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (value - lo) / ((b - a) - lo)
    out = np.where(pi <= 0.0, 0.0, np.where(pi >= 1.0, 1.0, out))
    return float(out) if out.ndim == 0 else out
