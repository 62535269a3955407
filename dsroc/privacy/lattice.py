"""The paper protocol's noise on a public lattice: scores snapped to multiples of 2^-k plus exact discrete Gaussian noise.

A released score is ``g * (round(s / g) + Y)`` with ``g`` a power of two chosen from the release's
public parameters (epsilon, delta, sensitivity) and ``Y ~ N_Z(0, sigma^2)`` drawn exactly
(:mod:`dsroc.privacy.exact`). Every released value is a multiple of ``g``, a function of the noisy
integer alone: no floating-point artefact of the noiseless score survives (Mironov 2012).

**Sensitivity.** If two scores differ by at most the sensitivity ``Delta``, their lattice points
``floor(s / g + 1/2)`` differ by at most ``D = ceil(Delta / g)`` (rounding is monotone and commutes
with integer shifts; ``s / g`` is exact in floating point because ``g`` is a power of two).

**Privacy.** The release is accounted as the continuous Gaussian mechanism of Gaussian-DP
``mu0 = Delta / tau0`` (``tau0``: the analytic Gaussian sigma of (epsilon, delta, Delta)), so the
ledger, its budgets and every mu field stay as they are. This is valid because
:func:`discrete_gaussian_gdp_mu` proves, for the chosen ``(sigma, D)``, that adding ``N_Z(0, sigma^2)``
to an integer query of sensitivity ``D`` is ``mu``-GDP with ``mu <= mu0``: the discrete Gaussian's
likelihood ratio is monotone, so its trade-off function (Dong, Roth and Su 2022, Def. 2.1) is the
piecewise-linear curve through the threshold tests ``(P[Y >= n], P[Y <= n - 1 - D])``; ``G_mu`` is
convex, so the curve lies above ``G_mu`` iff every vertex does, i.e. iff
``mu >= Phi^-1(F(n)) - Phi^-1(F(n - D))`` for every integer ``n`` (``F``: the discrete Gaussian's
CDF); a shift by fewer than ``D`` gives a smaller difference, and the noise is symmetric, so this
bounds every neighbouring pair. Vertices whose error probabilities are below ``exp(-700)`` are not
evaluated: the statement holds up to an additive ``1e-60`` in delta (for mu up to 20, checked).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .exact import exact_variance, sample_exact_discrete_gaussian
from .gaussian import analytic_gaussian_sigma

__all__ = ["LatticeGaussian", "lattice_gaussian", "discrete_gaussian_gdp_mu", "sort_points"]

# The lattice step: at most 2^-10 of the sensitivity (the snapped scores' sensitivity grows by at most
# 0.1 %), and at least 2^-14 of the noise SD (so that the integer noise's sigma stays below about 2^15).
_STEP_PER_SENSITIVITY = 2.0**-10
_STEP_PER_SIGMA = 2.0**-14
_MAX_MU = 20.0
_LOG_TINY = -700.0  # vertices with an error probability below exp(-700) are not evaluated
_MARGIN = 1e-8  # absolute, above the floating-point error of the vertex differences (about 1e-10)
_CALIBRATION_STEPS = 31  # attempts of lattice_gaussian's search (bounded: see there)


@lru_cache(maxsize=256)
def discrete_gaussian_gdp_mu(t: int, r: int, shift: int) -> float:
    """A Gaussian-DP ``mu`` of ``N_Z(0, t r)`` noise on an integer query of sensitivity ``shift``.

    ``max_n Phi^-1(F(n)) - Phi^-1(F(n - shift))`` over the vertices with both error probabilities
    above ``exp(-700)``, plus a margin of 1e-8 (module docstring). For large sigma it is
    ``shift / sigma`` to many digits.
    """
    from scipy.special import ndtri_exp  # at first use: a daemon starts without scipy

    variance = int(t) * int(r)
    sigma = math.sqrt(variance)
    shift = int(shift)
    if shift < 1:
        raise ValueError(f"shift must be a positive integer, got {shift}")
    bound = int(math.ceil(39.0 * sigma)) + shift + 1  # beyond: mass below exp(-760)
    # The noise is symmetric (F(-k) = P[Y > k - 1]): the tail sums and Phi^-1 on n >= 0 only, from the
    # smaller tail for precision, reflected to n < 0.
    half = np.arange(0, bound + 1, dtype=np.float64)
    log_w = -(half * half) / (2.0 * variance)
    log_p = log_w - np.logaddexp(log_w[0], math.log(2.0) + _logsumexp_decreasing(log_w[1:]))
    tail = np.empty_like(log_p)  # log P[Y > n], n >= 0
    tail[:-1] = np.logaddexp.accumulate(log_p[::-1])[::-1][1:]
    tail[-1] = -np.inf
    with np.errstate(divide="ignore"):
        z_half = -ndtri_exp(tail)  # Phi^-1(F(n)), n >= 0
        body = np.log1p(-np.exp(tail))  # log P[Y <= n], n >= 0
    # The vertex at n and the one at shift - 1 - n have the same difference and error probabilities (z(-m) =
    # -z(m - 1), log P[Y <= -m] = log P[Y > m - 1], exactly as reflected): only n >= shift - 1 - n is evaluated,
    # where n >= 0. Below n - shift = -1 - k (k >= 0) the reflected values of k, from n - shift = 0 the values.
    first = shift // 2  # the smallest n with 2 n >= shift - 1
    low = np.arange(first, shift)  # n - shift < 0
    z_low, cdf_low = -z_half[shift - 1 - low], tail[shift - 1 - low]
    kept = [(z_half[first:shift] - z_low)[(cdf_low > _LOG_TINY) & (tail[first:shift] > _LOG_TINY)],
            (z_half[shift:] - z_half[:-shift])[(body[:-shift] > _LOG_TINY) & (tail[shift:] > _LOG_TINY)]]
    kept = [k for k in kept if k.size] or kept[:1]  # none evaluated: np.max raises, as on the whole line
    return float(max(np.max(k) for k in kept)) + _MARGIN


def _logsumexp_decreasing(a: np.ndarray) -> float:
    """``scipy.special.logsumexp(a)`` of a strictly decreasing array, with its very operations (the largest, first,
    term apart: ``log1p`` of the others' sum after the shift, plus ``log 1``, plus the largest), bit for bit."""
    a_max = a[:1]
    shifted = a - a_max
    shifted[0] = -np.inf
    s = np.sum(np.exp(shifted), keepdims=True) / np.ones(1)
    return (np.log1p(s) + np.log(np.ones(1)) + a_max)[0]


@dataclass(frozen=True)
class LatticeGaussian:
    """The noise of one paper-protocol release: lattice ``step``, the snapped scores' integer sensitivity
    ``shift``, the integer noise's variance ``t * r``, and its proven Gaussian-DP ``mu``."""

    step: float
    shift: int
    t: int
    r: int
    mu: float

    @property
    def sigma(self) -> float:
        """The noise SD in score units, ``step * sqrt(t r)`` (the discrete Gaussian's SD to within exp(-2 pi^2 sigma^2))."""
        return self.step * math.sqrt(self.t * self.r)

    @property
    def accounted_sensitivity(self) -> float:
        """``mu * sigma``: the sensitivity of the continuous Gaussian the ledger charges (``mu`` Gaussian-DP)."""
        return self.mu * self.sigma

    def snap(self, scores) -> np.ndarray:
        """The lattice points ``floor(s / step + 1/2)`` of ``scores`` (int64)."""
        scaled = np.asarray(scores, dtype=np.float64) * (1.0 / self.step)  # exact: step is a power of two
        if scaled.size and not np.all(np.abs(scaled) < 2.0**52):
            raise ValueError("a score is too large for the lattice (|score / step| must stay below 2^52)")
        return np.floor(scaled + 0.5).astype(np.int64)

    def noisy_points(self, scores) -> np.ndarray:
        """The released lattice points: the snapped scores plus exact ``N_Z(0, t r)`` noise (int64, unsorted)."""
        points = self.snap(scores)
        return points + sample_exact_discrete_gaussian(self.t, self.r, points.size)

    def sorted_noisy_points(self, scores) -> np.ndarray:
        """:meth:`noisy_points`, ascending (what a release keeps and sends)."""
        return sort_points(self.noisy_points(scores))

    def values(self, points) -> np.ndarray:
        """The released scores ``step * points`` (float64; exact below 2^53)."""
        return np.asarray(points, dtype=np.int64).astype(np.float64) * self.step


@lru_cache(maxsize=256)
def lattice_gaussian(epsilon: float, delta: float, sensitivity: float) -> LatticeGaussian:
    """The lattice noise of a release at (epsilon, delta) for scores of sensitivity ``sensitivity``.

    Its proven ``mu`` is at most ``sensitivity / analytic_gaussian_sigma(epsilon, delta, sensitivity)``,
    the continuous mechanism's, so the release fits wherever that one did; its SD exceeds that
    mechanism's by the lattice's share (at most about 0.1 % for mu above 1/16).
    """
    tau0 = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    mu0 = float(sensitivity) / tau0
    if mu0 > _MAX_MU:
        raise ValueError(f"epsilon {epsilon} and delta {delta} give a Gaussian-DP mu of {mu0:.3g}, above {_MAX_MU:g}: "
                         "the release would be almost noiseless")
    step = 2.0 ** math.floor(math.log2(max(sensitivity * _STEP_PER_SENSITIVITY, tau0 * _STEP_PER_SIGMA)))
    shift = math.ceil(sensitivity / step)
    sigma = shift / mu0
    for attempt in range(_CALIBRATION_STEPS):
        t, r = exact_variance(sigma)
        mu = discrete_gaussian_gdp_mu(t, r, shift)
        if mu <= mu0:
            return LatticeGaussian(step, shift, t, r, mu)
        # The proportional step (mu is about shift / sigma) from the variance actually tried, which exceeds
        # sigma^2 by up to about 2 sigma: a step smaller than that gap gave the same (t, r) again and again.
        # Each failed attempt also grows the variance by a factor (1 + 2^attempt 1e-9)^2 at least, so the loop
        # ends: within _CALIBRATION_STEPS attempts the SD has grown by more than 2^30 1e-9 (a factor 2 at
        # least), far past mu ~ shift / sigma plus the 1e-8 margin, or the exact sampler's range refuses it.
        sigma = max(sigma * mu / mu0, math.sqrt(t * r)) * (1.0 + 2.0**attempt * 1e-9)
    raise ValueError(f"no lattice noise found within mu {mu0} (epsilon {epsilon}, delta {delta}) in "
                     f"{_CALIBRATION_STEPS} steps")


def sort_points(points: np.ndarray) -> np.ndarray:
    """Lattice points (int64) in ascending order: counted per point when they span few points beside their number
    (a release spans some ten thousand points however many scores it has: O(n), many times faster than a
    comparison sort), else sorted in place."""
    points = np.asarray(points, dtype=np.int64)
    if points.size == 0:
        return points
    low, high = int(points.min()), int(points.max())
    if high - low >= 4 * points.size + (1 << 16):
        points.sort()
        return points
    counts = np.bincount(points - low)
    return np.repeat(np.arange(low, high + 1, dtype=np.int64), counts)
