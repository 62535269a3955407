"""The four classes of INTERNAL errors of the attack review (issue 36, item 5), over real mutual-TLS daemons.

Each request is either answered correctly or refused with INVALID_ARGUMENT naming the field and the rule, and a
refusal leaves the ledger, the budget and the audit's release records as they were:

1. a histogram epsilon of 1e-300 (the discrete Laplace's variance divided by zero);
2. the paper protocol's lattice noise at valid (epsilon, delta) such as (0.08, 0.01) (its sigma steps were
   rounded away by the integer variance, so the calibration never converged): now released, with a Gaussian-DP
   mu at most the continuous mechanism's, computed here by scipy;
3. a tiny proposed secagg share (the accountant overflowed);
4. a Budget query of a Boyd release at epsilon 5e-324 (the count's Laplace scale divided by zero).
"""

from __future__ import annotations

import math
import secrets

import grpc
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from dsroc.v1 import site_pb2 as pb
from site_node.interceptors.audit import read_audit

from .conftest import ledger_snapshot
from .protocols.histogram.test_secagg import HUGE, NAMES, federation  # noqa: F401 (the fixture)

C = grpc.StatusCode
POLICY = {"protocols": ["histogram", "paper", "boyd"]}


def _refused(call, code=C.INVALID_ARGUMENT):
    with pytest.raises(grpc.RpcError) as info:
        call()
    assert info.value.code() == code, info.value.details()
    return info.value.details()


def _state(server, client):
    """What a refused call must leave as it was: the ledger's tables, the budget, the audit's granted calls."""
    budget = client.Budget(pb.BudgetRequest(dataset="test")).budget
    granted = [r for r in read_audit(server.config.audit_path) if r["decision"] == "OK" and r["call"] != "Budget"]
    return ledger_snapshot(server.config.ledger_path), budget.epsilon_spent, budget.reservations, len(granted)


def _gaussian_mu(epsilon: float, delta: float) -> float:
    """The largest mu of a Gaussian mechanism that is (epsilon, delta)-DP (Balle and Wang 2018, Thm 8), by scipy."""
    def excess(mu):
        return norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2) - delta
    return brentq(excess, 1e-6, 50.0, xtol=1e-14)


@pytest.mark.parametrize("epsilon", [1e-300, 1e-200, 5e-324])
def test_a_vanishing_histogram_epsilon_is_refused_naming_the_noise_rule(tls_site, epsilon):
    server, client = tls_site(policy=POLICY)
    s = client.open()
    before = _state(server, client)
    request = pb.HistogramRequest(session_id=s, epsilon=epsilon, delta=1e-5, n_bins=20, score_sums=True)
    for call in (lambda: client.ReleaseHistogram(request),
                 lambda: client.PrepareRelease(pb.PrepareRequest(histogram=request))):
        details = _refused(call)
        assert details.startswith("epsilon") and f"epsilon {epsilon:g}" in details.replace(repr(epsilon), f"{epsilon:g}")
        assert "needs noise of SD above 1000 per cell" in details or "too small" in details, details
    (left,) = client.Budget(pb.BudgetRequest(dataset="test", queries=[
        pb.ReleaseQuery(protocol="histogram", epsilon=epsilon, delta=1e-5)])).budget.left
    assert left.releases == 0 and left.refused.startswith("epsilon")
    assert _state(server, client) == before


@pytest.mark.parametrize("epsilon, delta", [(0.08, 0.01), (0.2099, 1e-6), (0.2899, 1e-5)])
def test_the_paper_noise_is_found_where_its_calibration_did_not_converge(tls_site, epsilon, delta):
    server, client = tls_site(policy=POLICY)
    s = client.open()
    held = client.PrepareRelease(pb.PrepareRequest(scores=pb.ReleaseRequest(session_id=s, epsilon=epsilon, delta=delta)))
    assert held.reservation_id and held.budget.reservations == 1
    info, values, _ = client.release(s, pb.SCORE_CLASS_NEGATIVES, epsilon=epsilon, delta=delta)
    mu0 = _gaussian_mu(epsilon, delta)
    # charged as a continuous Gaussian no worse than the one (epsilon, delta) allows, with almost its noise
    assert 0 < info.mu <= mu0 * (1 + 1e-9) and info.mu_charged == info.mu
    assert info.tau <= info.sensitivity / mu0 * 1.002
    assert values.size > 0 and np.all(np.isfinite(values))
    assert client.Budget(pb.BudgetRequest(dataset="test")).budget.releases == 1


@pytest.mark.parametrize("sigma", [5e-324, 1e-300, 1e-30, 1e-10])
def test_a_tiny_proposed_secagg_share_is_refused_as_too_small(federation, snapshot, sigma):
    configs, clients, sessions = federation(HUGE)
    before = snapshot(configs[0].ledger_path)
    base = dict(session_id=sessions[0], epsilon=1.0, delta=1e-5, n_bins=10, spacing="equal", sites=NAMES)
    for more in ({"share_sigma": sigma}, {"share_sigma": sigma, "score_sums": True},
                 {"next_round": pb.SecAggNextRound(epsilon=1.0, delta=1e-5, share_sigma=sigma)}):
        details = _refused(lambda: clients[0].SecAggAdvertise(pb.SecAggAdvertiseRequest(
            round_id=secrets.token_bytes(32), **base, **more)))
        assert details.startswith(f"share_sigma {sigma!r} is too small") or \
            details.startswith(f"next_round: share_sigma {sigma!r} is too small"), details
    assert snapshot(configs[0].ledger_path) == before
    # at a huge epsilon a small share meets the target (the sites calibrate ~1e-3): answered
    ad = clients[0].SecAggAdvertise(pb.SecAggAdvertiseRequest(
        round_id=secrets.token_bytes(32), **{**base, "epsilon": 4000.0, "delta": 0.01}, share_sigma=0.05))
    assert ad.share_sigma == 0.05


@pytest.mark.parametrize("epsilon", [5e-324, 1e-320])
def test_a_boyd_budget_query_at_a_subnormal_epsilon_is_refused_in_the_answer(tls_site, epsilon):
    server, client = tls_site(policy=POLICY)
    s = client.open()
    before = _state(server, client)
    (left,) = client.Budget(pb.BudgetRequest(dataset="test", queries=[
        pb.ReleaseQuery(protocol="boyd", epsilon=epsilon, delta=1e-5)])).budget.left
    assert left.releases == 0 and left.refused.startswith("epsilon * count_share must be at least 1e-300")
    details = _refused(lambda: client.ReleaseBoydStatistics(pb.BoydRequest(session_id=s, epsilon=epsilon, delta=1e-5)))
    assert details == left.refused
    assert _state(server, client) == before
