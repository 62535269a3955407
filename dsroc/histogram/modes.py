"""Whether a noisy histogram has a second mode: the deepest valley between two higher parts, in noise SDs.

The quantile grid's second stage puts a few edges at the quantiles of the first release. Inside each bin the shape AUC
(:mod:`dsroc.histogram.shape`) interpolates the positives' share smoothly; where a class's scores have two modes the
share rises steeply inside each and the few bins cannot follow it (bimodal scores at prevalence 0.3, n = 1 000: AUC
bias -0.013 with 5 bins, -0.008 with 7; docs/simulations.md). A valley between two modes of a class's first-release
histogram is what such scores show and smooth ones do not.
"""

from __future__ import annotations

import numpy as np

from .grid import check_counts, check_edges

__all__ = ["MODE_WINDOW", "valley_depth"]

# Fine bins summed into each value compared (the first release's fine logit bins are about 0.2 logit units wide,
# its counts noisy at small n: 3 bins found the stress study's bimodal scores at n = 1 000 as often as 2, with fewer
# false valleys on piecewise-uniform scores).
MODE_WINDOW = 3


def valley_depth(counts, sigma: float, *, window: int = MODE_WINDOW, edges=None) -> float:
    """The deepest valley of a histogram's interior in SDs: the largest ``(min(L, R) - V) / sd`` over windows of
    ``window`` adjacent bins, ``V`` a window's density and ``L``, ``R`` the highest windows wholly to its left and
    right, ``sd`` the SD of ``min(L, R) - V`` from ``sigma`` (the noise SD of one bin's count) and the counts
    themselves (their sampling variance). A window's density is its count over its width; with ``edges`` (F + 1)
    the widths are the bins' (on the logit scale for a grid inside [0, 1], the scale a logit grid is even on), else
    1 each, when the densities are the counts. The end bins are left out: they hold every score beyond the grid, so a
    long tail heaps up there like a mode. ``counts`` (F,) should be consistent
    (:func:`dsroc.histogram.consistent_counts`); a unimodal histogram gives at most its noise's excursions, and
    ``-inf`` when the interior has no room for a valley.
    """
    g = check_counts(counts, name="counts")
    if g.ndim != 1:
        raise ValueError(f"counts must be one histogram (F,), got shape {g.shape}")
    sigma = float(sigma)
    if not (np.isfinite(sigma) and sigma >= 0.0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma!r}")
    if isinstance(window, bool) or not float(window).is_integer() or window < 1:
        raise ValueError(f"window must be an integer >= 1, got {window!r}")
    if edges is None:
        widths = np.ones(g.size)
    else:
        e = check_edges(edges)
        if e.size != g.size + 1:
            raise ValueError(f"edges must have one more value than counts ({g.size + 1}), got {e.size}")
        z = np.log(e[1:-1] / (1.0 - e[1:-1])) if e[0] >= 0.0 and e[-1] <= 1.0 else e[1:-1]
        widths = np.concatenate([[np.nan], np.diff(z), [np.nan]])  # the end bins' are not used
    w = int(window)
    kernel = np.ones(w)
    c = np.convolve(g[1:-1], kernel, "valid")  # the interior's window counts and widths
    width = np.convolve(widths[1:-1], kernel, "valid")
    valleys = np.arange(w, c.size - w)
    if valleys.size == 0:
        return -np.inf
    d = c / width
    var = (w * sigma**2 + np.maximum(c, 0.0)) / width**2  # of each window's density
    left_at = _running_argmax(d)[valleys - w]  # highest window ending before the valley's
    right_at = (c.size - 1 - _running_argmax(d[::-1]))[c.size - 1 - (valleys + w)]  # highest starting after it
    peak_at = np.where(d[left_at] <= d[right_at], left_at, right_at)
    peak, valley = d[peak_at], d[valleys]
    variance = var[peak_at] + var[valleys]
    with np.errstate(invalid="ignore", divide="ignore"):
        depth = np.where(variance > 0, (peak - valley) / np.sqrt(variance), np.where(peak > valley, np.inf, 0.0))
    return float(depth.max())


def _running_argmax(x: np.ndarray) -> np.ndarray:
    """Index of the largest of ``x[:i + 1]`` for each ``i`` (the first, on ties)."""
    new = np.concatenate([[True], x[1:] > np.maximum.accumulate(x)[:-1]])  # a strictly higher value than before
    return np.maximum.accumulate(np.where(new, np.arange(x.size), 0))
