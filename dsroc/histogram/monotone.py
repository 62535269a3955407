"""A nonparametric AUC of binned counts: the area under the monotone (PCHIP) ROC curve through the ROC points.

The ROC points at the bin edges (false and true positive rates above each edge, from consistent counts) are
joined by the piecewise cubic Hermite interpolant of Fritsch and Carlson (1980), as
:class:`scipy.interpolate.PchipInterpolator` builds it: monotone wherever the points are, so the curve stays an
ROC curve, and smooth, so on a concave ROC curve it recovers most of what the straight lines of the binned AUC
(the trapezoid) cut off (FedCurve, the federated ROC of hierarchical histograms and quantiles, interpolates the
same way). Where a bin holds no negatives the curve rises vertically (its positives lie above every lower negative
and below every higher one): such jumps are taken out, the rest interpolated, and each jump ``J`` at false
positive rate ``x`` adds its exact area ``J (1 - x)``. Vectorised over any leading axes; the area of each segment is
the Hermite cubic's closed form ``h (y0 + y1) / 2 + h^2 (d0 - d1) / 12``.
"""

from __future__ import annotations

import numpy as np

from .grid import check_counts

__all__ = ["roc_points", "monotone_auc"]


def roc_points(h0, h1) -> tuple[np.ndarray, np.ndarray]:
    """False and true positive rates ``(..., B + 1)`` above each edge, from the top edge (0, 0) to the bottom (1, 1).

    ``h0, h1``: non-negative counts ``(..., B)`` (consistent counts), both classes with patients.
    """
    c0 = check_counts(h0, name="h0")
    c1 = check_counts(h1, name="h1", n_bins=np.shape(h0)[-1])
    zero = np.zeros(c0.shape[:-1] + (1,))
    with np.errstate(invalid="ignore", divide="ignore"):
        fpr = np.concatenate([zero, np.cumsum(c0[..., ::-1], axis=-1)], axis=-1) / c0.sum(-1, keepdims=True)
        tpr = np.concatenate([zero, np.cumsum(c1[..., ::-1], axis=-1)], axis=-1) / c1.sum(-1, keepdims=True)
    return fpr, tpr


def _edge_slope(h0, h1, m0, m1):
    """Fritsch-Carlson's shape-preserving three-point slope at an end (scipy's ``PchipInterpolator._edge_case``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        d = ((2.0 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
    d = np.where(np.sign(d) != np.sign(m0), 0.0, d)
    return np.where((np.sign(m0) != np.sign(m1)) & (np.abs(d) > 3.0 * np.abs(m0)), 3.0 * m0, d)


def _pchip_area(x, y, n):
    """Area on [x_0, x_{n-1}] under the PCHIP through rows of points ``x, y (R, P)`` whose first ``n`` (R,) entries
    are used (x strictly increasing there, n >= 2)."""
    rows, width = x.shape
    h = np.diff(x, axis=-1)
    seg = np.arange(width - 1)[None, :] < (n - 1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.where(seg, np.diff(y, axis=-1) / np.where(seg, h, 1.0), 0.0)
    h = np.where(seg, h, 0.0)
    d = np.zeros((rows, width))
    if width > 2:  # interior points: the weighted harmonic mean of the neighbouring slopes, 0 at a local extremum
        w1, w2 = 2.0 * h[:, 1:] + h[:, :-1], h[:, 1:] + 2.0 * h[:, :-1]
        flat = (np.sign(m[:, 1:]) != np.sign(m[:, :-1])) | (m[:, 1:] == 0) | (m[:, :-1] == 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            inner = (w1 + w2) / (w1 / m[:, :-1] + w2 / m[:, 1:])
        d[:, 1:-1] = np.where(flat, 0.0, inner)
    r = np.arange(rows)
    last = n - 1
    three = n >= 3
    i2, i3 = np.maximum(last - 1, 0), np.maximum(last - 2, 0)
    d[:, 0] = np.where(three, _edge_slope(h[:, 0], h[:, min(1, width - 2)], m[:, 0], m[:, min(1, width - 2)]), m[:, 0])
    d[r, last] = np.where(three, _edge_slope(h[r, i2], h[r, i3], m[r, i2], m[r, i3]), m[r, i2])
    d = np.where(np.arange(width)[None, :] < n[:, None], d, 0.0)
    area = h * (y[:, :-1] + y[:, 1:]) / 2.0 + h**2 * (d[:, :-1] - d[:, 1:]) / 12.0
    return np.where(seg, area, 0.0).sum(-1)


def monotone_auc(h0, h1) -> np.ndarray | float:
    """AUC under the monotone (PCHIP) ROC curve through the ROC points of counts ``h0, h1`` of shape ``(..., B)``.

    NaN where a class holds nobody. Equal to ``scipy.interpolate.PchipInterpolator(fpr, tpr).integrate(0, 1)`` on
    the points of :func:`roc_points` when no bin is free of negatives; a bin without negatives is a vertical jump,
    whose exact area is added to the interpolant of the rest.
    """
    fpr, tpr = roc_points(h0, h1)
    shape, width = fpr.shape[:-1], fpr.shape[-1]
    x, y = fpr.reshape(-1, width), tpr.reshape(-1, width)
    ok = np.isfinite(x).all(-1) & np.isfinite(y).all(-1)
    out = np.full(x.shape[0], np.nan)
    if ok.any():
        x, y = x[ok], y[ok]
        rise = np.diff(x, axis=-1) > 0
        jumps = np.where(rise, 0.0, np.diff(y, axis=-1))  # vertical rises: bins without negatives
        y = y - np.concatenate([np.zeros((y.shape[0], 1)), np.cumsum(jumps, axis=-1)], axis=-1)
        # one point per false positive rate (a vertical run's points now coincide), the last one always
        keep = np.concatenate([rise, np.ones((x.shape[0], 1), dtype=bool)], axis=-1)
        n = keep.sum(-1)
        pos = np.cumsum(keep, axis=-1) - 1
        rows = np.nonzero(keep)[0]
        cx, cy = np.ones_like(x), np.ones_like(y)
        cx[rows, pos[keep]], cy[rows, pos[keep]] = x[keep], y[keep]
        # n >= 2: the rates run from 0 to 1. A first kept point above (0, 0) still sits at FPR 0 (a vertical rise).
        out[ok] = _pchip_area(cx, cy, n) + (jumps * (1.0 - x[:, :-1])).sum(-1)
    out = out.reshape(shape)
    return float(out) if out.ndim == 0 else out
