"""Per-analyst limits on budget holds: how many, how much epsilon, and how much unused hold time an hour.

A hold counts as spent for every analyst of the population until it is used, cancelled or expires, so one
analyst's holds must not keep the budget from the others for long or for free. Within one ledger transaction:
an analyst's unexpired holds on a population number at most ``policy.max_holds_per_analyst`` and hold at most
``policy.held_epsilon_cap`` (the epsilon of their events composed by the ledger's accountant at the budget's delta:
what they keep from the others), except that an analyst holding nothing may always hold one validation (a release
and the one that follows it); and the hold time of holds that ended unused (cancelled: the time they were held; expired:
their whole lifetime) over the last hour, plus the whole lifetime of the unexpired ones and of the new hold,
stays within ``policy.hold_seconds_per_hour``. A hold used by its release costs no hold time: the release is
charged. So an analyst who keeps renewing holds it never uses keeps them at most that many seconds an hour.
"""

from __future__ import annotations

import json
import sqlite3

from dsroc.privacy.accounting import Accountant, decode_event

from ..config import Policy
from ..errors import ResourceExhausted

__all__ = ["WINDOW_SECONDS", "check_new_holds", "end_expired", "end_cancelled", "end_of_sessions"]

WINDOW_SECONDS = 3600.0  # the allowance of unused hold time is per this sliding window


def end_expired(db: sqlite3.Connection, now: float) -> None:
    """Delete the expired holds, recording each one's whole lifetime as unused hold time of its analyst, and forget
    the usage older than the window (call in a transaction)."""
    db.execute("INSERT INTO hold_usage SELECT analyst, population, expires, MAX(expires - started, 0) "
               "FROM reservations WHERE expires <= ?", (now,))
    db.execute("DELETE FROM reservations WHERE expires <= ?", (now,))
    db.execute("DELETE FROM hold_usage WHERE ended <= ?", (now - WINDOW_SECONDS,))


def end_cancelled(db: sqlite3.Connection, reservation_id: str, analyst: str, now: float) -> bool:
    """Delete the analyst's unexpired hold ``reservation_id``, recording the time it was held as unused hold time;
    whether there was one (call in a transaction)."""
    db.execute("INSERT INTO hold_usage SELECT analyst, population, ?, MAX(? - started, 0) FROM reservations "
               "WHERE reservation_id=? AND analyst=? AND expires > ?", (now, now, reservation_id, analyst, now))
    return db.execute("DELETE FROM reservations WHERE reservation_id=? AND analyst=? AND expires > ?",
                      (reservation_id, analyst, now)).rowcount > 0


def end_of_sessions(db: sqlite3.Connection, analyst: str, session_ids, now: float) -> int:
    """Delete the analyst's unexpired holds made in the sessions ``session_ids`` (closed or expired after
    inactivity), recording the time each was held as unused hold time, as a cancel would; how many (call in a
    transaction). Holds made in no session (an earlier version's) are left to their expiry."""
    ended = 0
    for session_id in session_ids:
        if not session_id:
            continue
        db.execute("INSERT INTO hold_usage SELECT analyst, population, ?, MAX(? - started, 0) FROM reservations "
                   "WHERE session_id=? AND analyst=? AND expires > ?", (now, now, session_id, analyst, now))
        ended += db.execute("DELETE FROM reservations WHERE session_id=? AND analyst=? AND expires > ?",
                            (session_id, analyst, now)).rowcount
    return ended


def check_new_holds(db: sqlite3.Connection, policy: Policy, *, analyst: str, population: str, dataset: str,
                    holds: int, events: tuple, seconds: float, now: float, interval: float) -> None:
    """Refuse (ResourceExhausted, naming the policy's limit) ``holds`` new holds of ``events`` in all, each held
    ``seconds``, unless the analyst's holds on the population stay within the policy's limits (call in a
    transaction, after :func:`end_expired`; ``interval``: the ledger's privacy-loss grid)."""
    rows = db.execute("SELECT events, MAX(expires - started, 0) FROM reservations WHERE analyst=? AND population=? "
                      "AND expires > ?", (analyst, population, now)).fetchall()
    count, lifetime = len(rows), sum(seconds_held for _, seconds_held in rows)
    (unused,) = db.execute("SELECT COALESCE(SUM(seconds), 0) FROM hold_usage WHERE analyst=? AND population=? AND "
                           "ended > ?", (analyst, population, now - WINDOW_SECONDS)).fetchone()
    who = f"analyst {analyst!r}"
    where = f"the patients behind dataset {dataset!r}"
    if count + holds > policy.max_holds_per_analyst:
        raise ResourceExhausted(
            f"policy: {who} already holds {count} releases of {where} (policy.max_holds_per_analyst = "
            f"{policy.max_holds_per_analyst}); use or cancel one (CancelReservation) first; nothing was held")
    cap = policy.held_epsilon_cap
    held = [decode_event(e) for text, _ in rows for e in json.loads(text)]
    # an analyst that holds nothing may always hold one validation (a release and the one that follows it)
    after = _epsilon(held + list(events), policy, interval) if held else 0.0
    if after > cap * (1 + 1e-9) + interval:  # the accountant's pessimistic rounding: up to a grid step
        raise ResourceExhausted(
            f"policy: {who} holds epsilon {_epsilon(held, policy, interval):.4g} of {where}; with this hold its holds "
            f"would keep epsilon {after:.4g} from the others, above policy.max_held_epsilon = {cap:g}; use or cancel "
            "a hold first; nothing was held")
    allowance = policy.hold_seconds_per_hour
    if unused + lifetime + holds * seconds > allowance * (1 + 1e-12):
        raise ResourceExhausted(
            f"policy: {who} kept holds of {where} unused for {unused:.3g} s of the last hour and holds some for "
            f"{lifetime:.3g} s now (their whole lifetime until they end); a hold of {seconds:g} s would exceed policy.hold_seconds_per_hour = "
            f"{allowance:g} (a hold used by its release costs nothing: cancel the holds you will not use); "
            "nothing was held")


def _epsilon(events: list, policy: Policy, interval: float) -> float:
    """The epsilon of ``events`` composed by the ledger's accountant at the budget's delta (0 for none)."""
    return Accountant(events, value_discretization_interval=interval).epsilon(policy.budget_delta) if events else 0.0
