"""An exact, vectorised discrete Gaussian sampler on a CSPRNG (integer arithmetic only).

The sampler of Canonne, Kamath and Steinke 2020 ("The Discrete Gaussian for Differential Privacy",
Algorithms 1-3), run on whole numpy arrays at once: every random decision is a comparison of a
uniform integer (unbiased rejection from 64-bit words of a CSPRNG: AES-256-CTR keyed from
``os.urandom``) with an integer, so the output follows ``N_Z(0, sigma^2)`` exactly, with no floating-point step an attacker could exploit
(Mironov 2012; Jin et al. 2022). OpenDP's ``make_gaussian`` runs the same algorithm one draw at a
time (about 40 us a draw here, 40 s for a million scores); this one draws a million in about a second.
Only the rare draws whose integers would pass 64 bits are finished in Python integers (``secrets``).

The variance is ``t * r`` for integers ``t, r`` (:func:`exact_variance`): then ``sigma^2 / t = r``
and every Bernoulli parameter of the algorithm is a ratio of integers that fit in 64 bits.
"""

from __future__ import annotations

import math
import os
import secrets

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

__all__ = ["exact_variance", "sample_exact_discrete_gaussian"]

_U64 = np.uint64
_MAX_SIGMA = 2.0**20
# Denominators of the vectorised Bernoulli draws stay below this; larger ones (probability below 1 / 1000!)
# are drawn one at a time in Python integers.
_SAFE = 2**62


def _bernoulli_exp_scalar(num: int, den: int) -> bool:
    """Bernoulli(exp(-num / den)) in Python integers (CKS 2020, Algorithm 1): the rare draws beyond 64 bits."""
    for _ in range(num // den):
        if not _bernoulli_exp_scalar(1, 1):
            return False
    num, k = num % den, 1
    while secrets.randbelow(den * k) < num:
        k += 1
    return k % 2 == 1


def exact_variance(sigma: float) -> tuple[int, int]:
    """Integers ``(t, r)`` with ``t`` near ``sigma`` and ``t * r`` the smallest such product at least ``sigma^2``.

    ``t`` (the proposal's scale) is searched within 64 of ``floor(sigma) + 1`` (CKS 2020's choice) for
    the multiple ``t * ceil(sigma^2 / t)`` closest to ``sigma^2``, so that ``sqrt(t r)`` exceeds
    ``sigma`` by far less than ``1 / sigma``.
    """
    sigma = float(sigma)
    if not (math.isfinite(sigma) and 1.0 <= sigma <= _MAX_SIGMA):
        raise ValueError(f"sigma must lie in [1, 2^20] for the exact sampler, got {sigma}")
    target = sigma * sigma
    centre = math.floor(sigma) + 1
    t = min(range(max(1, centre - 64), centre + 65), key=lambda c: (c * math.ceil(target / c), abs(c - centre)))
    return t, math.ceil(target / t)


def _words(count: int) -> np.ndarray:
    """``count`` uniform 64-bit words: the AES-256-CTR keystream under a fresh key from ``os.urandom``.

    A block cipher in counter mode under a uniformly random key is a CSPRNG (the construction of NIST SP
    800-90A's CTR_DRBG); it is three times faster than ``os.urandom`` here.
    """
    encryptor = Cipher(algorithms.AES(os.urandom(32)), modes.CTR(bytes(16))).encryptor()
    return np.frombuffer(encryptor.update(bytes(8 * count)), dtype=_U64).copy()


def _uniform_below(n: np.ndarray) -> np.ndarray:
    """Independent uniform integers in ``[0, n_i)`` (``1 <= n_i < 2^63``), exactly (rejection of 64-bit words)."""
    n = np.asarray(n).astype(_U64)
    # Words below 2^64 mod n would make small residues more likely; they are drawn again (probability < n / 2^64).
    floor = (_U64(0) - n) % n
    x = _words(n.size)
    out = x % n
    todo = np.flatnonzero(x < floor)
    while todo.size:
        x = _words(todo.size)
        ok = x >= floor[todo]
        out[todo[ok]] = x[ok] % n[todo[ok]]
        todo = todo[~ok]
    return out.astype(np.int64)


def _bernoulli(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Bernoulli(num / den) for integers ``0 <= num <= den``."""
    return _uniform_below(den) < num


def _bernoulli_exp_at_most_one(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Bernoulli(exp(-num / den)) for ``0 <= num <= den`` (CKS 2020, Algorithm 1, gamma <= 1).

    Draw Bernoulli(gamma / k) for k = 1, 2, ... until the first failure; the result is 1 when that k is odd.
    All draws still going are at the same k.
    """
    out = np.zeros(num.size, dtype=bool)
    active = np.arange(num.size)
    k = 1
    while active.size:
        if int(den[active].max()) > _SAFE // k:  # k beyond 2^19 (never in practice): Python integers
            for i in active:
                kk = k
                while secrets.randbelow(int(den[i]) * kk) < int(num[i]):
                    kk += 1
                out[i] = kk % 2 == 1
            break
        go_on = _bernoulli(num[active], den[active] * k)
        out[active[~go_on]] = k % 2 == 1
        active = active[go_on]
        k += 1
    return out


def _bernoulli_exp(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Bernoulli(exp(-num / den)) for integers ``num >= 0, den >= 1`` (CKS 2020, Algorithm 1).

    For gamma > 1: floor(gamma) independent Bernoulli(exp(-1)) must all succeed, then one Bernoulli(exp(-frac(gamma))).
    """
    whole, frac = num // den, num % den
    out = _bernoulli_exp_at_most_one(frac, den)
    left = np.flatnonzero(out & (whole > 0))
    remaining = whole[left]
    while left.size:
        ones = np.ones(left.size, dtype=np.int64)
        ok = _bernoulli_exp_at_most_one(ones, ones)
        out[left[~ok]] = False
        remaining = remaining[ok] - 1
        left = left[ok]
        left, remaining = left[remaining > 0], remaining[remaining > 0]
    return out


def _discrete_laplace(t: int, size: int) -> np.ndarray:
    """``size`` draws of the discrete Laplace ``P[y] ∝ exp(-|y| / t)`` (CKS 2020, Algorithm 2 with s = 1)."""
    out = np.empty(0, dtype=np.int64)
    while out.size < size:
        m = int((size - out.size) * 1.7) + 16
        u = _uniform_below(np.full(m, t, dtype=np.int64))
        u = u[_bernoulli_exp(u, np.full(m, t, dtype=np.int64))]
        # V: the number of Bernoulli(exp(-1)) successes before the first failure.
        v = np.zeros(u.size, dtype=np.int64)
        active = np.arange(u.size)
        while active.size:
            ones = np.ones(active.size, dtype=np.int64)
            ok = _bernoulli_exp_at_most_one(ones, ones)
            v[active[ok]] += 1
            active = active[ok]
        y = u + t * v
        negative = _uniform_below(np.full(y.size, 2, dtype=np.int64)) == 1
        keep = ~(negative & (y == 0))  # -0 is rejected, so that 0 is not counted twice
        out = np.concatenate([out, np.where(negative, -y, y)[keep]])
    return out[:size]


def sample_exact_discrete_gaussian(t: int, r: int, size: int) -> np.ndarray:
    """``size`` independent draws of ``N_Z(0, t r)`` (``P[y] ∝ exp(-y^2 / (2 t r))``), exactly (CKS 2020, Algorithm 3).

    A discrete Laplace proposal of scale ``t``, accepted with probability
    ``exp(-(|y| - sigma^2 / t)^2 / (2 sigma^2)) = exp(-(|y| - r)^2 / (2 t r))``. Randomness: :func:`_words`.

    Parameters
    ----------
    t, r : int
        Positive integers (:func:`exact_variance`); the variance parameter is ``t * r``.
    size : int
        Number of draws.

    Returns
    -------
    numpy.ndarray of int64
    """
    for name, value in (("t", t), ("r", r)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= 2**21:
            raise ValueError(f"{name} must be an integer in [1, 2^21], got {value!r}")
    t, r, size = int(t), int(r), int(size)
    if size < 0:
        raise ValueError(f"size must be non-negative, got {size}")
    out = np.empty(0, dtype=np.int64)
    while out.size < size:
        m = int((size - out.size) * 1.6) + 16
        y = _discrete_laplace(t, m)
        # (|y| - r)^2 fits in 64 bits unless |y| >= 2^30 (probability below exp(-2^9)): those in Python integers.
        wide = np.abs(y) >= 2**30
        accept = np.zeros(y.size, dtype=bool)
        accept[~wide] = _bernoulli_exp((np.abs(y[~wide]) - r) ** 2, np.full(int((~wide).sum()), 2 * t * r, dtype=np.int64))
        accept[wide] = [_bernoulli_exp_scalar((abs(int(v)) - r) ** 2, 2 * t * r) for v in y[wide]]
        out = np.concatenate([out, y[accept]])
    return out[:size]
