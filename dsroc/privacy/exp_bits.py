"""Exact integer thresholds ``floor(exp(-num / den) * 2^bits)`` and the comparisons of uniform bits with them.

A uniform ``U`` in [0, 1) whose first 32 bits are the integer ``B`` lies below ``p = exp(-x)`` when
``B < floor(p 2^32)`` and above it when ``B > floor(p 2^32)``; only when they are equal (probability
2^-32) are more bits needed, and :class:`LazyUniform` draws them until the comparison is decided
(``p`` is irrational for rational ``x > 0``, so it is, with probability one). The thresholds are
exact integers: decimal arithmetic (correctly rounded division and ``exp``) with a proven error
bound, at a precision raised until the floor is certain; tables of powers by interval arithmetic in
Python integers. No floating-point number enters a decision.
"""

from __future__ import annotations

import secrets
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from functools import lru_cache

import numpy as np

__all__ = ["exp_floor", "exp_floor_table", "LazyUniform", "WORD_BITS", "WORD_MAX", "WORK_BITS"]

WORD_BITS = 32  # the uniform words compared with the thresholds
WORD_MAX = 2**WORD_BITS - 1
WORK_BITS = 128  # the fixed point of the tables' interval arithmetic


def exp_floor(num: int, den: int, bits: int) -> int:
    """``floor(exp(-num / den) * 2^bits)`` exactly, for integers ``num >= 0``, ``den >= 1``, ``bits >= 1``.

    With ``p`` significant digits, ``x = num / den`` and ``exp(-x)`` are each correctly rounded
    (relative error at most ``10^(1-p) / 2``); the rounded ``x`` moves ``exp(-x)`` by a relative
    ``x 10^(1-p) / 2`` at most, so the result lies within a relative ``(x + 2) 10^(1-p)`` of the
    truth. The precision doubles until both ends of that interval have the same floor.
    """
    num, den, bits = int(num), int(den), int(bits)
    if num < 0 or den < 1 or bits < 1:
        raise ValueError(f"exp_floor needs num >= 0, den >= 1, bits >= 1, got {num}, {den}, {bits}")
    if num == 0:
        return 1 << bits
    if 10 * num > 7 * bits * den:  # x > 0.7 bits > bits ln 2: exp(-x) 2^bits < 1
        return 0
    prec = int(bits * 0.302) + 20
    while True:
        with localcontext() as ctx:
            ctx.prec, ctx.rounding = prec, ROUND_HALF_EVEN
            top, bottom = (-(Decimal(num) / Decimal(den))).exp().as_integer_ratio()
        # value (1 -/+ slack) 2^bits, slack = c / 10^prec, in integers: the floors of the exact rationals
        scale, c = 10**prec, (num // den + 2) * 10
        lo = (top * (scale - c) << bits) // (bottom * scale)
        if lo == (top * (scale + c) << bits) // (bottom * scale):
            return lo
        prec *= 2


@lru_cache(maxsize=16)
def exp_floor_table(step: int, den: int, count: int) -> np.ndarray:
    """``T[d] = min(floor(exp(-d step / den) 2^32), 2^32 - 1)`` for ``d < count`` (uint32, read-only).

    Powers of ``exp(-step / den)`` in 128-bit fixed point, each a lower and an upper bound (floor and
    ceiling of the products); an entry whose bounds straddle an integer of the 32-bit scale is
    computed alone by :func:`exp_floor`. Entry 0 is ``2^32 - 1`` for 1: the comparison ``B < T``
    then fails only at ``B = 2^32 - 1``, which :class:`LazyUniform` decides (below 1, always).
    """
    shift = WORK_BITS - WORD_BITS
    base = exp_floor(step, den, WORK_BITS)  # base <= exp(-step/den) 2^W < base + 1
    lo = hi = 1 << WORK_BITS
    out = np.zeros(count, dtype=np.uint32)
    for d in range(count):
        if d:
            lo = (lo * base) >> WORK_BITS
            hi = -((-hi * (base + 1)) >> WORK_BITS)
        a, b = lo >> shift, hi >> shift
        if b == 0:  # every further entry is 0
            break
        out[d] = min(a if a == b else exp_floor(d * step, den, WORD_BITS), WORD_MAX)
    out.flags.writeable = False
    return out


class LazyUniform:
    """A uniform number in [0, 1) known by its first ``bits`` bits ``prefix``; more come from ``secrets`` as needed.

    Parameters
    ----------
    prefix : int
        The first bits, as an integer below ``2^bits``.
    bits : int
        How many bits are known.
    """

    def __init__(self, prefix: int, bits: int = WORD_BITS):
        self.prefix, self.bits = int(prefix), int(bits)

    def below_exp(self, num: int, den: int) -> bool:
        """Whether the number is below ``exp(-num / den)`` (64 more bits at a time until the prefix decides)."""
        while True:
            threshold = exp_floor(num, den, self.bits)
            if self.prefix != threshold:
                return self.prefix < threshold
            self.prefix = (self.prefix << 64) | secrets.randbits(64)
            self.bits += 64
