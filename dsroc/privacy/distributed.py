"""The sum of independent discrete Gaussian shares (distributed noise): its exact law and privacy loss."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

__all__ = ["summed_noise_log_pmf", "summed_noise_pld", "summed_noise_variance"]

# Each share's pmf is tabulated on +-(40 sigma + 40) (all but exp(-800) of its mass, as dsroc's discrete
# Gaussian); every partial sum's pmf is cut where its log mass falls below this (mass left out < 1e-260,
# and every entry kept is far above the underflow of the products that make it up).
_LOG_MASS_FLOOR = -600.0
# Below this share sigma the pmf is convolved in log space (its values next to 0 underflow).
_LOG_SPACE_BELOW = 0.1


def _share_log_pmf(sigma: float) -> np.ndarray:
    """Log pmf of ``N_Z(0, sigma^2)`` on +-(40 sigma + 40), centred."""
    bound = int(math.ceil(40.0 * sigma)) + 40
    x = np.arange(-bound, bound + 1, dtype=np.float64)
    log_w = -0.5 * (x / sigma) ** 2
    return log_w - np.logaddexp.reduce(log_w)


def _log_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``log(exp(a) * exp(b))`` for the convolution ``*``, one shifted ``logaddexp`` per entry of ``b``."""
    out = np.full(a.size + b.size - 1, -np.inf)
    for j, value in enumerate(b):
        out[j:j + a.size] = np.logaddexp(out[j:j + a.size], a + value)
    return out


def _trim(log_p: np.ndarray) -> np.ndarray:
    """A centred symmetric log pmf without its entries below the floor (+-1 always kept)."""
    centre = log_p.size // 2
    half = max(int(np.flatnonzero(log_p[centre:] > _LOG_MASS_FLOOR)[-1]), 1)
    return log_p[centre - half:centre + half + 1]


def _convolve(a: np.ndarray, b: np.ndarray, log_space: bool) -> np.ndarray:
    """The trimmed log pmf of the sum of two independent centred symmetric variables of log pmfs ``a``, ``b``."""
    if log_space:
        return _trim(_log_convolve(a, b))
    with np.errstate(divide="ignore"):
        return _trim(np.log(np.convolve(np.exp(a), np.exp(b))))


@lru_cache(maxsize=64)
def summed_noise_log_pmf(sigma: float, count: int) -> tuple[int, np.ndarray]:
    """The law of the sum of ``count`` independent ``N_Z(0, sigma^2)`` draws: lowest integer and log pmf.

    Convolutions of the tabulated pmf by repeated doubling (``log2(count)`` squarings), each summed
    directly (``np.convolve`` adds non-negative products, so every entry kept is accurate to a few ulps
    relative, tails included; an FFT would not be); in log space for sigma below 0.1, whose values next
    to 0 underflow. After each step entries of log mass below -600 are cut symmetrically (in all below
    1e-258 of the mass), except that +-1 is always kept.
    """
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0.0):
        raise ValueError(f"sigma must be a finite positive number, got {sigma}")
    if isinstance(count, bool) or int(count) != count or count < 1:
        raise ValueError(f"count must be a positive integer (the number of summed shares), got {count!r}")
    log_space = sigma < _LOG_SPACE_BELOW
    base, total, n = _trim(_share_log_pmf(sigma)), None, int(count)
    while n:
        if n & 1:
            total = base if total is None else _convolve(total, base, log_space)
        n >>= 1
        if n:
            base = _convolve(base, base, log_space)
    return -(total.size // 2), total - np.logaddexp.reduce(total)


def summed_noise_variance(sigma: float, count: int) -> float:
    """Variance of the sum of ``count`` independent ``N_Z(0, sigma^2)`` draws (``count`` times one share's)."""
    lo, log_p = summed_noise_log_pmf(sigma, count)
    x = lo + np.arange(log_p.size, dtype=np.float64)
    return float(np.sum(np.exp(log_p) * x**2))


@lru_cache(maxsize=1)
def _privacy_loss_class():
    """``dp-accounting``'s discrete Gaussian privacy loss, generalised to a tabulated symmetric log-concave pmf (its
    connect-the-dots deltas by one vectorised inverse, :func:`dsroc.privacy.pld_kernels.vector_inverse`)."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    from .pld_kernels import vector_inverse

    class TabulatedPrivacyLoss(plm.DiscreteGaussianPrivacyLoss):
        """Additive integer noise of a tabulated pmf (symmetric, log-concave: the loss falls as x grows).

        Reuses the parent's tail, connect-the-dots bounds and cdf lookups, which read only the pmf and
        cdf arrays; the loss and its inverse are read from the table instead of the Gaussian closed
        form. dp-accounting 0.6 (pinned).
        """

        def __init__(self, lo: int, log_pmf: np.ndarray, sensitivity: int):
            bound = -int(lo)
            if log_pmf.size != 2 * bound + 1:
                raise ValueError("the tabulated pmf must be symmetric about 0")
            self._sigma = math.nan  # not a Gaussian; the parent's closed forms are all overridden
            self._truncation_bound = bound
            self._offset = -bound - 1
            self._log_pmf_array = np.append(-np.inf, log_pmf)
            self._log_cdf_array = np.logaddexp.accumulate(self._log_pmf_array)
            self._log_pmf_array -= self._log_cdf_array[-1]
            self._log_cdf_array -= self._log_cdf_array[-1]
            self._pmf_array = np.exp(self._log_pmf_array)
            self._cdf_array = np.exp(self._log_cdf_array)
            # loss(x) = log p(x + s) - log p(x) on [-T, T - s], non-increasing for a log-concave pmf;
            # the running minimum removes rounding wiggles of a few ulps (never raising a loss).
            log_p = self._log_pmf_array[1:]
            self._losses = np.minimum.accumulate(log_p[sensitivity:] - log_p[:-sensitivity])
            plm.AdditiveNoisePrivacyLoss.__init__(self, sensitivity, True, 1.0, plm.AdjacencyType.REMOVE)

        def _privacy_loss_without_subsampling_remove(self, x) -> float:
            if int(x) != x or x > self._truncation_bound or x < -self._truncation_bound - self.sensitivity:
                raise ValueError(f"privacy loss undefined at x = {x}")
            if x > self._truncation_bound - self.sensitivity:
                return -math.inf
            if x < -self._truncation_bound:
                return math.inf
            return float(self._losses[int(x) + self._truncation_bound])

        def _inverse_privacy_loss_without_subsampling_remove(self, privacy_loss: float) -> float:
            if privacy_loss == -math.inf:
                return self._truncation_bound - self.sensitivity
            # the losses fall with x: those >= privacy_loss are a prefix of the table
            above = int(np.searchsorted(-self._losses, -privacy_loss, side="right"))
            return -self._truncation_bound + above - 1

        def _losses_of(self, x: np.ndarray) -> np.ndarray:
            # the loss above at an array of integer points at once: the same values
            bound, s = self._truncation_bound, self.sensitivity
            inside = self._losses[np.clip(x + bound, 0, self._losses.size - 1)]
            return np.where(x > bound - s, -np.inf, np.where(x < -bound, np.inf, inside))

        def _inverse_losses(self, losses: np.ndarray) -> np.ndarray:
            # the inverse above for an array of losses at once: the same integers
            above = np.searchsorted(-self._losses, -losses, side="right")
            return np.where(losses == -np.inf, self._truncation_bound - self.sensitivity,
                            -self._truncation_bound + above - 1).astype(np.int64)

        def standard_deviation(self) -> float:
            x = np.arange(-self._truncation_bound, self._truncation_bound + 1, dtype=np.float64)
            return math.sqrt(float(np.sum(self._pmf_array[1:] * x**2)))

    return vector_inverse(TabulatedPrivacyLoss)


def summed_noise_pld(sigma: float, count: int, sensitivity: int, interval: float):
    """``dp-accounting``'s privacy-loss distribution of a release plus the sum of ``count`` shares.

    Built from the sum's probability mass function (:func:`summed_noise_log_pmf`) by the
    connect-the-dots algorithm (Doroshenko et al. 2022; pessimistic: the hockey-stick divergence it
    reports is never below that of the tabulated pmf). Symmetric noise: add and remove neighbours have
    the same loss distribution.
    """
    from dp_accounting.pld import privacy_loss_distribution as pld

    from .pld_kernels import connect_dots_pmf

    lo, log_p = summed_noise_log_pmf(sigma, count)
    loss = _privacy_loss_class()(lo, log_p, int(sensitivity))
    return pld.PrivacyLossDistribution(connect_dots_pmf(loss, interval))
