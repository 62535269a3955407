"""Per-analyst limit on calls in progress, so that one analyst cannot occupy every worker thread."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Callable

__all__ = ["CallSlots"]


class CallSlots:
    """Counts each analyst's calls in progress and refuses one beyond ``limit``.

    A stalled stream holds a worker thread until its client gives up; without a per-analyst limit,
    one analyst holding every worker would make the site unavailable to the others (and to health
    probes, which share the workers).

    Parameters
    ----------
    limit : int
        Calls in progress per analyst, at least 1.
    on_release : callable, optional
        Called after each slot is given back with the number of calls still in progress (of all analysts),
        outside the lock (the daemon gives its freed memory back then: :class:`site_node.memory.FreedMemory`).
    """

    def __init__(self, limit: int, *, on_release: Callable[[int], None] | None = None):
        if int(limit) < 1:
            raise ValueError(f"limit must be at least 1, got {limit!r}")
        self.limit = int(limit)
        self._busy: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._on_release = on_release

    def acquire(self, analyst: str) -> bool:
        """Take a slot for ``analyst``; False (and nothing taken) when all of theirs are in use."""
        with self._lock:
            if self._busy[analyst] >= self.limit:
                return False
            self._busy[analyst] += 1
            return True

    def release(self, analyst: str) -> None:
        """Give back a slot taken by :meth:`acquire`."""
        with self._lock:
            self._busy[analyst] -= 1
            if self._busy[analyst] <= 0:
                del self._busy[analyst]
            in_progress = sum(self._busy.values())
        if self._on_release is not None:
            self._on_release(in_progress)

    def busy(self, analyst: str) -> int:
        """Calls of ``analyst`` in progress."""
        with self._lock:
            return self._busy[analyst]
