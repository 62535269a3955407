"""Analysts against each other and the caps: others' sessions, concurrent releases, sessions and workers hogged."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest

from dsroc import analytic_gaussian_sigma, gdp_mu
from dsroc.v1 import site_pb2 as pb
from site_node.store.ledger import budget_mu
from site_node.testing import running_server

from ..conftest import peer_release
from .common import NEG, POS, C, ALICE, CAROL, f64, healthy, refused, audit_records

@pytest.fixture
def two_analysts_config(make_site_config):
    return make_site_config(analysts={"alice": ALICE, "carol": CAROL})  # each allowed every dataset


@pytest.fixture
def two_analysts(two_analysts_config):
    with running_server(two_analysts_config) as srv:
        yield srv


def test_another_analysts_session_is_not_found(two_analysts, client_factory, snapshot):
    alice, carol = client_factory(two_analysts), client_factory(two_analysts, CAROL)
    s = alice.open()
    alice.release(s, NEG)
    before = snapshot(two_analysts.config.ledger_path)
    calls = [
        lambda: carol.Sensitivity(pb.SensitivityRequest(session_id=s)),
        lambda: carol.release(s, POS),
        lambda: carol.upload(s, NEG, [0.2, 0.4]),
        lambda: carol.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1])),
        lambda: carol.PlacementMoments(pb.PlacementMomentsRequest(session_id=s)),
        lambda: carol.BrierParts(pb.BrierPartsRequest(session_id=s)),
        lambda: carol.CalibrationParts(pb.CalibrationPartsRequest(session_id=s)),
        lambda: carol.ConfusionParts(pb.ConfusionPartsRequest(session_id=s, threshold=0.5)),
        lambda: carol.CloseSession(pb.CloseSessionRequest(session_id=s)),
    ]
    for call in calls:
        # The same answer as for a session that never existed: carol learns nothing about alice's.
        assert "does not exist or has expired" in refused(call, C.NOT_FOUND)
    assert snapshot(two_analysts.config.ledger_path) == before
    assert alice.BrierParts(pb.BrierPartsRequest(session_id=s)).n > 0  # carol's CloseSession did not close it
    assert [e["analyst"] for e in audit_records(two_analysts)][-10:-1] == ["carol"] * 9


def test_the_theta_cap_holds_under_concurrency(make_site_config, client_factory, snapshot):
    cap = 5
    with running_server(make_site_config(policy={"max_glm_evaluations": cap}), max_workers=16) as srv:
        c = client_factory(srv)
        s = c.open()
        c.upload(s, NEG, np.linspace(0.01, 0.99, 120))

        def evaluate(i):
            try:
                return c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0.01 * i, 1])).evaluations_left
            except grpc.RpcError as exc:
                return exc.code()

        with ThreadPoolExecutor(8) as pool:  # at most 8 at once: the per-analyst call limit is not hit
            results = list(pool.map(evaluate, range(48)))
        answered = sorted(r for r in results if isinstance(r, int))
        assert answered == list(range(cap))  # each count 4..0 handed out exactly once
        assert results.count(C.RESOURCE_EXHAUSTED) == 48 - cap
        used = snapshot(srv.config.ledger_path)[1]
        assert [row[-1] for row in used] == [cap]
        assert healthy(srv)


def test_concurrent_first_releases_cannot_overspend_the_budget(make_site_config, client_factory, snapshot):
    policy = {"max_epsilon": 2.0, "max_delta": 0.01, "budget_epsilon": 2.0, "budget_delta": 0.01}
    with running_server(make_site_config(policy=policy), max_workers=16) as srv:
        # Each release alone fits the budget; any two together exceed it (independent check with dsroc).
        epsilons = [2.0 - 1e-3 * i for i in range(8)]
        mus = [1.0 / analytic_gaussian_sigma(e, 0.01, 1.0) for e in epsilons]
        assert max(mus) <= budget_mu(2.0, 0.01) * (1 + 1e-9) < gdp_mu(sorted(mus)[:2])

        def release(eps):
            c = client_factory(srv)
            try:
                return c.release(c.open(), NEG, epsilon=eps)[0].mu_charged
            except grpc.RpcError as exc:
                return exc.code()

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(release, epsilons))
        assert sum(isinstance(r, float) and r > 0 for r in results) == 1
        assert results.count(C.RESOURCE_EXHAUSTED) == 7
        assert srv.ledger.budget(srv.config.datasets["test"].population, srv.config.policy).releases == 1
        releases = snapshot(srv.config.ledger_path)[0]
        assert len(releases) == 1  # the charged release and nothing else was stored


def test_the_model_cap_holds_under_concurrency(make_site_config, client_factory, snapshot):
    with running_server(make_site_config(policy={"max_models": 2}), max_workers=16) as srv:
        def open_model(i):
            c = client_factory(srv)
            model = pb.GlmModel(link=pb.LINK_LOGIT, intercept=-i, coefficients=[pb.Coefficient(name="grade", value=1)])
            try:
                return c.open(model=model)
            except grpc.RpcError as exc:
                return exc.code()

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(open_model, range(8)))
        assert sum(isinstance(r, str) for r in results) == 2 and results.count(C.RESOURCE_EXHAUSTED) == 6
        assert len(snapshot(srv.config.ledger_path)[3]) == 2


def test_one_analyst_cannot_take_every_session(make_site_config, client_factory):
    config = make_site_config(analysts={"alice": ALICE, "carol": CAROL},
                              site={"max_sessions": 4, "max_sessions_per_analyst": 2})
    with running_server(config) as srv:
        alice, carol = client_factory(srv), client_factory(srv, CAROL)
        first = alice.open()
        alice.open()
        refused(alice.open, C.RESOURCE_EXHAUSTED, "limit per analyst")
        assert carol.open() and carol.open()
        alice.CloseSession(pb.CloseSessionRequest(session_id=first))
        assert alice.open()


def test_one_analyst_cannot_occupy_every_worker(two_analysts_config, client_factory, peer_release):
    import threading

    with running_server(two_analysts_config, max_workers=4) as srv:  # 2 calls at once per analyst
        alice, carol = client_factory(srv), client_factory(srv, CAROL)
        s = alice.open()
        stall = threading.Event()

        def stalled():  # a header, then nothing until released
            yield pb.SurvivorChunk(header=pb.SurvivorHeader(session_id=s, score_class=NEG,
                                                            segments=[peer_release(NEG, [0.5])]), scores=f64([0.5]))
            stall.wait(30)

        calls = [alice.stub.UploadSurvivor.future(stalled(), metadata=alice.metadata, timeout=60) for _ in range(2)]
        # Wait until both streams have reached the servicer; under a loaded machine that can take seconds, so the
        # budget is generous, and a stream that ended early is reported rather than waited for.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ended = [call for call in calls if call.done()]
            assert not ended, f"a stalled upload ended before the limit applied: {ended[0].exception()!r}"
            try:
                alice.Describe(pb.DescribeRequest())
            except grpc.RpcError as exc:
                assert exc.code() == C.RESOURCE_EXHAUSTED and "calls in progress" in exc.details()
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the per-analyst call limit never applied within 30 s")
        # The others and the health probe are still served while alice's streams hang.
        assert carol.Describe(pb.DescribeRequest()).site_name and healthy(srv)
        stall.set()
        for call in calls:
            assert call.result().n_received == 1
        assert alice.Describe(pb.DescribeRequest()).site_name  # her slots are back
        # Server-streamed answers give their slot back too, also when the client stops reading.
        for _ in range(3):
            alice.release(s, NEG)
        for _ in range(3):
            # A cancelled stream gives its slot back when the server notices the cancellation, which can
            # lag behind the client under load: wait for it rather than race it.
            deadline = time.monotonic() + 10
            while True:
                stream = alice.ReleaseNoisyScores(pb.ReleaseRequest(session_id=s, score_class=POS, epsilon=5,
                                                                    delta=0.01, chunk_size=1))
                try:
                    next(stream)
                    break
                except grpc.RpcError as exc:
                    assert exc.code() == C.RESOURCE_EXHAUSTED and time.monotonic() < deadline
                    time.sleep(0.1)
            stream.cancel()
        deadline = time.monotonic() + 10
        while True:
            try:
                assert alice.Describe(pb.DescribeRequest()).site_name
                break
            except grpc.RpcError as exc:
                assert exc.code() == C.RESOURCE_EXHAUSTED and time.monotonic() < deadline
                time.sleep(0.1)
        decisions = [e["decision"] for e in audit_records(srv) if e["analyst"] == "alice"]
        assert "RESOURCE_EXHAUSTED" in decisions  # refused calls are audited like every other
