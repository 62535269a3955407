"""The daemon's freed memory: reused by the C allocator while calls run, given back to the system when they end."""

from __future__ import annotations

import ctypes
import threading
import time

__all__ = ["FreedMemory", "trim_freed_memory"]


def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim
    except AttributeError:  # not glibc
        return None


_TRIM = _malloc_trim()


def trim_freed_memory() -> bool:
    """Give the C allocator's free memory back to the system (glibc's ``malloc_trim(0)``); False elsewhere."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


class FreedMemory:
    """Calls :func:`trim_freed_memory` when the site's last call in progress ends, and at least every
    ``interval`` seconds of calls ending while others run (a site that is never idle).

    glibc keeps freed blocks (up to 32 MB each) for the next request instead of unmapping them: a score
    array then reuses memory another array of the same call freed, rather than mapping fresh pages that
    the kernel must fault in and zero one by one (before, a third of a daemon's CPU time in a paper
    validation at 10^6 patients). What a call left behind is given back once no call needs it, so the
    daemon's resident memory between validations stays what its data needs.

    Parameters
    ----------
    interval : float
        Seconds between trims while calls keep overlapping.
    trim : callable
        What gives the memory back (:func:`trim_freed_memory`; a test passes its own).
    """

    def __init__(self, interval: float = 2.0, trim=trim_freed_memory):
        self.interval, self._trim = float(interval), trim
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def call_ended(self, in_progress: int) -> None:
        """Note that a call ended, ``in_progress`` calls still running; trims when that is none or the interval passed."""
        now = time.monotonic()
        with self._lock:
            if in_progress and now - self._last < self.interval:
                return
            self._last = now
        self._trim()
