"""A cache of secure-aggregation share calibrations and checks in a file its owner alone writes and reads.

The site keeps its own in ``state/secagg_calibrations.json`` (:data:`CALIBRATIONS_FILE`): each entry is a check or a
calibration this site computed, keyed by every argument and the accountant's version, content-hashed
(:class:`dsroc.secagg.calibrations.CalibrationCache`); no other party's cache is ever read. The analyst may keep one
too (``Federation(calibration_cache=...)``): its share proposals are checked by every site whatever their source. A
missing, unreadable or damaged file is an empty cache, and a file that cannot be written leaves the answers computed
(it is a cache, never a record of anything).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from dsroc.secagg.calibrations import CalibrationCache

__all__ = ["CALIBRATIONS_FILE", "CalibrationFile"]

CALIBRATIONS_FILE = "secagg_calibrations.json"
_log = logging.getLogger("dsroc.site")


class CalibrationFile:
    """The cache stored at ``path``, read on first use; :meth:`save` stores what is new."""

    def __init__(self, path):
        self.path = Path(path)
        self._cache: CalibrationCache | None = None
        self._lock = threading.Lock()

    @property
    def cache(self) -> CalibrationCache:
        with self._lock:
            if self._cache is None:
                try:
                    self._cache = CalibrationCache.loads(self.path.read_bytes())
                except OSError:
                    self._cache = CalibrationCache()
            return self._cache

    def save(self) -> None:
        """Write the cache if it holds something new (a temporary file renamed over it)."""
        with self._lock:
            if self._cache is None or not self._cache.changed:
                return
            tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
            try:
                tmp.write_bytes(self._cache.dumps())
                os.replace(tmp, self.path)
            except OSError as exc:
                _log.warning("secagg calibrations not cached (%s): each is computed again", exc)
