"""Pointwise confidence band and the below-chance (improper) part of a fitted binormal ROC-GLM curve."""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import norm

__all__ = ["rocglm_band", "rocglm_improper_range"]


def rocglm_band(params, cov, t, *, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Pointwise band ``Phi(eta(t) +- z se(eta(t)))`` of ``ROC(t) = Phi(gamma1 + gamma2 Phi^-1(t))``.

    ``eta(t) = gamma1 + gamma2 x`` with ``x = Phi^-1(t)`` has variance ``(1, x) cov (1, x)'`` (the delta
    method on the probit scale, as statsmodels' prediction intervals of a probit GLM). At ``t`` of 0 and
    1 the band is the curve's end point.
    """
    g = np.asarray(params, dtype=np.float64)
    c = np.asarray(cov, dtype=np.float64)
    if g.shape != (2,) or c.shape != (2, 2) or not (np.isfinite(g).all() and np.isfinite(c).all()):
        raise ValueError("params must be two finite numbers and cov a finite 2 x 2 matrix")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    t = np.asarray(t, dtype=np.float64)
    if np.any((t < 0) | (t > 1)) or not np.isfinite(t).all():
        raise ValueError("t must hold false-positive fractions in [0, 1]")
    inner = (t > 0) & (t < 1)
    x = ndtri(np.where(inner, t, 0.5))
    eta = g[0] + g[1] * x
    se = np.sqrt(np.maximum(c[0, 0] + 2 * c[0, 1] * x + c[1, 1] * x * x, 0.0))
    z = norm.ppf(0.5 + level / 2)
    lo, hi = ndtr(eta - z * se), ndtr(eta + z * se)
    return np.where(inner, lo, t), np.where(inner, hi, t)


def rocglm_improper_range(params, *, lo: float = 0.01, hi: float = 0.99) -> tuple[float, float] | None:
    """The false-positive fractions in ``[lo, hi]`` where the fitted curve lies below the diagonal, or None.

    A binormal curve with slope ``gamma2 != 1`` crosses the diagonal once, at ``t* = Phi(-gamma1 / (gamma2 - 1))``:
    below it for ``t < t*`` when ``gamma2 > 1``, for ``t > t*`` when ``gamma2 < 1``; with ``gamma2 = 1`` it
    lies below everywhere when ``gamma1 < 0``. Crossings outside ``[lo, hi]`` are ignored (every
    binormal curve with ``gamma2 != 1`` crosses somewhere in (0, 1)).
    """
    g1, g2 = (float(v) for v in np.asarray(params, dtype=np.float64))
    if not (np.isfinite(g1) and np.isfinite(g2)) or not 0.0 <= lo < hi <= 1.0:
        raise ValueError("params must be finite and 0 <= lo < hi <= 1")
    if g2 == 1.0:
        return (lo, hi) if g1 < 0 else None
    cross = float(ndtr(-g1 / (g2 - 1.0)))
    a, b = (lo, min(cross, hi)) if g2 > 1.0 else (max(cross, lo), hi)
    return (a, b) if a < b else None
