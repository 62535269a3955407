"""The daemon's freed memory: reused by the C allocator while calls run, given back to the system when they end."""

from __future__ import annotations

import ctypes
import os
import threading
import time

__all__ = ["FreedMemory", "resident_bytes", "trim_freed_memory"]


def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim
    except AttributeError:  # not glibc
        return None


_TRIM = _malloc_trim()
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def trim_freed_memory() -> bool:
    """Give the C allocator's free memory back to the system (glibc's ``malloc_trim(0)``); False elsewhere."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


_STATM: dict = {}  # process id -> its ``/proc/self/statm`` opened once (a forked child opens its own)
_STATM_LOCK = threading.Lock()


def resident_bytes() -> int:
    """This process's resident set size in bytes (``/proc/self/statm``); 0 where it cannot be read.

    Read from one descriptor opened at first use (``pread`` at offset 0 makes the kernel write the figures afresh):
    the daemon asks after nearly every call, and opening the file each time was a tenth of a cheap call's CPU.
    """
    try:
        pid = os.getpid()
        fd = _STATM.get(pid)
        if fd is None:
            with _STATM_LOCK:
                fd = _STATM.get(pid)
                if fd is None:
                    fd = _STATM[pid] = os.open("/proc/self/statm", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        return int(os.pread(fd, 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


class FreedMemory:
    """Calls :func:`trim_freed_memory` when the site's last call in progress ends and its resident memory grew by
    ``growth`` bytes since the last trim or a session was let go since (:meth:`note_freed`), and at least every
    ``interval`` seconds of calls ending while others run (a site that is never idle).

    glibc keeps freed blocks (up to 32 MB each) for the next request instead of unmapping them: a score
    array then reuses memory another array of the same call freed, rather than mapping fresh pages that
    the kernel must fault in and zero one by one (before, a third of a daemon's CPU time in a paper
    validation at 10^6 patients). What a call left behind is given back once no call needs it, so the
    daemon's resident memory between validations stays what its data needs, within ``growth``. A small
    validation's calls (a few MB each) trim once, when its session closes, not after every call: each trim
    gave back the pages the next call then faulted in again (about a tenth of a daemon's CPU at 2 000
    patients per site).

    Parameters
    ----------
    interval : float
        Seconds between trims while calls keep overlapping.
    trim : callable
        What gives the memory back (:func:`trim_freed_memory`; a test passes its own).
    growth : int
        Bytes of resident memory gained since the last trim that make the end of the last call in progress trim
        (0: every such end trims).
    resident : callable
        The process's resident bytes (:func:`resident_bytes`; 0 where unknown: then every end trims).
    """

    def __init__(self, interval: float = 2.0, trim=trim_freed_memory, *, growth: int = 16 << 20,
                 resident=resident_bytes):
        self.interval, self._trim = float(interval), trim
        self.growth, self._resident = int(growth), resident
        self._last = time.monotonic()
        self._baseline, self._freed = resident(), False
        self._lock = threading.Lock()

    def note_freed(self) -> None:
        """Note that large arrays were let go (a session closed or expired): the next idle moment trims."""
        self._freed = True

    def call_ended(self, in_progress: int) -> None:
        """Note that a call ended, ``in_progress`` calls still running; trims when that is none and memory grew or
        was let go, or when the interval passed."""
        now = time.monotonic()
        with self._lock:
            if in_progress:
                if now - self._last < self.interval:
                    return
            elif not self._freed and self.growth:
                resident = self._resident()
                if resident and resident - self._baseline < self.growth:
                    return
            self._last, self._freed = now, False
        self._trim()
        self._baseline = self._resident()
