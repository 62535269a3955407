"""Attacks on the survival release through real mutual-TLS daemons: grids the policy does not allow, differencing two
time grids, bad time data, sessions of the wrong kind; every refusal changes no ledger, audit or cache."""

from __future__ import annotations

import json
import sqlite3

import grpc
import numpy as np
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.testing import running_server

from ...conftest import make_config, tls_client
from .conftest import (SURVIVAL_POLICY, brute_force_cells, counts_of, laplace_epsilon_at, open_survival,
                       survival_dataset, survival_frame)

C = grpc.StatusCode


def _stores(server) -> tuple:
    """Every table of every SQLite store of the site (ledger with its holds, approvals, disclosure auditor)."""
    out = []
    for path in sorted(server.config.state_dir.glob("*.sqlite")):
        with sqlite3.connect(path) as db:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY 1")]
            out.append(tuple(tuple(sorted(map(repr, db.execute(f"SELECT * FROM {t}")))) for t in tables))
    return tuple(out)


def refused_cleanly(server, call, code, words: str) -> str:
    """``call()`` is refused with ``code`` and a message containing ``words``; the stores, the open sessions and the
    site's cached score vectors are unchanged, and the audit log gains exactly the refusal's record (and those of a
    combined call's parts, each naming the call)."""
    audit = server.config.audit_path
    before, sessions, offset = _stores(server), len(server.site.sessions), audit.stat().st_size if audit.exists() else 0
    cached = len(server.site._scored)  # noqa: SLF001 - the site's score cache, which a refusal must not fill
    with pytest.raises(grpc.RpcError) as refused:
        call()
    assert refused.value.code() == code, refused.value.details()
    assert words in refused.value.details(), refused.value.details()
    assert _stores(server) == before and len(server.site.sessions) == sessions
    assert len(server.site._scored) == cached  # noqa: SLF001
    with audit.open("rb") as f:
        f.seek(offset)
        records = [json.loads(line) for line in f.read().decode().splitlines()]
    assert records[0]["decision"] == code.name and all(r["parameters"]["in_call"] for r in records[1:])
    assert not any(r.get("parameters", {}).get("epsilon_charged") for r in records)
    return refused.value.details()


def _request(session, **kw) -> pb.SurvivalRequest:
    return pb.SurvivalRequest(session_id=session, **{"epsilon": 1.0, "delta": 1e-6, "n_bins": 5, "spacing": "equal",
                                                     **kw})


def test_a_time_edge_the_policy_does_not_list_is_refused(survival_site):
    server, client, _ = survival_site()
    session = open_survival(client)
    for edges in ([400.0], [365.0, 365.0 + 1e-6], [730.0, 2000.0]):
        refused_cleanly(server, lambda: client.ReleaseSurvival(_request(session, time_edges=edges)),
                        C.PERMISSION_DENIED, "every time edge must be one of this site's survival_time_edges")
    for edges in ([730.0, 365.0], [0.0, 365.0], [-1.0], [float("nan")], [float("inf")]):
        refused_cleanly(server, lambda: client.ReleaseSurvival(_request(session, time_edges=edges)),
                        C.INVALID_ARGUMENT, "time_edges must be finite, > 0 and strictly increasing")
    # Two edges within the matching tolerance of one listed edge would make an empty bin of width 0: refused.
    refused_cleanly(server, lambda: client.ReleaseSurvival(_request(session, time_edges=[365.0, 365.0 + 1e-8])),
                    C.INVALID_ARGUMENT, "two edges name the same edge")
    # An edge within that tolerance of a listed one is that edge: the same release as the listed value.
    listed = client.ReleaseSurvival(_request(session, time_edges=[365.0]))
    near = client.ReleaseSurvival(_request(session, time_edges=[365.0 + 1e-8]))
    assert near.repeated and near.release_id == listed.release_id and list(near.time_edges) == [0.0, 365.0, np.inf]


def test_a_time_grid_finer_than_allowed_is_refused(survival_site):
    """The policy allows 6 time bins (5 interior edges) of its 7-edge grid: 6 edges, or the whole grid by default, is
    refused; an edge between two listed ones (a finer grid) too."""
    server, client, _ = survival_site()
    session = open_survival(client)
    six = [90.0, 180.0, 365.0, 547.5, 730.0, 1095.0]
    refused_cleanly(server, lambda: client.ReleaseSurvival(_request(session, time_edges=six)),
                    C.PERMISSION_DENIED, "time_edges gives 7 time bins; this site allows at most 6")
    refused_cleanly(server, lambda: client.ReleaseSurvival(_request(session)),
                    C.PERMISSION_DENIED, "the site's whole survival grid has 8 time bins, more than its limit of 6")
    refused_cleanly(server, lambda: client.ReleaseSurvival(_request(session, time_edges=[365.0, 456.25, 547.5])),
                    C.PERMISSION_DENIED, "456.25 is not")
    assert not client.ReleaseSurvival(_request(session, time_edges=six[:5])).repeated  # 6 bins: allowed


def test_two_time_grids_that_difference_out_patients_are_both_charged(survival_site, snapshot):
    """Grids [365, 730] and [365, 547.5, 730] differ only by splitting (365, 730]: their difference isolates the
    patients of (365, 547.5]. Each is a release of its own: both charged, the ledger's composed epsilon is at least
    that of two discrete Laplace counts (brute force of the product distributions) and at most their basic
    composition, and a repeat of either is free and identical."""
    server, client, frame = survival_site(policy={"budget_epsilon": 10.0})
    session = open_survival(client)
    coarse, fine = _request(session, time_edges=[365.0, 730.0]), _request(session, time_edges=[365.0, 547.5, 730.0])
    a, b = client.ReleaseSurvival(coarse), client.ReleaseSurvival(fine)
    assert not a.repeated and not b.repeated and a.release_id != b.release_id and a.sigma == b.sigma
    budget = client.Budget(pb.BudgetRequest(dataset="test")).budget
    delta = server.config.policy.budget_delta
    exact = laplace_epsilon_at(a.sigma, delta, releases=2)
    assert budget.releases == 2 and exact - 1e-9 <= budget.epsilon_spent <= 2.0 + np.log1p(-delta)
    assert budget.epsilon_spent > laplace_epsilon_at(a.sigma, server.config.policy.budget_delta) + 0.5
    assert budget.delta_spent < 1e-12  # pure DP: 2 x 1 at delta 0, within epsilon 10
    before = snapshot(server.config.ledger_path)
    for request, first in ((coarse, a), (fine, b)):
        again = client.ReleaseSurvival(request)
        assert again.repeated and again.release_id == first.release_id and list(again.counts) == list(first.counts)
    assert snapshot(server.config.ledger_path) == before
    # Each release draws its own noise: their first time bin [0, 365] holds the same patients, and its 10 noisy cells
    # differ (the same numbers twice has probability about 1e-6 with independent noise).
    assert counts_of(a)[0].tolist() != counts_of(b)[0].tolist()
    exact_coarse = brute_force_cells(frame["time"], frame["y"], frame["pred"], a.time_edges, a.edges)
    assert np.abs(counts_of(a) - exact_coarse).max() < 40 * a.noise_sd


@pytest.mark.parametrize("bad, words", [
    (-1.0, "time column 'time': has negative values (follow-up times must be >= 0)"),
    (float("nan"), "time column 'time': has missing or non-finite values"),
    (float("inf"), "time column 'time': has missing or non-finite values"),
    ("soon", "time column 'time': is not numeric"),
])
def test_bad_time_data_is_refused_before_anything_is_held_or_charged(survival_site, bad, words):
    frame = survival_frame()
    frame["time"] = frame["time"].astype(object)
    frame.loc[7, "time"] = bad
    server, client, _ = survival_site(frame=frame)
    refused_cleanly(server, lambda: open_survival(client), C.INVALID_ARGUMENT, f"dataset 'test', {words}")
    # With a paper release to hold on the session-to-be: nothing is held either.
    prepare = pb.PrepareRequest(scores=pb.ReleaseRequest(epsilon=1.0, delta=1e-6))
    refused_cleanly(server, lambda: client.OpenSession(pb.OpenSessionRequest(
        dataset="test", outcome="y", time="time", score=pb.ScoreSource(score_column="pred"), prepare=prepare)),
        C.INVALID_ARGUMENT, words)
    assert client.open()  # the binary session on the same dataset does not read the time column


def test_an_undeclared_time_column_and_a_non_binary_event_are_refused(survival_site):
    frame = survival_frame().assign(grade_time=lambda f: f["time"], y=lambda f: f["y"] * 2)
    server, client, _ = survival_site(frame=frame)
    refused_cleanly(server, lambda: open_survival(client, time="grade_time"), C.INVALID_ARGUMENT,
                    "time: dataset 'test' has no declared time column 'grade_time' (declared: ['time'])")
    refused_cleanly(server, lambda: open_survival(client), C.INVALID_ARGUMENT,
                    "outcome column 'y': labels must be 0 or 1")


def test_binary_calls_refuse_a_survival_session_and_survival_refuses_a_binary_one(survival_site):
    server, client, _ = survival_site(policy={"protocols": ["histogram", "paper", "boyd", "secagg"]})
    survival, binary = open_survival(client), client.open()
    words = "a survival session): only ReleaseSurvival serves it"
    calls = [
        lambda: client.ReleaseHistogram(pb.HistogramRequest(session_id=survival, epsilon=1.0, delta=1e-6, n_bins=5)),
        lambda: client.ReleaseHistogram(pb.HistogramRequest(session_id=binary, epsilon=1.0, delta=1e-6, n_bins=5,
                                                            compare_session_id=survival)),
        lambda: client.release(survival, pb.SCORE_CLASS_NEGATIVES),
        lambda: client.Sensitivity(pb.SensitivityRequest(session_id=survival)),
        lambda: client.BrierParts(pb.BrierPartsRequest(session_id=survival)),
        lambda: client.ConfusionParts(pb.ConfusionPartsRequest(session_id=survival, threshold=0.5)),
        lambda: client.upload(survival, pb.SCORE_CLASS_NEGATIVES, [0.1, 0.2]),
        lambda: client.ReleaseBoydStatistics(pb.BoydRequest(session_id=survival, epsilon=1.0, delta=1e-6)),
        lambda: client.SecAggAdvertise(pb.SecAggAdvertiseRequest(session_id=survival, round_id=b"r" * 16, epsilon=1.0,
                                                                 delta=1e-6, n_bins=5, sites=["a", "b", "c"])),
        lambda: client.PrepareRelease(pb.PrepareRequest(histogram=pb.HistogramRequest(
            session_id=survival, epsilon=1.0, delta=1e-6, n_bins=5))),
    ]
    for call in calls:
        refused_cleanly(server, call, C.FAILED_PRECONDITION, words)
    for call in (lambda: client.ReleaseSurvival(_request(binary, time_edges=[365.0])),
                 lambda: client.PrepareRelease(pb.PrepareRequest(survival=_request(binary, time_edges=[365.0])))):
        refused_cleanly(server, call, C.FAILED_PRECONDITION, "ReleaseSurvival needs a session opened with one")
    prepare = pb.PrepareRequest(scores=pb.ReleaseRequest(epsilon=1.0, delta=1e-6))
    refused_cleanly(server, lambda: client.OpenSession(pb.OpenSessionRequest(
        dataset="test", outcome="y", time="time", score=pb.ScoreSource(score_column="pred"), prepare=prepare)),
        C.FAILED_PRECONDITION, words)
    reply = client.OpenSession(pb.OpenSessionRequest(dataset="test", outcome="y", time="time", with_sensitivity=True,
                                                     score=pb.ScoreSource(score_column="pred")))
    assert reply.session_id and not reply.HasField("sensitivity")


@pytest.mark.parametrize("fields, code, words", [
    ({"epsilon": 11.0}, C.PERMISSION_DENIED, "epsilon 11.0 is above"),
    ({"epsilon": float("nan")}, C.INVALID_ARGUMENT, "epsilon must be a positive finite number, got nan"),
    ({"epsilon": 1e-9}, C.INVALID_ARGUMENT, "epsilon"),
    ({"delta": 0.0}, C.INVALID_ARGUMENT, "delta must be a number strictly between 0 and 1"),
    ({"delta": 0.5}, C.PERMISSION_DENIED, "delta 0.5 is above"),
    ({"n_bins": 7}, C.PERMISSION_DENIED, "n_bins 7 is not one this site allows"),
    ({"spacing": "sqrt"}, C.INVALID_ARGUMENT, "spacing must be"),
    ({"n_bins": 0, "spacing": "", "edges": [0.123]}, C.PERMISSION_DENIED, "must be an edge of a grid"),
    ({"n_bins": 20, "time_edges": [90.0, 180.0, 365.0, 547.5, 730.0]}, C.INVALID_ARGUMENT,
     "6 time bins x 20 score bins = 120 cells per status is above this site's limit of 100"),
])
def test_bad_release_parameters_are_refused_with_the_field_and_rule(survival_site, fields, code, words):
    server, client, _ = survival_site(policy={"histogram_max_cells": 100})
    session = open_survival(client)
    refused_cleanly(server, lambda: client.ReleaseSurvival(_request(session, **{"time_edges": [365.0], **fields})),
                    code, words)


def test_fewer_than_q_events_are_refused_before_any_charge(survival_site):
    """As a binary histogram refuses a class below q, a survival release with fewer than q events gives curves no
    analysis can use: refused (the disclosure of "fewer than q", under every protocol) before anything is charged."""
    frame = survival_frame()
    frame["y"] = 0
    frame.loc[:3, "y"] = 1  # 4 events, q = 5
    server, client, _ = survival_site(frame=frame)
    session = open_survival(client)
    refused_cleanly(server, lambda: client.ReleaseSurvival(_request(session, time_edges=[365.0])),
                    C.PERMISSION_DENIED, "the events of a survival release")


def test_scores_that_are_not_risks_and_a_site_without_a_survival_grid_are_refused(survival_site):
    frame = survival_frame().assign(pred=lambda f: f["pred"] * 10)
    server, client, _ = survival_site(frame=frame, dataset={"score_range": [0.0, 10.0]})
    session = open_survival(client)
    refused_cleanly(server, lambda: client.ReleaseSurvival(_request(session, time_edges=[365.0])), C.INVALID_ARGUMENT,
                    "score: a survival release needs predicted risks in [0, 1]; this score source's range is "
                    "[0.0, 10.0]")
    other, c2, _ = survival_site("nogrid", policy={"survival_time_edges": []})
    session = open_survival(c2)
    refused_cleanly(other, lambda: c2.ReleaseSurvival(_request(session, time_edges=[365.0])),
                    C.FAILED_PRECONDITION, "this site serves no survival release")
    assert list(c2.Describe(pb.DescribeRequest()).policy.survival_time_edges) == []
    paper, c3, _ = survival_site("paper", policy={"protocols": ["paper"]})
    session = open_survival(c3)
    refused_cleanly(paper, lambda: c3.ReleaseSurvival(_request(session, time_edges=[365.0])),
                    C.FAILED_PRECONDITION, "does not serve the 'histogram' protocol")


def test_a_replay_after_the_times_changed_is_refused(tmp_path, tls_pki, client_factory):
    """The release's fingerprint covers the follow-up times: after a restart on data whose times changed, the same
    request is refused (its stored noisy cells no longer match the data) instead of replayed."""
    tls = {"cert": str(tls_pki.server_cert), "key": str(tls_pki.server_key), "client_ca": str(tls_pki.ca_cert)}
    frame = survival_frame()
    config = make_config(tmp_path / "site", tls=tls, frames={"test": frame}, datasets=survival_dataset(),
                         policy=SURVIVAL_POLICY)
    with running_server(config) as server:
        client = tls_client(client_factory, server.bound_address, tls_pki)
        request = _request(open_survival(client), time_edges=[365.0])
        assert not client.ReleaseSurvival(request).repeated
        request.session_id = open_survival(client)
        assert client.ReleaseSurvival(request).repeated  # the same data: a replay
    frame.assign(time=frame["time"][::-1].to_numpy()).to_csv(config.datasets["test"].path, index=False)
    with running_server(config) as server:
        client = tls_client(client_factory, server.bound_address, tls_pki)
        request.session_id = open_survival(client)
        refused_cleanly(server, lambda: client.ReleaseSurvival(request), C.FAILED_PRECONDITION,
                        "the dataset changed since this release was made")
