"""A refused request changes nothing (issue 36): for every RPC, every store snapshotted, a refused call, compared.

The stores: the ledger (every table: releases, holds, hold usage, survivor uploads, models, ROC-GLM evaluations), the
disclosure store, the model approvals, the audit log and the daemon's memory (sessions and what each received, the
shared score cache, opened score releases, secagg rounds). The log is designed to record refusals: a refused call
adds its own refusal record (a combined call also its refusing part's, every new record a refusal) and nothing else.
Each RPC is refused for bad input, the budget or a permission, on a daemon with releases, holds, uploads and
answers already made, over mutual TLS.
"""

from __future__ import annotations

import gc
import os
import sqlite3

import grpc
import numpy as np
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.interceptors.audit import read_audit
from site_node.protocols.histogram.secagg import SecAggProtocol
from site_node.testing import running_server

from ..conftest import TOKENS, peer_release

NEG, POS = pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES
C = grpc.StatusCode
EDGES = pb.Values(values=np.linspace(0, 1, 6).tolist())


def _tables(path) -> dict:
    with sqlite3.connect(path) as db:
        names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return {n: sorted(db.execute(f"SELECT * FROM {n}").fetchall(), key=repr) for n in names}


def _memory(server) -> dict:
    site = server.site
    sessions = {sid: (s.analyst, sorted((k, v.digest, v.placements is None, len(v.models)) for k, v in s.survivors.items()))
                for sid, (s, _) in site.sessions._sessions.items()}
    (secagg,) = [o for o in gc.get_objects() if isinstance(o, SecAggProtocol) and o.site is site]
    rounds = {a: [(rid, r.masked is None) for rid, r in rs.items()] for a, rs in secagg._rounds._rounds.items()}
    return {"sessions": sessions, "scored": list(site._scored), "releases": list(site.releases._entries),
            "rounds": rounds}


def _stores(server) -> dict:
    config = server.config
    return {"ledger": _tables(config.ledger_path), "disclosure": _tables(config.disclosure_path),
            "approvals": _tables(config.approvals_path), "memory": _memory(server)}


@pytest.fixture
def daemon(make_site_config):
    config = make_site_config(policy={"protocols": ["histogram", "paper", "boyd", "secagg"], "budget_epsilon": 15.0,
                                      "max_epsilon": 10.0})
    with running_server(config) as server:
        yield server


def test_every_rpc_refused_changes_no_store(daemon, client_factory):
    alice, bob = client_factory(daemon), client_factory(daemon, TOKENS["bob"])  # bob may use no dataset
    stranger = client_factory(daemon, "not-a-token")
    # A daemon with history: a paper validation's releases, uploads and answers, a histogram release, holds.
    s = alice.open()
    _, noisy0, _ = alice.release(s, NEG, epsilon=4.0)
    _, noisy1, _ = alice.release(s, POS, epsilon=4.0)
    alice.upload_both(s, noisy0, noisy1, answers=pb.PaperAggregatesRequest(
        calibration=pb.CalibrationPartsRequest(edges=EDGES), confusion=pb.ConfusionPartsRequest(threshold=0.5),
        rocglm=pb.RocGlmPartsRequest(theta=[0.0, 1.0])))
    alice.ReleaseHistogram(pb.HistogramRequest(session_id=s, epsilon=8.0, delta=1e-5, n_bins=10))
    held = alice.PrepareRelease(pb.PrepareRequest(histogram=pb.HistogramRequest(
        session_id=s, epsilon=1.0, delta=1e-5, n_bins=20))).reservation_id
    fresh = alice.open()  # nothing uploaded in it
    peer = peer_release(NEG, noisy0)

    def upload(session, values, n=None, answers=None, both=False):
        values = np.asarray(values, dtype=float)
        first = pb.SurvivorChunk(header=pb.SurvivorHeader(session_id=session, score_class=NEG,
                                                          n=values.size if n is None else n, segments=[peer],
                                                          answers=answers), scores=values.tobytes())
        return (alice.UploadSurvivors if both else alice.UploadSurvivor)(iter([first]))

    histogram = lambda **kw: alice.ReleaseHistogram(pb.HistogramRequest(**{"session_id": s, "delta": 1e-5, **kw}))
    calls = {
        "Describe": (lambda: stranger.Describe(pb.DescribeRequest()), C.UNAUTHENTICATED),
        "OpenSession": (lambda: bob.open(), C.PERMISSION_DENIED),
        "OpenSession (bad outcome)": (lambda: alice.open(outcome="pred"), C.INVALID_ARGUMENT),
        "OpenSession (hold over the budget)": (lambda: alice.OpenSession(pb.OpenSessionRequest(
            dataset="test", outcome="y", score=pb.ScoreSource(score_column="pred"),
            prepare=pb.PrepareRequest(scores=pb.ReleaseRequest(epsilon=10.0, delta=0.01))) ), C.RESOURCE_EXHAUSTED),
        "CloseSession": (lambda: bob.CloseSession(pb.CloseSessionRequest(session_id=s)), C.NOT_FOUND),
        "Budget": (lambda: bob.Budget(pb.BudgetRequest(dataset="test")), C.PERMISSION_DENIED),
        "PrepareRelease (over the budget)": (lambda: alice.PrepareRelease(pb.PrepareRequest(
            histogram=pb.HistogramRequest(session_id=s, epsilon=9.0, delta=1e-5, n_bins=10))), C.RESOURCE_EXHAUSTED),
        "PrepareRelease (bad hold_seconds)": (lambda: alice.PrepareRelease(pb.PrepareRequest(
            histogram=pb.HistogramRequest(session_id=s, epsilon=1.0, delta=1e-5, n_bins=8), hold_seconds=-1.0)),
            C.INVALID_ARGUMENT),
        "Sensitivity": (lambda: bob.Sensitivity(pb.SensitivityRequest(session_id=s)), C.NOT_FOUND),
        "ReleaseNoisyScores": (lambda: alice.release(s, NEG, epsilon=11.0), C.PERMISSION_DENIED),
        "ReleaseNoisyScores (over the budget)": (lambda: alice.release(s, NEG, epsilon=10.0, delta=0.01), C.RESOURCE_EXHAUSTED),
        "UploadSurvivor": (lambda: upload(s, noisy0, n=noisy0.size + 1), C.INVALID_ARGUMENT),
        "RocGlmParts": (lambda: alice.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0.0, float("nan")])),
                        C.INVALID_ARGUMENT),
        "PlacementMoments": (lambda: alice.PlacementMoments(pb.PlacementMomentsRequest(
            session_id=s, global_means=pb.GlobalMeans(mean_pv0=2.0))), C.INVALID_ARGUMENT),
        "BrierParts": (lambda: bob.BrierParts(pb.BrierPartsRequest(session_id=s)), C.NOT_FOUND),
        "CalibrationParts": (lambda: alice.CalibrationParts(pb.CalibrationPartsRequest(
            session_id=s, edges=pb.Values(values=[0.0, 0.123456, 1.0]))), C.INVALID_ARGUMENT),
        "ConfusionParts": (lambda: alice.ConfusionParts(pb.ConfusionPartsRequest(session_id=s, threshold=0.123456)),
                           C.INVALID_ARGUMENT),
        "PaperAggregates": (lambda: alice.PaperAggregates(pb.PaperAggregatesRequest(
            session_id=fresh, confusion=pb.ConfusionPartsRequest(threshold=0.3),
            calibration=pb.CalibrationPartsRequest(edges=EDGES))), C.FAILED_PRECONDITION),
        "UploadSurvivors": (lambda: upload(fresh, noisy0, both=True, answers=pb.PaperAggregatesRequest(
            confusion=pb.ConfusionPartsRequest(threshold=0.3))), C.INVALID_ARGUMENT),
        "ReleaseHistogram": (lambda: histogram(epsilon=1.0, n_bins=7), C.PERMISSION_DENIED),
        "ReleaseHistogram (over the budget)": (lambda: histogram(epsilon=9.0, n_bins=50), C.RESOURCE_EXHAUSTED),
        "ReleaseSurvival": (lambda: alice.ReleaseSurvival(pb.SurvivalRequest(session_id=s, epsilon=1.0, delta=1e-5)),
                            C.FAILED_PRECONDITION),
        "ReleaseBoydStatistics": (lambda: alice.ReleaseBoydStatistics(pb.BoydRequest(
            session_id=s, epsilon=1.0, delta=1e-5, count_share=2.0)), C.INVALID_ARGUMENT),
        "SecAggAdvertise": (lambda: alice.SecAggAdvertise(pb.SecAggAdvertiseRequest(
            session_id=s, round_id=os.urandom(32), epsilon=1.0, delta=1e-5, n_bins=10,
            sites=[daemon.config.name, "testpeer"])), C.PERMISSION_DENIED),
        "SecAggMask": (lambda: alice.SecAggMask(pb.SecAggMaskRequest(session_id=s, round_id=os.urandom(32))),
                       C.FAILED_PRECONDITION),
        "SecAggConfirm": (lambda: alice.SecAggConfirm(pb.SecAggConfirmRequest(session_id=s, round_id=os.urandom(32))),
                          C.FAILED_PRECONDITION),
        "SecAggUnmask": (lambda: alice.SecAggUnmask(pb.SecAggUnmaskRequest(session_id=s, round_id=os.urandom(32))),
                         C.FAILED_PRECONDITION),
    }
    served = {m.name for m in pb.DESCRIPTOR.services_by_name["SiteService"].methods}
    # every RPC is refused at least once, but CancelReservation, which refuses nothing (below)
    assert {name.split(" ")[0] for name in calls} == served - {"CancelReservation"}
    for name, (call, code) in calls.items():
        before, logged = _stores(daemon), read_audit(daemon.config.audit_path)
        with pytest.raises(grpc.RpcError) as error:
            call()
            pytest.fail(f"{name} was not refused")
        assert error.value.code() == code, f"{name}: {error.value.code()} {error.value.details()}"
        assert _stores(daemon) == before, name
        after = read_audit(daemon.config.audit_path)
        assert after[:len(logged)] == logged, name
        new = after[len(logged):]
        assert new and new[0]["call"] == name.split(" ")[0], (name, new)
        assert all(r["decision"] == code.name for r in new[:1]) and all(r["decision"] != "OK" for r in new), (name, new)
    # CancelReservation of another analyst's hold, or of one that does not exist, cancels nothing
    for client, reservation in ((bob, held), (alice, "0" * 32)):
        before = _stores(daemon)
        assert not client.CancelReservation(pb.CancelReservationRequest(reservation_id=reservation)).cancelled
        assert _stores(daemon) == before
    assert alice.CancelReservation(pb.CancelReservationRequest(reservation_id=held)).cancelled  # hers, still held
