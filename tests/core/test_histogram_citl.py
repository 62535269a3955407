"""Calibration-in-the-large from noisy histograms: the grouped fit equals statsmodels' offset GLM, and the stated
noise variance (counts and score sums) matches the spread of the estimate over simulated noise."""

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.special import logit

from dsroc import histogram_citl, histogram_validation
from dsroc.histogram.sums import bin_means, within_offsets

EDGES = np.array([0.0, 0.04, 0.07, 0.1, 0.14, 0.2, 0.3, 1.0])
GROUPS = ((0, 1), (2, 2), (3, 3), (4, 5), (6, 6))


def _patients(n=3000, seed=3):
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-rng.normal(-2.3, 1.0, n)))
    y = (rng.random(n) < p).astype(int)
    idx = np.searchsorted(EDGES, p, side="right") - 1
    h0, h1 = (np.bincount(idx[y == c], minlength=7).astype(float) for c in (0, 1))
    offsets = np.bincount(idx, weights=(p - EDGES[idx]) / np.diff(EDGES)[idx], minlength=7)
    return h0, h1, offsets


def _means(h0, h1, t, s):
    return bin_means(EDGES, within_offsets(h0 + h1, t, sums_sigma=s, clip=False))


def test_without_noise_it_is_the_offset_glm_on_the_merged_bins():
    h0, h1, t = _patients()
    r = _means(h0, h1, t, 0.0)
    est = histogram_citl(h0, h1, EDGES, GROUPS, r, sigma=0.0, sums_sd=0.0)
    k = np.array([h1[a:b + 1].sum() for a, b in GROUPS])
    m = np.array([(h0 + h1)[a:b + 1].sum() for a, b in GROUPS])
    rg = np.array([((h0 + h1) * r)[a:b + 1].sum() for a, b in GROUPS]) / m
    glm = sm.GLM(np.column_stack([k, m - k]), np.ones((k.size, 1)), family=sm.families.Binomial(),
                 offset=logit(rg)).fit(tol=1e-12)
    assert est.value == pytest.approx(glm.params[0], abs=1e-8)
    assert np.sqrt(est.variance) == pytest.approx(glm.bse[0], rel=1e-6)
    lo, hi = glm.conf_int(alpha=0.05)[0]
    assert (est.lower, est.upper) == pytest.approx((lo, hi), abs=1e-6)


def test_the_noise_variance_of_counts_and_score_sums_matches_simulated_noise():
    """Prevalence about 0.1 on a grid whose top bin is 0.7 wide, noise as 5 sites' at epsilon 1: the score sums'
    noise in the mean predictions is most of the estimate's noise (the counts' alone is an eighth of it)."""
    h0, h1, t = _patients()
    sigma, s = 4.4, 45.0  # a summed count's noise SD; both classes' summed offsets' (bin widths)
    r = _means(h0, h1, t, s)
    est = histogram_citl(h0, h1, EDGES, GROUPS, r, sigma=sigma, sums_sd=s)
    sampling = histogram_citl(h0, h1, EDGES, GROUPS, r, sigma=0.0, sums_sd=0.0).variance
    counts_only = histogram_citl(h0, h1, EDGES, GROUPS, r, sigma=sigma).variance - sampling
    rng = np.random.default_rng(7)
    values = []
    for _ in range(3000):
        c0, c1 = h0 + rng.normal(0, sigma, 7), h1 + rng.normal(0, sigma, 7)
        values.append(histogram_citl(c0, c1, EDGES, GROUPS, _means(c0, c1, t + rng.normal(0, s, 7), s),
                                     sigma=0.0).value)
    # 3000 draws: the variance's sampling SD is about 2.6 %; the delta method's error here is about 6 %
    assert np.var(values) == pytest.approx(est.variance - sampling, rel=0.15)
    assert counts_only < 0.25 * np.var(values)


def test_histogram_validation_reports_it_and_says_why_when_there_is_none():
    h0, h1, t = _patients()
    v = histogram_validation(h0, h1, EDGES, sigma=0.0, sums0=t * 0.9, sums1=t * 0.1, sums_sigma=0.0, noise_draws=5)
    c = v.calibration
    direct = histogram_citl(v.counts0, v.counts1, EDGES, c.groups, bin_means(EDGES, within_offsets(
        v.counts0 + v.counts1, t, sums_sigma=0.0, clip=False)), sigma=0.0, sums_sd=0.0)
    assert v.citl.value == pytest.approx(direct.value, abs=1e-12)
    none = histogram_validation(h0 + h1, np.zeros(7), EDGES, sigma=0.0, noise_draws=5)
    assert none.citl is None and "no events" in none.unavailable["citl"]


def test_a_fit_that_runs_off_is_refused_without_a_numpy_warning():
    """Every patient an event: the intercept runs off to infinity; once every fitted rate is 1 in floating point the
    fit says so (a ValueError histogram_citl turns into no estimate) instead of dividing by zero."""
    import warnings

    from dsroc.histogram.intercept import calibration_intercept

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match="diverged"):
            calibration_intercept([5.0, 5.0], [5.0, 5.0], [0.3, 0.4])
