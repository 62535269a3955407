"""The ROC-GLM reaches the statsmodels MLE in few evaluations: each is a round trip to every site when the parts are remote."""

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.special import ndtri

from dsroc import PartsAtTheta, RocGlmParts, fit_rocglm, fit_rocglm_batch, placement_values, rocglm_grid


class Counting:
    """Remote-looking parts: a local RocGlmParts behind ``evaluate``, counting the questions asked."""

    def __init__(self, parts: RocGlmParts):
        self.parts, self.grid, self.thetas = parts, parts.grid, []

    def evaluate(self, theta) -> PartsAtTheta:
        self.thetas.append(np.array(theta, dtype=float))
        return self.parts.evaluate(theta)


def _data(case: str):
    rng = np.random.default_rng(sum(map(ord, case)))
    if case == "binormal":
        return rng.normal(size=2000), rng.normal(1.0, size=2000)
    if case == "held-out":  # misspecified: expected and observed information differ at the MLE
        return rng.exponential(size=3000), rng.gamma(2.5, size=500) + rng.uniform(-1, 0, 500)
    if case == "auc 0.5":
        return rng.normal(size=500), rng.normal(0.0, size=500)
    if case == "auc 0.5, unequal variances":
        return rng.normal(size=300), rng.normal(0.02, 1.5, size=200)
    if case == "auc 0.99":
        return rng.normal(size=1000), rng.normal(3.3, size=1000)
    if case == "steep":
        return rng.normal(size=800), rng.normal(1.0, 1 / 3, size=800)
    if case == "flat":
        return rng.normal(size=800), rng.normal(1.0, 3.0, size=800)
    if case == "noisy negatives":  # the paper protocol: true positives placed among noisy negatives
        return rng.normal(size=2000) + rng.normal(size=2000), rng.normal(1.2, size=2000)
    if case == "tiny":
        return rng.normal(size=30), rng.normal(1.0, size=20)
    raise AssertionError(case)


CASES = ["binormal", "held-out", "auc 0.5", "auc 0.5, unequal variances", "auc 0.99", "steep", "flat",
         "noisy negatives", "tiny"]


def _statsmodels_mle(pv0, grid):
    u = (pv0[:, None] <= grid[None, :]).astype(float).ravel()
    model = sm.GLM(u, sm.add_constant(np.tile(ndtri(grid), pv0.size)),
                   family=sm.families.Binomial(link=sm.families.links.Probit()))
    irls = model.fit(tol=1e-15, maxiter=300)
    return model.fit(method="newton", start_params=irls.params, tol=1e-15, maxiter=50, disp=0).params


@pytest.mark.filterwarnings("ignore:fitted probabilities numerically 0 or 1")
@pytest.mark.parametrize("case", CASES)
def test_few_evaluations_to_the_statsmodels_mle(case):
    neg, pos = _data(case)
    pv0, grid = placement_values(neg, pos), rocglm_grid()
    mle = _statsmodels_mle(pv0, grid)
    pooled = RocGlmParts.from_placements(pv0, grid)
    # Remote: five sites, each asked once per evaluation for its score, information and deviance only.
    site = np.random.default_rng(1).integers(0, 5, pv0.size)
    sites = [Counting(RocGlmParts.from_placements(pv0[site == k], grid)) for k in range(5)]
    remote = fit_rocglm(sites)
    asked = [len(s.thetas) for s in sites]
    assert asked == [remote.evaluations] * 5 and remote.evaluations <= 6
    assert remote.converged and remote.iterations in (remote.evaluations, remote.evaluations + 1)
    np.testing.assert_allclose(remote.params, mle, rtol=0, atol=1e-9)
    # Local counts: Newton steps from R's first iterate.
    local = fit_rocglm(pooled)
    assert local.converged and local.evaluations <= 5
    np.testing.assert_allclose(local.params, mle, rtol=0, atol=1e-9)
    # The covariance is the inverse information at the last evaluation, within a tiny step of the MLE.
    np.testing.assert_allclose(remote.cov, np.linalg.inv(pooled.information(mle)), rtol=1e-6)
    assert remote.deviance == pytest.approx(pooled.deviance(mle), rel=1e-12)


def test_tiny_sites_and_a_single_site():
    # 20 positives over five sites, two with a single positive: the summed parts are what counts.
    neg, pos = _data("tiny")
    pv0, grid = placement_values(neg, pos), rocglm_grid()
    site = np.repeat(np.arange(5), [1, 1, 3, 7, 8])
    sites = [Counting(RocGlmParts.from_placements(pv0[site == k], grid)) for k in range(5)]
    remote = fit_rocglm(sites)
    one = fit_rocglm([Counting(RocGlmParts.from_placements(pv0, grid))])
    assert remote.evaluations == one.evaluations <= 6
    np.testing.assert_allclose(remote.params, _statsmodels_mle(pv0, grid), rtol=0, atol=1e-9)


@pytest.mark.filterwarnings("ignore:fitted probabilities numerically 0 or 1")
@pytest.mark.parametrize("newton", [True, False])
def test_batch_takes_the_same_steps_as_single_fits(newton):
    grid = rocglm_grid()
    parts = [RocGlmParts.from_placements(placement_values(*_data(case)), grid) for case in CASES]
    batch = fit_rocglm_batch(np.array([p.counts for p in parts]), [p.n_trials for p in parts], grid, newton=newton)
    for i, p in enumerate(parts):
        single = fit_rocglm(p if newton else [p])
        np.testing.assert_allclose(batch.params[i], single.params, rtol=0, atol=1e-12)
        assert (batch.iterations[i], batch.evaluations[i]) == (single.iterations, single.evaluations)
    assert batch.converged.all()


def test_a_given_start_is_used_and_the_moment_step_needs_the_grid():
    neg, pos = _data("auc 0.99")
    grid = rocglm_grid(12)
    pooled = RocGlmParts.from_placements(placement_values(neg, pos), grid)
    counting = Counting(pooled)
    fit = fit_rocglm([counting], start=(2.0, 1.0))
    np.testing.assert_allclose(counting.thetas[0], [2.0, 1.0])
    np.testing.assert_allclose(fit.params, fit_rocglm(pooled).params, rtol=0, atol=1e-9)
    # A callable without a grid is taken to use the default grid: the moment step is then off, the fit
    # still reaches the MLE (a step that raises the deviance is taken back).
    blind = fit_rocglm(lambda theta: pooled.evaluate(theta))
    assert blind.converged
    np.testing.assert_allclose(blind.params, fit.params, rtol=0, atol=1e-9)
