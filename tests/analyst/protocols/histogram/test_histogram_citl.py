"""Calibration-in-the-large from noisy histograms: the grouped fit equals statsmodels' offset GLM, and the stated
noise variance matches the spread of the estimate over simulated noise."""

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.special import logit

from analyst.protocols.histogram.protocol import citl_with_noise

EVENTS = np.array([12.0, 30.0, 61.0, 95.0, 140.0])
COUNTS = np.array([150.0, 160.0, 170.0, 180.0, 190.0])
R = np.array([0.1, 0.22, 0.35, 0.52, 0.7])
MERGED = np.array([3, 1, 1, 2, 1])


def test_without_noise_it_is_the_offset_glm():
    est = citl_with_noise(EVENTS, COUNTS, R, MERGED, sigma=0.0, level=0.95)
    glm = sm.GLM(np.column_stack([EVENTS, COUNTS - EVENTS]), np.ones((R.size, 1)),
                 family=sm.families.Binomial(), offset=logit(R)).fit(tol=1e-12)
    assert est.value == pytest.approx(glm.params[0], abs=1e-8)
    assert np.sqrt(est.variance) == pytest.approx(glm.bse[0], rel=1e-6)
    lo, hi = glm.conf_int(alpha=0.05)[0]
    assert (est.lower, est.upper) == pytest.approx((lo, hi), abs=1e-6)


def test_the_noise_variance_matches_simulated_noise():
    sigma = 4.0
    est = citl_with_noise(EVENTS, COUNTS, R, MERGED, sigma=sigma, level=0.95)
    sampling = citl_with_noise(EVENTS, COUNTS, R, MERGED, sigma=0.0, level=0.95).variance
    rng = np.random.default_rng(7)
    values = []
    for _ in range(3000):  # each class's count of bin g carries the noise of its k_g merged cells
        e = EVENTS + rng.normal(0, sigma * np.sqrt(MERGED))
        n = COUNTS - EVENTS + rng.normal(0, sigma * np.sqrt(MERGED)) + e
        values.append(citl_with_noise(e, n, R, MERGED, sigma=0.0, level=0.95).value)
    # 3000 draws: the variance's sampling SD is about 2.6 %
    assert np.var(values) == pytest.approx(est.variance - sampling, rel=0.1)


def test_no_events_gives_no_estimate():
    assert citl_with_noise(np.zeros(5), COUNTS, R, MERGED, sigma=1.0, level=0.95) is None
    assert citl_with_noise(EVENTS, COUNTS, np.array([0.0, 0.2, 0.3, 0.5, 1.0]), MERGED, sigma=1.0,
                           level=0.95).value == pytest.approx(
        citl_with_noise(EVENTS[1:4], COUNTS[1:4], R[1:4] * 0 + [0.2, 0.3, 0.5], MERGED[1:4], sigma=1.0,
                        level=0.95).value)
