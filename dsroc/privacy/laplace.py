"""Integer noise of the histogram protocol: the discrete Laplace (geometric) mechanism, pure epsilon-DP."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["discrete_laplace_variance", "discrete_laplace_sd", "discrete_laplace_scale", "discrete_laplace_scales",
           "sample_discrete_laplace", "discrete_laplace_noise"]

# A part's epsilon is rounded down to the ledger's privacy-loss grid, less this relative hair: dp-accounting rounds
# the loss up to the grid, so a part exactly on it in floating point could be charged one grid step more.
_BELOW_GRID = 1e-9
# Below this 1 - a, (1 - a)^2 is no longer a normal float (a scale above about 1e150).
_SMALLEST_GAP = 1e-150


def _check_scale(scale: float) -> float:
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0.0):
        raise ValueError(f"scale must be a finite positive number, got {scale}")
    return scale


def discrete_laplace_variance(scale: float) -> float:
    """Variance ``2 a / (1 - a)^2``, ``a = exp(-1 / scale)``, of the discrete Laplace ``P[x] ∝ exp(-|x| / scale)``.

    0 for ``scale`` 0 (no noise); inf beyond the floating-point range (a scale above about 1e154).
    """
    if float(scale) == 0.0:
        return 0.0
    a, gap = _terms(scale)
    return 2.0 * a / gap**2 if gap > _SMALLEST_GAP else math.inf


def discrete_laplace_sd(scale: float) -> float:
    """Standard deviation ``sqrt(2 a) / (1 - a)`` of the discrete Laplace of scale ``scale`` (0 for scale 0).

    Finite for every finite scale: beyond a scale of about 1e154, where ``(1 - a)^2`` underflows to 0 (and the
    variance divided by zero), it is ``sqrt(2 a) / (1 - a)`` itself; below, the square root of the variance, whose
    very rounding the study's pinned figures carry.
    """
    if float(scale) == 0.0:
        return 0.0
    a, gap = _terms(scale)
    return math.sqrt(2.0 * a / gap**2) if gap > _SMALLEST_GAP else math.sqrt(2.0 * a) / gap


def _terms(scale: float) -> tuple[float, float]:
    """``a = exp(-1 / scale)`` and ``1 - a`` (computed as ``-expm1(-1 / scale)``, exact for a large scale)."""
    scale = _check_scale(scale)
    return math.exp(-1.0 / scale), -math.expm1(-1.0 / scale)


def discrete_laplace_scale(epsilon: float, parts) -> float:
    """The shared scale ``b = sum_i (1 / ratio_i) / epsilon`` of a release's parts ``(sensitivity, ratio)`` before the
    ledger's grid (:func:`discrete_laplace_scales`): part ``i``'s noise has scale ``ratio_i sensitivity_i b``."""
    epsilon = float(epsilon)
    if not (math.isfinite(epsilon) and epsilon > 0.0):
        raise ValueError(f"epsilon must be a finite positive number, got {epsilon}")
    parts = [(int(k), float(r)) for k, r in parts]
    if not parts or any(k < 1 or not (math.isfinite(r) and r > 0.0) for k, r in parts):
        raise ValueError(f"parts must be a non-empty list of (sensitivity >= 1, ratio > 0), got {parts!r}")
    scale = sum(1.0 / r for _, r in parts) / epsilon
    if not math.isfinite(scale * max(k * r for k, r in parts)):  # every part's scale, not only the shared one
        raise ValueError(f"epsilon {epsilon:g} is too small: its noise scale is beyond the floating-point range")
    return scale


def discrete_laplace_scales(epsilon: float, parts, *, interval: float | None = None) -> tuple[float, ...]:
    """Scales of the discrete-Laplace parts of one release whose composition is pure ``epsilon``-DP.

    ``parts`` lists ``(sensitivity, ratio)`` per part: part ``i`` is an integer query of l1-sensitivity ``k_i``
    (a patient moves it by at most ``k_i``) released with noise of scale ``ratio_i k_i b``, so it is
    ``1 / (ratio_i b)``-DP (Ghosh, Roughgarden and Sundararajan 2009) and the parts compose to
    ``sum_i 1 / (ratio_i b) = epsilon``: ``b = sum_i (1 / ratio_i) / epsilon`` in closed form. Each part's epsilon
    is then rounded down to a multiple of ``interval``, the ledger's privacy-loss grid (default
    :func:`dsroc.privacy.accounting.discretization_for` of ``epsilon``): dp-accounting's pessimistic distribution
    rounds each part's loss up to the grid, and on it the composed release is charged at most ``epsilon`` (at
    delta 0). This costs less than one grid step (5e-4 at budgets up to epsilon 2) per part.

    Raises ValueError when a part's share of ``epsilon`` is below one grid step.
    """
    from .accounting import discretization_for  # the accountant's grid

    b = discrete_laplace_scale(epsilon, parts)
    parts = [(int(k), float(r)) for k, r in parts]
    interval = discretization_for(float(epsilon)) if interval is None else float(interval)
    scales = []
    for k, r in parts:
        steps = math.floor(1.0 / (r * b) / interval * (1.0 + _BELOW_GRID))
        if steps < 1:
            raise ValueError(f"epsilon {epsilon:g} is too small: a part of this release would get less than the "
                             f"ledger's privacy-loss grid step {interval:g} (ask for a larger epsilon)")
        scales.append(k / (steps * interval * (1.0 - _BELOW_GRID)))
    return tuple(scales)


def sample_discrete_laplace(scale: float, size: int) -> np.ndarray:
    """``size`` independent draws of the discrete Laplace ``P[X = x] ∝ exp(-|x| / scale)`` (the site's noise).

    OpenDP's ``make_laplace`` on an integer vector domain: the exact sampler of Canonne, Kamath and Steinke 2020
    (Algorithm 2) in rational arithmetic on OpenDP's cryptographically secure randomness, so no floating-point
    artefact reveals the noiseless value (Mironov 2012). Proof: docs.opendp.org, proofs of ``make_laplace`` (0.16).
    """
    from .noise import opendp_integer_noise

    return opendp_integer_noise("laplace", _check_scale(scale), size)


def discrete_laplace_noise(scale: float, size, rng: np.random.Generator) -> np.ndarray:
    """Vectorised draws of the discrete Laplace of scale ``scale`` from ``rng`` (studies; the site's distribution).

    The difference of two independent geometric variables of success probability ``1 - exp(-1 / scale)``. Fast and
    reproducible; not for releasing real data (use :func:`sample_discrete_laplace`). ``scale`` 0 gives zeros.
    """
    shape = tuple(np.atleast_1d(np.asarray(size, dtype=np.int64)).tolist()) if np.ndim(size) else (int(size),)
    if float(scale) == 0.0:
        return np.zeros(shape, dtype=np.int64)
    p = -math.expm1(-1.0 / _check_scale(scale))
    return (rng.geometric(p, shape) - rng.geometric(p, shape)).astype(np.int64)
