"""The site's private SQLite files: created readable by the site account only, WAL and full sync."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

__all__ = ["PrivateStore", "open_private_db"]


def open_private_db(path) -> sqlite3.Connection:
    """Open (creating it with mode 0600 and its folder if needed) a durable SQLite file for one writer thread lock.

    The ledger, the disclosure records and the model approvals hold noise seeds and which questions were
    asked, so nobody but the site account may read them; WAL with ``synchronous=FULL`` makes each
    committed transaction survive a crash (the kill -9 tests rely on it).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    return db


class PrivateStore:
    """A store in one private SQLite file: ``path``, the connection ``_db`` and the lock ``_lock`` that guards it."""

    def __init__(self, path, schema: str = ""):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = open_private_db(self.path)
        if schema:
            self._db.executescript(schema)

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
