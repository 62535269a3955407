"""The privacy ledger's SQLite tables: in its file (refusing one kept by an earlier dsroc version) or in memory."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import FailedPrecondition
from .sqlite_files import open_private_db

__all__ = ["open_ledger_file", "open_memory_ledger"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS releases (
    release_id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    analyst TEXT NOT NULL,
    population TEXT NOT NULL,
    dataset TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    kind TEXT NOT NULL,
    request TEXT NOT NULL,
    events TEXT NOT NULL,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    rule TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    seed BLOB NOT NULL,
    digest TEXT NOT NULL,
    payload BLOB,
    n0 INTEGER NOT NULL,
    n1 INTEGER NOT NULL,
    UNIQUE (population, source, outcome, kind, request)
);
CREATE TABLE IF NOT EXISTS reservations (
    reservation_id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    expires REAL NOT NULL,
    analyst TEXT NOT NULL,
    population TEXT NOT NULL,
    dataset TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    kind TEXT NOT NULL,
    request TEXT NOT NULL,
    events TEXT NOT NULL,
    started REAL NOT NULL DEFAULT 0,
    session_id TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS hold_usage (
    analyst TEXT NOT NULL,
    population TEXT NOT NULL,
    ended REAL NOT NULL,
    seconds REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS hold_usage_by_analyst ON hold_usage (analyst, population, ended);
CREATE TABLE IF NOT EXISTS survivor_uploads (
    population TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    score_class INTEGER NOT NULL,
    survivor TEXT NOT NULL,
    PRIMARY KEY (population, source, outcome, score_class, survivor)
);
CREATE TABLE IF NOT EXISTS models (
    population TEXT NOT NULL,
    source TEXT NOT NULL,
    PRIMARY KEY (population, source)
);
CREATE TABLE IF NOT EXISTS glm_evaluations (
    population TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    survivor TEXT NOT NULL,
    used INTEGER NOT NULL,
    PRIMARY KEY (population, source, outcome, survivor)
);
CREATE TABLE IF NOT EXISTS glm_answered (
    population TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    survivor TEXT NOT NULL,
    query TEXT NOT NULL,
    PRIMARY KEY (population, source, outcome, survivor, query)
);
"""


def open_ledger_file(path: Path) -> sqlite3.Connection:
    """Open (or create) the ledger at ``path`` with its tables.

    Parameters
    ----------
    path : Path
        The ledger's SQLite file.

    Returns
    -------
    sqlite3.Connection
        The open database, readable by the site account only.

    Raises
    ------
    FailedPrecondition
        If the file is a ledger of an earlier dsroc version (budgets per dataset), which is kept as it is.
    """
    db = open_private_db(path)
    columns = [row[1] for row in db.execute("PRAGMA table_info(releases)")]
    if columns and "population" not in columns:
        raise FailedPrecondition(
            f"{path} is a ledger of an earlier dsroc version (budgets per dataset, stored values); "
            "keep it as the record of those releases and point site.state_dir at a new folder"
        )
    held = [row[1] for row in db.execute("PRAGMA table_info(reservations)")]
    if held and "started" not in held:
        # Holds of an earlier version (at most a minute old) are taken to have started a full hold before they expire.
        db.executescript("ALTER TABLE reservations ADD COLUMN started REAL NOT NULL DEFAULT 0;"
                         "UPDATE reservations SET started = expires - 60;")
    db.executescript(SCHEMA)
    return db


def open_memory_ledger() -> sqlite3.Connection:
    """A ledger's tables in an in-memory database: nothing written to disk, gone when closed."""
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    db.executescript(SCHEMA)
    return db
