"""The two-stage quantile grid: edges at the quantiles of a fine release, and the budget split between stages."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from dsroc.histogram import balanced_quantile_edges, bin_scores, histogram_edges, quantile_edges
from dsroc.histogram.stages import (STAGE2_BINS, SUMS_RATIO, SUMS_RESOLUTION, balanced_interior, first_stage_bins,
                                   second_stage_bins, second_stage_grid, two_stage_plan)
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


def test_the_analysts_stage_choices_are_the_finest_common_count_and_the_balanced_quantiles_or_the_middle_edge():
    """The pure choices the analyst (both protocols' quantile grids, and the stress and multicentre studies) make
    between the stages: the finest common count, then as many bins as the class sizes over the noise call for at the
    fine edges nearest the quantiles of the mean of the class CDFs (by hand here)."""
    assert first_stage_bins([(5, 8, 12, 50, 100), (5, 20, 50)]) == 50
    assert first_stage_bins([(5, 8, 20), (8, 20, 100)]) == 20 and first_stage_bins([(5, 8), (100,)]) is None
    fine = histogram_edges(50, lo=0.005, hi=0.995, spacing="logit")
    rng = np.random.default_rng(4)
    c0 = rng.poisson(400.0, 50) + np.arange(50)  # non-negative: already consistent
    c1 = rng.poisson(60.0, 50) + 2 * np.arange(50)[::-1]
    n0, n1 = c0.sum(), c1.sum()
    mix = 0.5 * np.cumsum(c0)[:-1] / n0 + 0.5 * np.cumsum(c1)[:-1] / n1
    for sigma, most, bins in ((50.0, 100, 5), (20.0, 100, 7), (10.0, 100, 10), (1.0, 100, 12), (1.0, 8, 8)):
        ratio = (n0**-2.0 + n1**-2.0) ** -0.5 / sigma
        assert bins == min(most, 5 if ratio < 200 else 7 if ratio < 400 else 10 if ratio < 1500 else 12)
        expected = fine[1:-1][sorted({int(np.argmin(np.abs(mix - q))) for q in np.arange(1, bins) / bins})]
        np.testing.assert_array_equal(second_stage_grid(c0, c1, fine, sigma, most=most), expected)
    # n_bins asked for: the rule is not used; nobody left after the noise: the middle fine edge
    expected = fine[1:-1][sorted({int(np.argmin(np.abs(mix - q))) for q in (0.25, 0.5, 0.75)})]
    np.testing.assert_array_equal(second_stage_grid(c0, c1, fine, 4.0, most=100, n_bins=4), expected)
    np.testing.assert_array_equal(second_stage_grid(np.full(50, -3.0), np.full(50, -1.0), fine, 4.0, most=100),
                                  [fine[25]])
    # negative noisy counts count as the consistent counts do: a class emptied by the noise gives 5 bins
    np.testing.assert_array_equal(second_stage_grid(c0, np.full(50, -1.0), fine, 1.0, most=100),
                                  balanced_interior(c0, np.zeros(50), fine, 5))


def test_balanced_quantile_edges_are_the_fine_edges_nearest_the_mean_of_the_class_cdfs():
    rng = np.random.default_rng(3)
    s = expit(rng.normal(-4.0, 1.0, 20_000))  # prevalence about 0.03: all scores' quantiles are the negatives'
    y = (rng.random(s.size) < s).astype(int)
    fine = histogram_edges(50, lo=0.005, hi=0.995, spacing="logit")
    h0, h1 = bin_scores(s, y, fine)
    got = balanced_quantile_edges(h0, h1, fine, 5)
    clipped = np.clip(s, fine[0], fine[-1])
    mix = np.array([0.5 * np.mean(clipped[y == 0] < e) + 0.5 * np.mean(clipped[y == 1] < e) for e in fine[1:-1]])
    expected = fine[1:-1][sorted({int(np.argmin(np.abs(mix - q))) for q in (0.2, 0.4, 0.6, 0.8)})]
    np.testing.assert_array_equal(got, expected)
    # The positives get bins: above the highest edge sit about 10 % of all patients' mixture but far more
    # positives than the all-scores grid leaves in its top bin's share of positives.
    top = np.mean(clipped[y == 1] >= got[-1])
    assert 0.12 < top < 0.3 and np.mean(clipped[y == 1] >= quantile_edges(h0 + h1, fine, 5)[-1]) > 0.5
    # One class empty after the noise: the other's quantiles; both empty: no edge.
    np.testing.assert_array_equal(balanced_quantile_edges(h0, np.full(50, -2.0), fine, 5), quantile_edges(h0, fine, 5))
    assert balanced_quantile_edges(np.full(50, -2.0), np.full(50, -1.0), fine, 5).size == 0
    np.testing.assert_array_equal(balanced_interior(np.full(50, -2.0), np.zeros(50), fine, 5), [fine[25]])
    with pytest.raises(ValueError, match="n_bins must be an integer >= 2"):
        balanced_quantile_edges(h0, h1, fine, 1)
    with pytest.raises(ValueError, match="counts1 must have one count per bin"):
        balanced_quantile_edges(h0, h1[:-1], fine, 5)


@pytest.mark.parametrize("n0,n1,sigma", [(9800, 200, 9.2), (700, 300, 9.2), (7000, 3000, 9.2), (7000, 3000, 4.1),
                                         (70_000, 30_000, 4.1), (70_000, 30_000, 0.0), (100, 0.0, 9.2), (-5, 50, 1)])
def test_the_second_stages_bin_count_follows_the_effective_size_over_the_noise(n0, n1, sigma):
    # n_eff = (n0^-2 + n1^-2)^(-1/2), by hand; the thresholds of STAGE2_BINS: 5 below 200, 7 to 400, 10 to 1 500, then 12.
    ratio = 0.0 if min(n0, n1) <= 0 else float("inf") if sigma == 0 else 1.0 / np.sqrt(n0**-2.0 + n1**-2.0) / sigma
    expected = 5 if ratio < 200 else 7 if ratio < 400 else 10 if ratio < 1500 else 12
    assert STAGE2_BINS == ((0.0, 5), (200.0, 7), (400.0, 10), (1500.0, 12))
    assert second_stage_bins(n0, n1, sigma, most=100) == expected
    assert second_stage_bins(n0, n1, sigma, most=6) == min(expected, 6)
    # At epsilon 1 (5 sites, discrete Laplace: a summed count's SD 4.43): 5 bins at n = 1 000 at prevalence 0.3, 10 at
    # 10 000, 12 at 100 000.
    assert [second_stage_bins(*a, 4.43, most=100) for a in ((700, 300), (7000, 3000), (70_000, 30_000))] == [5, 10, 12]


def test_the_second_stages_bin_count_refuses_bad_arguments():
    with pytest.raises(ValueError, match="sigma must be a finite number >= 0"):
        second_stage_bins(100, 100, -1.0, most=10)
    with pytest.raises(ValueError, match="most must be an integer >= 2"):
        second_stage_bins(100, 100, 1.0, most=1)


@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-5), (5.0, 1e-6)])
def test_the_two_stages_as_the_sites_calibrate_them_compose_to_the_validations_budget(epsilon, delta):
    plan = two_stage_plan(epsilon, delta)
    # What each site does with the epsilon and delta it is asked for (site_node.protocols.histogram.release.plan_histogram).
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


@pytest.mark.parametrize("epsilon,score_sums,scalars", [(1.0, True, 0), (0.5, True, 2), (5.0, False, 0), (1.0, False, 3)])
def test_the_laplace_stages_share_epsilon_in_the_modules_proportions_and_compose_to_it(epsilon, score_sums, scalars):
    """The histogram protocol's discrete Laplace plan: stage 1 gets 0.2 of epsilon against 0.7 (counts), 0.1 (sums)
    and 0.1 per scalar for stage 2, renormalised over the parts asked; each stage's parts as the site calibrates them
    (on the ledger's grid of 5e-4) are charged by the accountant at most epsilon in all, at delta 0."""
    from dsroc.histogram.stages import laplace_release_parts, laplace_release_scales, laplace_two_stage_plan
    from dsroc.privacy.accounting import DiscreteLaplace

    stages = laplace_two_stage_plan(epsilon, 1e-5, score_sums=score_sums, scalars=scalars)
    weights = {"first": 0.2, "counts": 0.7, "sums": 0.1 * score_sums, "scalars": 0.1 * scalars}
    total = sum(weights.values())
    assert stages.epsilon1 == pytest.approx(epsilon * 0.2 / total, rel=1e-12)
    assert stages.epsilon2 == pytest.approx(epsilon * (total - 0.2) / total, rel=1e-12)
    assert stages.delta1 == stages.delta2 == 5e-6
    events = []
    for eps, sums, k in ((stages.epsilon1, False, 0), (stages.epsilon2, score_sums, scalars)):
        counts, sums_scale, scalar_scale = laplace_release_scales(eps, score_sums=sums, scalars=k, interval=5e-4)
        parts = laplace_release_parts(score_sums=sums, scalars=k)
        events += [DiscreteLaplace(counts)] + ([DiscreteLaplace(sums_scale, SUMS_RESOLUTION)] if sums else [])
        events += [DiscreteLaplace(scalar_scale, 16) for _ in range(k)]
        assert len(parts) == 1 + sums + k
    # closed form: the second stage's counts get 0.7 / total of epsilon, less than a grid step below
    assert epsilon * 0.7 / total - 5e-4 < 1.0 / events[1].scale <= epsilon * 0.7 / total
    # the stage SDs are the discrete Laplace's sqrt(2 a) / (1 - a) at those scales (a = exp(-1 / scale))
    a = np.exp(-1.0 / events[1].scale)
    assert stages.sigma2 == pytest.approx(np.sqrt(2 * a) / (1 - a), rel=2e-3)
    accountant = Accountant(events, value_discretization_interval=5e-4)
    assert accountant.delta(epsilon) < 1e-12 and accountant.delta(epsilon - 0.01) > 1e-6  # 1e-12: truncated tails


def test_the_laplace_shares_are_read_where_they_are_set(monkeypatch):
    """The shares live in one place: changing the module's constants changes the plan and the site's calibration."""
    from dsroc.histogram import stages as module

    before = module.laplace_two_stage_plan(1.0, 1e-5)
    monkeypatch.setattr(module, "LAPLACE_STAGE1_SHARE", 0.1)
    monkeypatch.setattr(module, "LAPLACE_COUNTS_SHARE", 0.8)
    after = module.laplace_two_stage_plan(1.0, 1e-5)
    assert before.epsilon1 == pytest.approx(0.2) and after.epsilon1 == pytest.approx(0.1)
    counts, sums, _ = module.laplace_release_scales(0.9, score_sums=True, interval=1e-9)
    assert 1.0 / counts == pytest.approx(0.9 * 0.8 / 0.9, rel=1e-6) and 2.0 / sums == pytest.approx(0.9 * 0.1 / 0.9, rel=1e-6)


def test_scores_crowded_into_few_fine_bins_get_their_bins_among_the_policys_edges():
    """A weak model's calibrated scores, 98 % of them in (0.19, 0.43): six of the fine grid's 50 logit bins. The fine
    edges alone give at most 7 bins for 12 asked; among the edges of every grid the policy allows (its logit grids), the mixture's CDF
    interpolated linearly inside each fine bin (by hand here), the grid gets 10 or more, each an edge a site accepts
    in an explicit grid, and no bin holds a sixth of the mixture (with the fine edges alone one holds a quarter)."""
    from scipy.special import logit

    from dsroc.histogram import allowed_edges
    from dsroc.histogram.stages import policy_candidates

    rng = np.random.default_rng(7)
    s = expit(rng.normal(-0.85, 0.25, 30_000))
    y = (rng.random(s.size) < s).astype(int)
    bins = (5, 8, 10, 12, 20, 50, 100)
    fine = histogram_edges(50, lo=0.005, hi=0.995, spacing="logit")
    h0, h1 = bin_scores(s, y, fine)
    assert np.count_nonzero(h0 + h1 > 200) <= 6 and balanced_quantile_edges(h0, h1, fine, 12).size + 1 <= 7
    candidates = policy_candidates([bins, bins[1:]], fine, "logit")  # the edges both sites allow
    by_hand = np.unique(np.concatenate([expit(np.linspace(logit(0.005), logit(0.995), k + 1)) for k in bins[1:]]))
    by_hand = by_hand[np.concatenate([[True], np.diff(by_hand) > 1e-12])]
    np.testing.assert_allclose(candidates, by_hand, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(allowed_edges(bins[1:], "logit", lo=0.005, hi=0.995), candidates)
    assert np.all(np.diff(candidates) > 1e-12)  # an edge two grids share (1/2 of 10 and 20 bins) is kept once
    got = balanced_quantile_edges(h0, h1, fine, 12, candidates=candidates)
    inner = candidates[(candidates > fine[0]) & (candidates < fine[-1])]
    mix = 0.5 * np.cumsum(h0)[:-1] / h0.sum() + 0.5 * np.cumsum(h1)[:-1] / h1.sum()
    at = np.interp(inner, fine, np.concatenate([[0.0], mix, [1.0]]))
    expected = inner[sorted({int(np.argmin(np.abs(at - q))) for q in np.arange(1, 12) / 12})]
    np.testing.assert_array_equal(got, expected)
    assert got.size + 1 >= 10 and np.isin(got, by_hand).all()
    c = np.clip(s, fine[0], fine[-1])

    def mixture(interior):  # each bin's share of the class-balanced mixture, by direct counting
        grid = np.concatenate([[0.0], interior, [1.0]])
        return sum(0.5 * np.histogram(c[y == k], grid)[0] / np.sum(y == k) for k in (0, 1))

    assert mixture(got).max() < 0.17 < 0.25 < mixture(balanced_quantile_edges(h0, h1, fine, 12)).max()
    # the same on the stage function; without candidates the fine edges as before
    np.testing.assert_array_equal(second_stage_grid(h0, h1, fine, 0.0, most=12, candidates=candidates), got)
    np.testing.assert_array_equal(second_stage_grid(h0, h1, fine, 0.0, most=12), balanced_quantile_edges(h0, h1, fine, 12))


def test_the_first_release_grid_is_fine_where_scores_lie_and_coarse_in_the_tails():
    """first_stage_edges by hand: on [0.0001, 0.9999] the 100-bin logit grid's edges inside [0.005, 0.995] and the
    10-bin grid's outside; on [0.005, 0.995] none (the uniform 50-bin grid, first_stage_grid); None where no allowed
    count is fine enough; only counts every site allows."""
    from scipy.special import expit, logit

    from dsroc.histogram.stages import first_stage_edges, first_stage_grid

    bins = (5, 8, 10, 12, 20, 50, 100, 200)
    core, tails = (np.linspace(logit(0.0001), logit(0.9999), k + 1) for k in (100, 10))
    inside = (core >= logit(0.005) - 1e-9) & (core <= logit(0.995) + 1e-9)
    outside = (tails < logit(0.005)) | (tails > logit(0.995))
    by_hand = expit(np.sort(np.concatenate([core[inside], tails[outside]])))
    got = first_stage_edges([bins, bins], 0.0001, 0.9999)
    np.testing.assert_allclose(got, by_hand, rtol=0, atol=1e-15)
    assert got.size - 1 == 62 and np.all(np.diff(logit(got)) <= 1.85) and np.diff(logit(got))[10:50].max() < 0.19
    # a range without tails beyond [0.005, 0.995]: no explicit grid, the uniform 50-bin grid as before
    assert first_stage_edges([bins], 0.005, 0.995) is None
    np.testing.assert_array_equal(first_stage_grid([bins], 0.005, 0.995),
                                  histogram_edges(50, lo=0.005, hi=0.995, spacing="logit"))
    np.testing.assert_array_equal(first_stage_grid([bins], 0.0001, 0.9999), [0.0, *got, 1.0])
    # a site without the 100-bin grid: the common counts decide (200 is then the coarsest fine enough)
    np.testing.assert_allclose(first_stage_edges([bins, (5, 10, 200)], 0.0001, 0.9999)[[0, -1]], [0.0001, 0.9999])
    assert np.diff(logit(first_stage_edges([bins, (5, 10, 200)], 0.0001, 0.9999)))[5:20].max() < 0.1
    assert first_stage_edges([(5, 8, 12)], 0.0001, 0.9999) is None
    with pytest.raises(ValueError, match="logit range"):
        first_stage_edges([bins], 0.0, 0.9999)


def test_policy_candidates_read_the_policys_range_when_the_first_grid_is_explicit():
    from dsroc.histogram.grid import allowed_edges
    from dsroc.histogram.stages import first_stage_edges, policy_candidates

    bins = (5, 8, 10, 12, 20, 50, 100, 200)
    fine = np.concatenate([[0.0], first_stage_edges([bins], 0.0001, 0.9999), [1.0]])  # as the sites bin it
    got = policy_candidates([bins, bins], fine, "logit", lo=0.0001, hi=0.9999)
    np.testing.assert_array_equal(got, allowed_edges(bins, "logit", lo=0.0001, hi=0.9999))


def test_at_small_noise_the_histogram_protocol_takes_at_least_seven_bins():
    """Issue 35: 250 patients at prevalence 0.3 give n_eff / sigma below 200 at any noise SD above 0.35, so the rule
    gives 5 bins; where a summed count's noise SD is at most 1.5 (epsilon 3 and more over 5 sites) the histogram
    protocol takes 7 (the secagg protocol, small_noise off, keeps 5), and not at SD 4.4 (epsilon 1), nor when a class
    holds nobody after the noise."""
    from dsroc.histogram.stages import SMALL_NOISE, first_stage_grid, policy_candidates

    POLICY = (5, 8, 10, 12, 20, 50, 100, 200)  # the default policy's bin counts

    rng = np.random.default_rng(3)
    y = (rng.random(250) < 0.3).astype(int)
    risk = 1 / (1 + np.exp(-(np.where(y == 1, -0.2, -1.2) + rng.standard_normal(250))))
    fine = first_stage_grid([POLICY], 0.0001, 0.9999)
    h0, h1 = bin_scores(risk, y, fine)
    candidates = policy_candidates([POLICY], fine, "logit", lo=0.0001, hi=0.9999)
    assert SMALL_NOISE == (1.5, 7)
    n_eff = (h0.sum() ** -2.0 + h1.sum() ** -2.0) ** -0.5
    for sigma, small, bins in ((0.57, True, 7), (1.5, True, 7), (0.57, False, 5), (4.4, True, 5)):
        assert n_eff / sigma < 200  # the rule's 5 bins
        interior = second_stage_grid(h0.astype(float), h1.astype(float), fine, sigma, most=12, candidates=candidates,
                                     small_noise=small)
        assert interior.size + 1 == bins, (sigma, small)
    empty = second_stage_grid(h0.astype(float), np.zeros(fine.size - 1), fine, 0.57, most=12, candidates=candidates,
                              small_noise=True)
    assert empty.size + 1 == 5
    # asked for: n_bins is the analyst's
    asked = second_stage_grid(h0.astype(float), h1.astype(float), fine, 0.57, most=12, n_bins=5, candidates=candidates,
                              small_noise=True)
    assert asked.size + 1 == 5
