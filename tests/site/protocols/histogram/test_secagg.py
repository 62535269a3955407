"""The secagg protocol over real mutual-TLS daemons, the test playing the analyst (honest or not).

The sum equals brute-force counts under negligible noise; a dropout at any step before the seeds are
revealed leaves every ledger unchanged and the partial vectors masked; replayed or mixed rounds,
foreign keys and garbage keys are refused; the charge is the accountant's value for the coalitions
each site's policy accepts.
"""

from __future__ import annotations

import contextlib
import json
import secrets

import grpc
import numpy as np
import pytest

from dsroc.privacy.accounting import Accountant, DiscreteGaussianSum, discretization_for
from dsroc.secagg import (advertisement_message, check_plausible, round_transcript, seed_commitment, share_sigma,
                          unmask_sum)
from dsroc.v1 import site_pb2 as pb
from site_node.cli.init import sample_dataset
from site_node.security.signing import ensure_signing_key, public_key_text
from site_node.testing import running_server

from ...conftest import make_config, read_frame, tls_client

C = grpc.StatusCode
HUGE = {"max_epsilon": 5000.0, "budget_epsilon": 1e5, "max_delta": 0.01, "budget_delta": 0.05}
NAMES = ["s0", "s1", "s2", "s3"]


def peered_configs(root, tls, policy, names=NAMES, analysts=None):
    """Site configs that list each other as peers (their release-signing keys)."""
    keys = {}
    for k, name in enumerate(names):
        first = make_config(root / name, tls=tls, frames={"test": sample_dataset(300, seed=20 + k)})
        keys[name] = public_key_text(ensure_signing_key(first.signing_key_path))
    policy = {"protocols": ["histogram", "secagg"], **policy}
    return [make_config(root / name, tls=tls, policy=policy, frames={"test": sample_dataset(300, seed=20 + k)},
                        peers={n: key for n, key in keys.items() if n != name}, analysts=analysts)
            for k, name in enumerate(names)]


@pytest.fixture
def federation(tmp_path, tls_pki, client_factory):
    """``make(policy)`` -> (configs, clients, sessions) of four running TLS sites that are each other's peers."""
    tls = {"cert": str(tls_pki.server_cert), "key": str(tls_pki.server_key), "client_ca": str(tls_pki.ca_cert)}
    stack = contextlib.ExitStack()

    def make(policy=None, root="fed"):
        configs = peered_configs(tmp_path / root, tls, policy or HUGE)
        clients = [tls_client(client_factory, stack.enter_context(running_server(c)).bound_address, tls_pki)
                   for c in configs]
        return configs, clients, [c.open() for c in clients]

    with stack:
        yield make


def advertise(clients, sessions, round_id, *, sites=NAMES, epsilon=4000.0, delta=0.01, n_bins=10, colluders=0,
              **more):
    return [c.SecAggAdvertise(pb.SecAggAdvertiseRequest(
        session_id=s, round_id=round_id, epsilon=epsilon, delta=delta, n_bins=n_bins, spacing="equal",
        sites=list(sites), colluders=colluders, **more)) for c, s in zip(clients, sessions)]


def mask(clients, sessions, round_id, ads):
    return [c.SecAggMask(pb.SecAggMaskRequest(session_id=s, round_id=round_id, advertisements=ads))
            for c, s in zip(clients, sessions)]


def unmask(clients, sessions, round_id, receipts):
    return [c.SecAggUnmask(pb.SecAggUnmaskRequest(session_id=s, round_id=round_id, receipts=receipts))
            for c, s in zip(clients, sessions)]


def vectors(masked):
    return [np.frombuffer(m.masked, dtype="<u8").astype(np.uint64) for m in masked]


def run_round(clients, sessions, **kw):
    round_id = secrets.token_bytes(32)
    ads = advertise(clients, sessions, round_id, **kw)
    masked = mask(clients, sessions, round_id, ads)
    seeds = unmask(clients, sessions, round_id, [m.receipt for m in masked])
    return ads, masked, seeds, unmask_sum(vectors(masked), [s.self_seed for s in seeds])


def truth(configs, edges):
    total = np.zeros(2 * (edges.size - 1), dtype=np.int64)
    for config in configs:
        f = read_frame(config)
        s = np.clip(f["pred"].to_numpy(), edges[0], edges[-1])
        idx = np.minimum(np.searchsorted(edges, s, side="right") - 1, edges.size - 2)
        for cls in (0, 1):
            total[cls * (edges.size - 1):(cls + 1) * (edges.size - 1)] += np.bincount(
                idx[f["y"].to_numpy() == cls], minlength=edges.size - 1)
    return total


def expect(code, call, match=""):
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == code, err.value.details()
    assert match in err.value.details()
    return err.value.details()


def test_the_unmasked_sum_is_the_brute_force_sum_and_is_released_once(federation, snapshot):
    configs, clients, sessions = federation()
    ads, masked, seeds, total = run_round(clients, sessions)
    edges = np.asarray(ads[0].edges)
    np.testing.assert_array_equal(total, truth(configs, edges))  # sigma ~ 1e-3 per share: the noise is 0
    assert all(a.request_sha256 == ads[0].request_sha256 for a in ads)
    assert all(not s.repeated and s.honest_shares == 4 for s in seeds)
    # no masked vector alone unmasks to counts, even with its own seed
    for m, seed in zip(masked, seeds):
        with pytest.raises(ValueError):
            check_plausible(unmask_sum([np.frombuffer(m.masked, dtype="<u8").astype(np.uint64)], [seed.self_seed]))
    for m in masked:
        with pytest.raises(ValueError):
            check_plausible(unmask_sum([np.frombuffer(m.masked, dtype="<u8").astype(np.uint64)], [bytes(32)]))
    # a second round of the same request over the same sites: the same sum, nothing charged
    before = [snapshot(c.ledger_path) for c in configs]
    _, masked2, seeds2, total2 = run_round(clients, sessions)
    np.testing.assert_array_equal(total2, total)
    assert all(s.repeated for s in seeds2) and [snapshot(c.ledger_path) for c in configs] == before
    assert all(a.masked != b.masked for a, b in zip(masked, masked2))  # fresh masks


def test_the_summed_noise_has_the_stated_law(federation):
    configs, clients, sessions = federation({"max_epsilon": 5.0, "budget_epsilon": 200.0})
    errors = []
    for i in range(6):  # new requests: fresh shares each round
        ads, _, _, total = run_round(clients, sessions, epsilon=1.0 + 1e-3 * i, delta=1e-5, n_bins=20)
        errors.append(total - truth(configs, np.asarray(ads[0].edges)))
    sigma = ads[0].share_sigma
    from dsroc.privacy.distributed import summed_noise_variance

    stated = summed_noise_variance(sigma, len(NAMES))
    errors = np.concatenate(errors)  # 240 cells; the variance's sampling SD is about 9%
    assert abs(errors.mean()) < 4 * np.sqrt(stated / errors.size)
    assert errors.var() == pytest.approx(stated, rel=0.4)
    # the shares are sized so that the sum of all four meets the request (no coalition assumed)
    event = DiscreteGaussianSum(sigma, 4)
    assert Accountant([event], value_discretization_interval=discretization_for(1.005)).delta(1.005) <= 1e-5


def test_a_dropout_before_the_seeds_are_revealed_charges_and_reveals_nothing(federation, snapshot):
    configs, clients, sessions = federation()
    before = [snapshot(c.ledger_path) for c in configs]
    # step 1: s3 never advertises -> nobody masks
    round_id = secrets.token_bytes(32)
    ads = advertise(clients[:3], sessions[:3], round_id)
    for c, s in zip(clients[:3], sessions[:3]):
        expect(C.INVALID_ARGUMENT, lambda: c.SecAggMask(pb.SecAggMaskRequest(
            session_id=s, round_id=round_id, advertisements=ads)), "one per site of the round")
    # step 2: everyone advertised, s3 drops before masking -> the others' vectors stay masked, no seed
    round_id = secrets.token_bytes(32)
    ads = advertise(clients, sessions, round_id)
    masked = mask(clients[:3], sessions[:3], round_id, ads)
    with pytest.raises(ValueError, match="aborted"):
        check_plausible(unmask_sum(vectors(masked), [bytes(32)] * 3))
    for c, s in zip(clients[:3], sessions[:3]):
        expect(C.FAILED_PRECONDITION, lambda: c.SecAggUnmask(pb.SecAggUnmaskRequest(
            session_id=s, round_id=round_id, receipts=[m.receipt for m in masked])), "one receipt from every site")
    assert [snapshot(c.ledger_path) for c in configs] == before
    # step 3: s3 drops while the seeds are revealed: the sum stays masked by its seed until it answers
    round_id = secrets.token_bytes(32)
    ads = advertise(clients, sessions, round_id)
    masked = mask(clients, sessions, round_id, ads)
    receipts = [m.receipt for m in masked]
    seeds = unmask(clients[:3], sessions[:3], round_id, receipts)
    with pytest.raises(ValueError, match="aborted"):
        check_plausible(unmask_sum(vectors(masked), [s.self_seed for s in seeds] + [bytes(32)]))
    last = unmask(clients[3:], sessions[3:], round_id, receipts)  # it comes back: the same round completes
    total = unmask_sum(vectors(masked), [s.self_seed for s in seeds + last])
    np.testing.assert_array_equal(total, truth(configs, np.asarray(ads[0].edges)))
    again = unmask(clients[:1], sessions[:1], round_id, receipts)  # a repeat reveals the same seed, free
    assert again[0].self_seed == seeds[0].self_seed and again[0].release_id == seeds[0].release_id


def test_replayed_and_mixed_rounds_are_refused(federation, snapshot):
    configs, clients, sessions = federation()
    before = [snapshot(c.ledger_path) for c in configs]
    round_a, round_b = secrets.token_bytes(32), secrets.token_bytes(32)
    ads_a = advertise(clients, sessions, round_a)
    ads_b = advertise(clients, sessions, round_b)
    # an advertisement of round A relayed in round B
    mixed = ads_b[:3] + ads_a[3:]
    expect(C.PERMISSION_DENIED, lambda: mask(clients[:1], sessions[:1], round_b, mixed), "another round")
    # the analyst swaps in its own round key for s3 (it cannot sign it)
    forged = pb.SecAggAdvertisement()
    forged.CopyFrom(ads_b[3])
    forged.public_key = secrets.token_bytes(32)
    expect(C.PERMISSION_DENIED, lambda: mask(clients[:1], sessions[:1], round_b, ads_b[:3] + [forged]), "signature")
    # a round id reused for another request (another site set)
    expect(C.PERMISSION_DENIED, lambda: advertise(clients[:1], sessions[:1], round_a, sites=NAMES[:3]),
           "another request")
    # different site sets within one round: the requests differ, so every site refuses the others' keys
    round_c = secrets.token_bytes(32)
    three = advertise(clients[:3], sessions[:3], round_c, sites=NAMES[:3])
    four = advertise(clients[3:], sessions[3:], round_c)
    expect(C.INVALID_ARGUMENT, lambda: mask(clients[:1], sessions[:1], round_c, three + four), "one per site")
    # receipts of round A replayed in round B
    masked_a = mask(clients, sessions, round_a, ads_a)
    masked_b = mask(clients, sessions, round_b, ads_b)
    receipts = [m.receipt for m in masked_b[:3]] + [masked_a[3].receipt]
    expect(C.PERMISSION_DENIED, lambda: unmask(clients[:1], sessions[:1], round_b, receipts), "signature")
    # a round masked again under another key set is refused, the vector is not re-masked
    expect(C.PERMISSION_DENIED, lambda: mask(clients[:1], sessions[:1], round_a, ads_b), "another round")
    assert [snapshot(c.ledger_path) for c in configs] == before


def test_a_site_outside_the_peers_and_a_garbage_round_key_are_refused(federation, snapshot, tmp_path):
    configs, clients, sessions = federation()
    before = [snapshot(c.ledger_path) for c in configs]
    expect(C.PERMISSION_DENIED, lambda: advertise(clients[:1], sessions[:1], secrets.token_bytes(32),
                                                  sites=NAMES[:3] + ["intruder"]), "not peers")
    expect(C.PERMISSION_DENIED, lambda: advertise(clients[:1], sessions[:1], secrets.token_bytes(32),
                                                  sites=NAMES[:2]), "secagg_min_sites")
    # s3 is compromised: it signs a low-order X25519 key (all zeros) with its real signing key
    round_id = secrets.token_bytes(32)
    ads = advertise(clients, sessions, round_id)
    signer = ensure_signing_key(configs[3].signing_key_path)
    bad = pb.SecAggAdvertisement()
    bad.CopyFrom(ads[3])
    bad.public_key = bytes(32)
    bad.signature = signer.sign(advertisement_message("s3", round_id, bad.request_sha256, bad.public_key))
    expect(C.INVALID_ARGUMENT, lambda: mask(clients[:1], sessions[:1], round_id, ads[:3] + [bad]),
           "not a valid X25519")
    assert [snapshot(c.ledger_path) for c in configs] == before


def test_the_charge_is_for_the_coalitions_the_policy_accepts(federation):
    configs, clients, sessions = federation({"max_epsilon": 5.0, "budget_epsilon": 100.0, "secagg_colluders": 1})
    expect(C.PERMISSION_DENIED, lambda: advertise(clients[:1], sessions[:1], secrets.token_bytes(32), epsilon=1.0,
                                                  delta=1e-5, colluders=0), "secagg_colluders")
    ads, masked, seeds, _ = run_round(clients, sessions, epsilon=1.0, delta=1e-5, colluders=1)
    assert all(s.honest_shares == 3 and a.site_colluders == 1 for s, a in zip(seeds, ads))
    # a coalition of the analyst and one site removes that site's share: three shares remain, and they
    # alone meet (1, 1e-5); the ledger charged exactly that event
    sigma = ads[0].share_sigma
    three = Accountant([DiscreteGaussianSum(sigma, 3)], value_discretization_interval=discretization_for(1.0))
    assert three.delta(1.0) <= 1e-5 and three.epsilon(1e-5) == pytest.approx(1.0, rel=1e-3)
    assert Accountant([DiscreteGaussianSum(sigma, 2)]).epsilon(1e-5) > 1.15  # a larger coalition: weaker
    for c, s in zip(clients, sessions):
        budget = c.Budget(pb.BudgetRequest(dataset="test"))
        assert budget.budget.releases == 1
        assert budget.budget.epsilon_spent == pytest.approx(three.epsilon(budget.budget.budget_delta), rel=1e-2)
    # the self seeds match the commitments every site signed for this round's transcript
    transcript = round_transcript(ads[0].round_id, ads[0].request_sha256, {a.site: a.public_key for a in ads})
    for m, s in zip(masked, seeds):
        assert m.receipt.commitment == seed_commitment(transcript, s.self_seed)


def test_a_proposed_share_is_checked_not_trusted(federation, snapshot):
    """The analyst proposes the share parameter (one calibration instead of one per site): each site checks it
    with its accountant, refuses a share too small for the honest shares to meet (epsilon, delta), and accepts
    the calibrated one with the same request digest as its own calibration."""
    configs, clients, sessions = federation({"max_epsilon": 5.0, "budget_epsilon": 100.0, "secagg_colluders": 1})
    before = [snapshot(c.ledger_path) for c in configs]
    own = advertise(clients, sessions, secrets.token_bytes(32), epsilon=1.0, delta=1e-5, colluders=1,
                    score_sums=True)
    sigma = own[0].share_sigma
    assert sigma == pytest.approx(share_sigma(1.0, 1e-5, 3, parts=((1, 1.0), (2, 3.0))), rel=1e-12)
    assert own[0].sums_share_sigma == pytest.approx(6 * sigma, rel=1e-12)
    for small in (sigma * 0.999, 1e-3):
        expect(C.INVALID_ARGUMENT, lambda: advertise(clients[:1], sessions[:1], secrets.token_bytes(32), epsilon=1.0,
                                                     delta=1e-5, colluders=1, score_sums=True, share_sigma=small),
               "share_sigma")
    expect(C.INVALID_ARGUMENT, lambda: advertise(clients[:1], sessions[:1], secrets.token_bytes(32), epsilon=1.0,
                                                 delta=1e-5, colluders=1, share_sigma=float("nan")), "share_sigma")
    proposed = advertise(clients, sessions, secrets.token_bytes(32), epsilon=1.0, delta=1e-5, colluders=1,
                         score_sums=True, share_sigma=sigma)
    assert [a.request_sha256 for a in proposed] == [a.request_sha256 for a in own]
    assert [snapshot(c.ledger_path) for c in configs] == before


def test_a_sites_calibration_cache_is_its_own_and_an_edited_entry_is_not_trusted(tmp_path, tls_pki, client_factory):
    """A site keeps its share checks in its state folder and reads them back only when intact: a cache file edited to
    say a too-small share meets the target (its hash left as the site wrote it) is not believed, the share is checked
    again and refused, and the file then holds the site's own answers."""
    from dsroc.secagg.calibrations import CalibrationCache, cached_shares_meet, calibration_key
    from site_node.store.calibrations import CALIBRATIONS_FILE

    tls = {"cert": str(tls_pki.server_cert), "key": str(tls_pki.server_key), "client_ca": str(tls_pki.ca_cert)}
    configs = peered_configs(tmp_path / "fed", tls, {"max_epsilon": 5.0, "budget_epsilon": 100.0})
    sigma = share_sigma(1.0, 1e-5, len(NAMES))
    small = 0.5 * sigma
    forged = CalibrationCache()
    assert cached_shares_meet(small, 1.0, 1e-5, len(NAMES), cache=forged) is False
    body = json.loads(forged.dumps())
    body["entries"][0]["value"] = True
    for c in configs:
        c.state_dir.mkdir(parents=True, exist_ok=True)
        (c.state_dir / CALIBRATIONS_FILE).write_text(json.dumps(body))
    with contextlib.ExitStack() as stack:
        clients = [tls_client(client_factory, stack.enter_context(running_server(c)).bound_address, tls_pki)
                   for c in configs]
        sessions = [c.open() for c in clients]
        expect(C.INVALID_ARGUMENT, lambda: advertise(clients[:1], sessions[:1], secrets.token_bytes(32), epsilon=1.0,
                                                     delta=1e-5, share_sigma=small), "share_sigma")
        ads = advertise(clients, sessions, secrets.token_bytes(32), epsilon=1.0, delta=1e-5, share_sigma=sigma)
        assert {a.share_sigma for a in ads} == {sigma}
    stored = CalibrationCache.loads((configs[0].state_dir / CALIBRATIONS_FILE).read_bytes())
    parts = ((1, 1.0),)
    assert stored.get(calibration_key("shares_meet", sigma=small, epsilon=1.0, delta=1e-5, honest=len(NAMES),
                                      parts=parts)) is False
    assert stored.get(calibration_key("shares_meet", sigma=sigma, epsilon=1.0, delta=1e-5, honest=len(NAMES),
                                      parts=parts)) is True
