"""Populations: which dataset entries read the same patients, and entries that look alike but are not declared so."""

from __future__ import annotations

from typing import TYPE_CHECKING

import hashlib
from itertools import combinations
from pathlib import Path

import numpy as np

from .config import DatasetConfig, SiteConfig

if TYPE_CHECKING:  # pandas is imported where tables are read, not at daemon start-up
    import pandas as pd

__all__ = ["populations", "suspected_shared_patients"]


def populations(config: SiteConfig) -> dict[str, list[str]]:
    """Each population of the site with the dataset entries behind it (they share one budget and history)."""
    out: dict[str, list[str]] = {}
    for name, ds in config.datasets.items():
        out.setdefault(ds.population, []).append(name)
    return out


def _file_digest(path: Path) -> str | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


def _column_digests(table: pd.DataFrame) -> set[tuple[str, int, str]]:
    """(column, rows, hash of its sorted values) per column of at least 10 distinct values: equal for two
    copies of one cohort in any row order, and unlikely for two cohorts (a binary outcome could be)."""
    out = set()
    for column in table.columns:
        values = np.sort(np.asarray(table[column].astype(str)))
        if np.unique(values).size < 10:
            continue
        out.add((str(column), len(table), hashlib.sha256("\x1f".join(values).encode()).hexdigest()))
    return out


def suspected_shared_patients(config: SiteConfig, tables: dict[str, pd.DataFrame]) -> list[str]:
    """Pairs of entries in different populations that may hold the same patients, in plain words.

    Flags entries over one SQL database (different tables or queries may select the same patients),
    byte-identical files, and tables with an identical column (same name, rows and values in any
    order, e.g. an outcome or an identifier). A pair flagged here gets two budgets unless the
    administrator gives both entries the same ``population = "..."``.

    Parameters
    ----------
    config : SiteConfig
    tables : mapping of dataset name to DataFrame
        The datasets that could be read (others are skipped).
    """
    notes = []
    digests = {name: _column_digests(table) for name, table in tables.items()}
    files = {name: _file_digest(ds.path) for name, ds in config.datasets.items() if ds.format != "sql"}
    for (a, da), (b, db) in combinations(config.datasets.items(), 2):
        if da.population == db.population:
            continue
        reason = _reason(da, db, files.get(a), files.get(b), digests.get(a), digests.get(b))
        if reason:
            notes.append(f"datasets {a!r} and {b!r} may hold the same patients ({reason}) but have separate privacy "
                         f"budgets; if they do, give both the same population = \"...\"")
    return notes


def _reason(da: DatasetConfig, db: DatasetConfig, file_a, file_b, cols_a, cols_b) -> str:
    if da.format == "sql" and db.format == "sql" and da.url == db.url:
        return "one SQL database"
    if file_a is not None and file_a == file_b:
        return "byte-identical files"
    shared = sorted(c[0] for c in (cols_a or set()) & (cols_b or set()))
    if shared:
        return f"identical column {shared[0]!r}"
    return ""
