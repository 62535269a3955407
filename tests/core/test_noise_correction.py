"""The noise-corrected AUC: exact without noise, the deconvolved blur against closed forms, a bias-aware CI, a noise variance that matches repeated releases and is seeded and batchable."""

import numpy as np
import pytest
from scipy.stats import norm

from dsroc import (
    auc_ci,
    auc_ci_batch,
    deconvolution_correction,
    delong_variance,
    empirical_auc,
    noise_corrected_auc,
    noise_variance,
    placement_values,
)
from dsroc.roc.noise_correction import grouped_deconvolution_correction, grouped_noise_variance

# Bimodal scores s | class c ~ 1/2 N(mu_c - A, V) + 1/2 N(mu_c + A, V): the AUC under pair noise sigma
# is a sum of four normal CDFs, so the target, the blur and the old extrapolation have closed forms.
MU0, MU1, A, V = 0.0, 0.2, 0.3, 0.01


def _auc_blurred(sigma2):
    shifts = (-A, A)
    return np.mean([norm.cdf((MU1 - MU0 + a1 - a0) / np.sqrt(2 * V + sigma2)) for a1 in shifts for a0 in shifts])


def _bimodal(rng, n, mu):
    return mu + rng.choice((-A, A), size=n) + np.sqrt(V) * rng.normal(size=n)


def _means(s0, s1, r0, r1):
    pv0, pv1 = placement_values(r0, s1), placement_values(r1, s0)
    var = pv0.var(ddof=1) / s1.size + pv1.var(ddof=1) / s0.size
    return pv0.mean(), pv1.mean(), var


def test_without_noise_it_is_the_empirical_auc_and_its_delong_interval():
    rng = np.random.default_rng(1)
    s0, s1 = np.round(rng.normal(size=300), 1), np.round(rng.normal(0.8, size=200), 1)  # with ties
    m0, m1, var = _means(s0, s1, s0, s1)
    assert deconvolution_correction(s0, s1, 0.0, 0.0) == 0.0
    scores, labels = np.r_[s0, s1], np.r_[np.zeros(300), np.ones(200)]
    c = noise_corrected_auc(mean_pv0=m0, mean_pv1=m1, correction=0.0, delong_variance=var, noise_variance=0.0)
    assert c.auc == pytest.approx(empirical_auc(scores, labels), abs=1e-12)
    assert c.variance == pytest.approx(delong_variance(scores, labels), rel=1e-12)
    assert (c.ci.lower, c.ci.upper) == pytest.approx(auc_ci(c.auc, c.variance), abs=1e-12)


def test_deconvolution_removes_the_blur_that_first_order_extrapolation_leaves():
    tau, n = 0.1, 100_000
    exact, a_tau, a_2 = _auc_blurred(0.0), _auc_blurred(tau**2), _auc_blurred(2 * tau**2)
    old_bias = 2 * a_tau - a_2 - exact  # the O(tau^4) term of 2 A(tau) - A(sqrt 2 tau)
    assert old_bias < -0.004
    rng = np.random.default_rng(2)
    s0, s1 = _bimodal(rng, n, MU0), _bimodal(rng, n, MU1)
    r0, r1 = s0 + tau * rng.normal(size=n), s1 + tau * rng.normal(size=n)
    m0, m1, var = _means(s0, s1, r0, r1)
    correction = deconvolution_correction(r0, r1, tau, tau)
    assert correction == pytest.approx(exact - a_tau, abs=0.1 * abs(old_bias))
    c = noise_corrected_auc(mean_pv0=m0, mean_pv1=m1, correction=correction, delong_variance=var,
                            noise_variance=noise_variance(r0, r1, tau, tau))
    assert c.auc_tau == pytest.approx(a_tau, abs=4 * np.sqrt(var))
    emp = 1 - placement_values(s0, s1).mean()  # the sample's own (pooled) AUC
    assert abs(c.auc - emp) < 0.15 * abs(old_bias)
    assert c.ci.lower < emp < c.ci.upper


def test_sites_with_different_noise_mix_as_the_placement_means_do():
    # Negatives from two sites (tau 0.05 and 0.15, shares 1/4 and 3/4), positives all at tau 0.1.
    n, taus0 = 80_000, np.r_[np.full(20_000, 0.05), np.full(60_000, 0.15)]
    rng = np.random.default_rng(5)
    s0, s1 = _bimodal(rng, n, MU0), _bimodal(rng, n, MU1)
    r0, r1 = s0 + taus0 * rng.normal(size=n), s1 + 0.1 * rng.normal(size=n)
    blurred = 0.5 * (0.25 * _auc_blurred(0.05**2) + 0.75 * _auc_blurred(0.15**2)) + 0.5 * _auc_blurred(0.1**2)
    expected = _auc_blurred(0.0) - blurred
    assert deconvolution_correction(r0, r1, taus0, 0.1) == pytest.approx(expected, abs=0.1 * expected)


def test_the_interval_is_bias_aware_for_a_share_of_the_correction():
    # Monte Carlo of an estimate biased by exactly the bound: the bias-aware interval keeps 95 %, the
    # plain one does not; without a bound it is the plain interval bit for bit.
    rng = np.random.default_rng(6)
    se, bound, truth = 0.01, 0.015, 0.7
    est = truth + bound + se * rng.normal(size=200_000)
    aware = auc_ci_batch(est, np.full(est.size, se**2), method="wald", bias=bound)
    plain = auc_ci_batch(est, np.full(est.size, se**2), method="wald")
    assert np.mean((aware.lower <= truth) & (truth <= aware.upper)) == pytest.approx(0.95, abs=0.003)
    assert np.mean((plain.lower <= truth) & (truth <= plain.upper)) < 0.7
    zero = auc_ci_batch(est[:10], np.full(10, se**2), bias=0.0)
    np.testing.assert_array_equal(zero.lower, auc_ci_batch(est[:10], np.full(10, se**2)).lower)
    c = noise_corrected_auc(mean_pv0=0.3, mean_pv1=0.7, correction=-0.02, delong_variance=1e-6, noise_variance=0.0)
    assert c.bias_bound == pytest.approx(0.002)
    assert (c.ci.lower, c.ci.upper) == tuple(float(v) for v in auc_ci_batch(0.68, 1e-6, bias=0.002)[:2])
    assert c.ci.upper - c.ci.lower > np.subtract(*auc_ci(0.68, 1e-6)[::-1]) + 0.002  # about 2 bounds - 0.6 SE wider


def test_noise_variance_matches_repeated_releases():
    # Fixed true scores, 60 independent releases: the spread of the corrected AUC against the estimate.
    rng = np.random.default_rng(3)
    s0, s1, tau = _bimodal(rng, 3000, MU0), _bimodal(rng, 1500, MU1), 0.1
    values, estimates = [], []
    for i in range(60):
        r0, r1 = s0 + tau * rng.normal(size=s0.size), s1 + tau * rng.normal(size=s1.size)
        m0, m1, var = _means(s0, s1, r0, r1)
        values.append(0.5 * (1 - m0 + m1) + deconvolution_correction(r0, r1, tau, tau))
        estimates.append(noise_variance(r0, r1, tau, tau, seed=i))
    ratio = np.mean(estimates) / np.var(values, ddof=1)
    assert 0.6 < ratio < 1.6  # 60 releases: the ratio's own SE is about 0.2
    assert np.mean(estimates) < var  # the noise is the smaller part of the variance


def test_noise_variance_and_correction_are_seeded_order_free_and_batchable():
    rng = np.random.default_rng(4)
    data = [(rng.normal(size=m), rng.normal(1, size=k)) for m, k in ((50, 70), (300, 20), (120, 120))]
    singles = [noise_variance(r0, r1, 0.3, 0.2, seed=[9, i]) for i, (r0, r1) in enumerate(data)]
    assert singles[0] == noise_variance(data[0][0][::-1], data[0][1][::-1], 0.3, 0.2, seed=[9, 0])
    assert singles[0] == noise_variance(np.sort(data[0][0]), np.sort(data[0][1]), 0.3, 0.2, seed=[9, 0])
    assert singles[0] != noise_variance(*data[0], 0.3, 0.2, seed=[9, 5])
    corrections = [deconvolution_correction(r0, r1, 0.3, 0.2) for r0, r1 in data]
    assert corrections[0] == deconvolution_correction(data[0][0][::-1], data[0][1][::-1], 0.3, 0.2)
    r0, r1 = np.concatenate([d[0] for d in data]), np.concatenate([d[1] for d in data])
    g0 = np.repeat(np.arange(3), [d[0].size for d in data])
    g1 = np.repeat(np.arange(3), [d[1].size for d in data])
    perm0, perm1 = rng.permutation(r0.size), rng.permutation(r1.size)  # groups interleaved
    batched = grouped_noise_variance(r0[perm0], g0[perm0], r1[perm1], g1[perm1], 0.3, 0.2, n_groups=3,
                                     seeds=[[9, i] for i in range(3)])
    np.testing.assert_allclose(batched, singles, rtol=1e-10)
    np.testing.assert_allclose(grouped_deconvolution_correction(r0[perm0], g0[perm0], r1[perm1], g1[perm1], 0.3, 0.2,
                                                                n_groups=3), corrections, rtol=1e-10, atol=1e-15)
    # a subset of max_size scores, scaled back to n
    big = noise_variance(*data[1], 0.3, 0.2, max_size=100)
    assert np.isfinite(big) and big > 0


def test_passes_in_chunks_give_the_same_numbers_with_little_memory(monkeypatch):
    # The released scores are binned and subsampled a chunk at a time (10^7 pooled scores would otherwise
    # hold several copies): the numbers must not depend on the chunk size, nor on the groups' layout.
    import tracemalloc

    from dsroc.roc import noise_correction as nc

    rng = np.random.default_rng(8)
    r0, r1 = np.sort(np.round(rng.normal(size=30_000), 3)), np.sort(np.round(rng.normal(0.7, size=20_000), 3))
    t0 = np.where(np.arange(r0.size) % 4 == 0, 0.1, 0.3)  # two noise levels
    g0, g1 = np.repeat([0, 2], [10_000, 20_000]), np.repeat([0, 2], [5_000, 15_000])  # group 1 empty
    whole = [deconvolution_correction(r0, r1, 0.3, 0.3), noise_variance(r0, r1, 0.3, 0.3, max_size=500),
             deconvolution_correction(r0, r1, t0, 0.2), noise_variance(r0, r1, t0, 0.2, seed=3),
             *grouped_deconvolution_correction(r0, g0, r1, g1, 0.3, 0.2, n_groups=3),
             *grouped_noise_variance(r0, g0, r1, g1, 0.3, 0.2, n_groups=3, seeds=[1, 2, 3])]
    perm0, perm1 = rng.permutation(r0.size), rng.permutation(r1.size)  # groups interleaved: indices, not slices
    interleaved = grouped_noise_variance(r0[perm0], g0[perm0], r1[perm1], g1[perm1], 0.3, 0.2, n_groups=3,
                                         seeds=[1, 2, 3])
    np.testing.assert_array_equal(interleaved[[0, 2]], whole[-3:][::2])
    monkeypatch.setattr(nc, "_CHUNK", 997)
    chunked = [deconvolution_correction(r0, r1, 0.3, 0.3), noise_variance(r0, r1, 0.3, 0.3, max_size=500),
               deconvolution_correction(r0, r1, t0, 0.2), noise_variance(r0, r1, t0, 0.2, seed=3),
               *grouped_deconvolution_correction(r0, g0, r1, g1, 0.3, 0.2, n_groups=3),
               *grouped_noise_variance(r0, g0, r1, g1, 0.3, 0.2, n_groups=3, seeds=[1, 2, 3])]
    np.testing.assert_array_equal(chunked, whole)
    monkeypatch.undo()
    big0, big1 = np.sort(np.round(rng.normal(size=2_000_000), 3)), np.sort(np.round(rng.normal(1, size=2_000_000), 3))
    tracemalloc.start()
    deconvolution_correction(big0, big1, 0.3, 0.3), noise_variance(big0, big1, 0.3, 0.3)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 0.5 * (big0.nbytes + big1.nbytes)  # not one copy of the scores (the group ids are a view)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="mean_pv0 must lie in"):
        noise_corrected_auc(mean_pv0=1.2, mean_pv1=0.5, correction=0.0, delong_variance=0.01, noise_variance=0.0)
    with pytest.raises(ValueError, match="correction must be a finite"):
        noise_corrected_auc(mean_pv0=0.2, mean_pv1=0.5, correction=np.nan, delong_variance=0.01, noise_variance=0.0)
    with pytest.raises(ValueError, match="noise_variance must be a finite non-negative"):
        noise_corrected_auc(mean_pv0=0.2, mean_pv1=0.5, correction=0.0, delong_variance=0.01, noise_variance=-1.0)
    with pytest.raises(ValueError, match="draws must be"):
        noise_variance([0.1, 0.2], [0.3, 0.4], 0.1, 0.1, draws=1)
    with pytest.raises(ValueError, match="tau must be finite"):
        noise_variance([0.1, 0.2], [0.3, 0.4], -0.1, 0.1)
    with pytest.raises(ValueError, match="misfit_share must lie in"):
        noise_corrected_auc(mean_pv0=0.2, mean_pv1=0.5, correction=0.0, delong_variance=0.01, noise_variance=0.0,
                            misfit_share=-0.1)
    with pytest.raises(ValueError, match="bias must be a finite non-negative"):
        auc_ci_batch(0.7, 0.01, bias=-1.0)
    with pytest.raises(ValueError, match="released scores must be finite"):
        deconvolution_correction([0.1, np.inf], [0.3, 0.4], 0.1, 0.1)
