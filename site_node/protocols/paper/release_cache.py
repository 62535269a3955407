"""The score releases a site opened last, kept so that a release's other class and its repeats are not opened again
while sessions are open (the site lets them go when its last session ends)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable

import numpy as np

__all__ = ["ReleaseCache"]


class ReleaseCache:
    """Opened releases by release id, the most recent first, at most ``max_bytes`` of arrays (thread-safe).

    A release is opened once even when both its classes are asked at the same moment: the second caller
    waits for the first. A release larger than ``max_bytes`` is opened for each caller and not kept.

    Parameters
    ----------
    max_bytes : int
        Bytes of the kept arrays at most.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self._entries: OrderedDict[str, tuple] = OrderedDict()
        self._opening: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, release_id: str, open_release: Callable[[], tuple]) -> tuple:
        """The opened release ``release_id``: kept, or ``open_release()`` (a tuple of arrays and other values),
        whose exceptions pass through (nothing is kept then)."""
        with self._lock:
            entry = self._entries.get(release_id)
            if entry is not None:
                self._entries.move_to_end(release_id)
                return entry
            opening = self._opening.setdefault(release_id, threading.Lock())
        with opening:
            with self._lock:  # opened meanwhile by the caller this one waited for
                entry = self._entries.get(release_id)
            if entry is None:
                entry = open_release()
                self._keep(release_id, entry)
        with self._lock:
            self._opening.pop(release_id, None)
        return entry

    def _keep(self, release_id: str, entry: tuple) -> None:
        size = sum(v.nbytes for v in entry if isinstance(v, np.ndarray))
        if size > self.max_bytes:
            return
        with self._lock:
            self._entries[release_id] = entry
            while sum(sum(v.nbytes for v in e if isinstance(v, np.ndarray)) for e in self._entries.values()) > self.max_bytes:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Let every kept release go (a caller that holds one keeps its own reference)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
