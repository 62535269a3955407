"""The site's disclosure auditor: every count answered per population, persisted, and the check before a new answer.

A paper-protocol answer that is a count at cut points (confusion cells, calibration bins' counts and
positives) is given only if, together with every count answered before about the same population
(any dataset entry, score source or outcome, and the class totals, which releases reveal), it
determines no group of 1 to q-1 patients (``dsroc.privacy.auditing``). The record is committed before the
answer leaves the site, so a crash never forgets an answer given; a refused answer records nothing.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Mapping

import numpy as np

from dsroc.privacy.auditing import CountQuery, audit_counts

from ..errors import PermissionDenied
from ..store.sqlite_files import PrivateStore

__all__ = ["DisclosureStore", "confusion_queries", "calibration_queries", "baseline_queries"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answered_counts (
    population TEXT NOT NULL,
    outcome TEXT NOT NULL,   -- '' for none
    label INTEGER NOT NULL,  -- -1 for none
    source TEXT NOT NULL,    -- '' for none
    lo TEXT NOT NULL,        -- repr of the float, '-inf' for none
    hi TEXT NOT NULL,        -- repr of the float, 'inf' for none
    PRIMARY KEY (population, outcome, label, source, lo, hi)
);
"""


def confusion_queries(outcome: str, source: str, threshold: float) -> list[CountQuery]:
    """The four cells of a confusion matrix at ``threshold`` (predicted positive when score >= threshold)."""
    return [CountQuery(outcome, label, source, lo, hi) for label in (1, 0)
            for lo, hi in ((threshold, math.inf), (-math.inf, threshold))]


def calibration_queries(outcome: str, source: str, edges, bins: Iterable[int]) -> list[CountQuery]:
    """Count and number of positives of each released calibration bin (first bin from -inf, last to +inf)."""
    bounds = [-math.inf, *np.asarray(edges, dtype=float)[1:-1].tolist(), math.inf]
    out = []
    for b in bins:
        lo, hi = bounds[int(b)], bounds[int(b) + 1]
        out += [CountQuery(source=source, lo=lo, hi=hi), CountQuery(outcome, 1, source, lo, hi)]
    return out


def baseline_queries(outcomes: Iterable[str]) -> list[CountQuery]:
    """What every validation reveals anyway: the number of patients and of each class of each outcome."""
    return [CountQuery()] + [CountQuery(o, c) for o in sorted(set(outcomes)) for c in (0, 1)]


def _row(population: str, q: CountQuery) -> tuple:
    return (population, q.outcome or "", -1 if q.label is None else q.label, q.source or "", repr(q.lo), repr(q.hi))


def _query(row) -> CountQuery:
    outcome, label, source, lo, hi = row
    return CountQuery(outcome or None, None if label < 0 else int(label), source or None, float(lo), float(hi))


class DisclosureStore(PrivateStore):
    """Answered counts per population in one SQLite file; check and record in one transaction."""

    def __init__(self, path):
        super().__init__(path, _SCHEMA)

    def answered(self, population: str) -> list[CountQuery]:
        """Every count answered about ``population``."""
        with self._lock:
            rows = self._db.execute("SELECT outcome, label, source, lo, hi FROM answered_counts WHERE population=?",
                                    (population,)).fetchall()
        return [_query(r) for r in rows]

    def check_and_record(self, population: str, new: list[CountQuery], *, q: int,
                         data: Callable[[set, set], tuple[Mapping, Mapping]], what: str) -> None:
        """Record ``new`` counts, or raise :class:`PermissionDenied` if with the answered ones they would
        determine a group of 1 to q-1 patients.

        ``data(outcomes, sources)`` returns the labels of each outcome and the scores of each source
        (the same patients, in the same order) that the audit needs.
        """
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                old = [_query(r) for r in db.execute(
                    "SELECT outcome, label, source, lo, hi FROM answered_counts WHERE population=?", (population,))]
                known = set(old)
                fresh = [x for x in dict.fromkeys(new) if x not in known]
                if fresh:
                    everything = old + fresh
                    outcomes = {x.outcome for x in everything if x.outcome is not None}
                    sources = {x.source for x in everything if x.source is not None}
                    labels, scores = data(outcomes, sources)
                    try:
                        result = audit_counts(everything + baseline_queries(outcomes), labels, scores, q)
                    except ValueError as exc:  # too many atoms to audit: refuse rather than guess
                        raise PermissionDenied(f"disclosure auditor: {what} refused: {exc}") from None
                    if not result.safe:
                        raise PermissionDenied(
                            f"disclosure auditor: {what} refused: together with the counts this site answered "
                            f"before about these patients (any dataset entry, score source or outcome), it would "
                            f"determine the size of a group of fewer than q = {q} patients"
                            + (" (or the audit could not rule that out)" if result.undecided else "")
                        )
                    db.executemany("INSERT INTO answered_counts VALUES (?,?,?,?,?,?)",
                                   [_row(population, x) for x in fresh])
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
