"""Budget holds cannot lock a population for others (issue 36, item 1), over real mutual-TLS daemons, three analysts.

Before, any analyst could hold the whole budget with PrepareRelease and renew the holds for free as they expired:
the victim was refused for as long as the attacker kept going, and the attacker was charged nothing. Now an
analyst's unexpired holds on a population are bounded in number (``policy.max_holds_per_analyst``) and in epsilon
(``policy.max_held_epsilon``), and holds that end unused (expired or cancelled) spend an hourly allowance of hold
time (``policy.hold_seconds_per_hour``); a hold used by its release costs nothing.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time

import grpc
import pytest

from dsroc.v1 import site_pb2 as pb

from ..conftest import TOKENS, tls_client

C = grpc.StatusCode
MALLORY = "token-of-mallory"
ANALYSTS = {name: {"token_sha256": hashlib.sha256(token.encode()).hexdigest(), "datasets": ["*"]}
            for name, token in {**TOKENS, "mallory": MALLORY}.items()}
BINS = (5, 8, 10, 12, 20, 50)


def _hold(client, session, epsilon, n_bins=10, hold_seconds=0.0):
    return client.PrepareRelease(pb.PrepareRequest(histogram=pb.HistogramRequest(
        session_id=session, epsilon=epsilon, delta=1e-5, n_bins=n_bins), hold_seconds=hold_seconds))


def _release(client, session, epsilon=1.0, n_bins=20):
    return client.ReleaseHistogram(pb.HistogramRequest(session_id=session, epsilon=epsilon, delta=1e-5, n_bins=n_bins))


def _code(call):
    try:
        call()
    except grpc.RpcError as error:
        return error.code(), error.details()
    return C.OK, ""


def _three(tls_site, client_factory, tls_pki, site=None, protocols=("histogram",), **policy):
    server, alice = tls_site(analysts=ANALYSTS, policy={"protocols": list(protocols), **policy}, site=site)
    bob = tls_client(client_factory, server.bound_address, tls_pki, TOKENS["bob"])
    mallory = tls_client(client_factory, server.bound_address, tls_pki, MALLORY)
    return server, alice, bob, mallory


def test_one_analyst_cannot_hold_the_whole_budget_with_default_limits(tls_site, client_factory, tls_pki):
    """Budget epsilon 20: five holds at epsilon 4 held all of it; the default limits (4 holds, epsilon 10 held per
    analyst beyond its first validation, composed: half the budget) leave the others room."""
    server, alice, bob, mallory = _three(tls_site, client_factory, tls_pki)
    m = mallory.open()
    granted = [_code(lambda: _hold(mallory, m, 4.0, n_bins=b))[0] for b in BINS[:5]]
    assert granted[:2] == [C.OK, C.OK] and set(granted[2:]) == {C.RESOURCE_EXHAUSTED}
    code, details = _code(lambda: _hold(mallory, m, 4.0, n_bins=BINS[5]))
    assert code == C.RESOURCE_EXHAUSTED and "policy.max_held_epsilon" in details and "'mallory'" in details
    assert "holds epsilon 7.9" in details and "would keep epsilon 11.9" in details  # composed, above 10
    assert "nothing was held" in details
    # a count limit too: many small holds are refused past four
    counts = [_code(lambda: _hold(mallory, m, 0.3, n_bins=b))[0] for b in BINS[2:5]]
    assert counts == [C.OK, C.OK, C.RESOURCE_EXHAUSTED]
    code, details = _code(lambda: _hold(mallory, m, 0.3, n_bins=BINS[5]))
    assert code == C.RESOURCE_EXHAUSTED and "policy.max_holds_per_analyst" in details
    # the victims still release (epsilon 8.6 of 20 is held by mallory)
    assert _release(alice, alice.open(), epsilon=5.0).epsilon == 5.0
    assert _release(bob, bob.open(), epsilon=5.0, n_bins=50).epsilon == 5.0
    budget = alice.Budget(pb.BudgetRequest(dataset="test")).budget
    assert budget.releases == 2 and budget.reservations == 4


def test_renewing_holds_is_paid_from_an_hourly_allowance_so_the_victim_gets_through(tls_site, client_factory,
                                                                                      tls_pki):
    """Fast version of the review's 150 s attack: mallory holds the whole budget (policy.max_held_epsilon 20) in holds
    of 1 s, renewed as each expires; alice tries a release while each is held. With an allowance of 3 s of unused
    hold time an hour, mallory's fourth hold is refused and alice's next try is released (before, mallory renewed
    for ever and alice was refused at every try)."""
    server, alice, _, mallory = _three(tls_site, client_factory, tls_pki, max_epsilon=20.0, max_held_epsilon=20.0,
                                       hold_seconds_per_hour=3.0)
    m, a = mallory.open(), alice.open()
    held, refused, victim_refusals = 0, "", 0
    for cycle in range(6):
        try:
            hold = _hold(mallory, m, 20.0, n_bins=BINS[cycle], hold_seconds=1.0)
        except grpc.RpcError as error:
            assert error.code() == C.RESOURCE_EXHAUSTED, error.details()
            refused = error.details()
            break
        held += 1
        granted = time.monotonic()
        code, details = _code(lambda: _release(alice, a))
        assert code == C.RESOURCE_EXHAUSTED and "held by validations in progress" in details, details
        victim_refusals += 1
        time.sleep(max(hold.expires_in_seconds - (time.monotonic() - granted), 0.0) + 0.05)  # until it expired
    assert held == 3 and victim_refusals == 3, f"alice was refused {victim_refusals} times, mallory held {held}"
    assert "policy.hold_seconds_per_hour" in refused and "'mallory'" in refused
    assert _release(alice, a).epsilon == 1.0  # nothing held now: the victim gets through
    # the allowance is mallory's alone: alice still holds, and a hold used by its release costs nothing
    for epsilon in (1.0, 1.1, 1.2, 1.3):  # 4 x 1 s held: beyond the allowance, were the holds not used
        h = _hold(alice, a, epsilon, n_bins=50, hold_seconds=1.0)
        assert h.reservation_id and not h.repeated
        alice.ReleaseHistogram(pb.HistogramRequest(session_id=a, epsilon=epsilon, delta=1e-5, n_bins=50,
                                                   reservation_id=h.reservation_id))
    code, details = _code(lambda: _hold(mallory, m, 1.0, n_bins=5, hold_seconds=0.4))
    assert code == C.RESOURCE_EXHAUSTED and "policy.hold_seconds_per_hour" in details


def test_a_cancelled_hold_spends_only_the_time_it_was_held(tls_site, client_factory, tls_pki):
    server, alice, _, _ = _three(tls_site, client_factory, tls_pki, hold_seconds_per_hour=2.5)
    a = alice.open()
    for k in range(10):  # ten 1 s holds cancelled at once: far less than their 10 s of lifetime
        h = _hold(alice, a, 1.0, n_bins=BINS[k % len(BINS)], hold_seconds=1.0)
        assert alice.CancelReservation(pb.CancelReservationRequest(reservation_id=h.reservation_id)).cancelled
    assert _hold(alice, a, 1.0, n_bins=5, hold_seconds=1.0).reservation_id
    code, details = _code(lambda: _hold(alice, a, 1.0, n_bins=8, hold_seconds=2.0))  # its 1 s and 2 s: above 2.5
    assert code == C.RESOURCE_EXHAUSTED and "policy.hold_seconds_per_hour" in details


@pytest.mark.parametrize("key, value, rule", [("max_holds_per_analyst", 0, "at least 1"),
                                              ("max_held_epsilon", -1.0, "positive"),
                                              ("hold_seconds_per_hour", 0.0, "positive")])
def test_the_hold_limits_are_checked_in_the_config(make_site_config, key, value, rule):
    from site_node.config import ConfigError

    with pytest.raises(ConfigError, match=f"policy.{key}: .*{rule}"):
        make_site_config(policy={key: value})


def _reservations(server):
    with sqlite3.connect(server.config.ledger_path) as db:
        return db.execute("SELECT analyst, session_id FROM reservations ORDER BY analyst, session_id").fetchall()


def _unused_seconds(server, analyst):
    with sqlite3.connect(server.config.ledger_path) as db:
        return db.execute("SELECT COALESCE(SUM(seconds), 0), COUNT(*) FROM hold_usage WHERE analyst=?",
                          (analyst,)).fetchone()


def test_closing_a_session_returns_its_holds_and_only_its_own(tls_site, client_factory, tls_pki):
    """Before, a hold outlived the session it was made in: mallory held the whole budget, closed her session and
    the victim was refused until the hold expired (60 s). Now CloseSession returns the session's holds (the time
    each was held spent from the allowance, as a cancel), and leaves her other session's and alice's holds."""
    server, alice, _, mallory = _three(tls_site, client_factory, tls_pki, max_held_epsilon=20.0, max_epsilon=20.0)
    m, other, a = mallory.open(), mallory.open(), alice.open()
    first = _hold(mallory, m, 15.0, n_bins=5)
    _hold(mallory, m, 1.0, n_bins=8)
    kept = _hold(mallory, other, 1.0, n_bins=10)
    mine = _hold(alice, a, 1.0, n_bins=12)
    code, details = _code(lambda: _release(alice, a, epsilon=5.0, n_bins=50))
    assert code == C.RESOURCE_EXHAUSTED and "held by validations in progress" in details
    assert [row[0] for row in _reservations(server)] == ["alice", "mallory", "mallory", "mallory"]
    started = time.monotonic()
    mallory.CloseSession(pb.CloseSessionRequest(session_id=m))
    held_for = time.monotonic() - started
    assert sorted(_reservations(server)) == sorted([("alice", a), ("mallory", other)])
    seconds, ended = _unused_seconds(server, "mallory")
    assert ended == 2 and 0.0 <= seconds < 2 * (held_for + 30.0)  # the time held, not the 60 s lifetimes
    assert _release(alice, a, epsilon=5.0, n_bins=50).epsilon == 5.0  # the victim gets through at once
    # the closed session's hold is gone: its release is refused, nothing charged
    code, details = _code(lambda: mallory.ReleaseHistogram(pb.HistogramRequest(
        session_id=other, epsilon=15.0, delta=1e-5, n_bins=5, reservation_id=first.reservation_id)))
    assert code == C.FAILED_PRECONDITION and "unknown, used or expired" in details
    for client, session, held, n_bins in ((mallory, other, kept, 10), (alice, a, mine, 12)):  # the others are used
        out = client.ReleaseHistogram(pb.HistogramRequest(session_id=session, epsilon=1.0, delta=1e-5,
                                                          n_bins=n_bins, reservation_id=held.reservation_id))
        assert out.epsilon == 1.0
    assert _reservations(server) == []


def test_a_session_expired_after_inactivity_returns_its_holds(tls_site, client_factory, tls_pki):
    """mallory holds the whole budget and stops calling; once her session expires (session_idle_seconds 1.5 here),
    the next call of anyone ends it and returns its holds, well before their 60 s lifetime."""
    server, alice, _, mallory = _three(tls_site, client_factory, tls_pki, max_held_epsilon=20.0, max_epsilon=20.0,
                                       site={"session_idle_seconds": 1.5})
    m = mallory.open()
    _hold(mallory, m, 19.0, n_bins=5)
    a = alice.open()
    code, _ = _code(lambda: _release(alice, a, epsilon=2.0))
    assert code == C.RESOURCE_EXHAUSTED
    time.sleep(1.7)  # mallory's session idles out (alice's too)
    assert _release(alice, alice.open(), epsilon=2.0).epsilon == 2.0  # her OpenSession ended mallory's
    assert _reservations(server) == []
    assert _unused_seconds(server, "mallory")[1] == 1


def test_a_hold_made_with_open_session_belongs_to_that_session(tls_site, client_factory, tls_pki):
    server, alice, _, mallory = _three(tls_site, client_factory, tls_pki, protocols=("histogram", "paper"))
    opened = mallory.OpenSession(pb.OpenSessionRequest(
        dataset="test", outcome="y", score=pb.ScoreSource(score_column="pred"),
        prepare=pb.PrepareRequest(scores=pb.ReleaseRequest(epsilon=2.0, delta=1e-5))))
    assert opened.prepared.reservation_id
    assert _reservations(server) == [("mallory", opened.session_id)]
    mallory.CloseSession(pb.CloseSessionRequest(session_id=opened.session_id))
    assert _reservations(server) == []
