"""Ledger (Gaussian-DP accounting, release-once, persistence) and the audit log."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm

from dsroc.v1 import site_pb2 as pb
from site_node.config import Policy
from site_node.errors import ResourceExhausted
from dsroc.privacy.accounting import Gaussian
from site_node.store.ledger import ReleaseKey, SqliteLedger, budget_mu
from site_node.testing import running_server

from ..conftest import channel_to

NEG, POS = pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES


def gdp_delta_direct(mu, eps):
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def test_budget_mu_is_the_largest_mu_within_the_budget():
    mu = budget_mu(3.0, 1e-5)
    assert gdp_delta_direct(mu, 3.0) <= 1e-5 * (1 + 1e-9)
    assert gdp_delta_direct(mu * 1.001, 3.0) > 1e-5


def test_composition_and_refusal_in_the_ledger(tmp_path):
    policy = Policy(budget_epsilon=3.619, budget_delta=1e-5, max_epsilon=1.0, max_delta=1e-5)
    ledger = SqliteLedger(tmp_path / "ledger.sqlite")
    tau = 3.7306316348  # SPEC: (Delta=1, eps=1, delta=1e-5) -> sigma
    draws = []

    def make(seed):
        draws.append(seed)
        return np.arange(8.0).tobytes(), 5, 3

    def release(i, sigma):
        key = ReleaseKey("d", "column:p", "y", "scores", f'{{"i": {i}}}')  # distinct releases
        return ledger.release(key, dataset="d", analyst="a", events=(Gaussian(sigma),), epsilon=1.0, delta=1e-5,
                              rule="range", fingerprint="f", policy=policy, make=make, store=False)

    # SPEC vector: ten (1, 1e-5) releases compose to about epsilon 3.619 at delta 1e-5, so ten fit...
    for i in range(10):
        release_, charged = release(i, tau)
        assert charged and release_.mu == pytest.approx(1.0 / tau)
    status = ledger.budget("d", policy)
    assert status.releases == 10 and status.mu_spent == pytest.approx(math.sqrt(10) / tau, rel=1e-8)
    assert status.epsilon_spent == pytest.approx(3.619, abs=2e-3)
    assert gdp_delta_direct(status.mu_spent, 3.619) == pytest.approx(status.delta_spent, rel=1e-6)
    # ... and an eleventh does not; nothing is drawn or recorded.
    with pytest.raises(ResourceExhausted, match="remaining about epsilon"):
        release(10, 2 * tau)
    assert len(draws) == 10 and len(set(draws)) == 10 and ledger.budget("d", policy).releases == 10
    assert ledger.budget("other", policy).mu_spent == 0  # budgets are per population
    ledger.close()


def test_release_once_across_a_daemon_restart(site_config, client_cls, snapshot):
    with running_server(site_config) as srv:
        c = client_cls(srv)
        s = c.open()
        info0, neg, _ = c.release(s, NEG, epsilon=2.0)
        _, pos, _ = c.release(s, POS, epsilon=2.0)
        c.close()
    before = snapshot(site_config.ledger_path)
    with running_server(site_config) as srv:
        c = client_cls(srv)
        s = c.open()
        again, neg2, _ = c.release(s, NEG, epsilon=2.0)
        _, pos2, _ = c.release(s, POS, epsilon=2.0)
        assert again.repeated and again.mu_charged == 0 and again.release_id == info0.release_id
        np.testing.assert_array_equal(neg, neg2)
        np.testing.assert_array_equal(pos, pos2)
        assert snapshot(site_config.ledger_path) == before
        # A different epsilon is a new release with new noise and a new charge.
        other, neg3, _ = c.release(s, NEG, epsilon=3.0)
        assert other.mu_charged > 0 and not np.array_equal(neg3, neg)
        assert c.Budget(pb.BudgetRequest(dataset="test")).budget.releases == 2
        c.close()


def test_negatives_and_positives_get_independent_noise(make_site_config, client_cls):
    from site_node.cli.init import sample_dataset

    frame = sample_dataset(400, seed=2)
    frame["pred"] = 0.5  # identical true scores: the noisy values are the noise itself
    frame["y"] = np.arange(400) % 2
    config = make_site_config(frames={"test": frame})
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        info, neg, _ = c.release(s, NEG, epsilon=1.0)
        _, pos, _ = c.release(s, POS, epsilon=1.0)
        assert not np.array_equal(neg, pos)
        # Same distribution N(0.5, tau^2), different draws: a two-sample KS test does not reject, and
        # both samples look like the noise they should be.
        from scipy.stats import kstest, ks_2samp

        assert ks_2samp(neg, pos).pvalue > 1e-4
        assert kstest((neg - 0.5) / info.tau, "norm").pvalue > 1e-4
        c.close()


def test_audit_log_records_requests_without_patient_data(server, client):
    s = client.open()
    info, noisy, _ = client.release(s, NEG, epsilon=4.0)
    with pytest.raises(Exception):
        client.release(s, NEG, epsilon=40.0)
    lines = server.config.audit_path.read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    assert [e["call"] for e in entries] == ["OpenSession", "ReleaseNoisyScores", "ReleaseNoisyScores"]
    assert all(set(e) == {"time", "analyst", "call", "peer", "parameters", "decision", "message", "privacy_cost"}
               for e in entries)
    ok, refused = entries[1], entries[2]
    assert ok["decision"] == "OK" and ok["analyst"] == "alice" and ok["privacy_cost"] == pytest.approx(info.mu)
    assert ok["parameters"]["epsilon"] == 4.0 and ok["parameters"]["release_id"] == info.release_id
    assert refused["decision"] == "PERMISSION_DENIED" and refused["privacy_cost"] == 0
    text = server.config.audit_path.read_text()
    assert not any(f"{v:.6f}"[:8] in text for v in noisy[:20])  # no released value in the log
    assert "token-of-alice" not in text


def test_a_changed_dataset_does_not_get_a_stale_release(site_config, client_cls, snapshot):
    import pandas as pd

    with running_server(site_config) as srv:
        c = client_cls(srv)
        c.release(c.open(), NEG, epsilon=2.0)
        c.close()
    path = site_config.datasets["test"].path
    frame = pd.read_csv(path)
    frame.loc[0, "pred"] = 1 - frame.loc[0, "pred"]
    frame.to_csv(path, index=False)
    before = snapshot(site_config.ledger_path)
    with running_server(site_config) as srv:
        c = client_cls(srv)
        s = c.open()
        import grpc

        with pytest.raises(grpc.RpcError) as info:
            c.release(s, NEG, epsilon=2.0)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "changed" in info.value.details()
        assert snapshot(site_config.ledger_path) == before
        c.close()


def test_a_sealed_release_that_was_altered_is_refused(site_config, client_cls, snapshot):
    import sqlite3

    import grpc

    with running_server(site_config) as srv:
        c = client_cls(srv)
        c.release(c.open(), NEG, epsilon=2.0)
        c.close()
    with sqlite3.connect(site_config.ledger_path) as db:  # one bit of the sealed points flipped on disk
        (payload,) = db.execute("SELECT payload FROM releases").fetchone()
        altered = bytearray(payload)
        altered[-1] ^= 1
        db.execute("UPDATE releases SET payload = ?", (bytes(altered),))
    before = snapshot(site_config.ledger_path)
    with running_server(site_config) as srv:
        c = client_cls(srv)
        with pytest.raises(grpc.RpcError) as info:
            c.release(c.open(), NEG, epsilon=2.0)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "cannot be replayed" in info.value.details()
        assert snapshot(site_config.ledger_path) == before
        c.close()


def test_concurrent_requests_for_one_release_charge_once(site_config, client_factory):
    with running_server(site_config, max_workers=16) as server:  # 8 calls at once per analyst
        _concurrent_release(server, client_factory)


def _concurrent_release(server, client_factory):
    from concurrent.futures import ThreadPoolExecutor

    def request(_):
        c = client_factory(server)
        info, values, _ = c.release(c.open(), NEG, epsilon=3.0)
        return info.release_id, info.mu_charged, values

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(request, range(8)))
    assert len({r[0] for r in results}) == 1
    assert sorted(r[1] > 0 for r in results) == [False] * 7 + [True]
    assert all(np.array_equal(r[2], results[0][2]) for r in results)
    assert server.ledger.budget(server.config.datasets["test"].population, server.config.policy).releases == 1


def test_health_turns_not_serving_on_shutdown(site_config):
    import threading

    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    seen = []
    with running_server(site_config) as srv:
        channel = channel_to(srv)
        stream = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service="dsroc.v1.SiteService"))
        first = threading.Event()

        def watch():
            try:
                for reply in stream:
                    seen.append(reply.status)
                    first.set()
            except grpc.RpcError:
                pass

        thread = threading.Thread(target=watch)
        thread.start()
        assert first.wait(10)
    thread.join(10)
    channel.close()
    S = health_pb2.HealthCheckResponse
    assert seen[0] == S.SERVING and S.NOT_SERVING in seen


def test_evaluation_counts_commit_unsynced_and_everything_else_synced(tmp_path):
    # The theta-evaluation counter commits without an fsync; the connection must go back to
    # synchronous=FULL (2) for the releases and charges, also when the cap refuses the evaluation.
    import sqlite3

    ledger = SqliteLedger(tmp_path / "ledger.sqlite")
    key = ("population", "column:pred", "y", "digest")
    assert ledger.use_evaluation(key, 2, query="a") == 1
    assert ledger._db.execute("PRAGMA synchronous").fetchone() == (2,)
    assert ledger.use_evaluation(key, 2, query="b") == 0
    with pytest.raises(ResourceExhausted):
        ledger.use_evaluation(key, 2, query="c")
    assert ledger._db.execute("PRAGMA synchronous").fetchone() == (2,)
    # the counts are committed: another connection (a restarted daemon) sees them
    other = sqlite3.connect(tmp_path / "ledger.sqlite")
    assert other.execute("SELECT used FROM glm_evaluations").fetchall() == [(2,)]
    assert ledger.evaluations_left(key, 2) == 0
