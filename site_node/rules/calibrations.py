"""Calibrations a site makes on an analyst's request (secagg shares, the events of a planned release): each made
once and kept, and the CPU time of new ones bounded per analyst.

A secagg share calibration is a search over the accountant (0.1-1 s of CPU), the events of a planned boyd or
histogram release ~0.05-0.15 s; an analyst could ask for a fresh one with every call (a new epsilon each time).
A calibration already made is answered from memory at no cost; a new one is made only while the analyst's new
calibrations took less than :data:`CPU_SECONDS_PER_MINUTE` of CPU over the last minute, and refused with
RESOURCE_EXHAUSTED beyond (nothing recorded, nothing kept). Other analysts have their own allowance.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, defaultdict, deque
from typing import Callable, Hashable, TypeVar

from ..errors import ResourceExhausted

__all__ = ["CPU_SECONDS_PER_MINUTE", "KEPT", "Calibrations"]

#: CPU seconds an analyst's new calibrations may take per minute at a site (a tenth of one core).
CPU_SECONDS_PER_MINUTE = 6.0
#: Calibrations kept (least recently used forgotten first).
KEPT = 1024
_WINDOW = 60.0

T = TypeVar("T")


class Calibrations:
    """A site's calibrations made on request, kept by key, their CPU time bounded per analyst.

    Parameters
    ----------
    cpu_per_minute : float
        CPU seconds of new calibrations one analyst may cause per minute.
    kept : int
        Calibrations kept.
    clock, cpu : callable
        Wall-clock seconds and this thread's CPU seconds (a test passes its own).
    """

    def __init__(self, cpu_per_minute: float = CPU_SECONDS_PER_MINUTE, *, kept: int = KEPT,
                 clock: Callable[[], float] = time.monotonic, cpu: Callable[[], float] = time.thread_time):
        self.cpu_per_minute, self.kept = float(cpu_per_minute), int(kept)
        self._clock, self._cpu = clock, cpu
        self._known: OrderedDict[Hashable, object] = OrderedDict()
        self._spent: defaultdict[str, deque] = defaultdict(deque)  # analyst -> (ended, cpu seconds) of new ones
        self._lock = threading.Lock()

    def get(self, analyst: str, key: Hashable, calibrate: Callable[[], T], *, what: str) -> T:
        """The calibration ``key``: kept, or made now by ``calibrate()`` if ``analyst``'s allowance is not used up
        (ResourceExhausted naming ``what`` otherwise). An exception of ``calibrate`` goes on, its CPU counted."""
        with self._lock:
            if key in self._known:
                self._known.move_to_end(key)
                return self._known[key]  # type: ignore[return-value]
            spent, wait = self._recent(analyst)
            if spent >= self.cpu_per_minute:
                raise ResourceExhausted(
                    f"{what}: your new calibrations took {spent:.1f} s of this site's CPU in the last minute, the "
                    f"limit per analyst ({self.cpu_per_minute:g} s a minute); ask again in {wait:.0f} s, or ask for "
                    "a calibration made before (kept and free)")
        start = self._cpu()
        try:
            value = calibrate()
        finally:
            used = self._cpu() - start
            with self._lock:
                self._spent[analyst].append((self._clock(), used))
        with self._lock:
            self._known[key] = value
            self._known.move_to_end(key)
            while len(self._known) > self.kept:
                self._known.popitem(last=False)
        return value

    def _recent(self, analyst: str) -> tuple[float, float]:
        """CPU seconds of the analyst's new calibrations within the last minute, and seconds until the oldest of
        them leaves it."""
        now, spent = self._clock(), self._spent.get(analyst)
        if not spent:
            return 0.0, 0.0
        while spent and spent[0][0] <= now - _WINDOW:
            spent.popleft()
        if not spent:
            del self._spent[analyst]
            return 0.0, 0.0
        return sum(cpu for _, cpu in spent), max(spent[0][0] + _WINDOW - now, 1.0)
