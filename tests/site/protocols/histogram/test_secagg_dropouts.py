"""Dropout recovery in the secagg protocol over four real mutual-TLS daemons, the test playing the analyst.

A round advertised with ``dropouts`` goes on without the sites that fail to mask: every survivor confirms the one
set of survivors, then reveals its self seed and its pairwise seeds with the sites that dropped out, so the analyst
gets the survivors' sum -- and never the self seed of a site whose pairwise seeds it was given.
"""

from __future__ import annotations

import secrets
import sqlite3

import grpc
import numpy as np
import pytest

from dsroc.secagg import check_plausible, remove_pair_masks, share_sigma, unmask_sum
from dsroc.v1 import site_pb2 as pb

from .test_secagg import NAMES, advertise, expect, federation, mask, truth, vectors  # noqa: F401 (fixture)

C = grpc.StatusCode


def confirm(clients, sessions, round_id, receipts):
    return [c.SecAggConfirm(pb.SecAggConfirmRequest(session_id=s, round_id=round_id, receipts=receipts))
            for c, s in zip(clients, sessions)]


def unmask(clients, sessions, round_id, receipts, confirmations):
    return [c.SecAggUnmask(pb.SecAggUnmaskRequest(session_id=s, round_id=round_id, receipts=receipts,
                                                  confirmations=confirmations)) for c, s in zip(clients, sessions)]


def releases(config) -> list[tuple]:
    with sqlite3.connect(config.ledger_path) as db:
        return db.execute("SELECT kind, events FROM releases").fetchall()


def recovered(masked, seeds, names):
    """The survivors' sum: their vectors less their self masks and their pairwise masks with the dropped sites."""
    total = unmask_sum(vectors(masked), [s.self_seed for s in seeds])
    return remove_pair_masks(total, [(name, p.peer, p.seed) for name, s in zip(names, seeds) for p in s.pair_seeds])


def test_a_site_that_drops_before_masking_is_left_out_of_the_sum(federation):
    configs, clients, sessions = federation()
    rid = secrets.token_bytes(32)
    ads = advertise(clients, sessions, rid, dropouts=1)
    masked = mask(clients[:3], sessions[:3], rid, ads)  # s3 is gone after advertising
    receipts = [m.receipt for m in masked]
    with pytest.raises(grpc.RpcError) as err:  # no seed without every survivor's confirmation
        unmask(clients[:1], sessions[:1], rid, receipts, [])
    assert err.value.code() == C.FAILED_PRECONDITION
    confirmations = confirm(clients[:3], sessions[:3], rid, receipts)
    seeds = unmask(clients[:3], sessions[:3], rid, receipts, confirmations)
    assert [[p.peer for p in s.pair_seeds] for s in seeds] == [["s3"]] * 3
    total = check_plausible(recovered(masked, seeds, NAMES[:3]))
    np.testing.assert_array_equal(total, truth(configs[:3], np.asarray(ads[0].edges)))  # s3's patients are not in it
    # the share is sized for the fewest survivors (3 honest shares), and that is what each survivor charged
    sigma = share_sigma(4000.0, 0.01, 3)
    assert ads[0].share_sigma == pytest.approx(sigma, rel=1e-12) and all(s.honest_shares == 3 for s in seeds)
    assert all(len(releases(c)) == 1 for c in configs[:3]) and releases(configs[3]) == []
    # a round with dropouts is a new release each time: no free replay of noise whose survivors may differ
    rid2 = secrets.token_bytes(32)
    ads2 = advertise(clients, sessions, rid2, dropouts=1)
    masked2 = mask(clients, sessions, rid2, ads2)
    receipts2 = [m.receipt for m in masked2]
    seeds2 = unmask(clients, sessions, rid2, receipts2, confirm(clients, sessions, rid2, receipts2))
    assert all(not s.repeated and not s.pair_seeds for s in seeds2)
    assert [len(releases(c)) for c in configs] == [2, 2, 2, 1]


def test_an_analyst_cannot_declare_a_site_that_masked_dropped_and_learn_its_vector(federation, snapshot):
    """The attack double masking stops: s3 masked, but the analyst tells s0-s2 that s3 dropped (to get their
    pairwise seeds with s3) and tells s3 that everyone survived (to get its self seed). A site confirms one set of
    survivors and reveals only given every member's confirmation of it, so s3 never reveals its seed."""
    configs, clients, sessions = federation()
    rid = secrets.token_bytes(32)
    ads = advertise(clients, sessions, rid, dropouts=1)
    masked = mask(clients, sessions, rid, ads)
    every, without = [m.receipt for m in masked], [m.receipt for m in masked[:3]]
    mine = confirm(clients[3:], sessions[3:], rid, every)  # s3 confirms all four
    theirs = confirm(clients[:3], sessions[:3], rid, without)  # s0-s2 confirm s0-s2
    for c, s in zip(clients[:3], sessions[:3]):  # ... and then refuse to confirm another set
        expect(C.PERMISSION_DENIED, lambda: c.SecAggConfirm(pb.SecAggConfirmRequest(
            session_id=s, round_id=rid, receipts=every)), "confirms one set of survivors per round")
    before = snapshot(configs[3].ledger_path)
    for confirmations, match in ((mine + theirs, "does not verify"), (mine, "one per survivor")):
        with pytest.raises(grpc.RpcError) as err:
            unmask(clients[3:], sessions[3:], rid, every, confirmations)
        assert err.value.code() in (C.PERMISSION_DENIED, C.FAILED_PRECONDITION) and match in err.value.details()
    expect(C.FAILED_PRECONDITION, lambda: unmask(clients[3:], sessions[3:], rid, without, theirs),
           "receipts must come from distinct sites of the round")  # a set without s3: s3 reveals nothing for it
    assert snapshot(configs[3].ledger_path) == before
    # s0-s2 complete their own round: the analyst has s3's vector and all its pairwise seeds, not its self seed
    seeds = unmask(clients[:3], sessions[:3], rid, without, theirs)
    np.testing.assert_array_equal(check_plausible(recovered(masked[:3], seeds, NAMES[:3])),
                                  truth(configs[:3], np.asarray(ads[0].edges)))
    alone = remove_pair_masks(vectors(masked[3:])[0].view(np.int64),
                              [(s, "s3", p.seed) for s, seed in zip(NAMES, seeds) for p in seed.pair_seeds])
    with pytest.raises(ValueError):  # still under s3's self mask: uniform, not counts
        check_plausible(alone)


def test_confirmations_and_survivor_sets_that_do_not_belong_to_the_round_are_refused(federation, snapshot):
    configs, clients, sessions = federation()
    rid, other = secrets.token_bytes(32), secrets.token_bytes(32)
    ads = advertise(clients, sessions, rid, dropouts=1)
    masked = mask(clients, sessions, rid, ads)
    ads2 = advertise(clients, sessions, other, dropouts=1)
    masked2 = mask(clients, sessions, other, ads2)
    receipts, foreign = [m.receipt for m in masked], [m.receipt for m in masked2]
    before = [snapshot(c.ledger_path) for c in configs]
    c, s = clients[0], sessions[0]
    call = lambda receipts: c.SecAggConfirm(pb.SecAggConfirmRequest(session_id=s, round_id=rid, receipts=receipts))
    expect(C.FAILED_PRECONDITION, lambda: call(receipts[:2]), "at least 3")  # fewer than the fewest survivors
    expect(C.FAILED_PRECONDITION, lambda: call(receipts[1:]), "this site among them")  # without s0 itself
    expect(C.PERMISSION_DENIED, lambda: call(receipts[:3] + foreign[3:]), "does not verify")  # mixed rounds
    expect(C.FAILED_PRECONDITION, lambda: call(receipts + receipts[3:]), "distinct sites")
    good = confirm(clients, sessions, rid, receipts)
    garbage = [pb.SecAggConfirmation(site=g.site, signature=bytes(64)) for g in good]
    expect(C.PERMISSION_DENIED, lambda: unmask(clients[:1], sessions[:1], rid, receipts, garbage), "does not verify")
    replayed = confirm(clients, sessions, other, foreign)  # confirmations of another round
    expect(C.PERMISSION_DENIED, lambda: unmask(clients[:1], sessions[:1], rid, receipts, replayed), "does not verify")
    assert [snapshot(x.ledger_path) for x in configs] == before


def test_dropouts_must_leave_enough_sites_and_a_round_without_them_needs_no_confirmation(federation):
    configs, clients, sessions = federation()
    # 4 sites, 1 colluder, 2 dropouts: 2 survivors could be split around one site (need colluders + 2 = 3)
    for dropouts, colluders in ((2, 1), (4, 0)):
        expect(C.PERMISSION_DENIED, lambda: advertise(clients[:1], sessions[:1], secrets.token_bytes(32),
                                                      dropouts=dropouts, colluders=colluders), "fewer than")
    rid = secrets.token_bytes(32)
    ads = advertise(clients, sessions, rid)
    masked = mask(clients, sessions, rid, ads)
    expect(C.FAILED_PRECONDITION, lambda: confirm(clients[:1], sessions[:1], rid, [m.receipt for m in masked]),
           "tolerates no dropout")


def test_a_survivor_lost_after_the_masks_leaves_nothing_revealed_or_the_sum_masked(federation, snapshot):
    """The residual window of recovery. A survivor that does not confirm: the others cannot reveal (its
    confirmation is missing) nor confirm a set without it (one set per round) -- nothing charged anywhere. A
    survivor lost after confirming: the others reveal and are charged, the sum stays under its self mask, and the
    round completes when it comes back (its repeated reveal is free)."""
    configs, clients, sessions = federation()
    rid = secrets.token_bytes(32)
    ads = advertise(clients, sessions, rid, dropouts=1)
    masked = mask(clients, sessions, rid, ads)
    every = [m.receipt for m in masked]
    before = [snapshot(c.ledger_path) for c in configs]
    three = confirm(clients[:3], sessions[:3], rid, every)  # s3 is lost before confirming
    expect(C.FAILED_PRECONDITION, lambda: unmask(clients[:1], sessions[:1], rid, every, three), "one per survivor")
    expect(C.PERMISSION_DENIED, lambda: confirm(clients[:1], sessions[:1], rid, every[:3]), "one set of survivors")
    assert [snapshot(c.ledger_path) for c in configs] == before
    # s3 comes back and confirms; then it is lost again before revealing
    confirmations = three + confirm(clients[3:], sessions[3:], rid, every)
    seeds = unmask(clients[:3], sessions[:3], rid, every, confirmations)
    assert all(not s.pair_seeds for s in seeds) and [len(releases(c)) for c in configs] == [1, 1, 1, 0]
    with pytest.raises(ValueError):  # s3's vector is in the sum, its self mask too
        check_plausible(unmask_sum(vectors(masked[:3]), [s.self_seed for s in seeds]) +
                        vectors(masked[3:])[0].view(np.int64))
    last = unmask(clients[3:], sessions[3:], rid, every, confirmations)
    again = unmask(clients[:3], sessions[:3], rid, every, confirmations)
    assert all(a.self_seed == s.self_seed for a, s in zip(again, seeds)) and [len(releases(c)) for c in configs] == [1] * 4
    np.testing.assert_array_equal(check_plausible(unmask_sum(vectors(masked), [s.self_seed for s in seeds + last])),
                                  truth(configs, np.asarray(ads[0].edges)))
