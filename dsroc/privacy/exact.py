"""An exact, vectorised discrete Gaussian sampler on a CSPRNG (integer comparisons only).

Rejection sampling of ``N_Z(0, v)``, ``v = t r``, run on whole numpy arrays at once, in the manner of
Canonne, Kamath and Steinke 2020 ("The Discrete Gaussian for Differential Privacy", Algorithms 1-3)
but with a staircase proposal and every Bernoulli(exp(-x)) drawn by comparing one uniform 32-bit word
with an exact integer threshold (:mod:`dsroc.privacy.exp_bits`) instead of CKS's series of
Bernoulli(x / k) draws:

- proposal ``|y| = U + s V``: ``U`` uniform on ``[0, s)`` (unbiased rejection of words), ``V`` with
  ``P[V >= k] = exp(-k)`` by inversion of one word against ``floor(exp(-k) 2^32)``, a random sign, -0
  rejected, so that ``q(y) ∝ exp(-floor(|y| / s))`` on the integers;
- acceptance ``exp(-N(y) / (2 v))`` with the integer ``N(y) = y^2 - 2 v floor(|y| / s) + C >= 0``
  (:class:`_Staircase`): the accepted draws have ``P[y] ∝ q(y) exp(-N(y) / (2 v)) ∝ exp(-y^2 / (2 v))``.
  One word against a table of ``floor(exp(-N(y) / (2 v)) 2^32)`` by ``|y|`` when the release is large
  beside the table (``s ≈ 1.4 sqrt(v)``: about 55 % accepted, a table of about ``7.5 sqrt(v)``
  entries), else the AND over the digits ``d`` of ``N`` at positions ``i`` of Bernoulli(exp(-d 2^(k i)
  / (2 v))), one word and one small table each, from the highest digit down while they succeed;
- a word equal to its threshold (probability 2^-32) is decided by more bits (:class:`LazyUniform`).

Every decision is therefore a comparison of uniform integers with exact integers: the output follows
``N_Z(0, v)`` exactly, with no floating-point step an attacker could exploit (Mironov 2012; Jin et
al. 2022). The words are an AES-256-CTR keystream under a fresh key from ``os.urandom``. The variance
is ``t * r`` for integers ``t, r`` (:func:`exact_variance`).
"""

from __future__ import annotations

import math
import os
import secrets
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from .exp_bits import WORD_BITS, WORD_MAX, WORK_BITS, LazyUniform, exp_floor, exp_floor_table

__all__ = ["exact_variance", "sample_exact_discrete_gaussian"]

_WORD = np.uint32
_MAX_SIGMA = 2.0**20
_WIDE = 2**30  # |y| from here on (V above 300: probability below exp(-300)): the exponent in Python integers
_GEOMETRIC_MAX = 22  # floor(exp(-v) 2^32) is positive for v <= 22 and 0 beyond


def exact_variance(sigma: float) -> tuple[int, int]:
    """Integers ``(t, r)`` with ``t`` near ``sigma`` and ``t * r`` the smallest such product at least ``sigma^2``.

    ``t`` is searched within 64 of ``floor(sigma) + 1`` (CKS 2020's proposal scale) for
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


class _Keystream:
    """Uniform 32-bit words: the AES-256-CTR keystream under a fresh key from ``os.urandom``.

    A block cipher in counter mode under a uniformly random key is a CSPRNG (the construction of NIST SP
    800-90A's CTR_DRBG); it is three times faster than ``os.urandom`` here.
    """

    def __init__(self):
        self._encryptor = Cipher(algorithms.AES(os.urandom(32)), modes.CTR(bytes(16))).encryptor()

    def words(self, count: int) -> np.ndarray:
        """The next ``count`` words (read-only uint32)."""
        return np.frombuffer(self._encryptor.update(bytes(4 * count)), dtype=_WORD)

    def bits(self, count: int) -> np.ndarray:
        """The next ``count`` uniform bits (bool)."""
        raw = np.frombuffer(self._encryptor.update(bytes((count + 7) // 8)), dtype=np.uint8)
        return np.unpackbits(raw, count=count).view(bool)


def _uniform_below(n: int, size: int, stream: _Keystream) -> np.ndarray:
    """``size`` independent uniform integers in ``[0, n)``, exactly (words below ``2^32 mod n`` drawn again)."""
    floor = _WORD((2**WORD_BITS) % n)
    n = _WORD(n)
    x = stream.words(size)
    out = x % n
    todo = np.flatnonzero(x < floor)
    while todo.size:
        x = stream.words(todo.size)
        ok = x >= floor
        out[todo[ok]] = x[ok] % n
        todo = todo[~ok]
    return out.astype(np.int64)


@lru_cache(maxsize=1)
def _geometric_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``floor(exp(-v) 2^32)`` for v = 22, 21, ..., 1 (ascending), and by the top 16 bits of a word: the
    count of thresholds above every word with those bits, and whether a threshold (or 0) lies among them."""
    thresholds = np.array([exp_floor(v, 1, WORD_BITS) for v in range(_GEOMETRIC_MAX, 0, -1)], dtype=_WORD)
    starts = np.arange(1 << 16, dtype=np.int64) << 16
    count = (_GEOMETRIC_MAX - np.searchsorted(thresholds, starts + (1 << 16) - 1, side="right")).astype(np.int64)
    mixed = np.zeros(1 << 16, dtype=bool)
    mixed[thresholds >> 16] = True
    mixed[0] = True  # 0 equals every threshold beyond v = 22
    return thresholds, count, mixed


def _geometric(size: int, stream: _Keystream) -> np.ndarray:
    """``V`` with ``P[V >= v] = exp(-v)``: the number of ``v >= 1`` with ``U < exp(-v)``, one word ``B`` per draw.

    ``B < floor(exp(-v) 2^32)`` proves ``U < exp(-v)`` and ``B >`` it the opposite: looked up by the
    word's top 16 bits, except in the few blocks of 2^16 words that hold a threshold; a word equal to a
    threshold (or 0, equal to every threshold beyond v = 22) is finished by :class:`LazyUniform`.
    """
    thresholds, count, mixed = _geometric_tables()
    b = stream.words(size)
    top = b >> 16
    out = count[top]
    look = np.flatnonzero(mixed[top])
    at = np.searchsorted(thresholds, b[look], side="right")  # thresholds <= b
    out[look] = _GEOMETRIC_MAX - at
    for i in look[(b[look] == 0) | (thresholds[np.maximum(at - 1, 0)] == b[look])]:
        u, v = LazyUniform(int(b[i])), 0
        while u.below_exp(v + 1, 1):
            v += 1
        out[i] = v
    return out


def _layout(den: int, positions: int) -> tuple[int, int, int]:
    """``(k, cap, top)`` of ``positions`` digit positions: exponents from ``cap = 23 den`` on have the threshold 0
    (``exp(-23) < 2^-32``), so ``positions`` digits of ``k = ceil(bits(cap) / positions)`` bits cover them,
    the highest from bit ``top``."""
    cap = 23 * den
    k = -(-cap.bit_length() // positions)
    return k, cap, k * (positions - 1)


def _positions(den: int, proposals: int) -> int:
    """The number of digit positions for ``proposals`` draws: the fewest passes over the draws against
    the fewest table entries (about 1 us an entry against 30 ns a draw and position), tables of at most 2^16."""
    best = None
    for positions in range(1, 8):
        k, cap, top = _layout(den, positions)
        if k > 16:
            continue
        cost = ((positions - 1) * (1 << k) + ((cap - 1) >> top) + 2) * 1000 + positions * proposals * 30
        if best is None or cost < best[0]:
            best = (cost, positions)
    return best[1]


@lru_cache(maxsize=16)
def _exp_digits(den: int, positions: int) -> tuple[int, list[np.ndarray]]:
    """How Bernoulli(exp(-num / den)) splits ``num`` (:func:`_layout`): the digit width ``k`` and one threshold
    table per position, the highest first; the highest ends with a 0 that every larger top digit uses."""
    k, cap, top = _layout(den, positions)
    tables = [exp_floor_table(1 << top, den, ((cap - 1) >> top) + 2)]
    tables += [exp_floor_table(1 << (k * i), den, 1 << k) for i in reversed(range(positions - 1))]
    return k, tables


def _bernoulli_exp(num: np.ndarray, den: int, stream: _Keystream) -> np.ndarray:
    """Bernoulli(exp(-num / den)) for ``0 <= num < 2^62`` (int64): the AND over the ``k``-bit digits ``d`` at
    positions ``i`` of Bernoulli(exp(-d 2^(k i) / den)) (:func:`_layout`), each one word against its exact
    threshold, from the highest position down while they succeed (a digit 0 has the threshold 2^32 - 1 for 1)."""
    k, tables = _exp_digits(den, _positions(den, num.size))
    alive, rest = np.arange(num.size), num
    for i, table in zip(reversed(range(len(tables))), tables):
        digit = rest >> (k * i)
        thresholds = table[np.minimum(digit, table.size - 1)] if i == len(tables) - 1 else table[digit]
        b = stream.words(alive.size)
        out = np.flatnonzero(b >= thresholds)
        fail = np.ones(out.size, dtype=bool)
        for j in np.flatnonzero(b[out] == thresholds[out]):
            fail[j] = not LazyUniform(int(b[out[j]])).below_exp(int(digit[out[j]]) << (k * i), den)
        if out.size:
            keep = np.ones(alive.size, dtype=bool)
            keep[out[fail]] = False
            alive, rest = alive[keep], rest[keep]
        if i:
            rest = rest & ((1 << (k * i)) - 1)
    accepted = np.zeros(num.size, dtype=bool)
    accepted[alive] = True
    return accepted


@dataclass(frozen=True)
class _Staircase:
    """The proposal and acceptance of ``N_Z(0, v)``, ``v = t r``: ``|y| = U + s V`` (``U`` uniform on ``[0, s)``,
    ``V`` geometric with ``P[V >= k] = exp(-k)``, a random sign, -0 rejected) has ``q(y) ∝ exp(-floor(|y| / s))``;
    accepting it with ``exp(-N(y) / D)``, ``D = 2 v``, ``N(y) = y^2 - D floor(|y| / s) + C``, gives
    ``q(y) exp(-N(y) / D) ∝ exp(-y^2 / (2 v))``. ``C = max_k k (D - k s^2)``, the largest
    ``D floor(|y| / s) - y^2``, makes ``N >= 0``; ``s`` about ``1.4 sqrt(v)`` accepts about 55 % of proposals."""

    s: int
    den: int
    offset: int

    @classmethod
    def of(cls, variance: int) -> "_Staircase":
        s = max(1, (7 * math.isqrt(variance) + 2) // 5)
        den = 2 * variance
        k = den // (2 * s * s)
        return cls(s, den, max(j * (den - j * s * s) for j in (0, k, k + 1)))

    def exponent(self, y: int) -> int:
        """``N(y)`` in Python integers."""
        return y * y - self.den * (y // self.s) + self.offset

    def table_size(self) -> int:
        """The first ``|y|`` from which ``N(y) >= 23 D`` (threshold 0): ``N(y) >= y^2 - D y / s``, so from the
        smallest ``y`` with ``s y^2 - D y >= 23 D s``."""
        y = (self.den + math.isqrt(self.den * self.den + 92 * self.den * self.s * self.s)) // (2 * self.s)
        while self.s * y * y - self.den * y < 23 * self.den * self.s:
            y += 1
        return y


@lru_cache(maxsize=8)
def _acceptance_table(variance: int) -> np.ndarray:
    """``T[y] = min(floor(exp(-N(y) / D) 2^32), 2^32 - 1)`` for ``0 <= y < L`` and ``T[L] = 0`` (:class:`_Staircase`).

    ``exp(-N(y) / D)`` in 128-bit fixed point, a lower and an upper bound, stepped from ``y`` to ``y + 1`` by
    the factor ``exp(-(2 y + 1) / D)`` (itself stepped by ``exp(-2 / D)``) and, where ``floor(|y| / s)`` grows,
    divided by ``exp(-1)``; an entry whose bounds straddle an integer of the 32-bit scale is computed alone.
    """
    stair = _Staircase.of(variance)
    size, work, den = stair.table_size(), WORK_BITS, stair.den
    shift = work - WORD_BITS
    f_lo = exp_floor(stair.offset, den, work)
    f_hi = f_lo + 1
    g_lo = exp_floor(1, den, work)
    g_hi = g_lo + 1
    q_lo = exp_floor(2, den, work)
    e_lo = exp_floor(1, 1, work)  # exp(-1) 2^W in [e_lo, e_lo + 1)
    out = np.zeros(size + 1, dtype=_WORD)
    for y in range(size):
        a, b = f_lo >> shift, f_hi >> shift
        out[y] = min(a if a == b else exp_floor(stair.exponent(y), den, WORD_BITS), WORD_MAX)
        f_lo, f_hi = (f_lo * g_lo) >> work, -((-f_hi * g_hi) >> work)
        if (y + 1) % stair.s == 0:
            f_lo, f_hi = (f_lo << work) // (e_lo + 1), -((-f_hi << work) // e_lo)
        g_lo, g_hi = (g_lo * q_lo) >> work, -((-g_hi * (q_lo + 1)) >> work)
    out.flags.writeable = False
    return out


def _use_table(stair: _Staircase, proposals: int) -> bool:
    """Whether to build the acceptance table (about 0.8 us an entry, for both classes of a release) for
    ``proposals`` draws rather than compare digit by digit (about 35 ns a draw more)."""
    return stair.table_size() <= min(proposals // 12, 1 << 18)


def _candidates(t: int, r: int, size: int, stream: _Keystream) -> np.ndarray:
    """The accepted draws among ``size`` proposals (:class:`_Staircase`): against the acceptance table when it
    is small beside the proposals, else by the digits of the exponent (:func:`_bernoulli_exp`)."""
    stair = _Staircase.of(t * r)
    y = _uniform_below(stair.s, size, stream) + stair.s * _geometric(size, stream)
    negative = stream.bits(size)
    if _use_table(stair, size):
        table = _acceptance_table(t * r)
        thresholds = table[np.minimum(y, table.size - 1)]
        b = stream.words(size)
        accept = b < thresholds
        for i in np.flatnonzero(b == thresholds):
            accept[i] = LazyUniform(int(b[i])).below_exp(stair.exponent(int(y[i])), stair.den)
    else:
        near = np.minimum(y, _WIDE)
        accept = _bernoulli_exp(near * near - stair.den * (near // stair.s) + stair.offset, stair.den, stream)
        for i in np.flatnonzero(y >= _WIDE):  # the exponent in Python integers
            accept[i] = LazyUniform(secrets.randbits(WORD_BITS)).below_exp(stair.exponent(int(y[i])), stair.den)
    accept &= ~(negative & (y == 0))  # -0 is rejected, so that 0 is not counted twice
    out = y[accept]
    np.negative(out, out=out, where=negative[accept])
    return out


def sample_exact_discrete_gaussian(t: int, r: int, size: int) -> np.ndarray:
    """``size`` independent draws of ``N_Z(0, t r)`` (``P[y] ∝ exp(-y^2 / (2 t r))``), exactly (module docstring).

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
    stream = _Keystream()
    parts, have, rate = [], 0, 0.55  # about the staircase's acceptance rate
    while have < size:
        m = int((size - have) / rate * 1.02) + 64
        drawn = _candidates(t, r, m, stream)
        rate = max(drawn.size / m, 0.05)
        parts.append(drawn)
        have += drawn.size
    return np.concatenate(parts)[:size] if parts else np.empty(0, dtype=np.int64)
