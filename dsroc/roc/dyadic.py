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

_CHUNK = 1 << 18  # values per pass (bounds the work arrays: about 7 MB)
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
        work = _Work(min(values.size, _CHUNK))
        bits = 0
        for part in _chunks(values):
            whole = work.scaled(part, shift)
            if not work.exact():
                return None  # a value has bits below 2**-shift: no grid of bounded size
            bits |= int(np.bitwise_or.reduce(whole))
        zeros = (bits & -bits).bit_length() - 1  # the trailing zero bits every scaled value has
        first, last = int(np.ldexp(low, shift)) >> zeros, int(np.ldexp(high, shift)) >> zeros
        cells = last - first + 1
        if cells > max_cells or max(abs(first), abs(last)) >= _EXACT:
            return None
        counts = np.zeros(cells, dtype=np.int64)
        for part in _chunks(values):
            # One pass (one chunk) leaves its scaled values in the work arrays: they need not be made again.
            cell = work.scaled(part, shift) if part.size < values.size else work.whole[:part.size]
            cell >>= zeros
            cell -= first
            counts += np.bincount(cell, minlength=cells)
        below = np.empty(cells + 1, dtype=np.int64)
        below[0] = 0
        np.cumsum(counts, out=below[1:])
        return cls(np.ldexp(1.0, zeros - shift), first, below)

    def counts(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``#{ref < q}`` and ``#{ref <= q}`` for every query (finite float64, any order)."""
        queries = np.asarray(queries, dtype=np.float64)
        cells = self.below.size - 1
        less, less_equal = np.empty(queries.size, dtype=np.int64), np.empty(queries.size, dtype=np.int64)
        work = _Work(min(queries.size, _CHUNK))
        for start in range(0, queries.size, _CHUNK):
            q = queries[start:start + _CHUNK]
            k = q.size
            cell, product, flag, index = work.values[:k], work.other[:k], work.flags[:k], work.whole[:k]
            # The first cell at or above q, in steps: ceil(q / step), kept within one cell of the grid, then
            # checked against q exactly (cell * step is an exact float64), so rounding of q / step cannot move it.
            np.divide(q, self.step, out=cell)
            np.ceil(cell, out=cell)
            np.clip(cell, self.first - 1, self.first + cells, out=cell)
            np.less(np.multiply(cell, self.step, out=product), q, out=flag)
            cell += flag
            np.subtract(cell, 1.0, out=product)
            np.greater_equal(np.multiply(product, self.step, out=product), q, out=flag)
            cell -= flag
            cell -= self.first
            index[...] = cell
            np.equal(np.multiply(np.add(cell, self.first, out=product), self.step, out=product), q, out=flag)
            np.take(self.below, np.clip(index, 0, cells), out=less[start:start + k])
            index += flag  # a query on a cell's value counts that cell's values as at most q
            np.take(self.below, np.clip(index, 0, cells, out=index), out=less_equal[start:start + k])
        return less, less_equal

    def sorted_blocks(self, size: int):
        """The reference values in ascending order, in consecutive blocks of whole cells, each of about ``size``
        values (or one cell's) at most."""
        start, cells = 0, self.below.size - 1
        while start < cells:
            stop = max(start + 1, int(np.searchsorted(self.below, self.below[start] + size, side="right")) - 1)
            stop = min(stop, cells)
            values = np.arange(self.first + start, self.first + stop, dtype=np.float64) * self.step
            yield np.repeat(values, np.diff(self.below[start:stop + 1]))
            start = stop

    def sorted_values(self) -> np.ndarray:
        """The reference values, ascending (each cell's value repeated by its count)."""
        cells = np.arange(self.first, self.first + self.below.size - 1, dtype=np.float64)
        return np.repeat(cells * self.step, np.diff(self.below))


class _Work:
    """Arrays of one pass's chunk, made once and reused by every chunk."""

    def __init__(self, size: int):
        self.values, self.other = np.empty(size), np.empty(size)
        self.whole, self.flags = np.empty(size, dtype=np.int64), np.empty(size, dtype=bool)
        self._size = 0

    def scaled(self, part: np.ndarray, shift: int) -> np.ndarray:
        """``part * 2**shift`` (exact), as float64 in ``values`` and truncated to int64 in ``whole``."""
        k = self._size = part.size
        np.ldexp(part, shift, out=self.values[:k])
        np.copyto(self.whole[:k], self.values[:k], casting="unsafe")
        return self.whole[:k]

    def exact(self) -> bool:
        """Whether the last :meth:`scaled` chunk was integral (its truncation changed nothing)."""
        k = self._size
        return bool(np.equal(self.whole[:k], self.values[:k], out=self.flags[:k]).all())


def _chunks(values: np.ndarray):
    for start in range(0, values.size, _CHUNK):
        yield values[start:start + _CHUNK]
