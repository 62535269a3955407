"""Whether a noisy histogram has a second mode: the deepest valley between two higher parts, in noise SDs.

The quantile grid's second stage puts a few edges at the quantiles of the first release. Inside each bin the shape AUC
(:mod:`dsroc.histogram.shape`) interpolates the positives' share smoothly; where a class's scores have two modes the
share rises steeply inside each and the few bins cannot follow it (bimodal scores at prevalence 0.3, n = 1 000: AUC
bias -0.013 with 5 bins, -0.008 with 7; docs/simulations.md). A valley between two modes of a class's first-release
histogram is what such scores show and smooth ones do not.
"""

from __future__ import annotations

import numpy as np

from .grid import check_counts

__all__ = ["MODE_WINDOW", "valley_depth"]

# Fine bins summed into each value compared (the first release's 50 logit bins are 0.21 logit units wide, its counts
# noisy at small n: 3 bins found the stress study's bimodal scores at n = 1 000 as often as 2, with fewer false
# valleys on piecewise-uniform scores).
MODE_WINDOW = 3


def valley_depth(counts, sigma: float, *, window: int = MODE_WINDOW) -> float:
    """The deepest valley of a histogram's interior in SDs: the largest ``(min(L, R) - V) / sd`` over windows of
    ``window`` adjacent bins, ``V`` a window's count and ``L``, ``R`` the highest windows wholly to its left and right,
    ``sd`` the SD of ``min(L, R) - V`` from ``sigma`` (the noise SD of one bin's count) and the counts themselves
    (their sampling variance). The end bins are left out: they hold every score beyond the grid, so a long tail heaps
    up there like a mode. ``counts`` (F,) should be consistent (:func:`dsroc.histogram.consistent_counts`); a
    unimodal histogram gives at most its noise's excursions, and ``-inf`` when the interior has no room for a valley.
    """
    g = check_counts(counts, name="counts")
    if g.ndim != 1:
        raise ValueError(f"counts must be one histogram (F,), got shape {g.shape}")
    sigma = float(sigma)
    if not (np.isfinite(sigma) and sigma >= 0.0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma!r}")
    if isinstance(window, bool) or not float(window).is_integer() or window < 1:
        raise ValueError(f"window must be an integer >= 1, got {window!r}")
    w = int(window)
    s = np.convolve(g[1:-1], np.ones(w), "valid")  # the interior's window sums
    valleys = np.arange(w, s.size - w)
    if valleys.size == 0:
        return -np.inf
    left = np.maximum.accumulate(s)[valleys - w]  # highest window ending before the valley's
    right = np.maximum.accumulate(s[::-1])[::-1][valleys + w]  # highest starting after it
    peak, valley = np.minimum(left, right), s[valleys]
    variance = 2.0 * w * sigma**2 + np.maximum(peak, 0.0) + np.maximum(valley, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        depth = np.where(variance > 0, (peak - valley) / np.sqrt(variance), np.where(peak > valley, np.inf, 0.0))
    return float(depth.max())
