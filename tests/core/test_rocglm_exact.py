"""The ROC-GLM lands on the maximum-likelihood estimate, and grid counts are exact where placement values hit grid points."""

from fractions import Fraction

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.special import ndtri

from dsroc import RocGlmParts, fit_rocglm, fit_rocglm_batch, placement_values, rocglm_counts, rocglm_grid
from dsroc.roc.batch import grouped_placement_values, grouped_rocglm_counts


def _held_out_placements(seed, n0=3000, n1=500):
    # Scores of a model on held-out data whose classes are not binormal (exponential vs shifted gamma):
    # the ROC-GLM is misspecified, so expected and observed information differ at the MLE and Fisher
    # scoring converges only linearly -- R's rule stops ~1e-6 short of the MLE here.
    rng = np.random.default_rng(seed)
    return placement_values(rng.exponential(size=n0), rng.gamma(2.5, size=n1) + rng.uniform(-1, 0, n1))


def _statsmodels_mle(pv0, grid):
    u = (pv0[:, None] <= grid[None, :]).astype(float).ravel()
    X = sm.add_constant(np.tile(ndtri(grid), pv0.size))
    model = sm.GLM(u, X, family=sm.families.Binomial(link=sm.families.links.Probit()))
    irls = model.fit(tol=1e-15, maxiter=300)
    # IRLS (Fisher scoring) at tol 1e-15 can still be ~3e-10 off: finish with Newton steps.
    return model.fit(method="newton", start_params=irls.params, tol=1e-15, maxiter=50, disp=0).params


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_fits_land_on_the_statsmodels_mle(seed):
    pv0 = _held_out_placements(seed)
    grid = rocglm_grid()
    mle = _statsmodels_mle(pv0, grid)
    parts = RocGlmParts.from_placements(pv0, grid)
    pooled = fit_rocglm(parts)
    # Newton from R's first iterate: the last step is not evaluated, its end point is the MLE
    assert pooled.converged and pooled.evaluations <= 3 and pooled.iterations == pooled.evaluations
    np.testing.assert_allclose(pooled.params, mle, rtol=0, atol=1e-9)
    # Distributed: five sites' parts summed at each theta (moment step, then quasi-Newton steps).
    site = np.random.default_rng(seed).integers(0, 5, pv0.size)
    sites = fit_rocglm([RocGlmParts.from_placements(pv0[site == k], grid) for k in range(5)])
    assert sites.converged and sites.evaluations <= 6
    np.testing.assert_allclose(sites.params, mle, rtol=0, atol=1e-9)
    for newton, single in ((True, pooled), (False, sites)):
        batch = fit_rocglm_batch(parts.counts[None, :], [pv0.size], grid, newton=newton)
        np.testing.assert_allclose(batch.params[0], mle, rtol=0, atol=1e-9)
        np.testing.assert_allclose(batch.params[0], single.params, rtol=0, atol=1e-12)
        assert batch.evaluations[0] == single.evaluations and batch.iterations[0] == single.iterations


def test_xtol_zero_stops_at_r_rule_short_of_the_mle():
    pv0 = _held_out_placements(0)
    grid = rocglm_grid()
    mle = _statsmodels_mle(pv0, grid)
    r_rule = fit_rocglm(RocGlmParts.from_placements(pv0, grid), xtol=0)
    exact = fit_rocglm(RocGlmParts.from_placements(pv0, grid))
    assert r_rule.converged and exact.evaluations < r_rule.evaluations == r_rule.iterations + 1
    assert np.abs(r_rule.params - mle).max() > 1e-8  # what the exact fit fixes
    # R's rule: Fisher scoring stops at the first relative deviance change below 1e-8, local or remote alike
    dev = np.array(r_rule.deviance_trace)
    change = np.abs(np.diff(dev)) / (np.abs(dev[1:]) + 0.1)
    assert change[-1] < 1e-8 and (change[:-1] >= 1e-8).all()
    assert fit_rocglm([RocGlmParts.from_placements(pv0, grid)], xtol=0).deviance_trace == pytest.approx(dev, rel=1e-12)


def test_observed_information_is_minus_the_statsmodels_hessian():
    pv0 = _held_out_placements(5, n1=200)
    grid = rocglm_grid(12)
    parts = RocGlmParts.from_placements(pv0, grid)
    u = (pv0[:, None] <= grid[None, :]).astype(float).ravel()
    model = sm.GLM(u, sm.add_constant(np.tile(ndtri(grid), pv0.size)),
                   family=sm.families.Binomial(link=sm.families.links.Probit()))
    for theta in ([0.0, 1.0], [0.7, 0.5], [-0.3, 1.8]):
        np.testing.assert_allclose(parts.observed_information(theta), -model.hessian(np.array(theta), observed=True),
                                   rtol=1e-9)


def _exact_counts(s0, s1, m, ties):
    """Brute force in rationals: PV0_i = (#{s0 > s1_i} + 1/2 #{s0 = s1_i}) / n0 against t_j = j / (m - 1)."""
    n0 = len(s0)
    pv = []
    for x in s1:
        greater, equal = sum(v > x for v in s0), sum(v == x for v in s0)
        pv.append(Fraction(2 * greater + (equal if ties == "mid" else 0), 2 * n0))
    return np.array([sum(p <= Fraction(j, m - 1) for p in pv) for j in range(1, m - 1)])


@pytest.mark.parametrize("m, k, ties", [(30, 1, "mid"), (30, 3, "mid"), (30, 7, "strict"), (100, 2, "mid"),
                                        (11, 5, "strict"), (30, 11, "mid")])
def test_counts_on_grid_points_are_exact(m, k, ties):
    # n0 a multiple of m - 1: placement values k / n0 fall exactly on grid points j / (m - 1); integer
    # scores make ties (mid-rank halves) and put many positives on those points.
    rng = np.random.default_rng(m * 100 + k)
    n0 = (m - 1) * k
    s0 = rng.permutation(n0).astype(float)
    s1 = rng.integers(-2, n0 + 2, size=150).astype(float)
    expected = _exact_counts(s0.tolist(), s1.tolist(), m, ties)
    pv0 = placement_values(s0, s1, ties=ties)
    for grid in (m, np.linspace(0, 1, m)[1:-1]):  # the integer spec and its linspace spelling alike
        np.testing.assert_array_equal(rocglm_counts(pv0, grid), expected)
        np.testing.assert_array_equal(RocGlmParts.from_placements(pv0, grid).counts, expected)
    groups = np.zeros(s1.size, dtype=np.int64)
    grouped = grouped_placement_values(s0, np.zeros(n0, dtype=np.int64), s1, groups, n_groups=1, ties=ties)
    np.testing.assert_array_equal(grouped_rocglm_counts(grouped, groups, m, n_groups=1)[0], expected)


def test_float_linspace_comparison_would_miscount():
    # The bug fixed: linspace's j * (1/29) is one ulp off j/29 for some j, so PV0 = j/29 lands on either side.
    n0 = 29 * 4
    s0 = np.arange(n0, dtype=float)
    s1 = np.arange(-1, n0 + 1, dtype=float)
    pv0 = placement_values(s0, s1, ties="strict")
    expected = _exact_counts(s0.tolist(), s1.tolist(), 30, "strict")
    naive = (pv0[:, None] <= np.linspace(0, 1, 30)[1:-1][None, :]).sum(0)
    assert (naive != expected).any()
    np.testing.assert_array_equal(rocglm_counts(pv0, rocglm_grid()), expected)
