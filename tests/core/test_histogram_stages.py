"""The two-stage quantile grid: edges at the quantiles of a fine release, and the budget split between stages."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from dsroc.histogram import bin_scores, histogram_edges, quantile_edges
from dsroc.histogram.stages import (SUMS_RATIO, SUMS_RESOLUTION, first_stage_bins, second_stage_interior,
                                   two_stage_plan)
from dsroc.privacy.accounting import Accountant, DiscreteGaussian
from dsroc.privacy.noise import discrete_gaussian_sigma, joint_discrete_gaussian_sigma


def test_quantile_edges_are_the_fine_edges_nearest_the_scores_quantiles():
    rng = np.random.default_rng(2)
    s = expit(rng.normal(-3.5, 1.0, 20_000))  # low scores: an equal grid would put nearly all in its first bin
    y = (rng.random(s.size) < s).astype(int)
    fine = histogram_edges(50, lo=0.005, hi=0.995, spacing="logit")
    h0, h1 = bin_scores(s, y, fine)
    got = quantile_edges(h0 + h1, fine, 5)
    clipped = np.clip(s, fine[0], fine[-1])
    share = np.array([np.mean(clipped < e) for e in fine[1:-1]])  # by direct comparison
    expected = fine[1:-1][sorted({int(np.argmin(np.abs(share - q))) for q in (0.2, 0.4, 0.6, 0.8)})]
    np.testing.assert_array_equal(got, expected)
    # Each of the five bins holds close to a fifth of the scores (within the fine grid's granularity).
    counts = np.histogram(clipped, np.concatenate([[0], got, [1]]))[0] / s.size
    assert np.all(np.abs(counts - 0.2) < 0.08)
    # Noisy counts are made consistent first; nobody left gives no edge; everyone in one fine bin gives one edge.
    assert quantile_edges(np.full(50, -3.0), fine, 5).size == 0
    one = np.zeros(50)
    one[20] = 100
    assert quantile_edges(one, fine, 5).size <= 2


def test_the_analysts_stage_choices_are_the_finest_common_count_and_the_quantiles_or_the_middle_edge():
    """The pure choices the analyst (and the stress study) make between the stages."""
    assert first_stage_bins([(5, 8, 12, 50, 100), (5, 20, 50)]) == 50
    assert first_stage_bins([(5, 8, 20), (8, 20, 100)]) == 20 and first_stage_bins([(5, 8), (100,)]) is None
    fine = histogram_edges(50, lo=0.005, hi=0.995, spacing="logit")
    counts = np.random.default_rng(4).poisson(40.0, 50) + np.arange(50)
    cum = np.cumsum(counts)[:-1] / counts.sum()  # already consistent: the nearest fine edge to each fifth
    expected = fine[1:-1][sorted({int(np.argmin(np.abs(cum - q))) for q in (0.2, 0.4, 0.6, 0.8)})]
    np.testing.assert_array_equal(second_stage_interior(counts, fine, 5), expected)
    np.testing.assert_array_equal(second_stage_interior(np.full(50, -3.0), fine, 5), [fine[25]])  # nobody left


@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-5), (5.0, 1e-6)])
def test_the_two_stages_as_the_sites_calibrate_them_compose_to_the_validations_budget(epsilon, delta):
    plan = two_stage_plan(epsilon, delta)
    # What each site does with the epsilon and delta it is asked for (site_node.histograms.plan_histogram).
    sigma1 = discrete_gaussian_sigma(plan.epsilon1, plan.delta1)
    t = joint_discrete_gaussian_sigma(plan.epsilon2, plan.delta2, [(1, 1.0), (SUMS_RESOLUTION, SUMS_RATIO)])
    assert sigma1 == pytest.approx(plan.sigma1, rel=1e-3) and t == pytest.approx(plan.sigma2, rel=1e-3)
    events = [DiscreteGaussian(sigma1), DiscreteGaussian(t), DiscreteGaussian(SUMS_RATIO * SUMS_RESOLUTION * t,
                                                                              SUMS_RESOLUTION)]
    assert Accountant(events).epsilon(delta) == pytest.approx(epsilon, rel=0.01)
    # The first stage costs the second about 5 % more noise than a single release with sums.
    single = joint_discrete_gaussian_sigma(epsilon, delta, [(1, 1.0), (SUMS_RESOLUTION, SUMS_RATIO)])
    assert 1.0 < plan.sigma2 / single < 1.1 and plan.epsilon1 < plan.epsilon2 < epsilon


def test_a_very_large_epsilon_is_calibrated_instead_of_exhausting_memory():
    # At epsilon 100 the secant steps on the accountant's figures left for a sigma whose loss distribution needed
    # 412 TiB (MemoryError), and its numbers overflowed into object arrays (TypeError) on the way.
    epsilon, delta = 100.0, 1e-5
    t = joint_discrete_gaussian_sigma(epsilon, delta, [(1, 1.0), (SUMS_RESOLUTION, SUMS_RATIO)])

    def release_delta(scale):
        return Accountant([DiscreteGaussian(scale), DiscreteGaussian(SUMS_RATIO * SUMS_RESOLUTION * scale,
                                                                     SUMS_RESOLUTION)]).delta(epsilon)

    assert release_delta(t) <= delta < release_delta(0.97 * t)  # meets delta, and not by a needlessly large sigma
    plan = two_stage_plan(epsilon, delta)
    assert np.isfinite([plan.sigma1, plan.sigma2]).all() and plan.epsilon2 <= epsilon
