"""The histogram release's discrete Laplace noise attacked through real mutual-TLS daemons: an empirical privacy audit
on neighbouring datasets, and one validation's charge against its epsilon."""

from __future__ import annotations

import math

import grpc
import numpy as np
import pytest
from scipy.stats import beta

from dsroc.histogram.stages import laplace_two_stage_plan
from dsroc.v1 import site_pb2 as pb
from site_node.cli.init import sample_dataset

RELEASES = 300  # per dataset; each a new release (another delta), so fresh noise at the same scale
ALPHA = 1e-4  # each Clopper-Pearson bound's error: the bound exceeds the truth with probability below 2e-4


def _clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """One-sided lower and upper Clopper-Pearson bounds of a binomial probability, each at level 1 - ALPHA."""
    lo = float(beta.ppf(ALPHA, k, n - k + 1)) if k > 0 else 0.0
    hi = float(beta.ppf(1 - ALPHA, k + 1, n - k)) if k < n else 1.0
    return lo, hi


def test_an_attack_on_neighbouring_datasets_finds_no_more_than_the_charged_epsilon(tls_site):
    """Two sites hold neighbouring datasets: D, and D without one positive patient. The attacker asks each for
    RELEASES counts-only histograms at epsilon 1 and tests "the removed patient's cell holds at least its count in
    D" (the likelihood-ratio test of the geometric mechanism, whose two rates differ by exactly e^epsilon). The
    empirical epsilon, the log ratio of the rates' Clopper-Pearson bounds (Jagielski et al. 2020; Nasr et al. 2021),
    is a lower bound on the release's true epsilon: it must stay below the epsilon charged, and be well above 0
    (the attack sees the patient: a release without noise, or with a fraction of it, would fail the first check)."""
    frame = sample_dataset(300, seed=1)
    target = int(np.flatnonzero(frame["y"].to_numpy() == 1)[0])
    policy = {"max_epsilon": 1.0, "budget_epsilon": 1000.0, "histogram_bins": [10]}
    _, with_patient = tls_site("with", frames={"test": frame}, policy=policy)
    _, without = tls_site("without", frames={"test": frame.drop(index=target).reset_index(drop=True)}, policy=policy)
    edges = np.linspace(0.0, 1.0, 11)
    cell = int(np.clip(np.searchsorted(edges, frame["pred"].iloc[target], side="right") - 1, 0, 9))
    in_d = int(np.sum((frame["y"] == 1) & (np.clip(np.searchsorted(edges, frame["pred"], side="right") - 1, 0, 9) == cell)))
    hits = {}
    for name, client in (("with", with_patient), ("without", without)):
        session = client.open()
        cells, charged = [], []
        for i in range(RELEASES):
            r = client.ReleaseHistogram(pb.HistogramRequest(session_id=session, epsilon=1.0, delta=1e-6 * (1 + i),
                                                            n_bins=10, spacing="equal"))
            assert not r.repeated and r.mechanism == "discrete_laplace"
            cells.append(r.positives[cell])
            charged.append(1.0 / r.sigma)
        assert 1.0 - 1e-6 < min(charged) <= max(charged) <= 1.0  # each release's counts: scale 1 / epsilon
        hits[name] = int(np.sum(np.asarray(cells) >= in_d))
        budget = client.Budget(pb.BudgetRequest(dataset="test")).budget
        # pure DP: 300 x 1 within the budget 1000 (the composed PLD's truncated tails add below 1e-12)
        assert budget.releases == RELEASES and budget.delta_spent < 1e-12
        client.close()
    lo_with, _ = _clopper_pearson(hits["with"], RELEASES)
    _, hi_without = _clopper_pearson(hits["without"], RELEASES)
    empirical = math.log(lo_with / hi_without)
    assert 0.1 < empirical < 1.0, (hits, empirical)


def test_one_validation_is_charged_at_most_its_epsilon(tls_site):
    """Both stages of a validation at (epsilon 1, delta 1e-5), asked as the analyst asks them
    (:func:`dsroc.histogram.stages.laplace_two_stage_plan`, the second with score sums and a scalar), fit a budget of
    exactly epsilon 1 with the request's delta: the ledger's composed history is then 1-DP at delta 0 (pure), its
    epsilon at the budget's delta at most 1, and nothing more fits."""
    policy = {"max_epsilon": 1.0, "max_delta": 1e-5, "budget_epsilon": 1.0, "budget_delta": 1e-5,
              "histogram_bins": [5, 50], "histogram_spacings": ["equal", "logit"]}
    _, client = tls_site(policy=policy)
    stages = laplace_two_stage_plan(1.0, 1e-5, score_sums=True, scalars=1)
    assert stages.epsilon1 + stages.epsilon2 == pytest.approx(1.0, rel=1e-12)
    session = client.open()
    first = client.ReleaseHistogram(pb.HistogramRequest(session_id=session, epsilon=stages.epsilon1,
                                                        delta=stages.delta1, n_bins=50, spacing="logit"))
    second = client.ReleaseHistogram(pb.HistogramRequest(session_id=session, epsilon=stages.epsilon2,
                                                         delta=stages.delta2, n_bins=5, spacing="equal",
                                                         score_sums=True, scalars=["sum_sq"]))
    assert not first.repeated and not second.repeated
    budget = client.Budget(pb.BudgetRequest(dataset="test")).budget
    assert budget.releases == 2 and budget.delta_spent < 1e-12 and budget.epsilon_spent <= 1.0
    with pytest.raises(grpc.RpcError) as refused:
        client.ReleaseHistogram(pb.HistogramRequest(session_id=session, epsilon=0.01, delta=1e-6, n_bins=5,
                                                    spacing="equal"))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    client.close()
