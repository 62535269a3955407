"""Exact counts below a query from a cumulative histogram, for reference values on a small dyadic grid.

Released noisy scores are multiples of a power of two (``dsroc.privacy.lattice``): pooled, they take a
few ten thousand distinct values however many there are. The counts ``#{ref < q}`` and ``#{ref <= q}``
then come from one cumulative histogram over the grid, in O(n + cells) without sorting the reference,
and a query is one division by the grid step (a power of two: exact) instead of a binary search.
The counts are integers, identical to those of sorting and searching.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DyadicCounts"]

_CHUNK = 1 << 20  # values per pass over the reference (bounds the temporaries)
_EXACT = 2.0**53  # integers of at most this size are exact float64 values


class DyadicCounts:
    """The reference values' counts per cell of the finest power-of-two grid they all lie on.

    Use :meth:`of`, which returns None when the values are not on such a grid of at most ``max_cells``
    cells (then sort and search instead).

    Attributes
    ----------
    step : float
        The grid step, a power of two.
    first : int
        The first cell's value in steps (the smallest reference value divided by ``step``).
    below : ndarray of int64
        ``below[i]`` is the number of reference values below cell ``i`` (length cells + 1).
    """

    def __init__(self, step: float, first: int, below: np.ndarray):
        self.step, self.first, self.below = float(step), int(first), below

    @property
    def n(self) -> int:
        """Number of reference values."""
        return int(self.below[-1])

    @classmethod
    def of(cls, values: np.ndarray, *, max_cells: int) -> "DyadicCounts | None":
        """The counts of ``values`` (finite float64, any order), or None if they need more than ``max_cells`` cells."""
        values = np.asarray(values, dtype=np.float64)
        if values.size == 0:
            return None
        low, high = float(values.min()), float(values.max())
        top = max(high, -low)
        if top == 0.0:
            return None
        shift = 61 - int(np.frexp(top)[1])  # every |value| * 2**shift < 2**62: an exact int64 when on the 2**-shift grid
        bits, kept = 0, None
        for part in _chunks(values):
            whole = np.ldexp(part, shift).astype(np.int64)
            if not np.array_equal(whole, np.ldexp(part, shift)):
                return None  # a value has bits below 2**-shift: no grid of bounded size
            bits |= int(np.bitwise_or.reduce(whole))
            kept = whole if part.size == values.size else None
        zeros = (bits & -bits).bit_length() - 1  # the trailing zero bits every scaled value has
        first, last = int(np.ldexp(low, shift)) >> zeros, int(np.ldexp(high, shift)) >> zeros
        cells = last - first + 1
        if cells > max_cells or max(abs(first), abs(last)) >= _EXACT:
            return None
        counts = np.zeros(cells, dtype=np.int64)
        for part in ([kept] if kept is not None else _chunks(values)):
            cell = part if kept is not None else np.ldexp(part, shift).astype(np.int64)
            cell >>= zeros
            cell -= first
            counts += np.bincount(cell, minlength=cells)
        below = np.empty(cells + 1, dtype=np.int64)
        below[0] = 0
        np.cumsum(counts, out=below[1:])
        return cls(np.ldexp(1.0, zeros - shift), first, below)

    def counts(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``#{ref < q}`` and ``#{ref <= q}`` for every query (finite float64, any order)."""
        cells = self.below.size - 1
        # The first cell at or above q, in steps: ceil(q / step), kept within one cell of the grid, then checked
        # against q exactly (cell * step is an exact float64), so rounding of q / step cannot move it.
        cell = np.clip(np.ceil(queries / self.step), self.first - 1, self.first + cells)
        cell += cell * self.step < queries
        cell -= (cell - 1) * self.step >= queries
        index = (cell - self.first).astype(np.int64)
        less = self.below[np.clip(index, 0, cells)]
        on_grid = cell * self.step == queries
        if not on_grid.any():
            return less, less
        less_equal = less.copy()
        less_equal[on_grid] = self.below[np.clip(index[on_grid] + 1, 0, cells)]
        return less, less_equal

    def sorted_values(self) -> np.ndarray:
        """The reference values, ascending (each cell's value repeated by its count)."""
        cells = np.arange(self.first, self.first + self.below.size - 1, dtype=np.float64)
        return np.repeat(cells * self.step, np.diff(self.below))


def _chunks(values: np.ndarray):
    for start in range(0, values.size, _CHUNK):
        yield values[start:start + _CHUNK]
