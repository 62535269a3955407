"""Every refusal path: the right status code, a message naming the rule, and no change to ledger or release cache."""

from __future__ import annotations

import json
import re
import time

import grpc
import numpy as np
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.cli.init import sample_dataset
from site_node.testing import running_server

NEG, POS = pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES
C = grpc.StatusCode


@pytest.fixture
def refused(server, snapshot):
    """Call ``fn`` expecting ``code``; assert the ledger (releases, stored values, counters) is unchanged."""

    def check(fn, code, match=None):
        before = snapshot(server.config.ledger_path)
        with pytest.raises(grpc.RpcError) as info:
            fn()
        assert info.value.code() == code, info.value.details()
        if match:
            assert re.search(match, info.value.details()), info.value.details()
        assert snapshot(server.config.ledger_path) == before
        return info.value.details()

    return check


@pytest.fixture
def released(client):
    """A session with one release made and both survivor functions uploaded."""
    session = client.open()
    _, noisy0, _ = client.release(session, NEG)
    _, noisy1, _ = client.release(session, POS)
    client.upload(session, NEG, noisy0)
    client.upload(session, POS, noisy1)
    return session


def test_authentication_refusals_are_audited(server, client_factory, refused):
    for token in (None, "not-a-token"):
        c = client_factory(server, token=token)
        refused(lambda: c.Describe(pb.DescribeRequest()), C.UNAUTHENTICATED, "bearer token")
    c = client_factory(server)
    unknown = c.channel.unary_unary("/dsroc.v1.SiteService/DumpEverything")
    refused(lambda: unknown(b"", metadata=c.metadata, timeout=10), C.UNAUTHENTICATED, "not served")
    streaming = client_factory(server, token="wrong")
    refused(lambda: list(streaming.ReleaseNoisyScores(pb.ReleaseRequest())), C.UNAUTHENTICATED)
    entries = [json.loads(line) for line in server.config.audit_path.read_text().splitlines()]
    assert [e["decision"] for e in entries] == ["UNAUTHENTICATED"] * 4
    assert "not-a-token" not in server.config.audit_path.read_text()


def test_dataset_permission_and_unknown_names(server, client, client_factory, refused):
    bob = client_factory(server, token="token-of-bob")
    assert list(bob.Describe(pb.DescribeRequest()).datasets) == []
    refused(lambda: bob.open(), C.PERMISSION_DENIED, "may not use dataset 'test'")
    refused(lambda: bob.Budget(pb.BudgetRequest(dataset="test")), C.PERMISSION_DENIED)
    refused(lambda: client.open(dataset="nope"), C.NOT_FOUND)
    refused(lambda: client.BrierParts(pb.BrierPartsRequest(session_id="deadbeef")), C.NOT_FOUND)
    session = client.open()
    # A session id is useless to another analyst.
    refused(lambda: bob.BrierParts(pb.BrierPartsRequest(session_id=session)), C.NOT_FOUND)
    client.CloseSession(pb.CloseSessionRequest(session_id=session))
    refused(lambda: client.BrierParts(pb.BrierPartsRequest(session_id=session)), C.NOT_FOUND)


def test_bad_columns_and_models(client, refused):
    refused(lambda: client.open(outcome="pred"), C.INVALID_ARGUMENT, "no declared outcome column 'pred'")
    refused(lambda: client.open(column="age"), C.INVALID_ARGUMENT, "no declared score column 'age'")
    coef = pb.Coefficient
    for model, match in [
        (pb.GlmModel(link=pb.LINK_LOGIT, coefficients=[coef(name="height", value=1.0)]), "no model column 'height'"),
        (pb.GlmModel(link=pb.LINK_LOGIT, coefficients=[coef(name="y", value=1.0)]), "no model column 'y'"),
        (pb.GlmModel(link=pb.LINK_LOGIT, coefficients=[coef(name="age", value=float("nan"))]), "must be finite"),
        (pb.GlmModel(link=pb.LINK_LOGIT, intercept=float("inf"), coefficients=[coef(name="age", value=1)]), "finite"),
        (pb.GlmModel(coefficients=[coef(name="age", value=1.0)]), "link"),
        (pb.GlmModel(link=pb.LINK_PROBIT), "at least one coefficient"),
        (pb.GlmModel(link=pb.LINK_PROBIT, coefficients=[coef(name="age", value=1), coef(name="age", value=2)]), "twice"),
    ]:
        refused(lambda: client.open(model=model), C.INVALID_ARGUMENT, match)
    refused(lambda: client.OpenSession(pb.OpenSessionRequest(dataset="test", outcome="y")), C.INVALID_ARGUMENT)


def test_release_parameter_refusals(client, refused):
    session = client.open()
    rel = lambda **kw: client.release(session, kw.pop("cls", NEG), **kw)
    refused(lambda: rel(epsilon=11.0), C.PERMISSION_DENIED, "epsilon 11.0 is above")
    refused(lambda: rel(delta=0.02), C.PERMISSION_DENIED, "delta 0.02 is above")
    refused(lambda: rel(epsilon=float("nan")), C.INVALID_ARGUMENT, "epsilon must be a positive finite number, got nan")
    refused(lambda: rel(epsilon=-1.0), C.INVALID_ARGUMENT, "positive")
    refused(lambda: rel(delta=0.0), C.INVALID_ARGUMENT, "delta")
    refused(lambda: rel(sensitivity=0.5), C.INVALID_ARGUMENT, "only ask for a larger sensitivity")
    refused(lambda: rel(cls=pb.SCORE_CLASS_UNSPECIFIED), C.INVALID_ARGUMENT, "score_class")
    # A larger sensitivity is allowed, and is a different release.
    info, _, _ = rel(sensitivity=2.0)
    assert info.sensitivity == 2.0 and info.mu_charged > 0


def test_budget_exhausted_releases_nothing(make_site_config, client_cls, snapshot):
    config = make_site_config(policy={"budget_epsilon": 6.0, "max_epsilon": 5.0, "budget_delta": 0.01})
    with running_server(config) as srv:
        c = client_cls(srv)
        session = c.open()
        first, _, _ = c.release(session, NEG, epsilon=5.0)
        before = snapshot(config.ledger_path)
        with pytest.raises(grpc.RpcError) as info:
            c.release(session, NEG, epsilon=4.0)
        assert info.value.code() == C.RESOURCE_EXHAUSTED and "nothing was released" in info.value.details()
        assert snapshot(config.ledger_path) == before
        # The repeat of the first release is still free and identical.
        again, _, _ = c.release(session, NEG, epsilon=5.0)
        assert again.release_id == first.release_id and again.mu_charged == 0
        budget = c.Budget(pb.BudgetRequest(dataset="test")).budget
        assert budget.releases == 1 and budget.mu_spent == pytest.approx(first.mu)
        c.close()


def test_privacy_level_refusals_do_not_reveal_counts(make_site_config, client_cls, snapshot):
    frame = sample_dataset(60, seed=3)
    frame["y"] = 0
    frame.loc[:2, "y"] = 1  # three positives: below q = 5
    config = make_site_config(frames={"test": frame})
    with running_server(config) as srv:
        c = client_cls(srv)
        session = c.open()
        c.upload(session, NEG, np.linspace(0, 1, 50))
        before = snapshot(config.ledger_path)
        for call in (lambda: c.release(session, NEG),
                     lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=0.5))):
            with pytest.raises(grpc.RpcError) as info:
                call()
            assert info.value.code() == C.PERMISSION_DENIED and "privacy level" in info.value.details()
            assert not re.search(r"\b3\b", info.value.details()), "the refusal must not reveal the count"
        with pytest.raises(grpc.RpcError) as info:
            c.RocGlmParts(pb.RocGlmPartsRequest(session_id=session, theta=[0, 1]))
        assert info.value.code() == C.PERMISSION_DENIED and not re.search(r"\b3\b", info.value.details())
        assert snapshot(config.ledger_path) == before
        # Brier covers all 60 patients: allowed.
        assert c.BrierParts(pb.BrierPartsRequest(session_id=session)).n == 60
        c.close()


def test_malformed_grid_theta_edges_threshold(released, client, refused):
    s = released
    parts = lambda **kw: client.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, **kw))
    refused(lambda: parts(theta=[0.0]), C.INVALID_ARGUMENT, "theta")
    refused(lambda: parts(theta=[0.0, float("nan")]), C.INVALID_ARGUMENT, "theta")
    refused(lambda: parts(theta=[0, 1], grid=pb.GridSpec(n_points=2)), C.INVALID_ARGUMENT, "grid")
    for bad in ([0.0, 0.5], [0.2, 1.0], [0.5, 0.3], [0.2, float("nan")], [0.5]):
        refused(lambda: parts(theta=[0, 1], grid=pb.GridSpec(thresholds=pb.Values(values=bad))), C.INVALID_ARGUMENT, "grid")
    refused(lambda: parts(theta=[0, 1], grid=pb.GridSpec(n_points=500)), C.PERMISSION_DENIED, "at most 100")
    cal = lambda **kw: client.CalibrationParts(pb.CalibrationPartsRequest(session_id=s, **kw))
    for bad in ([0.0, 0.5, 0.4, 1.0], [0.1, 1.0], [0.0, 0.5], [0.0, float("inf")], [0.0]):
        refused(lambda: cal(edges=pb.Values(values=bad)), C.INVALID_ARGUMENT, "edges")
    refused(lambda: cal(n_bins=1000), C.PERMISSION_DENIED, "at most 100")
    refused(lambda: client.ConfusionParts(pb.ConfusionPartsRequest(session_id=s, threshold=float("nan"))),
            C.INVALID_ARGUMENT, "threshold")
    refused(lambda: client.PlacementMoments(pb.PlacementMomentsRequest(session_id=s, global_means=pb.GlobalMeans(
        mean_pv0=float("nan")))), C.INVALID_ARGUMENT, "mean_pv0")


def test_calls_out_of_order(client, refused):
    s = client.open()
    refused(lambda: client.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1])), C.FAILED_PRECONDITION,
            "UploadSurvivor first")
    refused(lambda: client.PlacementMoments(pb.PlacementMomentsRequest(session_id=s)), C.FAILED_PRECONDITION)
    client.upload(s, NEG, np.linspace(0, 1, 40))
    refused(lambda: client.PlacementMoments(pb.PlacementMomentsRequest(session_id=s)), C.FAILED_PRECONDITION, "S~1")


def test_malformed_uploads(client, refused):
    s = client.open()
    refused(lambda: client.UploadSurvivor(iter([pb.SurvivorChunk(scores=np.array([0.1, 0.2]).tobytes())])), C.INVALID_ARGUMENT, "header")
    refused(lambda: client.upload(s, NEG, [0.1, float("nan"), 0.3]), C.INVALID_ARGUMENT, "non-finite")
    refused(lambda: client.upload(s, NEG, [0.1, 0.2, 0.3], n=5), C.INVALID_ARGUMENT, "header.n")
    refused(lambda: client.upload(s, pb.SCORE_CLASS_UNSPECIFIED, [0.1, 0.2]), C.INVALID_ARGUMENT, "score_class")
    refused(lambda: client.upload("nope", NEG, [0.1]), C.NOT_FOUND)


def test_query_cap_survives_new_sessions(make_site_config, client_cls, snapshot):
    config = make_site_config(policy={"max_glm_evaluations": 3})
    with running_server(config) as srv:
        c = client_cls(srv)
        s0 = np.linspace(0.05, 0.95, 200)
        s = c.open()
        assert c.upload(s, NEG, s0).evaluations_left == 3
        left = [c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1 + i])).evaluations_left for i in range(3)]
        assert left == [2, 1, 0]
        before = snapshot(config.ledger_path)
        fresh = c.open()  # a new session with the same S~0 does not reset the cap
        assert c.upload(fresh, NEG, s0[::-1]).evaluations_left == 0
        with pytest.raises(grpc.RpcError) as info:
            c.RocGlmParts(pb.RocGlmPartsRequest(session_id=fresh, theta=[0, 9]))
        assert info.value.code() == C.RESOURCE_EXHAUSTED and "at most 3" in info.value.details()
        assert snapshot(config.ledger_path) == before
        c.close()


def test_a_repeated_theta_is_answered_identically_and_not_counted(make_site_config, client_cls):
    # Repeating a validation (same release, same S~0, same Fisher-scoring path) asks the same questions:
    # the answers are identical, reveal nothing new and must not use up the query cap.
    config = make_site_config(policy={"max_glm_evaluations": 2})
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        c.upload(s, NEG, np.linspace(0.05, 0.95, 200))
        first = c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0.3, 1.1]))
        assert first.evaluations_left == 1
        for _ in range(5):
            again = c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0.3, 1.1]))
            assert list(again.score) == list(first.score) and again.deviance == first.deviance
            assert again.evaluations_left == 1
        assert c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0.3, 1.2])).evaluations_left == 0
        with pytest.raises(grpc.RpcError) as info:
            c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0.3, 1.3]))
        assert info.value.code() == C.RESOURCE_EXHAUSTED
        assert c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0.3, 1.1])).deviance == first.deviance
        c.close()


def test_expired_session(make_site_config, client_cls):
    config = make_site_config(site={"session_idle_seconds": 0.3})
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        c.BrierParts(pb.BrierPartsRequest(session_id=s))
        time.sleep(0.5)
        with pytest.raises(grpc.RpcError) as info:
            c.BrierParts(pb.BrierPartsRequest(session_id=s))
        assert info.value.code() == C.NOT_FOUND and "expired" in info.value.details()
        c.close()


def test_bad_data_is_named_per_column_without_counts(make_site_config, client_cls):
    # Each entry its own patients (copies of one frame would be look-alikes, which serve refuses).
    with_nan, bad_label, out_of_range, missing_label, bad_feature = (sample_dataset(50, seed=4 + k) for k in range(5))
    # Three bad rows each: the message must name the column and the rule, never how many rows.
    rows = [3, 7, 11]
    with_nan.loc[rows, "pred"] = np.nan
    bad_label.loc[rows, "y"] = 2
    out_of_range.loc[rows, "pred"] = 1.5
    missing_label = missing_label.astype({"y": float})
    missing_label.loc[rows, "y"] = np.nan
    bad_feature.loc[rows, "age"] = np.nan
    frames = {"nan": with_nan, "label": bad_label, "range": out_of_range, "missing": missing_label,
              "feature": bad_feature}
    config = make_site_config(frames=frames)
    with running_server(config) as srv:
        c = client_cls(srv)
        for dataset, match in [("nan", "score column 'pred': has missing"), ("label", "outcome column 'y': labels must be 0 or 1"),
                               ("range", "outside the declared range"), ("missing", "outcome column 'y': has missing")]:
            with pytest.raises(grpc.RpcError) as info:
                c.open(dataset=dataset)
            assert info.value.code() == C.INVALID_ARGUMENT and match in info.value.details()
            assert dataset in info.value.details() and not re.search(r"\b3\b", info.value.details())
        model = pb.GlmModel(link=pb.LINK_LOGIT, coefficients=[pb.Coefficient(name="age", value=0.1)])
        with pytest.raises(grpc.RpcError) as info:
            c.open(dataset="feature", model=model)
        assert info.value.code() == C.INVALID_ARGUMENT and "model column 'age': has missing" in info.value.details()
        assert c.open(dataset="feature")  # the score column itself is fine
        c.close()


def test_a_failing_request_never_takes_the_daemon_down(client, server):
    # Garbage bytes for a typed request: the server answers with a status and keeps serving.
    raw = client.channel.unary_unary("/dsroc.v1.SiteService/OpenSession")
    with pytest.raises(grpc.RpcError) as info:
        raw(b"\xff\xff\xff", metadata=client.metadata, timeout=10)
    assert info.value.code() in (C.INTERNAL, C.INVALID_ARGUMENT, C.UNKNOWN)
    assert client.Describe(pb.DescribeRequest()).datasets


def test_distinct_survivor_functions_are_capped(make_site_config, client_cls, snapshot):
    config = make_site_config(policy={"max_survivor_uploads": 2})
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        c.upload(s, NEG, [0.1, 0.2, 0.3])
        c.upload(s, NEG, [0.4, 0.5])
        c.upload(c.open(), NEG, [0.3, 0.1, 0.2])  # the same function again (any order, any session) is free
        c.upload(s, POS, [0.7])  # the cap is per class
        before = snapshot(config.ledger_path)
        with pytest.raises(grpc.RpcError) as info:
            c.upload(s, NEG, [0.9])
        assert info.value.code() == C.RESOURCE_EXHAUSTED and "at most 2 different survivor functions" in info.value.details()
        assert snapshot(config.ledger_path) == before
        assert c.Describe(pb.DescribeRequest()).policy.max_survivor_uploads == 2
        c.close()


def test_open_sessions_are_capped(make_site_config, client_cls):
    config = make_site_config(site={"max_sessions": 2})
    with running_server(config) as srv:
        c = client_cls(srv)
        first, _ = c.open(), c.open()
        with pytest.raises(grpc.RpcError) as info:
            c.open()
        assert info.value.code() == C.RESOURCE_EXHAUSTED and "open sessions" in info.value.details()
        c.CloseSession(pb.CloseSessionRequest(session_id=first))
        assert c.open()
        c.close()


def test_confusion_thresholds_cannot_be_differenced(client, frame, refused):
    s, y = frame["pred"].to_numpy(), frame["y"].to_numpy()
    session = client.open()
    client.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=0.3))
    # The next threshold of the site's 0.01 lattice, with 1..4 patients of some class in between, is refused.
    close = 0.31
    bands = [((s[y == c] >= 0.3) & (s[y == c] < close)).sum() for c in (0, 1)]
    assert any(0 < b < 5 for b in bands)
    refused(lambda: client.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=0.3 + 1e-6)),
            grpc.StatusCode.INVALID_ARGUMENT, "lattice")  # off the lattice: no bisecting down to one patient
    details = refused(lambda: client.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=close)),
                      grpc.StatusCode.PERMISSION_DENIED, "disclosure auditor")
    # Apart from the two thresholds and q, the message carries no number (no count).
    assert not re.search(r"\d", details.replace(str(close), "").replace("0.3", "").replace("q = 5", ""))
    # The same threshold again is free, also in a new session; a well-separated one is answered.
    again = client.ConfusionParts(pb.ConfusionPartsRequest(session_id=client.open(), threshold=0.3))
    assert again.tp == np.sum((s >= 0.3) & (y == 1))
    far = 0.5
    assert all(b == 0 or b >= 5 for b in [((s[y == c] >= 0.3) & (s[y == c] < far)).sum() for c in (0, 1)])
    client.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=far))


def test_calibration_edges_answered_again_give_the_same_bins(client, refused, server, approve):
    session = client.open()
    ten = pb.Values(values=np.linspace(0, 1, 11).tolist())
    first = client.CalibrationParts(pb.CalibrationPartsRequest(session_id=session, edges=ten))
    same = client.CalibrationParts(pb.CalibrationPartsRequest(session_id=client.open(), n_bins=10))
    assert list(same.suppressed) == list(first.suppressed) and len(same.bins) == len(first.bins)
    # Other edges are answered too, withholding the bins whose differences with the first ones would
    # describe fewer than q patients (the disclosure auditor, tests/site/test_disclosure.py).
    five = client.CalibrationParts(pb.CalibrationPartsRequest(session_id=session, n_bins=5))
    assert len(five.bins) + len(five.suppressed) == 5
    # Another score source is another question with its own edges.
    model = pb.GlmModel(link=pb.LINK_LOGIT, intercept=-1, coefficients=[pb.Coefficient(name="nodes", value=0.2)])
    approve(server.config, model)
    client.CalibrationParts(pb.CalibrationPartsRequest(session_id=client.open(model=model), n_bins=5))
