"""Random-effects pooling against statsmodels (DerSimonian-Laird, Hartung-Knapp) and a direct REML maximisation."""

import warnings

import numpy as np
import pytest
import statsmodels.stats.meta_analysis as smm
from scipy import optimize, stats

from dsroc.multicentre import log_oe, logit_auc, random_effects


def _designs(n=30, seed=1):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        k = int(rng.integers(3, 15))
        v = rng.uniform(0.005, 0.05, k)
        yield rng.normal(0.8, np.sqrt(v + rng.uniform(0.0, 0.1))), v


def test_dersimonian_laird_with_hartung_knapp_equals_statsmodels():
    compared = 0
    for y, v in _designs():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = smm.combine_effects(y, v, method_re="dl", use_t=True)
        ours = random_effects(y, v, method="dl")
        if ref.tau2 <= 0:  # statsmodels keeps a negative moment estimate; the model's tau^2 is 0 there
            assert ours.tau2 == 0.0
            continue
        compared += 1
        assert ours.tau2 == pytest.approx(ref.tau2, rel=1e-12)
        assert ours.estimate == pytest.approx(ref.mean_effect_re, rel=1e-12)
        assert ours.se == pytest.approx(ref.sd_eff_w_re_hksj, rel=1e-12)  # "random effect wls": HKSJ
        lo, hi = ref.conf_int(use_t=True)[3]
        assert ours.ci == pytest.approx((lo, hi), rel=1e-10)
        assert ours.q == pytest.approx(ref.q, rel=1e-12) and ours.i2 == pytest.approx(ref.i2, rel=1e-12)
        plain = random_effects(y, v, method="dl", hartung_knapp=False)
        assert plain.se == pytest.approx(ref.sd_eff_w_re, rel=1e-12)
    assert compared >= 20


def _reml_by_search(y, v):
    def negative_restricted_loglike(t2):
        w = 1 / (v + t2)
        mu = np.sum(w * y) / w.sum()
        return 0.5 * (np.sum(np.log(v + t2)) + np.log(w.sum()) + np.sum(w * (y - mu) ** 2))

    best = optimize.minimize_scalar(negative_restricted_loglike, bounds=(0, 5), method="bounded",
                                    options={"xatol": 1e-13})
    return best.x if negative_restricted_loglike(best.x) < negative_restricted_loglike(0.0) else 0.0


def test_reml_maximises_the_restricted_likelihood():
    for y, v in _designs(seed=2):
        assert random_effects(y, v).tau2 == pytest.approx(_reml_by_search(y, v), abs=1e-7)


def test_prediction_interval_is_riley_s_t_interval():
    y, v = next(_designs(seed=3))
    m = random_effects(y, v)
    half = stats.t.ppf(0.975, m.k - 2) * np.sqrt(m.tau2 + m.se**2)
    assert m.prediction_interval == pytest.approx((m.estimate - half, m.estimate + half), rel=1e-12)
    assert np.isnan(random_effects(y[:2], v[:2]).prediction_interval).all()
    assert m.weights.sum() == pytest.approx(1.0)


def test_prediction_interval_covers_a_new_site():
    # Sites drawn from the random-effects model itself: the PI covers a new site's true effect ~95 %.
    rng = np.random.default_rng(4)
    hits, reps = 0, 2000
    for _ in range(reps):
        v = rng.uniform(0.01, 0.03, 10)
        theta = rng.normal(1.0, 0.2, 11)
        m = random_effects(rng.normal(theta[:10], np.sqrt(v)), v)
        hits += m.prediction_interval[0] <= theta[10] <= m.prediction_interval[1]
    assert 0.92 <= hits / reps <= 0.985


def test_scales_and_bad_input():
    y, v = logit_auc([0.7, 0.8], [0.001, 0.002])
    np.testing.assert_allclose(y, np.log([0.7 / 0.3, 0.8 / 0.2]))
    np.testing.assert_allclose(v, [0.001 / 0.21**2, 0.002 / 0.16**2])
    y, v = log_oe([0.5, 2.0], [0.01, 0.04])
    np.testing.assert_allclose(v, [0.04, 0.01])
    with pytest.raises(ValueError, match="at least 2 sites"):
        random_effects([0.1], [0.01])
    with pytest.raises(ValueError, match="variances finite and > 0"):
        random_effects([0.1, 0.2], [0.01, 0.0])
    with pytest.raises(ValueError, match="method must be one of"):
        random_effects([0.1, 0.2], [0.01, 0.01], method="pm")
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        logit_auc([1.0, 0.5], [0.01, 0.01])


def test_i2_comes_from_the_same_tau2_as_metafor_reports_it():
    # metafor's rma: I^2 = tau^2 / (tau^2 + s^2), s^2 = (k - 1) sum w / ((sum w)^2 - sum w^2), w = 1 / v
    for y, v in _designs(seed=5):
        m = random_effects(y, v)
        w = 1 / v
        s2 = (len(v) - 1) * w.sum() / (w.sum() ** 2 - (w**2).sum())
        assert m.i2 == pytest.approx(m.tau2 / (m.tau2 + s2), rel=1e-12, abs=1e-15)
    # REML tau^2 = 0 although Q exceeds its degrees of freedom: no heterogeneity is reported, not a Q-based I^2
    rng = np.random.default_rng(0)
    for _ in range(24):
        v = rng.uniform(0.005, 0.05, 5)
        y = rng.normal(0.8, np.sqrt(v))
    m = random_effects(y, v)
    assert m.tau2 == 0.0 and m.q > 4 and (m.q - 4) / m.q > 0.2
    assert m.i2 == 0.0
