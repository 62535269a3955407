"""The Budget call's survival query through real mutual-TLS daemons: its count is the number of survival releases the
site then accepts before refusing, a bad query is refused naming the field with nothing recorded, and a site without
a survival grid refuses it."""

from __future__ import annotations

import math

import grpc
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.interceptors.audit import read_audit

from ...conftest import ledger_snapshot
from .conftest import TIME_GRID, open_survival

C = grpc.StatusCode


def _left(client, **query) -> pb.ReleasesLeft:
    (left,) = client.Budget(pb.BudgetRequest(dataset="test", queries=[
        pb.ReleaseQuery(protocol="survival", **query)])).budget.left
    return left


def _state(server, client):
    """What a Budget query must leave as it was: the ledger's tables, the budget, the audit's granted calls."""
    budget = client.Budget(pb.BudgetRequest(dataset="test")).budget
    granted = [r for r in read_audit(server.config.audit_path) if r["decision"] == "OK" and r["call"] != "Budget"]
    return ledger_snapshot(server.config.ledger_path), budget.epsilon_spent, budget.reservations, len(granted)


@pytest.mark.parametrize("risk_sums, epsilon, budget", [(False, 1.0, 3.5), (True, 1.0, 3.5), (True, 0.7, 2.0)])
def test_the_count_is_the_releases_the_site_then_accepts(survival_site, risk_sums, epsilon, budget):
    # Budget and per-release delta such that the ledger's own accountant decides: a count by hand would be a copy.
    server, client, _ = survival_site(policy={"budget_epsilon": budget, "max_epsilon": 1.0})
    session = open_survival(client)
    left = _left(client, epsilon=epsilon, delta=1e-6, score_sums=risk_sums)
    assert not left.refused and not left.at_least and 1 <= left.releases < len(TIME_GRID)
    # Each release on another time edge: a new release (the same request would be a free replay).
    for k in range(left.releases):
        r = client.ReleaseSurvival(pb.SurvivalRequest(session_id=session, epsilon=epsilon, delta=1e-6, n_bins=5,
                                                      time_edges=[TIME_GRID[k]], risk_sums=risk_sums))
        assert not r.repeated and (len(r.offsets) > 0) == risk_sums
        assert _left(client, epsilon=epsilon, delta=1e-6, score_sums=risk_sums).releases == left.releases - k - 1
    with pytest.raises(grpc.RpcError) as refused:
        client.ReleaseSurvival(pb.SurvivalRequest(session_id=session, epsilon=epsilon, delta=1e-6, n_bins=5,
                                                  time_edges=[TIME_GRID[left.releases]], risk_sums=risk_sums))
    assert refused.value.code() == C.RESOURCE_EXHAUSTED
    assert client.Budget(pb.BudgetRequest(dataset="test")).budget.releases == left.releases


@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.nan, math.inf, -math.inf])
def test_a_bad_epsilon_is_refused_naming_it_and_nothing_is_recorded(survival_site, epsilon):
    server, client, _ = survival_site()
    open_survival(client)
    before = _state(server, client)
    left = _left(client, epsilon=epsilon, delta=1e-6)
    assert left.releases == 0 and "epsilon must be a positive finite number" in left.refused, left.refused
    assert _state(server, client) == before


def test_a_site_without_a_survival_grid_refuses_the_query(survival_site):
    _, client, _ = survival_site(policy={"survival_time_edges": []})
    left = _left(client, epsilon=1.0, delta=1e-6)
    assert left.releases == 0 and "survival_time_edges" in left.refused, left.refused
