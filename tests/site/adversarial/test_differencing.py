"""Differencing attacks: other outcomes, edges, thresholds, models and removed score columns single out nobody."""

from __future__ import annotations

import numpy as np
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.testing import running_server

from .common import NEG, C, refused

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
        refused(lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=second, threshold=close)),
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
        refused(lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=near)),
                 C.PERMISSION_DENIED, "disclosure auditor")
        assert snapshot(srv.config.ledger_path) == before
        c.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=far))  # an edge itself is fine
        c.close()


def test_a_model_cannot_overflow_to_count_patients(server, client, frame, snapshot, approve):
    from site_node.data.scores import MAX_ABS_COEFFICIENT

    # age > 60 and size > 30 would make +inf - inf = NaN exactly for those patients: a count query.
    assert 0 < ((frame["age"] > 60) & (frame["size"] > 30)).sum()
    overflowing = pb.GlmModel(link=pb.LINK_LOGIT, coefficients=[pb.Coefficient(name="age", value=1.7976e308 / 60),
                                                                pb.Coefficient(name="size", value=-1.7976e308 / 30)])
    before = snapshot(server.config.ledger_path)
    refused(lambda: client.open(model=overflowing), C.INVALID_ARGUMENT, "at most 1e+06 in absolute value")
    big_intercept = pb.GlmModel(link=pb.LINK_PROBIT, intercept=-1e7, coefficients=[pb.Coefficient(name="age", value=1)])
    refused(lambda: client.open(model=big_intercept), C.INVALID_ARGUMENT, "intercept")
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
        refused(lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=same_scores, threshold=close)),
                 C.PERMISSION_DENIED, "disclosure auditor")
        assert snapshot(config.ledger_path) == before
        c.ConfusionParts(pb.ConfusionPartsRequest(session_id=same_scores, threshold=base))  # the same set: nothing new
        c.close()


def test_explicit_edges_are_equal_width_or_on_the_lattice(server, client):
    session = client.open()
    refused(lambda: client.CalibrationParts(pb.CalibrationPartsRequest(
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
        refused(lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=c.open(), threshold=0.4)),
                 C.FAILED_PRECONDITION, "can no longer be evaluated")
        assert snapshot(one.ledger_path) == before
        c.close()
