"""Area between the empirical and the ROC-GLM curve, against a brute-force integral."""

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from simulations.common.curves import roc_area_between


def _empirical_roc(s0, s1, t):
    # Brute force: among thresholds c, the ROC step at FPR t is the TPR at the smallest c whose FPR
    # #{s0 >= c}/n0 reaches t (right-continuous steps at k/n0).
    s0d = np.sort(s0)[::-1]
    k = int(np.ceil(t * s0.size)) - 1  # the (k+1)-th largest negative opens the step containing t
    k = min(max(k, 0), s0.size - 1)
    return np.mean(s1 > s0d[k])


def test_area_matches_quadrature():
    rng = np.random.default_rng(4)
    s0, s1 = rng.normal(0, 1, 23), rng.normal(1, 1.3, 17)
    scores, labels = np.concatenate([s0, s1]), np.r_[np.zeros(23), np.ones(17)]
    params = (0.8, 0.9)

    def gap(t):
        return abs(norm.cdf(params[0] + params[1] * norm.ppf(t)) - _empirical_roc(s0, s1, t))

    breaks = np.arange(1, 23) / 23
    expected = sum(quad(gap, a, b, limit=200)[0] for a, b in zip(np.r_[0, breaks], np.r_[breaks, 1]))
    assert roc_area_between(scores, labels, params) == pytest.approx(expected, rel=1e-4)


def test_area_zero_for_matching_curve_limit():
    # A perfect separation against a curve close to the top-left corner: area close to zero.
    s = np.r_[np.linspace(0, 0.4, 50), np.linspace(0.6, 1, 50)]
    y = np.r_[np.zeros(50), np.ones(50)]
    assert roc_area_between(s, y, (6.0, 1.0)) < 1e-3
