"""The privacy ledger: a durable record of every release, charged before anything leaves the site.

One accountant (``dsroc.privacy.accounting``) composes every release of a population, whatever its
mechanism; a release is refused unless the composed history stays (epsilon, delta)-DP at the
site's budget, compared exactly (no slack). Budgets, histories, caps and answered cuts are kept per
population (the patients behind one or more dataset entries), never per dataset name.

A release stores what it released (a histogram's few noisy counts; a score release's noisy lattice
points, compressed and sealed with the site's noise key by the paper protocol) with its digest and
the data's fingerprint (a replay is refused when the data changed); a plan that stores nothing gets a
256-bit seed from the operating system's CSPRNG and is regenerated from it. The same request returns
the identical values, after a restart too, at no further cost: averaging repeated releases is impossible.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from dsroc.privacy.accounting import PLD, VALUE_DISCRETIZATION, Accountant, decode_event, encode_event

from ..config import Policy
from ..errors import FailedPrecondition, InvalidArgument, ResourceExhausted
from .ledger_api import (HOLD_SECONDS, MAX_RELEASES_LEFT, BudgetStatus, Ledger, Release, ReleaseKey, ReleasePlan,
                         Reservation, asked_delta, budget_mu, validation_ids)
from .hold_limits import check_new_holds, end_cancelled, end_expired, end_of_sessions
from .budget_status import budget_status
from .ledger_file import open_ledger_file, open_memory_ledger
from .query_caps import SqliteQueryCaps

# The records and the interface live in ledger_api; they are exported here too, beside the SQLite ledger.
__all__ = ["ReleaseKey", "ReleasePlan", "Release", "Reservation", "BudgetStatus", "budget_mu", "Ledger", "SqliteLedger",
           "HOLD_SECONDS", "MAX_RELEASES_LEFT"]

SEED_BYTES = 32

# The request of a follow-up hold (the release that takes it over is not known yet): no release has such a key.
_FOLLOW_UP = "follow-up hold "
_CHANGED = ("the dataset changed since this release was made, so its noisy values no longer match the data; "
            "a new release needs different parameters (epsilon, delta, sensitivity or grid)")


def _key_fields(key: ReleaseKey) -> tuple:
    return (key.population, key.source, key.outcome, key.kind, key.request)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _events_json(events) -> str:
    return json.dumps([encode_event(e) for e in events], sort_keys=True)


def _digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


class SqliteLedger(SqliteQueryCaps, Ledger):
    """The ledger in one SQLite file; every change is a single transaction (``BEGIN IMMEDIATE``).

    Its query caps (ROC-GLM evaluations, survivor functions, models) are :class:`SqliteQueryCaps`.

    The composed accountant of each population is cached in memory and extended by one release at
    a time (the daemon is the ledger's only writer; a count mismatch rebuilds it from the file).
    ``interval`` is its privacy-loss grid (the server passes ``discretization_for(budget_epsilon)``); ``head``,
    when given, is told the number of releases and the new release's id after each release's commit (the
    server's :class:`site_node.store.ledger_head.HeadWriter`, which a rolled-back ledger cannot get behind).

    ``path=None`` keeps the same tables in memory (:meth:`in_memory`): the same code without a file or its
    fsyncs, for a read-only look at an empty ledger and for fast tests of the protocols above it.
    """

    def __init__(self, path, *, interval: float = VALUE_DISCRETIZATION, head: Callable[[int, str], None] | None = None):
        self.interval = float(interval)
        self.path = None if path is None else Path(path)
        self._head = head  # called after each release's commit (site_node.store.ledger_head.HeadWriter)
        self._lock = threading.Lock()
        self._db = open_memory_ledger() if path is None else open_ledger_file(self.path)
        self._accountants: dict[str, tuple[int, Accountant]] = {}

    @classmethod
    def in_memory(cls, *, interval: float = VALUE_DISCRETIZATION) -> "SqliteLedger":
        """A ledger whose tables live in memory: nothing is written to disk, and it is gone when closed."""
        return cls(None, interval=interval)

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def _accountant(self, population: str) -> Accountant:
        """The population's composed history (call with the lock held)."""
        (count,) = self._db.execute("SELECT COUNT(*) FROM releases WHERE population = ?", (population,)).fetchone()
        cached = self._accountants.get(population)
        if cached is not None and cached[0] == count:
            return cached[1]
        events = [decode_event(e) for (text,) in self._db.execute(
            "SELECT events FROM releases WHERE population = ? ORDER BY rowid", (population,)) for e in json.loads(text)]
        accountant = Accountant(events, value_discretization_interval=self.interval)
        self._accountants[population] = (count, accountant)
        return accountant

    def _committed(self, population: str, *, without: str = "") -> tuple[Accountant, int, int]:
        """The history with the unexpired holds (except ``without``) composed on, the number of releases and
        of holds (call with the lock held)."""
        accountant = self._accountant(population)
        count = self._accountants[population][0]
        rows = self._db.execute("SELECT events FROM reservations WHERE population = ? AND expires > ? "
                                "AND reservation_id != ? ORDER BY rowid", (population, time.time(), without)).fetchall()
        for (text,) in rows:
            for event in json.loads(text):
                accountant = accountant.add(decode_event(event))
        return accountant, count, len(rows)

    def budget(self, population: str, policy: Policy, *, delta: float = 0.0, release_ids=()) -> BudgetStatus:
        delta = asked_delta(delta, release_ids)
        with self._lock:
            accountant, count, holds = self._committed(population)
            events = self._events_of(population, release_ids) if release_ids else None
        status = budget_status(population, policy, accountant, count, holds, delta=delta)
        if events is None:
            return status
        # by the bound of the history's report: a validation that is the whole history gets its value, a part never more
        accountant = Accountant(events, value_discretization_interval=self.interval)
        epsilon, accounting = accountant.guarantee(delta, tight=status.accounting == PLD)
        return replace(status, validation_epsilon=epsilon, validation_releases=len(set(release_ids)), validation_accounting=accounting)

    def _events_of(self, population: str, release_ids) -> list:
        """The events of the population's releases ``release_ids`` (each once; :func:`validation_ids`), or
        InvalidArgument naming the ids that are none of its releases (call with the lock held)."""
        ids = validation_ids(release_ids)
        rows = dict(self._db.execute(
            f"SELECT release_id, events FROM releases WHERE population = ? AND release_id IN "
            f"({','.join('?' * len(ids))})", (population, *ids)).fetchall())
        unknown = [r for r in ids if r not in rows]
        if unknown:
            raise InvalidArgument(f"release_ids: {', '.join(map(repr, unknown[:5]))} are no releases of its patients")
        return [decode_event(e) for r in ids for e in json.loads(rows[r])]

    def releases_left(self, population, policy, events):
        with self._lock:
            accountant, _, _ = self._committed(population)
        return accountant.releases_left(tuple(events), policy.budget_epsilon, policy.budget_delta,
                                        cap=MAX_RELEASES_LEFT)

    def _fit(self, population: str, dataset: str, events: tuple, policy: Policy, epsilon, delta, *,
             without: str = "", also: str = "") -> None:
        """Refuse (ResourceExhausted) unless ``events`` fit the history and the other holds (call in a transaction);
        ``also``: what the events hold beside the release, for the message."""
        accountant, count, holds = self._committed(population, without=without)
        after = accountant
        for event in events:
            after = after.add(event)
        if not after.within(policy.budget_epsilon, policy.budget_delta):
            spent = budget_status(population, policy, accountant, count, holds)
            held = f" (and {holds} held by validations in progress)" if holds else ""
            raise ResourceExhausted(
                f"privacy budget: this release (epsilon {epsilon}, delta {delta}){also} would exceed the total budget "
                f"(epsilon {policy.budget_epsilon}, delta {policy.budget_delta}) of the patients behind dataset "
                f"{dataset!r}: spent so far epsilon {spent.epsilon_spent:.6g} at delta {policy.budget_delta} in "
                f"{count} releases{held}, remaining about epsilon {spent.epsilon_remaining:.6g}; nothing was released"
            )

    def _existing(self, key: ReleaseKey):
        return self._db.execute(
            "SELECT release_id, created, analyst, dataset, events, epsilon, delta, rule, fingerprint, seed, "
            "digest, payload, n0, n1 FROM releases WHERE population=? AND source=? AND outcome=? AND kind=? "
            "AND request=?", _key_fields(key),
        ).fetchone()

    def reserve(self, key, *, dataset, analyst, events, epsilon, delta, fingerprint, policy, hold_seconds=HOLD_SECONDS,
                follow_up=(), takes_over="", session_id=""):
        events, follow_up = tuple(events), tuple(follow_up)
        hold = min(float(hold_seconds), HOLD_SECONDS) if hold_seconds and hold_seconds > 0 else HOLD_SECONDS
        out = []

        def insert(db, reservation_id, request, held_events, now):
            db.execute("INSERT INTO reservations (reservation_id, created, expires, analyst, population, dataset, "
                       "source, outcome, kind, request, events, started, session_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       (reservation_id, _now(), now + hold, analyst, key.population, dataset, key.source,
                        key.outcome, key.kind, request, _events_json(held_events), now, str(session_id)))

        def body(db):
            now = time.time()
            end_expired(db, now)  # returned to the budget (their lifetime spent from their analyst's allowance)
            took = bool(takes_over) and self._take_over(takes_over, analyst, key, events, now)
            main, needed = None, follow_up
            row = self._existing(key)
            if row is not None:
                if row[8] != fingerprint:
                    raise FailedPrecondition(_CHANGED)
                main = Reservation("", 0.0, True)
            else:
                held = db.execute(
                    "SELECT reservation_id, expires FROM reservations WHERE analyst=? AND population=? AND source=? "
                    "AND outcome=? AND kind=? AND request=?", (analyst, *_key_fields(key))).fetchone()
                if held is not None:
                    main = Reservation(held[0], held[1] - now, False)
                elif not took:  # a follow-up hold taken over already holds these events
                    needed = events + follow_up
            if needed:
                also = " with the release that follows it (held together)" if follow_up else ""
                self._fit(key.population, dataset, needed, policy, epsilon, delta, also=also)
            new = (main is None) + bool(follow_up)
            if new:
                check_new_holds(db, policy, analyst=analyst, population=key.population, dataset=dataset, holds=new,
                                events=(events if main is None else ()) + follow_up, seconds=hold, now=now,
                                interval=self.interval)
            if main is None:
                main = Reservation(secrets.token_hex(16), hold, False)
                insert(db, main.reservation_id, key.request, events, now)
            if follow_up:
                follow_id = secrets.token_hex(16)
                insert(db, follow_id, _FOLLOW_UP + follow_id, follow_up, now)
                main = Reservation(main.reservation_id, main.expires_in, main.repeated, follow_id)
            out.append(main)

        self._transaction(body)
        return out[0]

    def end_sessions(self, analyst, session_ids):
        out = []

        def body(db):
            out.append(end_of_sessions(db, analyst, tuple(session_ids), time.time()))

        self._transaction(body)
        return out[0]

    def _take_over(self, reservation_id: str, analyst: str, key: ReleaseKey, events: tuple, now: float) -> bool:
        """Delete the analyst's unexpired follow-up hold ``reservation_id`` for ``key``'s population, score and
        outcome when it holds ``events`` (True), False when it is unknown or expired; InvalidArgument when it
        is no follow-up hold or holds other events (call in a transaction)."""
        row = self._db.execute("SELECT population, source, outcome, kind, request, events FROM reservations WHERE "
                               "reservation_id=? AND analyst=? AND expires > ?", (reservation_id, analyst, now)).fetchone()
        if row is None:
            return False
        where = f"follow_up_reservation_id {reservation_id!r}"
        if not row[4].startswith(_FOLLOW_UP) or tuple(row[:4]) != _key_fields(key)[:4]:
            raise InvalidArgument(f"{where} is not a follow-up hold of this dataset, score and outcome")
        if row[5] != _events_json(events):
            raise InvalidArgument(f"{where} holds the budget of another release (other epsilon, delta or noise) than "
                                  "this one: a follow-up hold is taken over only by the release it was held for")
        self._db.execute("DELETE FROM reservations WHERE reservation_id=?", (reservation_id,))
        return True

    def cancel(self, reservation_id, analyst):
        out = []

        def body(db):
            out.append(end_cancelled(db, reservation_id, analyst, time.time()))

        self._transaction(body)
        return out[0]

    def release(self, key, *, dataset, analyst, events, epsilon, delta, rule, fingerprint, policy, make, store,
                reservation=""):
        events = tuple(events)
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                row = self._existing(key)
                if row is not None:
                    if reservation:  # a hold of a release made meanwhile (the other class's call) is not needed
                        db.execute("DELETE FROM reservations WHERE reservation_id=? AND analyst=?",
                                   (reservation, analyst))
                    db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            if row is not None:
                return self._replay(key, row, fingerprint, make), False
            try:
                if reservation:
                    self._use_hold(reservation, analyst, key)
                self._fit(key.population, dataset, events, policy, epsilon, delta, without=reservation)
                seed = secrets.token_bytes(SEED_BYTES)
                payload, n0, n1 = make(seed)
                release_id = secrets.token_hex(16)
                created = _now()
                db.execute(
                    "INSERT INTO releases VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (release_id, created, analyst, key.population, dataset, key.source, key.outcome, key.kind,
                     key.request, _events_json(events), float(epsilon), float(delta), rule, fingerprint,
                     b"" if store else seed,  # a stored payload needs no seed: none is kept that regenerates noise
                     _digest(payload), payload if store else None, int(n0), int(n1)),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            count, after = self._accountants[key.population]  # the history alone, extended by this release
            for event in events:
                after = after.add(event)
            self._accountants[key.population] = (count + 1, after)
            if self._head is not None:
                self._head(db.execute("SELECT COUNT(*) FROM releases").fetchone()[0], release_id)
        return Release(release_id, key, dataset, events, float(epsilon), float(delta), rule, created, analyst,
                       payload, int(n0), int(n1)), True

    def _use_hold(self, reservation: str, analyst: str, key: ReleaseKey) -> None:
        """Delete the analyst's unexpired hold of this release, or refuse (call in a transaction)."""
        held = self._db.execute("SELECT population, source, outcome, kind, request FROM reservations WHERE "
                                "reservation_id=? AND analyst=? AND expires > ?",
                                (reservation, analyst, time.time())).fetchone()
        if held is None:
            raise FailedPrecondition(
                f"reservation_id {reservation!r} is unknown, used or expired (a hold lasts at most {HOLD_SECONDS:g} s); "
                "nothing was charged: prepare the release again")
        if tuple(held) != _key_fields(key):
            raise InvalidArgument(f"reservation_id {reservation!r} holds another release than this request")
        self._db.execute("DELETE FROM reservations WHERE reservation_id=?", (reservation,))

    def recorded(self, key, fingerprint):
        with self._lock:
            row = self._db.execute(
                "SELECT fingerprint, payload FROM releases WHERE population=? AND source=? AND outcome=? AND kind=? "
                "AND request=?", (key.population, key.source, key.outcome, key.kind, key.request)).fetchone()
        if row is None:
            return None
        if row[0] != fingerprint:
            raise FailedPrecondition(
                "the dataset changed since this release was made, so its noisy values no longer match the data; "
                "a new release needs different parameters")
        return row[1]

    def fits(self, population, events, policy):
        with self._lock:
            after, _, _ = self._committed(population)  # holds of validations in progress count as spent
        for event in events:
            after = after.add(event)
        return after.within(policy.budget_epsilon, policy.budget_delta)

    def _replay(self, key: ReleaseKey, row, fingerprint: str, make) -> Release:
        (release_id, created, analyst, dataset, events, epsilon, delta, rule, stored_fingerprint, seed, digest,
         payload, n0, n1) = row
        if stored_fingerprint != fingerprint:
            raise FailedPrecondition(_CHANGED)
        if payload is None:
            payload, _, _ = make(seed)
            if _digest(payload) != digest:
                raise FailedPrecondition(
                    "this release cannot be reproduced from its seed (the noise generator changed with a software "
                    "update?); fresh noise would allow averaging, so a new release needs different parameters"
                )
        return Release(release_id, key, dataset, tuple(decode_event(e) for e in json.loads(events)), epsilon, delta,
                       rule, created, analyst, payload, n0, n1)

    def _transaction(self, body: Callable[[sqlite3.Connection], None], *, synced: bool = True) -> None:
        """Run ``body`` in one write transaction. ``synced=False`` commits without an fsync (WAL,
        ``synchronous=NORMAL``): the commit survives a crash or kill of the daemon, not a power failure;
        the next synced commit makes it durable too."""
        with self._lock:
            if not synced:
                self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    body(self._db)
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            finally:
                if not synced:
                    self._db.execute("PRAGMA synchronous=FULL")

    def has_release(self, release_id):
        with self._lock:
            return self._db.execute("SELECT 1 FROM releases WHERE release_id = ?", (str(release_id),)).fetchone() is not None

    def history(self):
        with self._lock:
            cursor = self._db.execute(
                "SELECT release_id, created, analyst, population, dataset, source, outcome, kind, request, events, "
                "epsilon, delta, rule FROM releases ORDER BY created, rowid")
            names = [d[0] for d in cursor.description]
            rows = [dict(zip(names, row)) for row in cursor.fetchall()]
        for row in rows:
            row["request"], row["events"] = json.loads(row["request"]), json.loads(row["events"])
        return rows
