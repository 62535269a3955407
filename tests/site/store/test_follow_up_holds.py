"""Follow-up holds in the ledger: a release holds the budget of the release that follows it (the second stage of a
two-stage grid) in one check, and only that release, by the same analyst, takes the hold over.

Budget epsilon 1.6 at delta 1e-5 fits two releases at (1, 1e-5) (composed: epsilon 1.465) but not three (1.835).
"""

from __future__ import annotations

import sqlite3
import time

import pytest

from dsroc.privacy.accounting import Gaussian
from site_node.config import Policy
from site_node.errors import InvalidArgument, ResourceExhausted
from site_node.store.ledger import ReleaseKey, SqliteLedger

POLICY = Policy(budget_epsilon=1.6, budget_delta=1e-5, max_epsilon=1.0, max_delta=1e-5)
TAU = 3.7306316348  # (Delta 1, epsilon 1, delta 1e-5) -> sigma
EVENTS = (Gaussian(TAU),)


def _key(i: int) -> ReleaseKey:
    return ReleaseKey("d", "column:p", "y", "secagg", f'{{"i": {i}}}')


@pytest.fixture
def ledger(tmp_path):
    out = SqliteLedger(tmp_path / "ledger.sqlite")
    yield out
    out.close()


def _reserve(ledger, i, *, analyst="a", events=EVENTS, **kw):
    return ledger.reserve(_key(i), dataset="d", analyst=analyst, events=events, epsilon=1.0, delta=1e-5,
                          fingerprint="f", policy=POLICY, **kw)


def _release(ledger, i, reservation):
    return ledger.release(_key(i), dataset="d", analyst="a", events=EVENTS, epsilon=1.0, delta=1e-5, rule="secagg",
                          fingerprint="f", policy=POLICY, make=lambda _s: (b"x", 0, 0), store=True,
                          reservation=reservation)


def _holds(ledger) -> int:
    with sqlite3.connect(ledger.path) as db:
        return db.execute("SELECT COUNT(*) FROM reservations WHERE expires > ?", (time.time(),)).fetchone()[0]


def test_a_release_and_its_follow_up_are_held_together_or_not_at_all(ledger):
    first = _reserve(ledger, 1, follow_up=EVENTS)
    assert first.reservation_id and first.follow_up_id and _holds(ledger) == 2
    with pytest.raises(ResourceExhausted, match="held by validations in progress"):  # a third does not fit
        _reserve(ledger, 9)
    ledger.cancel(first.reservation_id, "a"), ledger.cancel(first.follow_up_id, "a")
    _release(ledger, 0, "")  # one release spent: one more fits, not two
    with pytest.raises(ResourceExhausted, match="with the release that follows it"):
        _reserve(ledger, 1, follow_up=EVENTS)
    assert _holds(ledger) == 0  # neither held


def test_the_follow_up_is_taken_over_once_and_charged_once(ledger):
    first = _reserve(ledger, 1, follow_up=EVENTS)
    _release(ledger, 1, first.reservation_id)
    second = _reserve(ledger, 2, takes_over=first.follow_up_id)  # no new check: the budget is the one held
    assert second.reservation_id and not second.follow_up_id and _holds(ledger) == 1
    assert _release(ledger, 2, second.reservation_id)[1]
    assert ledger.budget("d", POLICY).releases == 2 and _holds(ledger) == 0
    with pytest.raises(ResourceExhausted):  # taken over once: the id is gone, a third release is checked and refused
        _reserve(ledger, 3, takes_over=first.follow_up_id)


def test_a_follow_up_hold_is_no_hold_of_another_release(ledger):
    first = _reserve(ledger, 1, follow_up=EVENTS)
    with pytest.raises(InvalidArgument, match="holds another release"):  # not usable as a release's reservation
        _release(ledger, 2, first.follow_up_id)
    with pytest.raises(InvalidArgument, match="another release"):  # other noise: not the release it was held for
        _reserve(ledger, 2, events=(Gaussian(2 * TAU),), takes_over=first.follow_up_id)
    with pytest.raises(InvalidArgument, match="not a follow-up hold"):  # a release's own hold is not one
        _reserve(ledger, 2, takes_over=first.reservation_id)
    with pytest.raises(ResourceExhausted):  # another analyst's release cannot take it over: checked, and refused
        _reserve(ledger, 2, analyst="b", takes_over=first.follow_up_id)
    assert _holds(ledger) == 2 and ledger.budget("d", POLICY).releases == 0  # nothing changed


def test_an_expired_follow_up_hold_leaves_the_release_checked_as_any_other(ledger):
    first = _reserve(ledger, 1, follow_up=EVENTS, hold_seconds=0.05)
    time.sleep(0.1)
    second = _reserve(ledger, 2, takes_over=first.follow_up_id)  # both expired: it fits the budget by itself
    assert second.reservation_id and _holds(ledger) == 1
