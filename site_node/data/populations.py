"""Populations: which dataset entries read the same patients, and entries that look alike but are not declared so."""

from __future__ import annotations

import hashlib
import os
import re
from itertools import combinations
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..config import DatasetConfig, SiteConfig, source_identity

if TYPE_CHECKING:  # pandas is imported where tables are read, not at daemon start-up
    import pandas as pd

__all__ = ["populations", "candidates", "suspected_shared_patients", "RowSketch", "row_sketch",
           "shared_rows", "TableSummary", "summarize", "SKETCH_SIZE", "SHARED_ROWS_FLAGGED"]

#: Row hashes kept per entry (the smallest ones, a bottom-k sketch): the share of rows two entries have in common is
#: estimated within about 0.05 (one standard error <= 0.5 / sqrt(SKETCH_SIZE) of the Jaccard index), exact for
#: entries of at most this many distinct rows.
SKETCH_SIZE = 1024
#: Two entries are flagged when at least this share of the smaller one's distinct rows are rows of the other.
SHARED_ROWS_FLAGGED = 0.5


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


def _canonical_hashes(values: pd.Series) -> np.ndarray:
    """A 64-bit hash of each value: numbers as float64 (an integer stored as a float is the same value), anything
    else as its text; equal values hash equally in any file format."""
    import pandas as pd

    if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        canonical = np.asarray(values, dtype=np.float64)
    else:
        canonical = np.asarray(values.astype(str), dtype=object)
    return pd.util.hash_array(canonical, categorize=False)


def _column_digests(table: pd.DataFrame, hashes: dict | None = None) -> set[tuple[str, int, str]]:
    """(column, rows, hash of its sorted value hashes) per column of at least 10 distinct values: equal for two
    copies of one cohort in any row order or file format, and unlikely for two cohorts (a binary outcome could be).
    ``hashes``: each column's :func:`_canonical_hashes`, when already made."""
    out = set()
    for column in table.columns:
        values = hashes[str(column)] if hashes is not None else _canonical_hashes(table[column])
        ordered = np.sort(values)
        if ordered.size and np.count_nonzero(np.diff(ordered)) + 1 < 10:
            continue
        out.add((str(column), len(table), hashlib.sha256(ordered.tobytes()).hexdigest()))
    return out


@dataclass(frozen=True)
class RowSketch:
    """A table's distinct rows (``rows``, their number) by the smallest :data:`SKETCH_SIZE` of their 64-bit hashes
    (``hashes``, ascending): equal for copies of one table in any row order, column order or file format."""

    rows: int
    hashes: np.ndarray


def row_sketch(table: pd.DataFrame, hashes: dict | None = None) -> RowSketch:
    """The bottom-k sketch of ``table``'s rows: each row's hash combines its columns' :func:`_canonical_hashes` in
    the order of the columns' names, and the smallest distinct row hashes are kept (``hashes``: the columns'
    hashes, when already made)."""
    hashes = hashes if hashes is not None else {str(c): _canonical_hashes(table[c]) for c in table.columns}
    rows = np.zeros(len(table), dtype=np.uint64)
    with np.errstate(over="ignore"):  # arithmetic modulo 2^64
        for name in sorted(hashes):
            rows = rows * np.uint64(0x100000001B3) + hashes[name]
            rows ^= rows >> np.uint64(29)
    distinct = np.unique(rows)
    return RowSketch(int(distinct.size), distinct[:SKETCH_SIZE])


def shared_rows(a: RowSketch, b: RowSketch) -> float:
    """The estimated share of the smaller table's distinct rows that are rows of the other (0 to 1).

    The bottom-k estimator of the Jaccard index J (Broder 1997; Cohen and Kaplan 2007): the smallest k hashes of
    both sketches together are the smallest of the union, and each one's membership in either table is known, so J
    is the share of them in both; the shared rows are then J (|A| + |B|) / (1 + J).
    """
    if not a.rows or not b.rows:
        return 0.0
    union = np.union1d(a.hashes, b.hashes)[:SKETCH_SIZE]
    both = np.intersect1d(np.intersect1d(union, a.hashes, assume_unique=True), b.hashes, assume_unique=True)
    jaccard = both.size / union.size
    return float(min(jaccard * (a.rows + b.rows) / (1.0 + jaccard) / min(a.rows, b.rows), 1.0))


def _declared(ds: DatasetConfig) -> bool:
    """Whether the administrator named the entry's population (``population = "..."``) rather than taking the default."""
    return ds.population != source_identity(ds)


def _file_key(path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
        return st.st_dev, st.st_ino
    except OSError:
        return None


def _database_key(url: str):
    """One key per database however its URL is spelled: the SQLite file itself (device and inode), or the URL
    without password and driver (``postgresql+psycopg://u:pw@HOST/db`` -> ``postgresql://u@host/db``)."""
    scheme, _, rest = url.partition("://")
    dialect = scheme.split("+", 1)[0].lower()
    if dialect == "sqlite":
        file = rest[1:].split("?", 1)[0]  # sqlite:///PATH[?options]
        return ("sqlite", _file_key(file) or str(Path(file).resolve()))
    rest = re.sub(r"^([^:/@]*):[^@/]*@", r"\1@", rest)
    host, _, tail = rest.partition("/")
    return (dialect, host.lower(), tail.split("?", 1)[0])


@dataclass(frozen=True)
class TableSummary:
    """What the look-alike checks keep of a table: its column digests and its row sketch (the table itself can go)."""

    columns: set
    rows: RowSketch


def summarize(table: pd.DataFrame) -> TableSummary:
    """The :class:`TableSummary` of ``table`` (each column hashed once for both)."""
    hashes = {str(c): _canonical_hashes(table[c]) for c in table.columns}
    return TableSummary(_column_digests(table, hashes), row_sketch(table, hashes))


def suspected_shared_patients(config: SiteConfig, tables: dict[str, pd.DataFrame] | None = None, *,
                              summaries: dict[str, TableSummary] | None = None) -> list[str]:
    """Pairs of entries that may hold the same patients but would get separate budgets, in plain words.

    Flags entries over one SQL database (another table, a view, or the same table through a
    differently spelled URL), one file under two names (a hard link), byte-identical files, and, when
    ``tables`` are given, tables with an identical column (same name, rows and values in any order,
    e.g. an outcome or an identifier) and tables of which at least :data:`SHARED_ROWS_FLAGGED` of the smaller
    one's distinct rows are rows of the other (:func:`shared_rows`: a copy missing some patients, in any order or
    format). A pair is not flagged when it shares a population or when the
    administrator declared both entries' populations (``population = "..."``: the same name for the
    same patients, different names for different patients).

    Parameters
    ----------
    config : SiteConfig
    tables : mapping of dataset name to DataFrame, optional
        The datasets that could be read; without them (and ``summaries``) only the sources are compared.
    summaries : mapping of dataset name to TableSummary, optional
        Instead of ``tables``: what :func:`summarize` keeps of them.
    """
    notes = []
    summaries = {**{name: summarize(table) for name, table in (tables or {}).items()}, **(summaries or {})}
    digests = {name: summary.columns for name, summary in summaries.items()}
    sketches = {name: summary.rows for name, summary in summaries.items()}
    files = {name: (_file_key(ds.path), os.path.getsize(ds.path) if _file_key(ds.path) else None)
             for name, ds in config.datasets.items() if ds.format != "sql"}
    content: dict[str, str | None] = {}

    def digest(name):  # files are hashed only when another one has the same size
        if name not in content:
            content[name] = _file_digest(config.datasets[name].path)
        return content[name]

    for (a, da), (b, db) in combinations(config.datasets.items(), 2):
        if da.population == db.population or (_declared(da) and _declared(db)):
            continue
        reason = ""
        if da.format == "sql" and db.format == "sql":
            if _database_key(da.url) == _database_key(db.url):
                reason = "one SQL database: another table, a view or a differently spelled URL of the same tables"
        elif da.format != "sql" and db.format != "sql" and files[a][0] is not None and files[b][0] is not None:
            if files[a][0] == files[b][0]:
                reason = "one file under two names (a hard link)"
            elif files[a][1] == files[b][1] and digest(a) is not None and digest(a) == digest(b):
                reason = "byte-identical files"
        if not reason:
            shared = sorted(c[0] for c in digests.get(a, set()) & digests.get(b, set()))
            reason = f"identical column {shared[0]!r}" if shared else ""
        if not reason and a in sketches and b in sketches:
            share = shared_rows(sketches[a], sketches[b])
            if share >= SHARED_ROWS_FLAGGED:
                small, big = (a, b) if sketches[a].rows <= sketches[b].rows else (b, a)
                reason = (f"rows: about {100 * share:.0f} % of the {sketches[small].rows} distinct rows of {small!r} "
                          f"are rows of {big!r}")
        if reason:
            notes.append(f"datasets {a!r} and {b!r} may hold the same patients ({reason}) but have separate privacy "
                         f"budgets; if they do, give both the same population = \"...\", if they do not, give each "
                         "its own")
    return notes


def candidates(config: SiteConfig) -> list[str]:
    """The entries in a pair that could be flagged (another population, not both declared), in config order."""
    names = set()
    for (a, da), (b, db) in combinations(config.datasets.items(), 2):
        if da.population != db.population and not (_declared(da) and _declared(db)):
            names.update((a, b))
    return [name for name in config.datasets if name in names]
