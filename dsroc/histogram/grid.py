"""Histogram protocol: the public grid, binning, consistency of noisy counts, and the ROC/PR/confusion points at bin edges.

A site releases per-class counts of the model's scores on a public grid of ``B`` bins plus integer noise;
the analyst sums the sites' releases. Every function here is post-processing of those summed counts.
Counts are arrays of shape ``(..., B)``: one histogram, or a batch of them (leading axes), so that the
simulation study evaluates many replications at once with the same functions the analyst calls.

Conventions: bin ``b`` is ``[e_b, e_{b+1})``, the last bin closed; scores outside ``[e_0, e_B]`` are clipped
to its ends. A patient is predicted positive at threshold ``e_b`` when its score is at least ``e_b``, so
the survivor functions at the edges are exact (no tie convention) and ``S(e_0) = 1``, ``S(e_B) = 0``.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import isotonic_regression
from scipy.special import expit, logit

from .._checks import check_scores_labels

__all__ = [
    "SPACINGS",
    "recommended_n_bins",
    "histogram_edges",
    "check_edges",
    "bin_index",
    "bin_scores",
    "bin_representatives",
    "consistent_counts",
    "check_counts",
    "survivor_at_edges",
    "histogram_roc",
    "histogram_pr",
    "histogram_confusion",
    "quantile_edges",
    "balanced_quantile_edges",
    "allowed_edges",
]

SPACINGS = ("equal", "logit")
# Two edges closer than this are one edge (a site checks an explicit grid's edges against its own to this tolerance).
EDGE_TOLERANCE = 1e-12


def recommended_n_bins(site_sigma: float) -> int:
    """Bin count for a release whose per-site noise SD is ``site_sigma`` (from the study, docs/simulations.md).

    Fewer bins carry less noise into the ROC points; more bins follow the curve more closely. Over the
    study's binormal design (5 sites, n 250 to 10 000) the ROC-GLM through the edges was most accurate
    with 5 equal-width bins on [0, 1] for ``site_sigma >= 1.5`` (epsilon <= 2 at delta = 1e-5), 8 for
    ``0.75 <= site_sigma < 1.5`` and 12 below.
    """
    s = float(site_sigma)
    if not (np.isfinite(s) and s >= 0.0):
        raise ValueError(f"site_sigma must be a finite number >= 0, got {site_sigma!r}")
    return 5 if s >= 1.5 else 8 if s >= 0.75 else 12


def histogram_edges(n_bins: int, *, lo: float = 0.0, hi: float = 1.0, spacing: str = "equal") -> np.ndarray:
    """Public bin edges of the histogram protocol.

    Parameters
    ----------
    n_bins : int
        Number of bins, at least 2.
    lo, hi : float, default 0 and 1
        The score range; scores outside it are clipped to its ends by :func:`bin_index`.
    spacing : {"equal", "logit"}, default "equal"
        ``"equal"``: equal-width bins on ``[lo, hi]``; ``"logit"``: equal width on the logit scale,
        for probabilities (needs ``0 < lo < hi < 1``).

    Returns
    -------
    ndarray
        ``n_bins + 1`` strictly increasing edges, the first ``lo`` and the last ``hi`` exactly.
    """
    if isinstance(n_bins, bool) or not float(n_bins).is_integer() or n_bins < 2:
        raise ValueError(f"n_bins must be an integer >= 2, got {n_bins!r}")
    if spacing not in SPACINGS:
        raise ValueError(f"spacing must be one of {SPACINGS}, got {spacing!r}")
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"the score range must be finite with lo < hi, got lo={lo}, hi={hi}")
    if spacing == "equal":
        edges = np.linspace(lo, hi, int(n_bins) + 1)
    else:
        if not 0.0 < lo < hi < 1.0:
            raise ValueError(f"logit spacing needs 0 < lo < hi < 1 (probabilities), got lo={lo}, hi={hi}")
        edges = expit(np.linspace(logit(lo), logit(hi), int(n_bins) + 1))
    edges[0], edges[-1] = lo, hi
    return check_edges(edges)


def allowed_edges(bins, spacing: str, *, lo: float, hi: float) -> np.ndarray:
    """Every edge of the ``spacing`` grids of each bin count in ``bins`` on ``[lo, hi]`` (:func:`histogram_edges`),
    sorted, once each: the edges an explicit grid may use under a site's policy (its allowed bin counts; for logit
    spacing ``lo, hi`` is the policy's logit range), so that an analyst's grid is never finer than the policy's
    finest. One function for the site's check and the analyst's choice, so both compute the same floats. The same
    edge of two grids (e.g. 1/2 of 10 and 20 bins) can differ in its last bits: it is kept once (the first), so that
    no grid chosen among these edges has a bin a few ulps wide."""
    e = np.unique(np.concatenate([histogram_edges(int(b), lo=lo, hi=hi, spacing=spacing) for b in bins]))
    return e[np.concatenate([[True], np.diff(e) > EDGE_TOLERANCE])]


def check_edges(edges) -> np.ndarray:
    """Validate bin edges: a finite, strictly increasing 1-D array of at least 3 values (2 bins)."""
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 3:
        raise ValueError(f"edges must be a one-dimensional array of at least 3 values (2 bins), got shape {e.shape}")
    if not np.isfinite(e).all():
        raise ValueError("edges must be finite")
    if np.any(np.diff(e) <= 0.0):
        raise ValueError("edges must be strictly increasing")
    return e


def bin_index(scores, edges) -> np.ndarray:
    """Bin of each score (0 .. B-1): scores are clipped into ``[e_0, e_B]``; the last bin includes ``e_B``."""
    e = check_edges(edges)
    s = np.clip(np.asarray(scores, dtype=np.float64), e[0], e[-1])
    return np.minimum(np.searchsorted(e, s, side="right") - 1, e.size - 2)


def bin_scores(scores, labels, edges) -> tuple[np.ndarray, np.ndarray]:
    """Exact per-class counts ``(h0, h1)`` of validated scores on the grid (what a site counts before noise)."""
    s, y = check_scores_labels(scores, labels)
    idx = bin_index(s, edges)
    m = np.asarray(edges).size - 1
    return np.bincount(idx[y == 0], minlength=m), np.bincount(idx[y == 1], minlength=m)


def bin_representatives(edges) -> np.ndarray:
    """Score standing for each bin in binned Brier and calibration: the bin's midpoint."""
    e = check_edges(edges)
    return 0.5 * (e[:-1] + e[1:])


def check_counts(counts, *, name: str = "counts", n_bins: int | None = None) -> np.ndarray:
    """Validate counts: a finite float array of shape ``(..., B)`` with ``B >= 2`` (noisy counts may be negative)."""
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim < 1 or c.shape[-1] < 2:
        raise ValueError(f"{name} must have at least 2 bins along its last axis, got shape {c.shape}")
    if n_bins is not None and c.shape[-1] != n_bins:
        raise ValueError(f"{name} must have one count per bin ({n_bins}), got {c.shape[-1]}")
    if not np.isfinite(c).all():
        raise ValueError(f"{name} must be finite")
    return c


def consistent_counts(counts) -> np.ndarray:
    """Make noisy counts consistent: non-negative, with non-decreasing cumulative counts.

    The cumulative sums are projected onto the non-decreasing sequences (least squares, by
    ``scipy.optimize.isotonic_regression``) and clipped at 0, and the counts are their differences.
    Counts that are already consistent come back unchanged. Works row by row on ``(..., B)``.

    Returns
    -------
    ndarray of float
        Consistent counts, same shape; their sum along the last axis is the estimated class size.
    """
    c = check_counts(counts)
    cum = np.cumsum(c, axis=-1)
    flat = cum.reshape(-1, c.shape[-1])
    # Rows that are already monotone need no projection (most rows at low noise).
    bad = np.flatnonzero(np.any(np.diff(flat, axis=-1) < 0, axis=-1))
    fitted = flat.copy()
    for i in bad.tolist():
        fitted[i] = isotonic_regression(flat[i], increasing=True).x
    np.maximum(fitted, 0.0, out=fitted)
    return np.diff(fitted, axis=-1, prepend=0.0).reshape(c.shape)


def _class_size(counts: np.ndarray, name: str) -> np.ndarray:
    n = counts.sum(axis=-1)
    if np.any(n <= 0):
        raise ValueError(f"{name}: the (estimated) class size is not positive; the histogram holds no patients of that class")
    return n


def survivor_at_edges(counts) -> np.ndarray:
    """``S(e_b) = #{score >= e_b} / n`` at the ``B + 1`` edges (``S(e_0) = 1``, ``S(e_B) = 0``) of consistent counts."""
    c = check_counts(counts)
    n = _class_size(c, "counts")
    upper = np.cumsum(c[..., ::-1], axis=-1)[..., ::-1]  # counts at or above bin b
    zero = np.zeros(c.shape[:-1] + (1,))
    return np.concatenate([upper, zero], axis=-1) / n[..., None]


def histogram_roc(h0, h1) -> tuple[np.ndarray, np.ndarray]:
    """ROC points (FPR, TPR) with the bin edges as thresholds, from consistent counts.

    Returns ``(fpr, tpr)``, each ``(..., B + 1)``, from (1, 1) at the lowest edge to (0, 0) at the highest.
    """
    return survivor_at_edges(h0), survivor_at_edges(h1)


def histogram_pr(h0, h1) -> tuple[np.ndarray, np.ndarray]:
    """PR points (recall, precision) at the bin edges ``e_0 .. e_{B-1}`` (the highest edge predicts nobody).

    Precision is NaN at an edge above which the (consistent) counts hold nobody.
    """
    c0, c1 = check_counts(h0, name="h0"), check_counts(h1, name="h1")
    tp = np.cumsum(c1[..., ::-1], axis=-1)[..., ::-1]
    fp = np.cumsum(c0[..., ::-1], axis=-1)[..., ::-1]
    n1 = _class_size(c1, "h1")
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), np.nan)
    return tp / n1[..., None], precision


def histogram_confusion(h0, h1, edge: int) -> dict:
    """Confusion matrix at threshold ``e_edge`` (predicted positive when the score is at least ``e_edge``).

    Parameters
    ----------
    h0, h1 : array_like, shape (B,)
        Consistent counts of negatives and positives.
    edge : int
        Index of the threshold edge, 0 .. B.

    Returns
    -------
    dict
        ``tp, fp, fn, tn`` (estimated counts) and ``bins_above``: the number of bins summed for the
        predicted-positive cells (their noise variance is ``bins_above * sigma^2``; the negative cells'
        ``(B - bins_above) * sigma^2``).
    """
    c0, c1 = check_counts(h0, name="h0"), check_counts(h1, name="h1", n_bins=np.shape(h0)[-1])
    if c0.ndim != 1:
        raise ValueError("histogram_confusion takes one histogram per class (1-D counts)")
    m = c0.size
    if isinstance(edge, bool) or not float(edge).is_integer() or not 0 <= edge <= m:
        raise ValueError(f"edge must be an integer edge index in [0, {m}], got {edge!r}")
    edge = int(edge)
    tp, fp = float(c1[edge:].sum()), float(c0[edge:].sum())
    fn, tn = float(c1[:edge].sum()), float(c0[:edge].sum())
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "bins_above": m - edge}


def quantile_edges(counts, edges, n_bins: int) -> np.ndarray:
    """Interior edges of a coarser grid at the quantiles of a (noisy) histogram of all scores on a fine grid.

    For levels ``k / n_bins`` (k = 1 .. n_bins - 1) the fine inner edge whose cumulative share of the
    consistent counts is nearest; repeats are dropped, so fewer bins come back where the counts are
    concentrated. Post-processing of a release: the grid of a second release that follows the scores.

    Returns
    -------
    ndarray
        Strictly increasing interior edges, a subset of ``edges[1:-1]`` (empty when the counts hold nobody).
    """
    e = check_edges(edges)
    c = _fine_counts(counts, e, "counts")
    _check_n_bins(n_bins)
    total = c.sum()
    if total <= 0:
        return e[1:1]
    return _edges_at_levels(np.cumsum(c)[:-1] / total, e, n_bins)


def balanced_quantile_edges(counts0, counts1, edges, n_bins: int, *, candidates=None) -> np.ndarray:
    """Interior edges of a coarser grid at the quantiles of the class-balanced mixture of two (noisy) per-class
    histograms on a fine grid: ``G = (F0 + F1) / 2`` with ``F0``, ``F1`` the cumulative shares of each class's
    consistent counts.

    At a low prevalence the quantiles of all scores are the negatives' and leave the positives in one or two
    bins; the mixture gives each class about half of the edges. For levels ``k / n_bins`` the edge whose ``G`` is
    nearest, repeats dropped (as :func:`quantile_edges`). A class that holds nobody after the noise is left out
    (the other class's quantiles). Post-processing of a release: the histogram protocol's first stage releases
    both classes' counts (:mod:`dsroc.histogram.stages`).

    ``candidates``: the edges to choose from (e.g. :func:`allowed_edges` of the sites' policies), ``G`` at each
    interpolated linearly inside its fine bin (scores spread evenly within a fine bin); where the scores crowd into
    a few fine bins (a weak model's narrow range, two clusters) this still gives about ``n_bins`` bins, where the
    fine edges alone give as few as the fine bins the scores occupy. Default: the fine inner edges.

    Returns
    -------
    ndarray
        Strictly increasing interior edges, a subset of ``candidates`` strictly inside the fine grid (empty when
        both classes hold nobody).
    """
    e = check_edges(edges)
    cdfs = [np.cumsum(c)[:-1] / c.sum() for c in (_fine_counts(counts0, e, "counts0"), _fine_counts(counts1, e, "counts1"))
            if c.sum() > 0]
    _check_n_bins(n_bins)
    if not cdfs:
        return e[1:1]
    return _edges_at_levels(np.mean(cdfs, axis=0), e, n_bins, candidates)


def _fine_counts(counts, e: np.ndarray, name: str) -> np.ndarray:
    c = consistent_counts(check_counts(counts, name=name, n_bins=e.size - 1))
    if c.ndim != 1:
        raise ValueError(f"{name}: one histogram (1-D counts) is needed")
    return c


def _check_n_bins(n_bins) -> None:
    if isinstance(n_bins, bool) or not float(n_bins).is_integer() or n_bins < 2:
        raise ValueError(f"n_bins must be an integer >= 2, got {n_bins!r}")


def _edges_at_levels(share: np.ndarray, e: np.ndarray, n_bins: int, candidates=None) -> np.ndarray:
    """The edges whose cumulative ``share`` is nearest each level ``k / n_bins``, once each: among the inner edges
    ``e_1 .. e_{B-1}`` (``share`` there), or among ``candidates`` strictly inside ``(e_0, e_B)`` with the share
    interpolated linearly between the fine edges."""
    levels = np.arange(1, int(n_bins)) / int(n_bins)
    points = e[1:-1]
    if candidates is not None:
        c = np.unique(np.asarray(candidates, dtype=np.float64))
        points = c[(c > e[0]) & (c < e[-1])]
        share = np.interp(points, e, np.concatenate([[0.0], share, [1.0]]))
    if points.size == 0:
        return points
    picked = np.unique(np.argmin(np.abs(share[None, :] - levels[:, None]), axis=1))
    return points[picked]
