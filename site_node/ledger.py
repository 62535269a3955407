"""The privacy ledger: a durable record of every release, charged before anything leaves the site.

Composition is Gaussian DP (``dsroc.gdp_*``): a release costs ``mu_i = Delta / tau``, releases of a
dataset compose as ``sqrt(sum mu_i^2)``, and the site's budget (epsilon, delta) is the largest mu that
is (epsilon, delta)-DP. The noisy values are stored with the release, so the same request returns the
identical values, after a restart too, at no further cost: averaging repeated releases is impossible.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

from dsroc import analytic_gaussian_sigma, gdp_epsilon, gdp_mu, gdp_release_mu

from .config import Policy
from .errors import FailedPrecondition, PermissionDenied, ResourceExhausted

__all__ = ["ReleaseKey", "Release", "BudgetStatus", "budget_mu", "Ledger", "SqliteLedger"]

# Relative slack when comparing composed mu with the budget: the budget is itself a root-finder result.
_BUDGET_SLACK = 1e-9


@dataclass(frozen=True)
class ReleaseKey:
    """What makes two release requests the same release."""

    dataset: str
    source: str
    outcome: str
    epsilon: float
    delta: float
    sensitivity: float


@dataclass(frozen=True)
class Release:
    """A release recorded in the ledger, with its noisy values (ascending) per class."""

    release_id: str
    key: ReleaseKey
    tau: float
    mu: float
    rule: str
    created: str
    analyst: str
    negatives: np.ndarray
    positives: np.ndarray


@dataclass(frozen=True)
class BudgetStatus:
    """Spent and remaining budget of one dataset."""

    dataset: str
    budget_epsilon: float
    budget_delta: float
    mu_budget: float
    mu_spent: float
    releases: int

    @property
    def mu_remaining(self) -> float:
        """``sqrt(mu_budget^2 - mu_spent^2)``, 0 when spent."""
        return float(np.sqrt(max(self.mu_budget**2 - self.mu_spent**2, 0.0)))

    @property
    def epsilon_spent(self) -> float:
        """The spent mu as epsilon at the budget's delta."""
        return gdp_epsilon(self.mu_spent, self.budget_delta) if self.mu_spent > 0 else 0.0


def budget_mu(epsilon: float, delta: float) -> float:
    """The largest Gaussian-DP mu that is (epsilon, delta)-DP: ``1 / sigma`` of the analytic mechanism at sensitivity 1."""
    return gdp_release_mu(1.0, analytic_gaussian_sigma(epsilon, delta, 1.0))


class Ledger(ABC):
    """Interface of a privacy ledger (see :class:`SqliteLedger`)."""

    @abstractmethod
    def budget(self, dataset: str, policy: Policy) -> BudgetStatus:
        """Spent and remaining budget of ``dataset``."""

    @abstractmethod
    def release(self, key: ReleaseKey, *, analyst: str, tau: float, rule: str, fingerprint: str, policy: Policy,
                draw: Callable[[], tuple[np.ndarray, np.ndarray]]) -> tuple[Release, float]:
        """Return the release for ``key``, charging and recording it first if it is new.

        ``draw`` makes the noisy (negatives, positives); it is called only for a new release, after
        the budget check, inside the transaction that records it. Returns the release and the mu
        charged by this call (0 for a repeat).
        """

    @abstractmethod
    def use_evaluation(self, key: tuple[str, str, str, str], cap: int, *, query: str) -> int:
        """Count one theta-evaluation on a survivor function; return how many are left after it.

        ``query`` identifies the question (grid and theta): one answered before on the same survivor
        function gets the identical answer, reveals nothing new and is not counted again, so that a
        repeated validation does not use up the cap. Raises :class:`ResourceExhausted` (and counts
        nothing) when the cap is reached.
        """

    @abstractmethod
    def evaluations_left(self, key: tuple[str, str, str, str], cap: int) -> int:
        """Theta-evaluations left on a survivor function."""

    @abstractmethod
    def record_survivor(self, key: tuple[str, str, str, int, str], cap: int) -> None:
        """Record an uploaded survivor function ``(dataset, source, outcome, class, digest)``.

        A digest seen before is free; a new one beyond ``cap`` distinct ones raises
        :class:`ResourceExhausted` and records nothing.
        """

    @abstractmethod
    def record_model(self, dataset: str, source: str, cap: int) -> None:
        """Record an analyst's model (canonical ``source`` text) used on ``dataset``.

        A model seen before is free; a new one beyond ``cap`` distinct ones raises
        :class:`ResourceExhausted` and records nothing.
        """

    @abstractmethod
    def fix_calibration_edges(self, key: tuple[str, str, str], edges: np.ndarray,
                              check: Callable[[dict], None]) -> None:
        """Record the calibration edges of ``(dataset, source, outcome)``, or refuse different ones.

        Bins of two different edge sets overlap, and their differences describe patients that no
        single answer covers; so the first edges answered for a (dataset, source), whatever the
        outcome (bin counts do not depend on it), are the only ones (PermissionDenied). The first
        edges are recorded only if ``check(cuts)`` does not raise, ``cuts`` being the dataset's
        answered cuts per score source (see :meth:`answer_threshold`).
        """

    @abstractmethod
    def answer_threshold(self, key: tuple[str, str, str], threshold: float, check: Callable[[dict], None]) -> None:
        """Record a confusion-matrix threshold of ``(dataset, source, outcome)``.

        A threshold answered before for this source and outcome is free; a new one is recorded only
        if ``check(cuts)`` does not raise, ``cuts`` mapping each score source of the dataset to its
        answered cuts (sorted): its confusion thresholds, any outcome, and its inner calibration edges.
        """

    @abstractmethod
    def history(self) -> list[dict]:
        """Every release (without values), oldest first."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS releases (
    release_id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    analyst TEXT NOT NULL,
    dataset TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    sensitivity REAL NOT NULL,
    tau REAL NOT NULL,
    mu REAL NOT NULL,
    rule TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    n0 INTEGER NOT NULL,
    n1 INTEGER NOT NULL,
    UNIQUE (dataset, source, outcome, epsilon, delta, sensitivity)
);
CREATE TABLE IF NOT EXISTS release_values (
    release_id TEXT NOT NULL REFERENCES releases(release_id),
    score_class INTEGER NOT NULL,
    vals BLOB NOT NULL,
    PRIMARY KEY (release_id, score_class)
);
CREATE TABLE IF NOT EXISTS survivor_uploads (
    dataset TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    score_class INTEGER NOT NULL,
    survivor TEXT NOT NULL,
    PRIMARY KEY (dataset, source, outcome, score_class, survivor)
);
CREATE TABLE IF NOT EXISTS models (
    dataset TEXT NOT NULL,
    source TEXT NOT NULL,
    PRIMARY KEY (dataset, source)
);
CREATE TABLE IF NOT EXISTS calibration_edges (
    dataset TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    edges BLOB NOT NULL,
    PRIMARY KEY (dataset, source, outcome)
);
CREATE TABLE IF NOT EXISTS confusion_thresholds (
    dataset TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    threshold REAL NOT NULL,
    PRIMARY KEY (dataset, source, outcome, threshold)
);
CREATE TABLE IF NOT EXISTS glm_evaluations (
    dataset TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    survivor TEXT NOT NULL,
    used INTEGER NOT NULL,
    PRIMARY KEY (dataset, source, outcome, survivor)
);
CREATE TABLE IF NOT EXISTS glm_answered (
    dataset TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    survivor TEXT NOT NULL,
    query TEXT NOT NULL,
    PRIMARY KEY (dataset, source, outcome, survivor, query)
);
"""


class SqliteLedger(Ledger):
    """The ledger in one SQLite file; every change is a single transaction (``BEGIN IMMEDIATE``)."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The ledger holds every released value and which questions were asked: site account only.
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def budget(self, dataset: str, policy: Policy) -> BudgetStatus:
        with self._lock:
            mus = [row[0] for row in self._db.execute("SELECT mu FROM releases WHERE dataset = ?", (dataset,))]
        return BudgetStatus(dataset, policy.budget_epsilon, policy.budget_delta,
                            budget_mu(policy.budget_epsilon, policy.budget_delta), gdp_mu(mus), len(mus))

    def release(self, key, *, analyst, tau, rule, fingerprint, policy, draw):
        mu = gdp_release_mu(key.sensitivity, tau)
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "SELECT release_id, created, analyst, tau, mu, rule, fingerprint FROM releases WHERE dataset=? "
                    "AND source=? AND outcome=? AND epsilon=? AND delta=? AND sensitivity=?",
                    (key.dataset, key.source, key.outcome, key.epsilon, key.delta, key.sensitivity),
                ).fetchone()
                if row is not None:
                    release = self._load(key, row, fingerprint)
                    db.execute("COMMIT")
                    return release, 0.0
                spent = [r[0] for r in db.execute("SELECT mu FROM releases WHERE dataset = ?", (key.dataset,))]
                if gdp_mu(spent + [mu]) > budget_mu(policy.budget_epsilon, policy.budget_delta) * (1 + _BUDGET_SLACK):
                    raise ResourceExhausted(
                        f"privacy budget: this release would exceed the total budget of dataset {key.dataset!r} "
                        f"(epsilon {policy.budget_epsilon}, delta {policy.budget_delta}); nothing was released"
                    )
                negatives, positives = (np.sort(np.asarray(v, dtype=np.float64)) for v in draw())
                release_id = secrets.token_hex(16)
                created = datetime.now(timezone.utc).isoformat(timespec="seconds")
                db.execute(
                    "INSERT INTO releases VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (release_id, created, analyst, key.dataset, key.source, key.outcome, key.epsilon, key.delta,
                     key.sensitivity, tau, mu, rule, fingerprint, negatives.size, positives.size),
                )
                db.executemany(
                    "INSERT INTO release_values VALUES (?,?,?)",
                    [(release_id, 0, negatives.tobytes()), (release_id, 1, positives.tobytes())],
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return Release(release_id, key, tau, mu, rule, created, analyst, negatives, positives), mu

    def _load(self, key: ReleaseKey, row, fingerprint: str) -> Release:
        release_id, created, analyst, tau, mu, rule, stored_fingerprint = row
        if stored_fingerprint != fingerprint:
            raise FailedPrecondition(
                "the dataset changed since this release was made, so its noisy scores no longer match the data; "
                "a new release needs different (epsilon, delta, sensitivity)"
            )
        values = dict(self._db.execute(
            "SELECT score_class, vals FROM release_values WHERE release_id = ?", (release_id,)).fetchall())
        return Release(release_id, key, tau, mu, rule, created, analyst,
                       np.frombuffer(values[0], dtype=np.float64), np.frombuffer(values[1], dtype=np.float64))

    def use_evaluation(self, key, cap, *, query):
        used = []

        def body(db):
            used.append(self._used(key))
            if db.execute("SELECT 1 FROM glm_answered WHERE dataset=? AND source=? AND outcome=? AND survivor=? "
                          "AND query=?", (*key, query)).fetchone():
                used[0] -= 1  # a repeat: free
                return
            if used[0] >= cap:
                raise ResourceExhausted(
                    f"query cap: this site answers at most {cap} ROC-GLM evaluations per uploaded survivor function"
                )
            db.execute("INSERT INTO glm_evaluations VALUES (?,?,?,?,?) ON CONFLICT DO UPDATE SET used = used + 1",
                       (*key, 1))
            db.execute("INSERT INTO glm_answered VALUES (?,?,?,?,?)", (*key, query))

        self._transaction(body)
        return cap - used[0] - 1

    def _used(self, key) -> int:
        row = self._db.execute(
            "SELECT used FROM glm_evaluations WHERE dataset=? AND source=? AND outcome=? AND survivor=?", key
        ).fetchone()
        return 0 if row is None else int(row[0])

    def evaluations_left(self, key, cap):
        with self._lock:
            return max(cap - self._used(key), 0)

    def record_survivor(self, key, cap):
        def body(db):
            seen = db.execute("SELECT 1 FROM survivor_uploads WHERE dataset=? AND source=? AND outcome=? "
                              "AND score_class=? AND survivor=?", key).fetchone()
            if seen is not None:
                return
            (count,) = db.execute("SELECT COUNT(*) FROM survivor_uploads WHERE dataset=? AND source=? "
                                  "AND outcome=? AND score_class=?", key[:4]).fetchone()
            if count >= cap:
                raise ResourceExhausted(
                    f"query cap: this site accepts at most {cap} different survivor functions per dataset, "
                    "score source, outcome and class"
                )
            db.execute("INSERT INTO survivor_uploads VALUES (?,?,?,?,?)", key)

        self._transaction(body)

    def record_model(self, dataset, source, cap):
        def body(db):
            if db.execute("SELECT 1 FROM models WHERE dataset=? AND source=?", (dataset, source)).fetchone():
                return
            (count,) = db.execute("SELECT COUNT(*) FROM models WHERE dataset=?", (dataset,)).fetchone()
            if count >= cap:
                raise ResourceExhausted(
                    f"query cap: this site accepts at most {cap} different models for dataset {dataset!r}; "
                    "answers about different models could be differenced down to single patients"
                )
            db.execute("INSERT INTO models VALUES (?,?)", (dataset, source))

        self._transaction(body)

    def _transaction(self, body: Callable[[sqlite3.Connection], None]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                body(self._db)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def fix_calibration_edges(self, key, edges, check):
        edges = np.asarray(edges, dtype=np.float64)

        def body(db):
            row = db.execute("SELECT edges FROM calibration_edges WHERE dataset=? AND source=? LIMIT 1",
                             key[:2]).fetchone()
            if row is None:
                check(self._cuts(key[0]))
                db.execute("INSERT INTO calibration_edges VALUES (?,?,?,?)", (*key, edges.tobytes()))
                return
            fixed = np.frombuffer(row[0], dtype=np.float64)
            if fixed.shape != edges.shape or not np.array_equal(fixed, edges):
                raise PermissionDenied(
                    "privacy level: this site answers calibration for this dataset and score source (any outcome) only "
                    f"with the bin edges it answered first, {fixed.tolist()}: bins of different edges overlap, and "
                    "their differences could describe fewer than q patients"
                )

        self._transaction(body)

    def answer_threshold(self, key, threshold, check):
        def body(db):
            if db.execute("SELECT 1 FROM confusion_thresholds WHERE dataset=? AND source=? AND outcome=? "
                          "AND threshold=?", (*key, float(threshold))).fetchone():
                return
            check(self._cuts(key[0]))
            db.execute("INSERT INTO confusion_thresholds VALUES (?,?,?,?)", (*key, float(threshold)))

        self._transaction(body)

    def _cuts(self, dataset: str) -> dict[str, np.ndarray]:
        """Per score source of ``dataset``: its answered confusion thresholds and inner calibration edges."""
        cuts: dict[str, list[float]] = {}
        for source, threshold in self._db.execute(
                "SELECT source, threshold FROM confusion_thresholds WHERE dataset=?", (dataset,)):
            cuts.setdefault(source, []).append(threshold)
        for source, edges in self._db.execute("SELECT source, edges FROM calibration_edges WHERE dataset=?", (dataset,)):
            cuts.setdefault(source, []).extend(np.frombuffer(edges, dtype=np.float64)[1:-1].tolist())
        return {source: np.unique(np.asarray(values, dtype=np.float64)) for source, values in cuts.items()}

    def history(self):
        with self._lock:
            cursor = self._db.execute(
                "SELECT release_id, created, analyst, dataset, source, outcome, epsilon, delta, sensitivity, tau, mu, "
                "rule, n0, n1 FROM releases ORDER BY created, rowid")
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]
