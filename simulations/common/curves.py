"""The l1 distance between the empirical ROC curve and a fitted ROC-GLM curve (the paper's Figure 4)."""

from __future__ import annotations

import numpy as np

from dsroc import placement_values, rocglm_curve

__all__ = ["roc_area_between"]

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(8)


def roc_area_between(scores, labels, params) -> float:
    """``discr = integral_0^1 |ROC_glm(t) - S1(S0^-1(t))| dt`` for one data set.

    The empirical ROC curve is the step function that, on the false positive rates
    ``(k/n0, (k+1)/n0]``, equals the true positive rate ``#{s1 > a_(k+1)} / n1`` at the (k+1)-th
    largest negative score ``a_(k+1)`` (exact for data without ties between classes). Each step is
    integrated with 8-point Gauss-Legendre quadrature against the smooth fitted curve.

    Parameters
    ----------
    scores, labels : array_like
        One data set.
    params : (float, float)
        ROC-GLM parameters (gamma1, gamma2).
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    negatives = np.sort(s[y == 0])[::-1]
    heights = placement_values(s[y == 1], negatives, ties="strict")  # TPR at each negative, descending
    n0 = negatives.size
    t = (np.arange(n0)[:, None] + (_NODES[None, :] + 1.0) / 2.0) / n0
    gap = np.abs(rocglm_curve(params, t.ravel()).reshape(t.shape) - heights[:, None])
    return float((gap @ _WEIGHTS).sum() / (2.0 * n0))
