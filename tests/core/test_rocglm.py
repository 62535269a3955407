"""ROC-GLM Fisher scoring against statsmodels' probit GLM on the expanded indicator data set."""

import warnings

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.integrate import quad
from scipy.special import ndtri

from dsroc import (
    RocGlmParts,
    fit_rocglm,
    fit_rocglm_batch,
    placement_values,
    rocglm_auc,
    rocglm_counts,
    rocglm_curve,
    rocglm_grid,
    rocglm_intercept_for_auc,
)


def _placements(seed, n0=400, n1=300, shift=1.0):
    rng = np.random.default_rng(seed)
    return placement_values(rng.normal(size=n0), rng.normal(shift, 1.3, size=n1))


def _statsmodels_fit(pv0, grid):
    u = (pv0[:, None] <= grid[None, :]).astype(float).ravel()
    X = sm.add_constant(np.tile(ndtri(grid), pv0.size))
    model = sm.GLM(u, X, family=sm.families.Binomial(link=sm.families.links.Probit()))
    return model, model.fit(tol=1e-13, maxiter=100)


def test_default_grid_is_the_papers_28_points():
    g = rocglm_grid()
    assert g.size == 28
    np.testing.assert_allclose(g, np.linspace(0, 1, 30)[1:-1])
    np.testing.assert_allclose(rocglm_grid(5), [0.25, 0.5, 0.75])


@pytest.mark.parametrize(
    "spec, match",
    [
        ([0.0, 0.5], "strictly inside"),
        ([0.5, 1.0], "strictly inside"),
        ([0.2, 0.2, 0.3], "strictly increasing"),
        ([0.3], "at least 2"),
        ([0.2, np.nan], "non-finite"),
        (3, ">= 4"),
    ],
)
def test_invalid_grid_is_a_clear_error(spec, match):
    with pytest.raises(ValueError, match=match):
        rocglm_grid(spec)


@pytest.mark.parametrize("seed, shift", [(1, 0.3), (2, 1.0), (3, 2.0)])
def test_fit_matches_statsmodels_expanded_data(seed, shift):
    pv0 = _placements(seed, shift=shift)
    grid = rocglm_grid()
    result = fit_rocglm(RocGlmParts.from_placements(pv0, grid))
    model, sm_result = _statsmodels_fit(pv0, grid)
    assert result.converged
    np.testing.assert_allclose(result.params, sm_result.params, atol=1e-6)
    assert result.deviance == pytest.approx(sm_result.deviance, rel=1e-9)
    np.testing.assert_allclose(result.cov, sm_result.cov_params(), rtol=1e-4)


def test_parts_derivatives_match_statsmodels_at_any_theta():
    pv0 = _placements(4)
    grid = rocglm_grid(12)
    parts = RocGlmParts.from_placements(pv0, grid)
    model, _ = _statsmodels_fit(pv0, grid)
    for theta in ([0.0, 1.0], [0.7, 0.5], [-0.3, 1.8]):
        np.testing.assert_allclose(parts.score(theta), model.score(np.array(theta)), rtol=1e-9)
        np.testing.assert_allclose(parts.information(theta), -model.hessian(np.array(theta), observed=False), rtol=1e-9, atol=1e-9)
        assert parts.loglike(theta) == pytest.approx(model.loglike(np.array(theta)), rel=1e-10)


def test_k_sites_equal_pooled_fit():
    rng = np.random.default_rng(7)
    neg, pos = rng.normal(size=1500), rng.normal(1.1, size=900)
    pv0 = placement_values(neg, pos)
    grid = rocglm_grid()
    pooled = fit_rocglm(RocGlmParts.from_placements(pv0, grid))
    site_of = rng.integers(0, 5, size=pv0.size)
    sites = [RocGlmParts.from_placements(pv0[site_of == k], grid) for k in range(5)]
    distributed = fit_rocglm(sites)
    np.testing.assert_allclose(distributed.params, pooled.params, atol=1e-12)
    # the pooled parts behind the remote-parts interface take the same steps as the five sites
    remote_pooled = fit_rocglm([RocGlmParts.from_placements(pv0, grid)])
    assert distributed.deviance_trace == pytest.approx(remote_pooled.deviance_trace, rel=1e-12)
    assert distributed.evaluations == remote_pooled.evaluations
    # a callable that already sums gives the same too
    summed = fit_rocglm(lambda th: sum((p.evaluate(th) for p in sites[1:]), sites[0].evaluate(th)))
    np.testing.assert_allclose(summed.params, pooled.params, atol=1e-12)


@pytest.mark.parametrize("params", [(1.0, 1.0), (0.3, 0.6), (2.5, 1.7), (-0.5, 1.2)])
def test_closed_form_auc_equals_integral_of_curve(params):
    integral, _ = quad(lambda t: rocglm_curve(params, t), 0, 1, epsabs=1e-12, epsrel=1e-12, limit=200)
    assert rocglm_auc(params) == pytest.approx(integral, abs=1e-7)


def test_batch_fit_equals_single_fits():
    grid = rocglm_grid()
    parts = [RocGlmParts.from_placements(_placements(s, n1=100 + 50 * s, shift=0.2 * s), grid) for s in range(1, 8)]
    batch = fit_rocglm_batch(np.array([p.counts for p in parts]), [p.n_trials for p in parts], grid)
    for i, p in enumerate(parts):
        single = fit_rocglm(p)
        np.testing.assert_allclose(batch.params[i], single.params, atol=1e-12)
        assert batch.iterations[i] == single.iterations
    assert batch.converged.all() and not batch.degenerate.any()


def test_batch_of_many_blocks_equals_single_fits_row_by_row():
    # More rows than one block of the batched fit (512), separated rows among them: every row's estimate
    # and iteration count as its own one-row fit (Python floats), whichever block it falls in.
    grid = rocglm_grid()
    rng = np.random.default_rng(12)
    rows = 1100
    n1 = rng.integers(20, 200, rows)
    pv0 = [rng.beta(rng.uniform(0.3, 2.0), rng.uniform(1.0, 4.0), size=k) for k in n1]
    counts = np.array([rocglm_counts(p, grid) for p in pv0])
    counts[[3, 600, 1099]] = 0  # separated: not fitted
    batch = fit_rocglm_batch(counts, n1, grid)
    assert batch.degenerate.sum() == 3 and np.isnan(batch.params[[3, 600, 1099]]).all()
    for i in np.flatnonzero(~batch.degenerate):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            single = fit_rocglm(RocGlmParts(counts[i], int(n1[i]), grid))
        np.testing.assert_allclose(batch.params[i], single.params, rtol=0, atol=1e-12)
        assert batch.iterations[i] == single.iterations and batch.converged[i] == single.converged


def test_separated_counts_are_a_clear_error_and_flagged_in_batch():
    grid = rocglm_grid()
    with pytest.raises(ValueError, match="degenerate.*every count k_j equals n1"):
        fit_rocglm(RocGlmParts.from_placements(np.zeros(20), grid))
    with pytest.raises(ValueError, match="every count k_j is 0"):
        fit_rocglm(RocGlmParts(np.zeros(grid.size), 10, grid))
    with pytest.raises(ValueError, match="separation"):
        fit_rocglm(RocGlmParts.from_placements(np.full(20, 0.5), grid))
    batch = fit_rocglm_batch(np.array([np.zeros(grid.size), rocglm_counts(_placements(1), grid)]), [10, 300], grid)
    assert batch.degenerate.tolist() == [True, False]
    assert np.isnan(batch.params[0]).all() and np.isfinite(batch.params[1]).all()


def _statsmodels_probit(counts, n, grid):
    x = sm.add_constant(ndtri(grid))
    model = sm.GLM(np.c_[counts, n - counts], x, family=sm.families.Binomial(sm.families.links.Probit()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(maxiter=1000, tol=1e-13)


def test_quasi_complete_separation_has_no_finite_estimate():
    # One threshold holds both successes and failures, the others only one kind, zeros below and n1 above:
    # the deviance falls towards 0 as the slope grows (statsmodels walks off to a huge slope), so there is
    # no MLE to converge to. Such data once "converged" or not at gamma2 ~ 110 depending on rounding.
    grid = rocglm_grid()
    counts = np.where(np.arange(grid.size) < 13, 0, 726)
    counts[13] = 560
    sm_fit = _statsmodels_probit(counts, 726, grid)
    assert sm_fit.params[1] > 50 and sm_fit.deviance < 1e-6
    with pytest.raises(ValueError, match="quasi-complete separation"):
        fit_rocglm(RocGlmParts(counts, 726, grid))
    reversed_counts = 726 - counts[::-1]  # the same pattern decreasing along the grid
    batch = fit_rocglm_batch(np.array([counts, reversed_counts]), [726, 726], grid)
    assert batch.degenerate.tolist() == [True, True] and np.isnan(batch.params).all()
    # A second threshold with both kinds gives overlap: a finite MLE, the one statsmodels finds.
    counts[14] = 700
    sm_fit = _statsmodels_probit(counts, 726, grid)
    fit = fit_rocglm(RocGlmParts(counts, 726, grid))
    assert fit.converged and not fit_rocglm_batch(counts[None], [726], grid).degenerate[0]
    np.testing.assert_allclose(fit.params, sm_fit.params, rtol=1e-7)


def test_non_convergence_is_a_warning_on_the_result():
    parts = RocGlmParts.from_placements(_placements(2), rocglm_grid())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit_rocglm(parts, max_iter=1)
    assert not result.converged and result.iterations == 1
    assert any("did not converge" in w for w in result.warnings)
    assert any("did not converge" in str(c.message) for c in caught)


def test_counts_and_parts_validation():
    grid = rocglm_grid(6)
    with pytest.raises(ValueError, match="one entry per threshold"):
        RocGlmParts([1, 2], 5, grid)
    with pytest.raises(ValueError, match="between 0 and n_trials"):
        RocGlmParts([1, 2, 3, 9], 5, grid)
    with pytest.raises(ValueError, match="theta"):
        RocGlmParts([1, 2, 3, 4], 5, grid).score([np.nan, 1])
    with pytest.raises(ValueError, match="pv0"):
        rocglm_counts([0.2, 1.5], grid)


def test_deviance_is_finite_for_extreme_parameters():
    # A product of likelihoods underflows here; a sum of log terms does not.
    parts = RocGlmParts.from_placements(_placements(3, n1=5000), rocglm_grid())
    for theta in ([40.0, 1.0], [-40.0, 1.0], [0.0, 30.0]):
        assert np.isfinite(parts.deviance(theta))
        assert np.isfinite(parts.score(theta)).all() and np.isfinite(parts.information(theta)).all()


def test_near_separation_is_a_warning_not_a_crash():
    grid = rocglm_grid()
    counts = np.where(np.arange(grid.size) < 14, 1, 199)  # nearly every positive between two thresholds
    with pytest.warns(RuntimeWarning, match="numerically 0 or 1"):
        result = fit_rocglm(RocGlmParts(counts, 200, grid))
    assert result.converged and result.params[1] > 3
    assert any("close to separation" in w for w in result.warnings)
    # an ordinary fit carries no such warning
    assert fit_rocglm(RocGlmParts.from_placements(_placements(5), grid)).warnings == []


@pytest.mark.parametrize("auc, gamma2", [(0.6, 1.0), (0.83, 0.4), (0.97, 2.2)])
def test_intercept_for_auc_inverts_the_closed_form(auc, gamma2):
    gamma1 = rocglm_intercept_for_auc(auc, gamma2)
    integral, _ = quad(lambda t: rocglm_curve((gamma1, gamma2), t), 0, 1, epsabs=1e-12, limit=200)
    assert integral == pytest.approx(auc, abs=1e-7)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        rocglm_intercept_for_auc(1.0, gamma2)
