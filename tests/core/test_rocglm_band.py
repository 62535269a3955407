"""The ROC-GLM's pointwise band against statsmodels' probit GLM on the expanded data, and its improper part."""

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.stats import norm

import dsroc


def test_band_matches_statsmodels_probit_prediction_intervals():
    rng = np.random.default_rng(4)
    s0, s1 = rng.normal(0, 1, 300), rng.normal(1.0, 1.4, 200)
    pv0 = dsroc.placement_values(s0, s1)
    fit = dsroc.fit_rocglm(dsroc.RocGlmParts.from_placements(pv0))
    grid = dsroc.rocglm_grid(None)
    # the indicator data set of the ROC-GLM: one row per (positive, threshold)
    y = (pv0[:, None] <= grid[None, :]).ravel().astype(float)
    x = np.tile(norm.ppf(grid), pv0.size)
    glm = sm.GLM(y, sm.add_constant(x), family=sm.families.Binomial(link=sm.families.links.Probit())).fit(tol=1e-12)
    np.testing.assert_allclose(fit.params, glm.params, atol=1e-6)
    t = np.array([0.02, 0.1, 0.3, 0.5, 0.8, 0.97])
    lo, hi = dsroc.rocglm_band(fit.params, fit.cov, t)
    pred = glm.get_prediction(sm.add_constant(norm.ppf(t)), which="linear").conf_int(alpha=0.05)
    np.testing.assert_allclose(lo, norm.cdf(pred[:, 0]), atol=2e-5)
    np.testing.assert_allclose(hi, norm.cdf(pred[:, 1]), atol=2e-5)
    assert np.all(lo < fit.curve(t)) and np.all(fit.curve(t) < hi)
    end_lo, end_hi = dsroc.rocglm_band(fit.params, fit.cov, [0.0, 1.0])
    assert end_lo.tolist() == [0.0, 1.0] and end_hi.tolist() == [0.0, 1.0]


@pytest.mark.parametrize("params", [(0.5, 3.15), (0.8, 0.4), (-0.2, 1.0), (1.0, 1.0), (1.2, 1.05), (0.3, 0.9)])
def test_improper_range_matches_a_brute_force_scan(params):
    t = np.linspace(0.01, 0.99, 98001)
    below = t[dsroc.rocglm_curve(params, t) < t]
    got = dsroc.rocglm_improper_range(params)
    if below.size == 0:
        assert got is None
    else:
        assert got == pytest.approx((below.min(), below.max()), abs=2e-5)
