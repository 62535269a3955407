"""An attacker-analyst with a valid token against a real daemon: huge and malformed requests, other
analysts' sessions, concurrency against the caps and the budget, and the audit log's completeness."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dsroc import analytic_gaussian_sigma, gdp_mu
from dsroc.v1 import site_pb2 as pb
from site_node.cli import build_parser
from site_node.config import ConfigError
from site_node.store.ledger import budget_mu
from site_node.server import SiteServer, is_loopback
from site_node.testing import running_server, site_stub

from .conftest import channel_to, peer_release

NEG, POS = pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES
C = grpc.StatusCode
ROOT = Path(__file__).resolve().parents[2]
ALICE, CAROL = "token-of-alice", "token-of-carol"  # alice as in conftest



def _f64(values) -> bytes:
    """Scores as the wire carries them: little-endian float64 bytes."""
    return np.asarray(values, dtype="<f8").tobytes()

def _healthy(server) -> bool:
    with channel_to(server) as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def _refused(fn, code, match=None):
    with pytest.raises(grpc.RpcError) as info:
        fn()
    assert info.value.code() == code, info.value.details()
    if match:
        assert match in info.value.details(), info.value.details()
    return info.value.details()


def _audit(server) -> list[dict]:
    return [json.loads(line) for line in server.config.audit_path.read_text().splitlines()]


def test_huge_grid_and_bin_counts_are_refused_before_any_allocation(server, client, snapshot):
    s = client.open()
    client.upload(s, NEG, np.linspace(0.01, 0.99, 50))
    before, peak = snapshot(server.config.ledger_path), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    largest = 2**32 - 1  # uint32: a grid or edge array this long would take 32 GB
    _refused(lambda: client.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1],
                                                              grid=pb.GridSpec(n_points=largest))),
             C.PERMISSION_DENIED, "at most 100")
    _refused(lambda: client.CalibrationParts(pb.CalibrationPartsRequest(session_id=s, n_bins=largest)),
             C.PERMISSION_DENIED, "at most 100")
    # The server runs in this process: its peak memory grew by far less than one such array (KiB).
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 200 * 1024
    assert snapshot(server.config.ledger_path) == before
    assert _healthy(server)


def test_undecodable_requests_are_refused_as_invalid_and_audited(server, client):
    unary = client.channel.unary_unary("/dsroc.v1.SiteService/OpenSession")
    details = _refused(lambda: unary(b"\xff\xff\xff", metadata=client.metadata, timeout=10), C.INVALID_ARGUMENT,
                       "could not be parsed")
    streaming = client.channel.stream_unary("/dsroc.v1.SiteService/UploadSurvivor")
    _refused(lambda: streaming(iter([b"\x0a\xff"]), metadata=client.metadata, timeout=10), C.INVALID_ARGUMENT,
             "could not be parsed")
    entries = _audit(server)
    assert [(e["call"], e["decision"], e["analyst"]) for e in entries] == [
        ("OpenSession", "INVALID_ARGUMENT", "alice"), ("UploadSurvivor", "INVALID_ARGUMENT", "alice")]
    assert entries[0]["message"] == details
    assert client.Describe(pb.DescribeRequest()).datasets and _healthy(server)


def test_malformed_survivor_streams(server, client, snapshot):
    s = client.open()
    before = snapshot(server.config.ledger_path)
    # Each stream announces signed releases (checked before any score is read), so that the malformation is reached.
    header = pb.SurvivorHeader(session_id=s, score_class=NEG, n=2, segments=[peer_release(NEG, [0.1, 0.2])])
    two_headers = [pb.SurvivorChunk(header=header, scores=_f64([0.1])), pb.SurvivorChunk(header=header, scores=_f64([0.2]))]
    _refused(lambda: client.UploadSurvivor(iter(two_headers)), C.INVALID_ARGUMENT, "only the first")
    _refused(lambda: client.UploadSurvivor(iter([])), C.INVALID_ARGUMENT, "header")
    _refused(lambda: client.upload(s, 3, [0.1, 0.2]), C.INVALID_ARGUMENT, "score_class")
    _refused(lambda: client.upload(s, NEG, [0.1, float("inf")]), C.INVALID_ARGUMENT, "non-finite")
    _refused(lambda: client.upload(s, NEG, [0.1], n=2**64 - 1), C.INVALID_ARGUMENT, "at most")
    torn = [pb.SurvivorChunk(header=pb.SurvivorHeader(session_id=s, score_class=NEG, n=1,
                                                      segments=[peer_release(NEG, [0.0])]), scores=b"\x00" * 7)]
    _refused(lambda: client.UploadSurvivor(iter(torn)), C.INVALID_ARGUMENT, "multiple of 8 bytes")

    sent = []

    def outgrowing():  # announces 10 scores, then keeps sending
        yield pb.SurvivorChunk(header=pb.SurvivorHeader(session_id=s, score_class=NEG, n=10,
                                                        segments=[peer_release(NEG, [0.5] * 10)]), scores=_f64([0.5] * 10))
        for _ in range(2000):
            sent.append(1)
            yield pb.SurvivorChunk(scores=_f64([0.5] * 1000))

    _refused(lambda: client.UploadSurvivor(outgrowing()), C.INVALID_ARGUMENT, "header.n is 10 but more")
    assert len(sent) < 2000  # refused at the first extra chunk, long before the stream ended
    assert snapshot(server.config.ledger_path) == before
    # Nothing was stored in the session either: the next call is still out of order.
    _refused(lambda: client.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1])), C.FAILED_PRECONDITION)
    assert _healthy(server)


def test_a_negative_chunk_size_on_the_wire_is_capped(server, client):
    s = client.open()
    # chunk_size = -1 encoded as a 10-byte varint: it parses as the largest uint32, which the site caps.
    wire = pb.ReleaseRequest(session_id=s, score_class=NEG, epsilon=5, delta=0.01).SerializeToString()
    wire += b"\x30" + b"\xff" * 9 + b"\x01"
    raw = client.channel.unary_stream("/dsroc.v1.SiteService/ReleaseNoisyScores",
                                      response_deserializer=pb.ReleaseChunk.FromString)
    chunks = list(raw(wire, metadata=client.metadata, timeout=30))
    limit = server.config.policy.max_chunk_scores
    assert chunks[0].info.n == sum(len(c.scores) // 8 for c in chunks)
    assert all(len(c.scores) // 8 <= limit for c in chunks)


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
        assert "does not exist or has expired" in _refused(call, C.NOT_FOUND)
    assert snapshot(two_analysts.config.ledger_path) == before
    assert alice.BrierParts(pb.BrierPartsRequest(session_id=s)).n > 0  # carol's CloseSession did not close it
    assert [e["analyst"] for e in _audit(two_analysts)][-10:-1] == ["carol"] * 9


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
        assert _healthy(srv)


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


def test_release_once_and_a_larger_sensitivity_is_a_new_charge(server, client):
    s = client.open()
    first, v1, _ = client.release(s, NEG, epsilon=4.0)
    again, v2, _ = client.release(client.open(), NEG, epsilon=4.0)
    assert again.mu_charged == 0.0 and again.repeated and np.array_equal(v1, v2)
    wider, v3, _ = client.release(s, NEG, epsilon=4.0, sensitivity=2.0)
    assert wider.sensitivity == 2.0 and wider.mu_charged == pytest.approx(first.mu)  # Delta/tau: same ratio
    assert wider.release_id != first.release_id and not np.array_equal(v1, v3)
    assert np.std(v3 - np.sort(v3)) == 0 and wider.tau == pytest.approx(2 * first.tau)
    assert server.ledger.budget(server.config.datasets["test"].population, server.config.policy).releases == 2
    _refused(lambda: client.release(s, NEG, epsilon=4.0, sensitivity=0.5), C.INVALID_ARGUMENT, "larger sensitivity")


def test_models_are_capped_per_dataset_also_after_a_restart(make_site_config, client_cls, snapshot):
    config = make_site_config(policy={"max_models": 2})

    def model(intercept):
        return pb.GlmModel(link=pb.LINK_LOGIT, intercept=intercept, coefficients=[pb.Coefficient(name="age", value=0.05)])

    with running_server(config) as srv:
        c = client_cls(srv)
        c.open(model=model(-3))
        c.open(model=model(-2))
        c.open(model=model(-3))  # the same model again is free
        before = snapshot(config.ledger_path)
        details = _refused(lambda: c.open(model=model(-2.5)), C.RESOURCE_EXHAUSTED, "at most 2 different models")
        assert "age" not in details
        assert snapshot(config.ledger_path) == before
        assert c.open()  # the administrator's score columns are not models
        assert c.Describe(pb.DescribeRequest()).policy.max_models == 2
        c.close()
    with running_server(config) as srv:
        c = client_cls(srv)
        _refused(lambda: c.open(model=model(-1)), C.RESOURCE_EXHAUSTED)
        assert c.open(model=model(-2))
        c.close()


def test_a_refused_session_records_no_model(make_site_config, client_cls, snapshot):
    config = make_site_config(site={"max_sessions": 1})
    model = pb.GlmModel(link=pb.LINK_PROBIT, coefficients=[pb.Coefficient(name="nodes", value=0.1)])
    with running_server(config) as srv:
        c = client_cls(srv)
        c.open()
        before = snapshot(config.ledger_path)
        _refused(lambda: c.open(model=model), C.RESOURCE_EXHAUSTED, "open sessions")
        assert snapshot(config.ledger_path) == before
        c.close()


def test_the_audit_log_records_every_request_and_only_grows(server, client, client_factory):
    s = client.open()  # 1
    _, noisy, _ = client.release(s, NEG)  # 2
    client.upload(s, NEG, noisy)  # 3
    client.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1]))  # 4
    _refused(lambda: client.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0])), C.INVALID_ARGUMENT)  # 5
    _refused(lambda: client.release(s, NEG, epsilon=99), C.PERMISSION_DENIED)  # 6
    stranger = client_factory(server, token="stolen?")
    _refused(lambda: stranger.upload(s, NEG, noisy), C.UNAUTHENTICATED)  # 7
    _refused(lambda: client_factory(server, token=None).BrierParts(
        pb.BrierPartsRequest(session_id=s)), C.UNAUTHENTICATED)  # 8
    first = server.config.audit_path.read_text()
    entries = _audit(server)
    assert [(e["call"], e["decision"]) for e in entries] == [
        ("OpenSession", "OK"), ("ReleaseNoisyScores", "OK"), ("UploadSurvivor", "OK"), ("RocGlmParts", "OK"),
        ("RocGlmParts", "INVALID_ARGUMENT"), ("ReleaseNoisyScores", "PERMISSION_DENIED"),
        ("UploadSurvivor", "UNAUTHENTICATED"), ("BrierParts", "UNAUTHENTICATED"),
    ]
    assert all({"time", "analyst", "call", "parameters", "decision", "message", "privacy_cost"} <= set(e)
               for e in entries)
    assert entries[1]["privacy_cost"] > 0 and entries[6]["analyst"] == ""
    assert all(e["peer"].startswith("ipv4:127.0.0.1:") for e in entries)  # also who tried without a token
    # Never a released or uploaded score, never a token.
    assert not any(f"{v:.6f}"[:8] in first for v in noisy[:20])
    assert "stolen?" not in first and ALICE not in first
    client.BrierParts(pb.BrierPartsRequest(session_id=s))
    assert server.config.audit_path.read_text().startswith(first)  # appended, nothing rewritten
    assert os.stat(server.config.audit_path).st_mode & 0o077 == 0  # readable by the site account only


_CRASH = """
import os, sys
import numpy as np
sys.path.insert(0, {root!r})
from site_node.config import Policy
from site_node.store.ledger import ReleaseKey, SqliteLedger

ledger = SqliteLedger({path!r})
from dsroc.privacy.accounting import Gaussian

key = ReleaseKey("test", "column:pred", "y", "scores", "{{}}")

def make(seed):
    if {how!r} == "raise":
        raise MemoryError("while drawing")
    os._exit(3)  # the process dies inside the charging transaction

try:
    ledger.release(key, dataset="test", analyst="a", events=(Gaussian(4.0),), epsilon=1.0, delta=1e-3, rule="range",
                   fingerprint="f", policy=Policy(), make=make, store=False)
except MemoryError:
    sys.exit(4)
"""


@pytest.mark.parametrize("how, code", [("crash", 3), ("raise", 4)])
def test_a_crash_while_charging_leaves_neither_charge_nor_release(tmp_path, how, code, snapshot):
    path = tmp_path / "ledger.sqlite"
    proc = subprocess.run([sys.executable, "-c", _CRASH.format(root=str(ROOT), path=str(path), how=how)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert snapshot(path)[0] == ()  # reopened after the crash: no release


def test_plain_text_only_on_loopback(make_site_config):
    assert all(map(is_loopback, ["127.0.0.1:1", "localhost:1", "[::1]:1", "127.0.0.2:0"]))
    assert not any(map(is_loopback, ["0.0.0.0:1", "[::]:1", "10.1.2.3:1", "example.org:1"]))
    with pytest.raises(ConfigError, match="--insecure serves only a loopback address"):
        SiteServer(make_site_config(), insecure=True, address="0.0.0.0:0")


def test_help_texts_explain_every_command():
    parser = build_parser()
    top = parser.format_help()
    commands = ["init", "token", "serve", "check", "budget", "audit", "model", "key", "backup", "restore", "analyst"]
    assert all(c in top for c in commands) and "privacy" in top
    sub = parser._subparsers._group_actions[0].choices
    assert sorted(sub) == sorted(commands)
    serve = sub["serve"].format_help()
    for option in ("--config", "--insecure", "--grace", "--workers", "--listen", "--reset-state"):
        assert option in serve
    assert "loopback" in serve and "SIGTERM" in serve and "NOT_SERVING" in serve
    for name in commands:  # every command says what it does on its own --help, not only in the list
        assert len(sub[name].description or "") > 60, name


def test_other_outcomes_cannot_difference_thresholds_or_edges(make_site_config, client_cls, snapshot):
    from site_node.cli.init import sample_dataset

    frame = sample_dataset(300, seed=1)
    frame["y2"] = 1 - frame["y"]  # a second outcome of the same patients
    config = make_site_config(frames={"two": frame}, datasets={"two": {
        "path": "data/two.csv", "outcomes": ["y", "y2"], "scores": ["pred"]}})
    s = np.sort(frame["pred"].to_numpy())
    base, close = 0.31, 0.32  # neighbours on the lattice; tp + fp at the two differ by 3 patients
    assert ((s >= base) & (s < close)).sum() == 3
    with running_server(config) as srv:
        c = client_cls(srv)
        first, second = c.open(dataset="two", outcome="y"), c.open(dataset="two", outcome="y2")
        cells = c.ConfusionParts(pb.ConfusionPartsRequest(session_id=first, threshold=base))
        before = snapshot(config.ledger_path)
        _refused(lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=second, threshold=close)),
                 C.PERMISSION_DENIED, "disclosure auditor")
        c.CalibrationParts(pb.CalibrationPartsRequest(session_id=first, n_bins=2))
        assert snapshot(config.ledger_path) == before  # the refused threshold was not recorded
        # Other edges for the other outcome: answered, withholding what the auditor must (counts do not
        # depend on the outcome, so the first outcome's answers bind).
        five = c.CalibrationParts(pb.CalibrationPartsRequest(session_id=second, n_bins=5))
        assert len(five.bins) + len(five.suppressed) == 5
        # The same threshold and the same edges are answered for the other outcome.
        other = c.ConfusionParts(pb.ConfusionPartsRequest(session_id=second, threshold=base))
        assert (other.tp, other.fp) == (cells.fp, cells.tp)
        c.CalibrationParts(pb.CalibrationPartsRequest(session_id=second, n_bins=2))
        c.close()


def test_calibration_edges_and_confusion_thresholds_cannot_be_differenced(make_site_config, client_cls, frame,
                                                                         snapshot):
    s = np.sort(frame["pred"].to_numpy())
    base, near, far = 0.31, 0.32, 0.6  # on the lattice; 3 patients in [base, near)
    assert ((s >= base) & (s < near)).sum() == 3
    assert ((s >= base) & (s < far)).sum() >= 5 and ((s >= near) & (s < far)).sum() >= 5
    with running_server(make_site_config()) as srv:
        c = client_cls(srv)
        session = c.open()
        c.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=base))
        before = snapshot(srv.config.ledger_path)
        # Bins above the edge 0.32 minus the row total at 0.31 would count 3 patients, and so would the
        # bin below 0.32 minus the row total below 0.31: the auditor withholds what would tell.
        parts = c.CalibrationParts(pb.CalibrationPartsRequest(
            session_id=session, edges=pb.Values(values=[0, near, far, 1])))
        released = {b.index for b in parts.bins}
        assert 0 not in released and not {1, 2} <= released
        assert snapshot(srv.config.ledger_path) == before
        c.CalibrationParts(pb.CalibrationPartsRequest(session_id=session, edges=pb.Values(values=[0, base, far, 1])))
        c.close()
    # The other way round, on a fresh site: a threshold next to an answered edge is refused.
    with running_server(make_site_config("fresh")) as srv:
        c = client_cls(srv)
        session = c.open()
        c.CalibrationParts(pb.CalibrationPartsRequest(session_id=session, edges=pb.Values(values=[0, base, far, 1])))
        before = snapshot(srv.config.ledger_path)
        _refused(lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=near)),
                 C.PERMISSION_DENIED, "disclosure auditor")
        assert snapshot(srv.config.ledger_path) == before
        c.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=far))  # an edge itself is fine
        c.close()


def test_keys_ledger_and_audit_are_private_to_the_site_account(server, client, tmp_path):
    from site_node.security.pki import generate_dev_pki

    client.open()
    pki = generate_dev_pki(tmp_path / "pki")
    for path in (pki.ca_key, pki.server_key, pki.client_key, server.config.ledger_path, server.config.audit_path):
        assert os.stat(path).st_mode & 0o077 == 0, path
    assert os.stat(pki.ca_cert).st_mode & 0o044  # certificates are public


def test_a_model_cannot_overflow_to_count_patients(server, client, frame, snapshot, approve):
    from site_node.data.scores import MAX_ABS_COEFFICIENT

    # age > 60 and size > 30 would make +inf - inf = NaN exactly for those patients: a count query.
    assert 0 < ((frame["age"] > 60) & (frame["size"] > 30)).sum()
    overflowing = pb.GlmModel(link=pb.LINK_LOGIT, coefficients=[pb.Coefficient(name="age", value=1.7976e308 / 60),
                                                                pb.Coefficient(name="size", value=-1.7976e308 / 30)])
    before = snapshot(server.config.ledger_path)
    _refused(lambda: client.open(model=overflowing), C.INVALID_ARGUMENT, "at most 1e+06 in absolute value")
    big_intercept = pb.GlmModel(link=pb.LINK_PROBIT, intercept=-1e7, coefficients=[pb.Coefficient(name="age", value=1)])
    _refused(lambda: client.open(model=big_intercept), C.INVALID_ARGUMENT, "intercept")
    assert snapshot(server.config.ledger_path) == before
    # At the bound the link saturates to exact 0 and 1: finite scores, a normal session.
    sharp = pb.GlmModel(link=pb.LINK_LOGIT, intercept=-MAX_ABS_COEFFICIENT,
                        coefficients=[pb.Coefficient(name="age", value=MAX_ABS_COEFFICIENT),
                                      pb.Coefficient(name="size", value=-MAX_ABS_COEFFICIENT)])
    approve(server.config, sharp)
    s = client.open(model=sharp)
    _, noisy, _ = client.release(s, NEG)
    assert np.isfinite(noisy).all()
    assert client.BrierParts(pb.BrierPartsRequest(session_id=s)).n == len(frame)


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
        _refused(alice.open, C.RESOURCE_EXHAUSTED, "limit per analyst")
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
                                                            segments=[peer_release(NEG, [0.5])]), scores=_f64([0.5]))
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
        assert carol.Describe(pb.DescribeRequest()).site_name and _healthy(srv)
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
        decisions = [e["decision"] for e in _audit(srv) if e["analyst"] == "alice"]
        assert "RESOURCE_EXHAUSTED" in decisions  # refused calls are audited like every other


def test_query_records_survive_a_restart(make_site_config, client_cls):
    config = make_site_config(policy={"max_glm_evaluations": 2, "max_survivor_uploads": 1})
    s0 = np.linspace(0.05, 0.95, 60)
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        c.upload(s, NEG, s0)
        for i in range(2):
            c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1 + i]))
        c.ConfusionParts(pb.ConfusionPartsRequest(session_id=s, threshold=0.31))
        c.CalibrationParts(pb.CalibrationPartsRequest(session_id=s, n_bins=2))
        c.close()
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        assert c.upload(s, NEG, s0).evaluations_left == 0
        _refused(lambda: c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 3])), C.RESOURCE_EXHAUSTED)
        _refused(lambda: c.upload(s, NEG, s0[1:]), C.RESOURCE_EXHAUSTED, "at most 1 different survivor")
        _refused(lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=s, threshold=0.32)),
                 C.PERMISSION_DENIED, "disclosure auditor")
        c.close()


def test_messages_above_the_size_limit(make_site_config, client_factory):
    config = make_site_config(site={"max_message_bytes": 1024 * 1024})
    with running_server(config) as srv:
        c = client_factory(srv)
        c.channel.close()
        c.channel = channel_to(srv, max_message_bytes=64 << 20)
        c.stub = site_stub(c.channel)
        _refused(lambda: c.OpenSession(pb.OpenSessionRequest(dataset="x" * (2 << 20))), C.RESOURCE_EXHAUSTED)
        s = c.open()
        _refused(lambda: c.upload(s, NEG, np.linspace(0, 1, 200_000), chunk=200_000), C.RESOURCE_EXHAUSTED)
        # gRPC refuses an oversized message before the site sees it; to the site the stream just ends.
        # Logged as CANCELLED when gRPC has ended the call by then, else as the refusal of a stream
        # without its header (which changes nothing either).
        last = _audit(srv)[-1]
        assert last["call"] == "UploadSurvivor" and last["decision"] in ("CANCELLED", "INVALID_ARGUMENT")
        assert srv.ledger.budget(srv.config.datasets["test"].population, srv.config.policy).releases == 0
        assert c.Describe(pb.DescribeRequest()).datasets and _healthy(srv)


def test_thresholds_snap_to_the_lattice(server, client, frame):
    from site_node.errors import InvalidArgument
    from site_node.rules.guard import check_threshold

    assert check_threshold(0.30000000000000004) == check_threshold(0.3 - 1e-12) == 0.3
    assert check_threshold(56.0 + 1e-9, score_range=(10.0, 110.0), steps=50) == 56.0  # steps of 2 from 10
    with pytest.raises(InvalidArgument, match="use 10 \\+ k \\* 2"):
        check_threshold(55.0, score_range=(10.0, 110.0), steps=50)
    s, y = frame["pred"].to_numpy(), frame["y"].to_numpy()
    session = client.open()
    a = client.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=0.5))
    b = client.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=0.5 - 1e-12))
    assert (a.tp, a.fp, a.fn, a.tn) == (b.tp, b.fp, b.fn, b.tn) == (
        np.sum((s >= 0.5) & (y == 1)), np.sum((s >= 0.5) & (y == 0)), np.sum((s < 0.5) & (y == 1)),
        np.sum((s < 0.5) & (y == 0)))
    assert len(snapshot_thresholds(server)) == 1  # one threshold recorded, not two


def snapshot_thresholds(server):
    import sqlite3

    with sqlite3.connect(server.config.disclosure_path) as db:
        return db.execute("SELECT DISTINCT lo FROM answered_counts WHERE lo != '-inf'").fetchall()


def test_a_model_reproducing_a_score_column_cannot_difference_it(make_site_config, client_cls, snapshot, approve):
    from dsroc import GlmModel
    from site_node.cli.init import sample_dataset

    frame = sample_dataset(300, seed=1)
    glm = GlmModel(link="logit", intercept=-3.0, coefficients={"age": 0.03, "nodes": 0.2})
    frame["risk"] = glm.predict({c: frame[c].to_numpy(float) for c in ("age", "nodes")})
    config = make_site_config(frames={"test": frame}, datasets={"test": {
        "path": "data/test.csv", "outcomes": ["y"], "scores": ["risk"], "model_columns": ["age", "nodes"]}})
    s, y = frame["risk"].to_numpy(), frame["y"].to_numpy()

    def cells_ok(t):
        p = s >= t
        return min(np.sum(p & (y == 1)), np.sum(p & (y == 0)), np.sum(~p & (y == 1)), np.sum(~p & (y == 0))) >= 5

    pairs = [(k / 100, (k + 1) / 100) for k in range(5, 95)
             if 0 < np.sum((s >= k / 100) & (s < (k + 1) / 100)) < 5 and cells_ok(k / 100) and cells_ok((k + 1) / 100)]
    assert pairs, "the data should have a sparse band between answerable thresholds"
    base, close = pairs[0]
    model = pb.GlmModel(link=pb.LINK_LOGIT, intercept=-3.0, coefficients=[
        pb.Coefficient(name="age", value=0.03), pb.Coefficient(name="nodes", value=0.2)])
    approve(config, model)
    with running_server(config) as srv:
        c = client_cls(srv)
        column, same_scores = c.open(column="risk"), c.open(model=model)
        c.ConfusionParts(pb.ConfusionPartsRequest(session_id=column, threshold=base))
        before = snapshot(config.ledger_path)
        # The model's own threshold history is empty, but its scores are the column's.
        _refused(lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=same_scores, threshold=close)),
                 C.PERMISSION_DENIED, "disclosure auditor")
        assert snapshot(config.ledger_path) == before
        c.ConfusionParts(pb.ConfusionPartsRequest(session_id=same_scores, threshold=base))  # the same set: nothing new
        c.close()


def test_explicit_edges_are_equal_width_or_on_the_lattice(server, client):
    session = client.open()
    _refused(lambda: client.CalibrationParts(pb.CalibrationPartsRequest(
        session_id=session, edges=pb.Values(values=[0, 0.333, 1]))), C.INVALID_ARGUMENT, "lattice")
    thirds = client.CalibrationParts(pb.CalibrationPartsRequest(
        session_id=session, edges=pb.Values(values=np.linspace(0, 1, 4).tolist())))
    assert len(thirds.edges) == 4


def test_cuts_of_a_removed_score_column_still_bind(make_site_config, client_cls, frame, snapshot):
    frame = frame.assign(pred2=frame["pred"])
    two = make_site_config(frames={"test": frame}, datasets={"test": {
        "path": "data/test.csv", "outcomes": ["y"], "scores": ["pred", "pred2"]}})
    with running_server(two) as srv:
        c = client_cls(srv)
        c.ConfusionParts(pb.ConfusionPartsRequest(session_id=c.open(column="pred2"), threshold=0.5))
        c.close()
    one = make_site_config(frames={"test": frame}, datasets={"test": {
        "path": "data/test.csv", "outcomes": ["y"], "scores": ["pred"]}})
    assert one.ledger_path == two.ledger_path
    with running_server(one) as srv:
        c = client_cls(srv)
        before = snapshot(one.ledger_path)
        _refused(lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=c.open(), threshold=0.4)),
                 C.FAILED_PRECONDITION, "can no longer be evaluated")
        assert snapshot(one.ledger_path) == before
        c.close()
