"""The calls that combine others: survivors uploaded with their answers, PaperAggregates, a session's hold."""

from __future__ import annotations

import sqlite3

import grpc
import numpy as np
import pytest

from dsroc.v1 import site_pb2 as pb

from .independent import NEG, POS, GRID, brute_placements, statsmodels_parts

def test_upload_survivors_stores_both_classes_and_answers_as_each_call_would(client, server, frame):
    # One stream carries S~0 then S~1; its reply carries the confusion matrix, placement moments, Brier sums,
    # calibration cells, budget and the ROC-GLM parts at one theta: checked against brute-force placement
    # values, statsmodels and the data, and equal to what the separate calls answer; each part is audited as
    # its own call.
    from site_node.interceptors.audit import read_audit

    session = client.open()
    s, y = frame["pred"].to_numpy(), frame["y"].to_numpy()
    s0, s1 = s[y == 0], s[y == 1]
    _, noisy0, _ = client.release(session, NEG, epsilon=5.0, delta=0.01)
    _, noisy1, _ = client.release(session, POS, epsilon=5.0, delta=0.01)
    edges = pb.Values(values=np.linspace(0, 1, 6).tolist())
    theta = [0.0, 1.0]
    answers = pb.PaperAggregatesRequest(calibration=pb.CalibrationPartsRequest(edges=edges),
                                        confusion=pb.ConfusionPartsRequest(threshold=0.5),
                                        rocglm=pb.RocGlmPartsRequest(theta=theta))
    out = client.upload_both(session, noisy0, noisy1, answers=answers, chunk=37)
    assert [(r.score_class, r.n_received) for r in out.survivors] == [(NEG, noisy0.size), (POS, noisy1.size)]
    got = out.answers
    pv0, pv1 = brute_placements(noisy0, s1), brute_placements(noisy1, s0)
    assert (got.moments.pv0.n, got.moments.pv1.n) == (s1.size, s0.size)
    assert got.moments.pv0.total == pytest.approx(pv0.sum(), rel=1e-12)
    assert got.moments.local_ssd_pv1 == pytest.approx(((pv1 - pv1.mean()) ** 2).sum(), rel=1e-12)
    assert got.brier.n == s.size and got.brier.sum_sq == pytest.approx(((y - s) ** 2).sum(), rel=1e-12)
    assert (got.confusion.tp, got.confusion.fp) == (((s >= 0.5) & (y == 1)).sum(), ((s >= 0.5) & (y == 0)).sum())
    score, info, deviance = statsmodels_parts(np.array([(pv0 <= t).sum() for t in GRID]), s1.size, np.array(theta))
    np.testing.assert_allclose(got.rocglm.score, score, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.reshape(got.rocglm.information, (2, 2)), info, rtol=1e-9, atol=1e-9)
    assert got.rocglm.deviance == pytest.approx(deviance, rel=1e-9)
    # The same answers as each call apart (the repeated theta is free: one evaluation was counted, with the upload).
    assert got.moments == client.PlacementMoments(pb.PlacementMomentsRequest(session_id=session))
    assert got.calibration == client.CalibrationParts(pb.CalibrationPartsRequest(session_id=session, edges=edges))
    assert got.confusion == client.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=0.5))
    again = client.RocGlmParts(pb.RocGlmPartsRequest(session_id=session, theta=theta))
    assert again == got.rocglm and again.evaluations_left == out.survivors[0].evaluations_left - 1
    assert got.budget == client.Budget(pb.BudgetRequest(dataset="test")).budget
    records = [r for r in read_audit(server.config.audit_path) if r["call"] != "ReleaseNoisyScores"]
    first = next(i for i, r in enumerate(records) if r["call"] == "UploadSurvivors")
    parts = records[first:first + 9]
    assert [(r["call"], r["decision"]) for r in parts] == [("UploadSurvivors", "OK")] + [(c, "OK") for c in (
        "UploadSurvivor", "UploadSurvivor", "PlacementMoments", "BrierParts", "Budget", "ConfusionParts",
        "CalibrationParts", "RocGlmParts")]
    assert all(r["parameters"]["in_call"] == "UploadSurvivors" for r in parts[1:])
    assert [r["parameters"]["score_class"] for r in parts[1:3]] == [NEG, POS]
    assert parts[6]["parameters"]["threshold"] == 0.5 and parts[8]["parameters"]["theta"] == theta


def test_upload_survivors_refuses_a_malformed_stream_and_audits_a_refused_part(client, server, peer_release):
    from site_node.interceptors.audit import read_audit

    session = client.open()
    negatives, positives = np.linspace(0.05, 0.6, 40), np.linspace(0.3, 0.95, 30)

    def refused(messages):
        with pytest.raises(grpc.RpcError) as error:
            client.UploadSurvivors(iter(messages))
        return error.value

    def header(cls, values, **kw):
        return pb.SurvivorChunk(header=pb.SurvivorHeader(session_id=session, score_class=cls, n=len(values),
                                                         segments=[peer_release(cls, values)], **kw),
                                scores=np.asarray(values, dtype=float).tobytes())

    # S~1 first, S~0 twice, S~1 missing, answers in the second header: INVALID_ARGUMENT naming the rule.
    for messages, words in (([header(POS, positives), header(NEG, negatives)], "S~0"),
                            ([header(NEG, negatives), header(NEG, negatives)], "S~1"),
                            ([header(NEG, negatives)], "the header of S~1 (SCORE_CLASS_POSITIVES) is missing"),
                            ([header(NEG, negatives), header(POS, positives, answers=pb.PaperAggregatesRequest())],
                             "only the first header")):
        error = refused(messages)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and words in error.details()
    # UploadSurvivor (one class) does not answer: answers belong to UploadSurvivors.
    with pytest.raises(grpc.RpcError) as error:
        client.UploadSurvivor(iter([header(NEG, negatives, answers=pb.PaperAggregatesRequest())]))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "header.answers" in error.value.details()
    # Every check of the answers comes before anything is stored: a refused one leaves ledger and session as
    # they were; the audit keeps the refusal alone (each class's checked upload was never stored nor answered).
    bad = pb.PaperAggregatesRequest(calibration=pb.CalibrationPartsRequest(edges=pb.Values(values=[0.0, 0.123456, 1.0])))
    def stored():
        with sqlite3.connect(server.config.ledger_path) as db:
            return db.execute("SELECT * FROM survivor_uploads").fetchall()

    before = stored()
    error = refused([header(NEG, negatives, answers=bad), header(POS, positives)])
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "edges" in error.details()
    last = read_audit(server.config.audit_path)[-2:]
    assert [(r["call"], r["decision"]) for r in last] == [("UploadSurvivor", "INVALID_ARGUMENT"),  # the call before
                                                          ("UploadSurvivors", "INVALID_ARGUMENT")]
    assert "edges" in last[-1]["message"] and stored() == before
    with pytest.raises(grpc.RpcError) as error:
        client.PlacementMoments(pb.PlacementMomentsRequest(session_id=session))
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "upload the survivor function" in error.value.details()
    # An optional part the site refuses (a threshold off its lattice) is left out and audited with its refusal;
    # the rest is answered.
    ok = pb.PaperAggregatesRequest(confusion=pb.ConfusionPartsRequest(threshold=0.123456))
    out = client.UploadSurvivors(iter([header(NEG, negatives, answers=ok), header(POS, positives)]))
    assert not out.answers.HasField("confusion") and out.answers.moments.pv0.n > 0
    last = read_audit(server.config.audit_path)[-8:]
    assert [(r["call"], r["decision"]) for r in last] == [
        ("UploadSurvivors", "OK"), ("UploadSurvivor", "OK"), ("UploadSurvivor", "OK"), ("PlacementMoments", "OK"),
        ("BrierParts", "OK"), ("Budget", "OK"), ("ConfusionParts", "INVALID_ARGUMENT"), ("CalibrationParts", "OK")]
    assert "lattice" in last[6]["message"]


def test_open_session_holds_a_release_as_prepare_release_would_and_opens_nothing_when_refused(client, server):
    # OpenSession can carry the noisy release's PrepareRequest: the hold it makes is what PrepareRelease makes
    # (the release then uses it and is charged once); a refused hold opens no session and holds nothing; each
    # is audited as its own PrepareRelease.
    from site_node.interceptors.audit import read_audit

    def holds():
        with sqlite3.connect(server.config.ledger_path) as db:
            return db.execute("SELECT reservation_id, request FROM reservations").fetchall()

    def open_holding(**release):
        return client.OpenSession(pb.OpenSessionRequest(dataset="test", outcome="y", score=pb.ScoreSource(
            score_column="pred"), prepare=pb.PrepareRequest(scores=pb.ReleaseRequest(**release))))

    opened = open_holding(epsilon=5.0, delta=0.01)
    held = opened.prepared.reservation_id
    assert held and holds() == [(held, '{"delta": 0.01, "epsilon": 5.0, "sensitivity": 1.0}')]
    assert opened.prepared.budget.reservations == 1 and not opened.prepared.repeated
    chunks = list(client.ReleaseNoisyScores(pb.ReleaseRequest(session_id=opened.session_id, epsilon=5.0, delta=0.01,
                                                               both_classes=True, reservation_id=held)))
    assert [c.info.score_class for c in chunks if c.HasField("info")] == [NEG, POS] and holds() == []
    budget = client.Budget(pb.BudgetRequest(dataset="test")).budget
    assert budget.releases == 1 and budget.reservations == 0
    records = read_audit(server.config.audit_path)
    first = next(i for i, r in enumerate(records) if r["call"] == "OpenSession")
    assert [(r["call"], r["decision"]) for r in records[first:first + 2]] == [("OpenSession", "OK"), ("PrepareRelease", "OK")]
    assert records[first + 1]["parameters"]["reservation_id"] == held
    # Refused holds (epsilon above the policy's cap; a histogram): no session, no hold, the refusal audited twice.
    sessions = len(server.site.sessions._sessions)
    for release, code, words in ((pb.PrepareRequest(scores=pb.ReleaseRequest(epsilon=50.0, delta=0.01)),
                                  grpc.StatusCode.PERMISSION_DENIED, "limit per release"),
                                 (pb.PrepareRequest(histogram=pb.HistogramRequest(epsilon=1.0, delta=0.01)),
                                  grpc.StatusCode.INVALID_ARGUMENT, "paper-protocol release (scores) only")):
        with pytest.raises(grpc.RpcError) as refused:
            client.OpenSession(pb.OpenSessionRequest(dataset="test", outcome="y", prepare=release,
                                                     score=pb.ScoreSource(score_column="pred")))
        assert refused.value.code() == code and words in refused.value.details()
        assert [(r["call"], r["decision"]) for r in read_audit(server.config.audit_path)[-2:]] == [
            ("OpenSession", code.name), ("PrepareRelease", code.name)]
    assert len(server.site.sessions._sessions) == sessions and holds() == []


def test_sessions_on_the_same_question_share_the_site_data(client, server):
    a, b = client.open(), client.open()
    other = client.open(model=pb.GlmModel(link=pb.LINK_LOGIT, coefficients=[pb.Coefficient(name="age", value=0.01)]))
    site = server.site
    data = [site.session("alice", s).data for s in (a, b, other)]
    assert data[0] is data[1] and data[0] is not data[2]
    assert data[0].key == (server.config.datasets["test"].population, "column:pred", "y")


def test_paper_aggregates_answer_the_four_calls_in_one(client, frame):
    # One round trip gives what PlacementMoments (pass 1), BrierParts, CalibrationParts and Budget give,
    # checked against brute-force placement values and the data.
    session = client.open()
    s, y = frame["pred"].to_numpy(), frame["y"].to_numpy()
    s0, s1 = s[y == 0], s[y == 1]
    _, noisy0, _ = client.release(session, NEG, epsilon=5.0, delta=0.01)
    _, noisy1, _ = client.release(session, POS, epsilon=5.0, delta=0.01)
    for cls, values in ((NEG, noisy0), (POS, noisy1)):
        client.upload(session, cls, values)
    edges = pb.Values(values=np.linspace(0, 1, 6).tolist())
    both = client.PaperAggregates(pb.PaperAggregatesRequest(
        session_id=session, calibration=pb.CalibrationPartsRequest(edges=edges)))
    pv0, pv1 = brute_placements(noisy0, s1), brute_placements(noisy1, s0)
    assert (both.moments.pv0.n, both.moments.pv1.n) == (s1.size, s0.size)
    assert both.moments.pv0.total == pytest.approx(pv0.sum(), rel=1e-12)
    assert both.moments.local_ssd_pv1 == pytest.approx(((pv1 - pv1.mean()) ** 2).sum(), rel=1e-12)
    assert both.brier.n == s.size and both.brier.sum_sq == pytest.approx(((y - s) ** 2).sum(), rel=1e-12)
    counts = np.histogram(s, np.linspace(0, 1, 6))[0]
    released = {b.index: b for b in both.calibration.bins}
    assert released and all(released[i].count == counts[i] >= 5 for i in released)
    withheld = sorted(set(range(5)) - set(released))
    assert list(both.calibration.suppressed) == withheld and counts[withheld].sum() in (0, *range(5, s.size + 1))
    assert both.moments == client.PlacementMoments(pb.PlacementMomentsRequest(session_id=session))
    assert both.calibration == client.CalibrationParts(pb.CalibrationPartsRequest(session_id=session, edges=edges))
    assert both.budget == client.Budget(pb.BudgetRequest(dataset="test")).budget
    # A refused part refuses the call with its own status and reason: here calibration edges off the lattice.
    with pytest.raises(grpc.RpcError) as refused:
        client.PaperAggregates(pb.PaperAggregatesRequest(session_id=session, calibration=pb.CalibrationPartsRequest(
            edges=pb.Values(values=[0.0, 0.123456, 1.0]))))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "edges" in refused.value.details()


def test_a_refused_paper_aggregates_records_nothing(client, server):
    """Issue 36, item 7: PaperAggregates asked before the survivor functions were uploaded is refused (its moments
    need them), and before, its confusion part had already been answered, recorded in the disclosure store and
    logged "ConfusionParts OK" for an answer never sent. Now the parts that record run after every part that may
    refuse: the disclosure store is unchanged and the log holds the refusal alone (the call's and its refusing
    part's)."""
    from site_node.interceptors.audit import read_audit

    def answered():
        with sqlite3.connect(server.config.disclosure_path) as db:
            return db.execute("SELECT * FROM answered_counts ORDER BY 1, 2, 3, 4, 5, 6").fetchall()

    session = client.open()
    before, logged = answered(), len(read_audit(server.config.audit_path))
    request = pb.PaperAggregatesRequest(session_id=session, confusion=pb.ConfusionPartsRequest(threshold=0.5),
                                        calibration=pb.CalibrationPartsRequest(
                                            edges=pb.Values(values=np.linspace(0, 1, 6).tolist())))
    with pytest.raises(grpc.RpcError) as error:
        client.PaperAggregates(request)
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "upload the survivor function" in error.value.details()
    assert answered() == before
    new = read_audit(server.config.audit_path)[logged:]
    assert [(r["call"], r["decision"]) for r in new] == [("PaperAggregates", "FAILED_PRECONDITION"),
                                                         ("PlacementMoments", "FAILED_PRECONDITION")]
    # the same confusion part asked on its own is answered and recorded then
    assert client.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=0.5)).tp > 0
    assert len(answered()) > len(before)
