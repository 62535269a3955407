"""The survival release through real mutual-TLS daemons: exact cells under negligible noise, the policy's grids in
Describe, the charge and the free repeat, the hold, and the stated noise."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from dsroc.v1 import site_pb2 as pb

from .conftest import HUGE, TIME_GRID, brute_force_cells, counts_of, laplace_epsilon_at, open_survival

C = grpc.StatusCode


def test_with_a_huge_epsilon_the_cells_equal_brute_force(survival_site):
    server, client, frame = survival_site(policy=HUGE)
    session = open_survival(client)
    interior = [180.0, 365.0, 730.0, 1460.0]
    r = client.ReleaseSurvival(pb.SurvivalRequest(session_id=session, epsilon=4000.0, delta=1e-5, time_edges=interior,
                                                  n_bins=10, spacing="equal", risk_sums=True))
    assert list(r.time_edges) == [0.0, *interior, np.inf]
    np.testing.assert_allclose(r.edges, np.linspace(0, 1, 11), rtol=0, atol=1e-15)
    t, d, p = frame["time"].to_numpy(), frame["y"].to_numpy(), frame["pred"].to_numpy()
    expected = brute_force_cells(t, d, p, r.time_edges, r.edges)
    np.testing.assert_array_equal(counts_of(r), expected)
    assert expected.sum() == len(frame) and not r.repeated and r.mechanism == "discrete_laplace"
    assert r.privacy_unit == "add or remove one patient" and r.epsilon == 4000.0 and r.delta == 1e-5
    # Offsets within the score bin, randomly rounded to 1/2 (unbiased, SD at most sqrt(count) / 4 per cell) and sent
    # in halves, plus noise of a few hundredths.
    assert r.sums_resolution == 2 and 0 < r.sums_noise_sd < 0.1
    shape = counts_of(r).shape
    offsets, squares = (np.asarray(v, dtype=float).reshape(shape) / 2 for v in (r.offsets, r.squares))
    edges = np.asarray(r.edges)
    for k in range(shape[0]):
        for status in (0, 1):
            for j in range(shape[2]):
                inside = np.array([brute_force_cells([a], [b], [c], r.time_edges, edges)[k, status, j] == 1
                                   for a, b, c in zip(t, d, p)])
                u = (p[inside] - edges[j]) / (edges[j + 1] - edges[j])
                bound = 5 * np.sqrt(inside.sum()) / 4 + 1e-9
                assert abs(offsets[k, status, j] - u.sum()) <= bound
                assert abs(squares[k, status, j] - (u * u).sum()) <= bound


def test_describe_reports_the_time_columns_and_the_policy_grid(survival_site):
    _, client, _ = survival_site(policy={"survival_max_tau": 1095.0, "survival_min_censoring_survival": 0.25})
    reply = client.Describe(pb.DescribeRequest())
    assert list(reply.policy.survival_time_edges) == TIME_GRID and reply.policy.survival_max_time_bins == 6
    assert reply.policy.survival_max_tau == 1095.0 and reply.policy.survival_min_censoring_survival == 0.25
    assert [list(d.time_columns) for d in reply.datasets] == [["time"]]


def test_a_release_is_charged_once_and_its_repeat_is_free_and_identical(survival_site, snapshot):
    server, client, _ = survival_site()
    session = open_survival(client)
    request = pb.SurvivalRequest(session_id=session, epsilon=1.0, delta=1e-6, time_edges=[365.0, 730.0], n_bins=5,
                                 spacing="equal")
    first = client.ReleaseSurvival(request)
    # Counts only: the whole epsilon goes to the counts (scale 1 / epsilon up to the ledger's grid); the ledger charges
    # the pure history its basic composition, (1 + log(1 - delta))-DP at the budget's delta, never below the exact
    # epsilon of one such count, computed here by brute force.
    assert not first.repeated and 1.0 <= first.sigma <= 1.0 / (1.0 - 1e-3) and len(first.offsets) == 0
    delta = server.config.policy.budget_delta
    exact = laplace_epsilon_at(first.sigma, delta)
    assert exact - 1e-9 <= first.epsilon_spent <= 1.0 + np.log1p(-delta) + 1e-12 and exact < 1.0
    before = snapshot(server.config.ledger_path)
    again = client.ReleaseSurvival(request)
    assert again.repeated and again.release_id == first.release_id and list(again.counts) == list(first.counts)
    assert snapshot(server.config.ledger_path) == before
    budget = client.Budget(pb.BudgetRequest(dataset="test")).budget
    assert budget.releases == 1 and budget.delta_spent < 1e-12


def test_the_whole_grid_is_the_default_and_the_sums_share_epsilon(survival_site):
    """No time_edges: the policy's whole grid when it fits (7 edges, 8 bins: here the limit is 8). With the risk sums
    at epsilon 1 the release fits a budget of exactly 1: counts 0.8, each sum 0.1 at sensitivity 2."""
    caps = {"survival_max_time_bins": 8, "max_epsilon": 1.0, "budget_epsilon": 1.0, "max_delta": 1e-5,
            "budget_delta": 1e-5}
    _, client, _ = survival_site(policy=caps)
    r = client.ReleaseSurvival(pb.SurvivalRequest(session_id=open_survival(client), epsilon=1.0, delta=1e-5, n_bins=5,
                                                  risk_sums=True))
    assert list(r.time_edges) == [0.0, *TIME_GRID, np.inf] and len(r.counts) == 8 * 2 * 5
    assert len(r.offsets) == len(r.squares) == 8 * 2 * 5
    assert 1 / 0.8 <= r.sigma <= 1 / (0.8 - 1e-3) and 2 / 0.1 <= r.sums_sigma <= 2 / (0.1 - 1e-3)
    a = np.exp(-1.0 / r.sigma)
    assert r.noise_sd == pytest.approx(np.sqrt(2 * a) / (1 - a), rel=1e-12)
    assert r.epsilon_spent <= 1.0 + 1e-9
    with pytest.raises(grpc.RpcError) as refused:  # nothing more fits
        client.ReleaseSurvival(pb.SurvivalRequest(session_id=open_survival(client), epsilon=0.05, delta=1e-5, n_bins=5))
    assert refused.value.code() == C.RESOURCE_EXHAUSTED


def test_a_prepared_hold_is_used_by_the_release_and_charged_once(survival_site, snapshot):
    server, client, _ = survival_site(policy={"budget_epsilon": 1.5, "max_epsilon": 1.0})
    session = open_survival(client)
    request = pb.SurvivalRequest(session_id=session, epsilon=1.0, delta=1e-6, time_edges=[365.0], n_bins=5)
    held = client.PrepareRelease(pb.PrepareRequest(survival=request))
    assert held.reservation_id and not held.repeated and held.budget.reservations == 1
    with pytest.raises(grpc.RpcError) as refused:  # the hold counts as spent: a second release does not fit
        client.ReleaseSurvival(pb.SurvivalRequest(session_id=session, epsilon=1.0, delta=1e-6, time_edges=[730.0],
                                                  n_bins=5))
    assert refused.value.code() == C.RESOURCE_EXHAUSTED
    request.reservation_id = held.reservation_id
    r = client.ReleaseSurvival(request)
    assert not r.repeated and laplace_epsilon_at(r.sigma, 0.05) - 1e-9 <= r.epsilon_spent <= 1.0 + np.log1p(-0.05)
    budget = client.Budget(pb.BudgetRequest(dataset="test")).budget
    assert budget.releases == 1 and budget.reservations == 0
    again = client.PrepareRelease(pb.PrepareRequest(survival=request))
    assert again.repeated and not again.reservation_id


def test_with_real_noise_the_stated_variance_holds(survival_site):
    server, client, frame = survival_site(policy={"budget_epsilon": 1000.0, "max_epsilon": 2.0})
    session = open_survival(client)
    noise, stated = [], None
    for i in range(20):  # another delta each time: a new release with fresh noise
        r = client.ReleaseSurvival(pb.SurvivalRequest(session_id=session, epsilon=1.0, delta=1e-6 * (1 + i),
                                                      time_edges=[365.0, 730.0], n_bins=5))
        exact = brute_force_cells(frame["time"], frame["y"], frame["pred"], r.time_edges, r.edges)
        noise.append((counts_of(r) - exact).ravel())
        stated = r.noise_sd
    noise = np.concatenate(noise)  # 600 draws
    assert abs(noise.mean()) < 4 * stated / np.sqrt(noise.size)
    # within 4.5 of the variance estimate's own SE: discrete Laplace noise is heavy-tailed (kurtosis 6 at this
    # epsilon), so 600 draws put it within about +-0.3 of the stated variance only most of the time
    se = np.sqrt(np.mean((noise**2 - noise.var()) ** 2) / noise.size)
    assert abs(noise.var() - stated**2) < 4.5 * se and 0.5 < noise.var() / stated**2 < 2.0


def test_an_analysts_model_is_released_on_its_own_risks(survival_site):
    """A GLM sent by the analyst: its risks (computed here with scipy's expit) binned with the times and events."""
    from scipy.special import expit

    _, client, frame = survival_site(policy=HUGE)
    model = pb.GlmModel(link=pb.LINK_LOGIT, intercept=-3.0, coefficients=[pb.Coefficient(name="age", value=0.03),
                                                                         pb.Coefficient(name="nodes", value=0.2)])
    session = client.OpenSession(pb.OpenSessionRequest(dataset="test", outcome="y", time="time",
                                                       score=pb.ScoreSource(model=model))).session_id
    r = client.ReleaseSurvival(pb.SurvivalRequest(session_id=session, epsilon=4000.0, delta=1e-5, time_edges=[730.0],
                                                  n_bins=20, spacing="logit"))
    risk = expit(-3.0 + 0.03 * frame["age"] + 0.2 * frame["nodes"])
    assert r.edges[0] == 0.0 and r.edges[-1] == 1.0 and len(r.edges) == 21  # a logit grid, its ends at 0 and 1
    np.testing.assert_array_equal(counts_of(r), brute_force_cells(frame["time"], frame["y"], risk, r.time_edges,
                                                                  r.edges))
