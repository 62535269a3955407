"""The shape AUC: the classes inside each bin from the first stage's shape of all scores and the positives' share.

The quantile grid's first release is a histogram of all scores on a fine grid; the second gives each coarse bin's
negatives and positives. Inside bin ``b`` the positives' density is modelled as that fine shape times the chance
``expit(a_b + s_b (z - zbar_b))`` that a patient with covariate ``z`` (the logit of the score for probabilities, else
the score) is positive, the negatives' as the shape times its complement. The slope ``s_b`` is the derivative, at
the bin's mean covariate ``zbar_b``, of the logit of the positives' share across the bins (second-order finite
differences over the bins' ``(zbar, logit share)``, one-sided at the ends, as :func:`numpy.gradient`), and ``a_b``
makes the bin's share of positives exact. The within-bin concordances then order the pairs inside each bin
(:func:`dsroc.histogram.resolved.concordance_auc`). Where the scores' density has several modes the ROC curve
through the edges is wavy and a curve interpolated in ROC space (:mod:`dsroc.histogram.monotone`) cuts across the
waves; here the waves come from the measured shape and only the smooth share is interpolated (on bimodal scores
at n = 10 000, prevalence 0.1, 7 bins: bias -0.0022 against the PCHIP curve's -0.0058, docs/simulations.md).
Needs no score sums, so it is as precise as the counts.
"""

from __future__ import annotations

import numpy as np

from .grid import check_counts
from .resolved import concordance_auc

__all__ = ["share_slopes", "shape_classes", "shape_concordance", "shape_auc"]

_NEWTON = 60
_STEP = 2.0  # a Newton step on the intercept is clipped to this (logit units): a flat bin's step can be huge


def share_slopes(zbar, logit_share) -> np.ndarray:
    """Derivative of ``logit_share`` over ``zbar`` at each bin (``(..., B)`` each, ``zbar`` increasing): second-order
    differences inside, first-order at the ends (:func:`numpy.gradient` with ``edge_order=1``); 0 with one bin."""
    z, y = np.broadcast_arrays(np.asarray(zbar, dtype=np.float64), np.asarray(logit_share, dtype=np.float64))
    out = np.zeros(z.shape)
    if z.shape[-1] < 2:
        return out
    h = np.diff(z, axis=-1)
    d = np.diff(y, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out[..., 0], out[..., -1] = d[..., 0] / h[..., 0], d[..., -1] / h[..., -1]
        if z.shape[-1] > 2:
            h1, h2 = h[..., :-1], h[..., 1:]
            out[..., 1:-1] = (h1**2 * y[..., 2:] - h2**2 * y[..., :-2] + (h2**2 - h1**2) * y[..., 1:-1]) / (
                h1 * h2 * (h1 + h2))
    return np.where(np.isfinite(out), out, 0.0)


def shape_classes(h0, h1, z, base) -> tuple[np.ndarray, np.ndarray]:
    """The classes' densities at the sub-points of each bin, ``(f0, f1)`` of shape ``(..., B, S)`` each summing to 1
    over ``S``, from consistent counts ``h0, h1`` ``(..., B)`` and the fine shape ``z`` ``(B, S)``, ``base`` ``(...,
    B, S)`` of :func:`dsroc.histogram.resolved.fine_base` (its covariate and density at the sub-points)."""
    c0, c1 = check_counts(h0, name="h0"), check_counts(h1, name="h1", n_bins=np.shape(h0)[-1])
    w = np.asarray(base, dtype=np.float64)
    w = w / w.sum(-1, keepdims=True)
    zbar = (w * z).sum(-1)
    share = (c1 + 0.5) / (c0 + c1 + 1.0)  # a half patient of each class: an empty class has a finite logit
    lshare = np.log(share / (1.0 - share))
    slope = share_slopes(zbar, lshare)[..., None]
    dz = z - zbar[..., None]
    a = lshare.copy()
    for _ in range(_NEWTON):  # the bin's share of positives under the model is its observed share
        p = 1.0 / (1.0 + np.exp(-(a[..., None] + slope * dz)))
        step = ((w * p).sum(-1) - share) / np.maximum((w * p * (1.0 - p)).sum(-1), 1e-12)
        a = a - np.clip(step, -_STEP, _STEP)
        if np.abs(step).max(initial=0.0) < 1e-12:
            break
    p = 1.0 / (1.0 + np.exp(-(a[..., None] + slope * dz)))
    f1, f0 = w * p, w * (1.0 - p)
    return f0 / f0.sum(-1, keepdims=True), f1 / f1.sum(-1, keepdims=True)


def shape_concordance(h0, h1, z, base) -> np.ndarray:
    """Within-bin concordance ``P(X0 < X1)`` of the classes of :func:`shape_classes` (same arguments), ``(..., B)``."""
    f0, f1 = shape_classes(h0, h1, z, base)
    below = np.cumsum(f0, -1) - f0
    return np.clip((f1 * (below + 0.5 * f0)).sum(-1), 0.0, 1.0)


def shape_auc(h0, h1, z, base) -> np.ndarray | float:
    """The shape AUC of consistent counts ``h0, h1`` ``(..., B)`` with the fine shape ``(z, base)`` (module doc)."""
    return concordance_auc(h0, h1, shape_concordance(h0, h1, z, base))
