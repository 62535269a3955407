"""The multicentre study: its unbinned DeLong reference against a brute force, and seconds-long runs of each analysis."""

import numpy as np
import pytest
from scipy import stats

from simulations.multicentre.study import _delong_paired_p, decision_curves, heterogeneity, paired_comparison, subgroups


def test_unbinned_paired_delong_equals_the_definition():
    rng = np.random.default_rng(0)
    y = rng.random(300) < 0.4
    sa = np.round(rng.normal(size=300) + y, 1)  # ties
    sb = np.round(0.5 * sa + rng.normal(size=300), 1)

    def psi(s):
        return (s[y][:, None] > s[~y][None, :]) + 0.5 * (s[y][:, None] == s[~y][None, :])

    pa, pb = psi(sa), psi(sb)
    var = np.var(pa.mean(1) - pb.mean(1), ddof=1) / y.sum() + np.var(pa.mean(0) - pb.mean(0), ddof=1) / (~y).sum()
    z = (pa.mean() - pb.mean()) / np.sqrt(var)
    p, se = _delong_paired_p(sa, sb, y)
    assert p == pytest.approx(2 * stats.norm.sf(abs(z)), rel=1e-10) and se == pytest.approx(np.sqrt(var), rel=1e-10)


def test_each_analysis_runs_and_reports_sane_figures():
    dc = decision_curves(20, n=4000)
    assert all(dc[f"mae@{u:g}"] < 0.02 for u in (0.1, 0.2, 0.3))
    assert all(dc[f"coverage@{u:g}"] >= 0.75 for u in (0.1, 0.2, 0.3))
    pc = paired_comparison(10, n=4000, epsilon=5.0)
    assert 0 <= pc["power"] <= pc["power_noise_free_unbinned"] + 0.3 and pc["coverage"] >= 0.7
    assert pc["mean_bins"] < 7 and pc["se_ratio_to_unbinned"] > 0.9  # the joint grid: every second of <= 12 bins
    sg = subgroups(5, n=4000, epsilon=5.0)
    assert sg["halfwidth_ratio_to_noise_free"] > 0.9  # binning and noise never make the interval narrower
    het = heterogeneity(4, sites=5, n=600, epsilon=5.0)
    assert het["tau2_mean"] >= 0 and 0 <= het["pi_coverage_new_site"] <= 1


@pytest.mark.parametrize("epsilon,bins", [(3000.0, 12), (1.0, 10)])
def test_the_partitioned_releases_grid_is_the_analysts_default_grid(epsilon, bins, policy_grids):
    """The validation's grid the stratified and joint releases reuse, as the analyst chooses it: the bin rule on the
    class sizes over the second stage's summed noise (by hand: 12 bins at negligible noise, 10 at n = 10 000,
    prevalence 0.3, epsilon 1 over 5 sites), and at negligible noise the policy's logit edges nearest the quantiles
    (interpolated inside a fine bin) of the mean of the two classes' score CDFs (brute force), which differ from all scores' quantiles."""
    from scipy.special import expit, logit

    from dsroc.histogram.stages import laplace_two_stage_plan
    from simulations.multicentre.study import DELTA, _binormal, _validation_grid

    rng = np.random.default_rng(5)
    s, y = _binormal(rng, 10_000, 0.8, 0.3)
    site = rng.integers(5, size=s.size)
    n0, n1 = np.sum(~y), np.sum(y)
    ratio = (n0**-2.0 + n1**-2.0) ** -0.5 / (laplace_two_stage_plan(epsilon, DELTA).sigma2 * np.sqrt(5))
    assert bins == (5 if ratio < 200 else 7 if ratio < 400 else 10 if ratio < 1500 else 12)
    assert ratio > 1.2 * 400 and (ratio < 1500 / 1.2 or bins == 12)  # no first-stage noise moves it across
    edges = _validation_grid(rng, s, y, site, 5, epsilon)
    fine, every = policy_grids
    assert edges.size - 1 == bins and edges[0] == 0.0 and edges[-1] == 1.0
    # each edge one of the default policy's logit grids' (the edges an explicit grid may use)
    allowed = every[(every > fine[0]) & (every < fine[-1])]
    assert np.isin(edges[1:-1], allowed).all()
    if epsilon > 100:
        c = np.clip(s, fine[0], fine[-1])
        for share, same in (([0.5 * np.mean(c[~y] < e) + 0.5 * np.mean(c[y] < e) for e in fine[1:-1]], True),
                            ([np.mean(c < e) for e in fine[1:-1]], False)):
            at = np.interp(allowed, fine, np.concatenate([[0.0], share, [1.0]]))  # linear inside a fine bin
            picked = sorted({int(np.argmin(np.abs(at - q))) for q in np.arange(1, bins) / bins})
            expected = [0.0, *allowed[picked], 1.0]
            assert (len(expected) == edges.size and np.allclose(edges, expected, rtol=0, atol=1e-12)) == same
