"""Finer partitions of one histogram release (issue 19): strata of a column the policy lists, and the joint 2-D
histogram of two models. Exact cells by brute force under negligible noise, one charge like a plain release
(also through PrepareRelease's hold), and the refusals: a column the policy does not list (PERMISSION_DENIED
naming the column and policy.strata, nothing charged, no hold, no release in the audit), more cells than the
policy's limit (INVALID_ARGUMENT naming histogram_max_cells), a second session that is not comparable."""

from __future__ import annotations

import json

import grpc
import numpy as np
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.config import ConfigError
from site_node.cli.init import sample_dataset
from site_node.testing import running_server

from ...conftest import read_frame

C = grpc.StatusCode
HUGE = {"max_epsilon": 5000.0, "budget_epsilon": 1e5, "max_delta": 0.01, "budget_delta": 0.05}
STRATA = {"strata": {"age": [50, 60], "grade": [1.5]}}


def _request(session, **kw):
    return pb.HistogramRequest(session_id=session, **{"epsilon": 1.0, "delta": 1e-5, "n_bins": 10,
                                                      "spacing": "equal", **kw})


def _cells(bins, parts, labels, n_bins, n_parts):
    """Brute-force counts per (class, bin, part), by direct comparison cell by cell."""
    h = np.zeros((2, n_bins, n_parts), dtype=int)
    for b in range(n_bins):
        for k in range(n_parts):
            for y in (0, 1):
                h[y, b, k] = np.sum((bins == b) & (parts == k) & (labels == y))
    return h


def _bins(scores, edges):
    """Bin of each score by direct comparison: [e_b, e_b+1), the last bin closed."""
    s = np.clip(scores, edges[0], edges[-1])
    out = np.full(s.size, -1)
    for b in range(edges.size - 1):
        inside = (s >= edges[b]) & ((s < edges[b + 1]) if b < edges.size - 2 else (s <= edges[b + 1]))
        out[inside] = b
    assert (out >= 0).all()
    return out


def _audit(config) -> list[dict]:
    return [json.loads(line) for line in config.audit_path.read_text().splitlines()]


def test_a_stratified_release_equals_brute_force_per_stratum(make_site_config, client_cls):
    config = make_site_config(policy={**HUGE, **STRATA})
    frame = read_frame(config)
    with running_server(config) as srv:
        c = client_cls(srv)
        r = c.ReleaseHistogram(_request(c.open(), epsilon=4000.0, delta=0.01, strata_column="age", score_sums=True))
        edges = np.asarray(r.edges)
        assert r.parts == 3 and list(r.strata_cuts) == [50.0, 60.0] and not r.compare_edges
        age, y, p = frame["age"].to_numpy(), frame["y"].to_numpy(), frame["pred"].to_numpy()
        stratum = np.where(age < 50, 0, np.where(age < 60, 1, 2))  # cuts[k-1] <= age < cuts[k]
        h = _cells(_bins(p, edges), stratum, y, 10, 3)
        np.testing.assert_array_equal(np.asarray(r.negatives).reshape(10, 3), h[0])
        np.testing.assert_array_equal(np.asarray(r.positives).reshape(10, 3), h[1])
        assert len(r.negative_sums) == 30 and r.epsilon == 4000.0 and not r.repeated
        # each cell's sum of offsets within its bin, within the rounding and noise of the sums
        offset = (p - edges[_bins(p, edges)]) / np.diff(edges)[_bins(p, edges)]
        for label, sums in ((0, r.negative_sums), (1, r.positive_sums)):
            exact = np.array([[offset[(_bins(p, edges) == b) & (stratum == k) & (y == label)].sum()
                               for k in range(3)] for b in range(10)])
            assert np.all(np.abs(np.asarray(sums).reshape(10, 3) - exact)
                          <= 5 * np.sqrt(h[label]) / 4 + 5 * r.sums_noise_sd + 1e-9)
        policy = c.Describe(pb.DescribeRequest()).policy
        assert {s.column: list(s.cuts) for s in policy.strata} == {"age": [50.0, 60.0], "grade": [1.5]}
        assert policy.histogram_max_cells == 400
        c.close()


def test_a_stratified_release_is_charged_once_like_a_plain_release(make_site_config, client_cls, snapshot):
    """Same epsilon spent as a plain release at the same (epsilon, delta) and the same noise; a repeat is free;
    a PrepareRelease hold of it becomes its charge."""
    config = make_site_config(policy=STRATA)
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        plain = c.ReleaseHistogram(_request(s))
        spent_plain = c.Budget(pb.BudgetRequest(dataset="test")).budget.epsilon_spent
        c.close()
    other = make_site_config("other", policy=STRATA)
    with running_server(other) as srv:
        c = client_cls(srv)
        s = c.open()
        held = c.PrepareRelease(pb.PrepareRequest(histogram=_request(s, strata_column="grade")))
        assert held.reservation_id and held.budget.reservations == 1
        r = c.ReleaseHistogram(_request(s, strata_column="grade", reservation_id=held.reservation_id))
        assert not r.repeated and r.parts == 2 and r.sigma == pytest.approx(plain.sigma, rel=1e-12)
        b = c.Budget(pb.BudgetRequest(dataset="test")).budget
        assert b.releases == 1 and b.reservations == 0 and b.epsilon_spent == pytest.approx(spent_plain, rel=1e-9)
        before = snapshot(other.ledger_path)
        again = c.ReleaseHistogram(_request(c.open(), strata_column="grade"))
        assert again.repeated and list(again.negatives) == list(r.negatives) and snapshot(other.ledger_path) == before
        # the same grid unstratified is another release (charged), not a replay of the stratified one
        assert not c.ReleaseHistogram(_request(s)).repeated
        c.close()


def test_a_column_the_policy_does_not_list_is_refused_and_nothing_is_charged(make_site_config, client_cls, snapshot):
    config = make_site_config(policy=STRATA)
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        before = snapshot(config.ledger_path)
        for column in ("size", "no_such_column"):  # an existing column and an unknown one: the same refusal
            for call in (lambda: c.ReleaseHistogram(_request(s, strata_column=column)),
                         lambda: c.PrepareRelease(pb.PrepareRequest(histogram=_request(s, strata_column=column)))):
                with pytest.raises(grpc.RpcError) as refused:
                    call()
                assert refused.value.code() == C.PERMISSION_DENIED
                assert repr(column) in refused.value.details() and "policy.strata" in refused.value.details()
                assert "['age', 'grade']" in refused.value.details()
        assert snapshot(config.ledger_path) == before
        b = c.Budget(pb.BudgetRequest(dataset="test")).budget
        assert b.releases == 0 and b.reservations == 0 and b.epsilon_spent == 0
        refusals = [e for e in _audit(config) if e["call"].endswith(("ReleaseHistogram", "PrepareRelease"))]
        assert len(refusals) == 4 and all(e["decision"] == "PERMISSION_DENIED" for e in refusals)
        assert all(e["privacy_cost"] == 0 and "release_id" not in e["parameters"] for e in refusals)
        c.close()


def test_more_cells_than_the_policy_allows_is_invalid_argument_naming_the_limit(make_site_config, client_cls,
                                                                                snapshot):
    config = make_site_config(policy={**STRATA, "histogram_max_cells": 50})
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        before = snapshot(config.ledger_path)
        with pytest.raises(grpc.RpcError) as refused:  # 20 bins x 3 strata = 60 > 50
            c.ReleaseHistogram(_request(s, n_bins=20, strata_column="age"))
        assert refused.value.code() == C.INVALID_ARGUMENT
        assert "60 cells per class" in refused.value.details() and "limit of 50" in refused.value.details()
        assert "histogram_max_cells" in refused.value.details()
        with pytest.raises(grpc.RpcError) as refused:  # joint: 10 x 10 = 100 > 50
            c.ReleaseHistogram(_request(s, compare_session_id=c.open()))
        assert refused.value.code() == C.INVALID_ARGUMENT and "limit of 50" in refused.value.details()
        assert snapshot(config.ledger_path) == before
        assert c.ReleaseHistogram(_request(s, n_bins=12, strata_column="age")).parts == 3  # 36 cells fit
        c.close()


def test_strata_data_and_request_problems_are_named(make_site_config, client_cls, snapshot):
    frame = sample_dataset(300, seed=1)
    frame.loc[3, "size"] = np.nan
    config = make_site_config(frames={"test": frame}, policy={"strata": {"size": [20.0], "bmi": [25.0]}})
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        before = snapshot(config.ledger_path)
        for column, words in (("size", "strata column 'size': has missing or non-finite values"),
                              ("bmi", "has no column 'bmi'")):
            with pytest.raises(grpc.RpcError) as refused:
                c.ReleaseHistogram(_request(s, strata_column=column))
            assert refused.value.code() == C.INVALID_ARGUMENT and words in refused.value.details()
        with pytest.raises(grpc.RpcError) as refused:
            c.ReleaseHistogram(_request(s, strata_column="size", compare_session_id=s))
        assert refused.value.code() == C.INVALID_ARGUMENT and "not both" in refused.value.details()
        assert snapshot(config.ledger_path) == before
        c.close()


@pytest.mark.parametrize("strata, words", [
    ({"age": []}, "policy.strata.age: must be a non-empty list"),
    ({"age": [60, 50]}, "strictly increasing"),
    ({"age": "50"}, "policy.strata.age: must be a list of cut points"),
])
def test_bad_strata_policies_are_named(make_site_config, strata, words):
    with pytest.raises(ConfigError, match=words):
        make_site_config(policy={"strata": strata})


def _two_models(n=400, seed=3):
    frame = sample_dataset(n, seed=seed)
    rng = np.random.default_rng(seed)
    frame["pred2"] = np.clip(frame["pred"] + rng.normal(0, 0.15, n), 0, 1).round(4)
    return frame


def test_a_joint_release_equals_the_brute_force_2d_histogram(make_site_config, client_cls, snapshot):
    frame = _two_models()
    config = make_site_config(frames={"test": frame}, policy=HUGE,
                              datasets={"test": {"path": "data/test.csv", "outcomes": ["y"], "scores": ["pred", "pred2"],
                                                 "model_columns": ["age", "size", "nodes", "grade"]}})
    with running_server(config) as srv:
        c = client_cls(srv)
        s, s2 = c.open(), c.open(column="pred2")
        r = c.ReleaseHistogram(_request(s, epsilon=4000.0, delta=0.01, n_bins=8, compare_session_id=s2))
        edges, edges2 = np.asarray(r.edges), np.asarray(r.compare_edges)
        assert r.parts == 8 and not r.strata_cuts
        np.testing.assert_allclose(edges2, np.linspace(0, 1, 9), atol=1e-15)
        y = frame["y"].to_numpy()
        h = _cells(_bins(frame["pred"].to_numpy(), edges), _bins(frame["pred2"].to_numpy(), edges2), y, 8, 8)
        np.testing.assert_array_equal(np.asarray(r.negatives).reshape(8, 8), h[0])
        np.testing.assert_array_equal(np.asarray(r.positives).reshape(8, 8), h[1])
        # one release, charged once; the swapped pair is another release
        again = c.ReleaseHistogram(_request(s, epsilon=4000.0, delta=0.01, n_bins=8, compare_session_id=s2))
        assert again.repeated
        swapped = c.ReleaseHistogram(_request(s2, epsilon=4000.0, delta=0.01, n_bins=8, compare_session_id=s))
        assert not swapped.repeated
        np.testing.assert_array_equal(np.asarray(swapped.positives).reshape(8, 8), h[1].T)
        assert c.Budget(pb.BudgetRequest(dataset="test")).budget.releases == 2
        # the second model is opened and checked as the first: a model reading the outcome is refused at opening
        bad = pb.GlmModel(link=pb.LINK_LOGIT, coefficients=[pb.Coefficient(name="y", value=1.0)])
        with pytest.raises(grpc.RpcError) as refused:
            c.open(model=bad)
        assert refused.value.code() == C.INVALID_ARGUMENT and "no model column 'y'" in refused.value.details()
        c.close()


def test_a_joint_release_needs_the_analysts_own_comparable_session(make_site_config, client_cls, snapshot):
    frame = _two_models()
    frame["y2"] = frame["y"][::-1].to_numpy()
    config = make_site_config(frames={"test": frame},
                              datasets={"test": {"path": "data/test.csv", "outcomes": ["y", "y2"],
                                                 "scores": ["pred", "pred2"]}},
                              analysts=None)
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        before = snapshot(config.ledger_path)
        with pytest.raises(grpc.RpcError) as refused:
            c.ReleaseHistogram(_request(s, compare_session_id=c.open(outcome="y2", column="pred2")))
        assert refused.value.code() == C.INVALID_ARGUMENT and "same dataset and outcome" in refused.value.details()
        with pytest.raises(grpc.RpcError) as refused:
            c.ReleaseHistogram(_request(s, compare_session_id="0" * 32))
        assert refused.value.code() == C.NOT_FOUND
        assert snapshot(config.ledger_path) == before
        c.close()
