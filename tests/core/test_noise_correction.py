"""The noise-corrected AUC: exact without noise, unbiased to first order with it, and a noise variance that is seeded and batchable."""

import numpy as np
import pytest
from scipy.stats import norm

from dsroc import (
    auc_ci,
    delong_variance,
    empirical_auc,
    noise_corrected_auc,
    noise_variance,
    placement_values,
    released_auc,
)
from dsroc.roc.noise_correction import grouped_noise_variance


def _pieces(s0, s1, r0, r1):
    pv0, pv1 = placement_values(r0, s1), placement_values(r1, s0)
    var = pv0.var(ddof=1) / s1.size + pv1.var(ddof=1) / s0.size
    return pv0.mean(), pv1.mean(), released_auc(r0, r1), var


def test_without_noise_it_is_the_empirical_auc_and_its_delong_interval():
    rng = np.random.default_rng(1)
    s0, s1 = np.round(rng.normal(size=300), 1), np.round(rng.normal(0.8, size=200), 1)  # with ties
    m0, m1, rel, var = _pieces(s0, s1, s0, s1)
    scores, labels = np.r_[s0, s1], np.r_[np.zeros(300), np.ones(200)]
    c = noise_corrected_auc(mean_pv0=m0, mean_pv1=m1, auc_released=rel, delong_variance=var, noise_variance=0.0)
    assert c.auc == pytest.approx(empirical_auc(scores, labels), abs=1e-12)
    assert c.variance == pytest.approx(delong_variance(scores, labels), rel=1e-12)
    assert (c.ci.lower, c.ci.upper) == pytest.approx(auc_ci(c.auc, c.variance), abs=1e-12)


def test_extrapolation_removes_the_noise_bias_binormal():
    # s0 ~ N(0, 1), s1 ~ N(1, 1): A(sigma) = Phi(1 / sqrt(2 + sigma^2)) in closed form.
    tau = 0.3
    exact = norm.cdf(1 / np.sqrt(2))
    a_tau, a_2 = norm.cdf(1 / np.sqrt(2 + tau**2)), norm.cdf(1 / np.sqrt(2 + 2 * tau**2))
    assert abs(2 * a_tau - a_2 - exact) < 0.1 * abs(a_tau - exact)  # O(tau^4) left of an O(tau^2) bias
    rng = np.random.default_rng(2)
    n = 200_000
    s0, s1 = rng.normal(size=n), rng.normal(1.0, size=n)
    r0, r1 = s0 + tau * rng.normal(size=n), s1 + tau * rng.normal(size=n)
    m0, m1, rel, var = _pieces(s0, s1, r0, r1)
    c = noise_corrected_auc(mean_pv0=m0, mean_pv1=m1, auc_released=rel, delong_variance=var,
                            noise_variance=noise_variance(r0, r1, tau, tau))
    assert c.auc_tau == pytest.approx(a_tau, abs=4 * np.sqrt(var))
    assert c.auc_released == pytest.approx(a_2, abs=4 * np.sqrt(var))
    assert c.auc == pytest.approx(2 * a_tau - a_2, abs=4 * np.sqrt(c.variance))
    # Against the sample's own (pooled) AUC the noise bias is gone and the interval holds it.
    emp = 1 - placement_values(s0, s1).mean()
    assert abs(c.auc - emp) < 0.1 * abs(c.auc_tau - emp)
    assert c.ci.lower < emp < c.ci.upper


def test_noise_variance_matches_repeated_releases_within_a_factor():
    # Fixed true scores, 60 independent releases: the spread of the corrected AUC against the estimate.
    rng = np.random.default_rng(3)
    s = rng.random(4000)
    y = (s > 0.5) ^ (rng.random(4000) < 0.2)
    s0, s1, tau = s[~y], s[y], 0.1
    values, estimates = [], []
    for _ in range(60):
        r0, r1 = s0 + tau * rng.normal(size=s0.size), s1 + tau * rng.normal(size=s1.size)
        m0, m1, rel, var = _pieces(s0, s1, r0, r1)
        values.append(2 * 0.5 * (1 - m0 + m1) - rel)
        estimates.append(noise_variance(r0, r1, tau, tau, seed=len(values)))
    ratio = np.mean(estimates) / np.var(values, ddof=1)
    assert 0.3 < ratio < 1.5  # approximate (blurred stand-ins); see the docstring
    assert np.mean(estimates) < 0.1 * var  # and small beside the sampling variance


def test_noise_variance_is_seeded_order_free_and_batchable():
    rng = np.random.default_rng(4)
    data = [(rng.normal(size=m), rng.normal(1, size=k)) for m, k in ((50, 70), (300, 20), (120, 120))]
    singles = [noise_variance(r0, r1, 0.3, 0.2, seed=[9, i]) for i, (r0, r1) in enumerate(data)]
    assert singles[0] == noise_variance(data[0][0][::-1], data[0][1][::-1], 0.3, 0.2, seed=[9, 0])
    assert singles[0] == noise_variance(np.sort(data[0][0]), np.sort(data[0][1]), 0.3, 0.2, seed=[9, 0])
    assert singles[0] != noise_variance(*data[0], 0.3, 0.2, seed=[9, 5])
    r0, r1 = np.concatenate([d[0] for d in data]), np.concatenate([d[1] for d in data])
    g0 = np.repeat(np.arange(3), [d[0].size for d in data])
    g1 = np.repeat(np.arange(3), [d[1].size for d in data])
    perm0, perm1 = rng.permutation(r0.size), rng.permutation(r1.size)  # groups interleaved
    batched = grouped_noise_variance(r0[perm0], g0[perm0], r1[perm1], g1[perm1], 0.3, 0.2, n_groups=3,
                                     seeds=[[9, i] for i in range(3)])
    np.testing.assert_allclose(batched, singles, rtol=1e-12)
    # a subset of max_size scores, scaled back to n
    big = noise_variance(*data[1], 0.3, 0.2, max_size=100)
    assert np.isfinite(big) and big > 0


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="mean_pv0 must lie in"):
        noise_corrected_auc(mean_pv0=1.2, mean_pv1=0.5, auc_released=0.5, delong_variance=0.01, noise_variance=0.0)
    with pytest.raises(ValueError, match="noise_variance must be a finite non-negative"):
        noise_corrected_auc(mean_pv0=0.2, mean_pv1=0.5, auc_released=0.5, delong_variance=0.01, noise_variance=-1.0)
    with pytest.raises(ValueError, match="draws must be"):
        noise_variance([0.1, 0.2], [0.3, 0.4], 0.1, 0.1, draws=1)
    with pytest.raises(ValueError, match="tau must be finite"):
        noise_variance([0.1, 0.2], [0.3, 0.4], -0.1, 0.1)
