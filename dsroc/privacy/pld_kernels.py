"""Exact numpy equivalents of the two pure-Python loops that dominate composing dp-accounting 0.6's PLDs.

Composing two privacy-loss distributions in dp-accounting 0.6 turns a sparse pmf (a dict keyed by loss index)
into a dense one by a list comprehension over every index (``common.dictionary_to_list``), and truncates the
composed pmf's tails by summing it element by element in Python (``pld_pmf._truncate_tails``). At the loss grids
the accountant uses they are three quarters of a secure-aggregation calibration's CPU time (a 10^5-entry pmf per
composition). :func:`install` replaces both with numpy versions that give the same numbers bit for bit: the same
entries in the same places (missing ones 0.0), and the prefix sums in the same order (``np.cumsum`` adds one
entry after another, as the loop does). Installed only on the pinned version they were checked against
(``tests/core/test_pld_kernels.py``); any other version keeps its own code.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHECKED_VERSION", "dictionary_to_list", "find_prefix_to_truncate", "install", "installed",
           "truncate_tails"]

#: The dp-accounting release whose two helpers these reproduce.
CHECKED_VERSION = "0.6.0"

_ORIGINALS: dict = {}


def dictionary_to_list(input_dictionary):
    """``dp_accounting.pld.common.dictionary_to_list``: ``(offset, values)`` with ``values[i]`` the dictionary's
    value at ``offset + i`` (0.0 where it has none), as a float array instead of a list (every caller in
    dp-accounting makes an array of it, or convolves it as one)."""
    offset, top = min(input_dictionary), max(input_dictionary)
    try:
        keys = np.fromiter(input_dictionary.keys(), dtype=np.int64, count=len(input_dictionary))
        values = np.fromiter(input_dictionary.values(), dtype=np.float64, count=len(input_dictionary))
    except (TypeError, ValueError, OverflowError):  # not float values on int64 keys: dp-accounting's own loop
        from dp_accounting.pld import common

        return _ORIGINALS.get("dictionary_to_list", common.dictionary_to_list)(input_dictionary)
    out = np.zeros(int(top) - int(offset) + 1, dtype=np.float64)
    out[keys - offset] = values
    return offset, out


def find_prefix_to_truncate(arr, threshold: float) -> int:
    """The length of the longest prefix of ``arr`` whose running sum (added one entry after another) stays at most
    ``threshold``: dp-accounting's loop inside ``_truncate_tails``, by ``np.cumsum`` on float64 entries."""
    values = np.asarray(arr)
    if values.dtype != np.float64:  # the loop's own arithmetic on anything else
        s = 0
        for i, val in enumerate(arr):
            s += val
            if s > threshold:
                return i
        return len(arr)
    above = np.flatnonzero(np.cumsum(values) > threshold)
    return int(above[0]) if above.size else len(values)


def truncate_tails(probs, tail_mass_truncation: float, pessimistic_estimate: bool):
    """``dp_accounting.pld.pld_pmf._truncate_tails`` of 0.6.0, line for line, with :func:`find_prefix_to_truncate`
    instead of its Python loop."""
    if tail_mass_truncation == 0:
        return 0, probs, 0
    left_idx = find_prefix_to_truncate(probs, tail_mass_truncation / 2)
    right_idx = len(probs) - find_prefix_to_truncate(np.flip(probs), tail_mass_truncation / 2)
    right_idx = max(right_idx, left_idx + 1)
    left_mass = np.sum(probs[:left_idx])
    right_mass = np.sum(probs[right_idx:])
    truncated_probs = probs[left_idx:right_idx]
    if pessimistic_estimate:
        truncated_probs[0] += left_mass
        return left_idx, truncated_probs, right_mass
    truncated_probs[-1] += right_mass
    return left_idx, truncated_probs, 0


def installed() -> bool:
    """Whether dp-accounting runs these helpers (it is the checked version and :func:`install` ran)."""
    return bool(_ORIGINALS)


def install() -> bool:
    """Make dp-accounting use these helpers if it is :data:`CHECKED_VERSION` (once per process; idempotent).
    Returns whether they are in use. Called wherever dsroc builds a privacy-loss distribution."""
    if _ORIGINALS:
        return True
    from importlib.metadata import PackageNotFoundError, version

    try:
        if version("dp-accounting") != CHECKED_VERSION:
            return False
    except PackageNotFoundError:
        return False
    from dp_accounting.pld import common, pld_pmf

    _ORIGINALS.update(dictionary_to_list=common.dictionary_to_list, truncate_tails=pld_pmf._truncate_tails)
    common.dictionary_to_list = dictionary_to_list
    pld_pmf._truncate_tails = truncate_tails
    return True


def original(name: str):
    """dp-accounting's own helper ``name`` (``"dictionary_to_list"`` or ``"truncate_tails"``), for the tests that
    check these against it; None before :func:`install`."""
    return _ORIGINALS.get(name)
