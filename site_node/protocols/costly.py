"""One costly computation per analyst at a time, so that one analyst's parallel calls cannot starve the others' CPU.

A daemon's worker threads share one interpreter lock: an analyst running four noise calibrations at once (a
secure-aggregation share is a search of about ten privacy-loss evaluations, ~0.1 s of CPU each time its epsilon
changes) held four fifths of the site's CPU, and another analyst's validation ran five times slower (0.5 s became
2.7 s through three daemons). Each analyst's costly calls (:func:`costly`: PrepareRelease, SecAggAdvertise, Budget and
Describe, wrapped by the servicer) now run one after another; the analyst's other calls and every other analyst's go on
beside them, so one analyst's costly work keeps at most one thread busy. The limit is per analyst name in the process
(one daemon per process in a deployment; the in-process test daemons share it).
"""

from __future__ import annotations

import contextlib
import threading
from collections import defaultdict
from typing import Iterator

__all__ = ["costly"]

_LOCKS: defaultdict[str, threading.RLock] = defaultdict(threading.RLock)  # re-entered by nested steps
_GUARD = threading.Lock()


@contextlib.contextmanager
def costly(analyst: str) -> Iterator[None]:
    """Run the block as ``analyst``'s one costly computation in progress (waiting for the one before it)."""
    with _GUARD:
        lock = _LOCKS[analyst]
    with lock:
        yield
