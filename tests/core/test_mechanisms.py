"""Boyd's smooth-sensitivity mechanisms and Sun's FedAUC (dsroc.mechanisms): test vectors T6-T11 and brute force."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest
from scipy import integrate, stats

from dsroc import empirical_auc
from dsroc import mechanisms as M
from dsroc.mechanisms import boyd, fedauc


def brute_auc_strict(scores, labels):
    pos = [s for s, y in zip(scores, labels) if y == 1]
    neg = [s for s, y in zip(scores, labels) if y == 0]
    return sum(1 for x in neg for y in pos if x < y) / (len(pos) * len(neg))


def test_t1_auc_ties_zero():
    scores = np.round(np.arange(0.95, -0.01, -0.05), 2)
    labels = np.isin(scores, [0.95, 0.80, 0.75, 0.50, 0.15]).astype(int)
    release = M.dp_auc(scores, labels, epsilon=1e9, delta=0.5, rng=np.random.default_rng(0))
    assert round(release.unclipped, 6) == 0.706667


def test_t2_auc():
    scores = [1, 0.8, 0.7, 0.6, 0.5, 0.3, 0.2, 0.1]
    labels = [1, 1, 0, 1, 0, 0, 1, 0]
    assert brute_auc_strict(scores, labels) == 0.75
    assert M.dp_auc(scores, labels, epsilon=1e12, delta=0.5, rng=np.random.default_rng(0)).unclipped == pytest.approx(0.75, abs=1e-9)


def test_t6_local_sensitivity_bounds_every_neighbour():
    # B15 Fig. 1: 15+/15- AUC 0.796 -> 16+/14- 0.772, |change| 0.024 <= LS = 1/15.
    assert M.auc_local_sensitivity(15, 15) == pytest.approx(1 / 15) and 0.024 <= 1 / 15
    # Brute force: every single-row change (score and/or label) of small data sets moves the AUC by at most LS.
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(4, 10))
        scores = rng.integers(0, 5, n).astype(float)
        labels = rng.permutation(np.r_[0, 1, rng.integers(0, 2, n - 2)])
        n1, n0 = int(labels.sum()), int(n - labels.sum())
        base = brute_auc_strict(scores, labels)
        for i, s_new, y_new in product(range(n), range(5), (0, 1)):
            s2, y2 = scores.copy(), labels.copy()
            s2[i], y2[i] = s_new, y_new
            if 0 < y2.sum() < n:
                assert abs(brute_auc_strict(s2, y2) - base) <= M.auc_local_sensitivity(n1, n0) + 1e-12


def test_t7_smooth_sensitivity_auc():
    expected = {0.1: [0.40657, 0.02, 0.01, 0.004, 0.002], 0.01: [0.91393, 0.61263, 0.37158, 0.08291, 0.00681]}
    for beta, values in expected.items():
        got = [M.smooth_sensitivity(n1, 1000, beta=beta) for n1 in (10, 50, 100, 250, 500)]
        assert [round(v, 5) for v in got] == values
    assert round(M.smooth_sensitivity(10, 1000, beta=0.001), 5) == 0.99104
    assert round(M.smooth_sensitivity(500, 1000, beta=0.001), 5) == 0.60714
    # Vectorised over n1 equals the scalar calls, and equals the definition by a Python loop.
    n1 = np.array([10, 50, 100, 250, 500])
    assert np.allclose(M.smooth_sensitivity(n1, 1000, beta=0.01), expected[0.01], atol=5e-6)
    loop = max((1 / min(i, 1000 - i) if 0 < i < 1000 else 1.0) * math.exp(-0.01 * abs(i - 37)) for i in range(1001))
    assert M.smooth_sensitivity(37, 1000, beta=0.01) == pytest.approx(loop, rel=1e-14)


def test_t8_laplace_and_cauchy_calibration():
    cal = M.smooth_noise_calibration(1.0, 0.01)
    assert round(cal.beta, 6) == 0.094370 and cal.distribution == "laplace"
    for n, s_star in ((100, 0.01), (1000, 0.001)):
        s = M.smooth_sensitivity(n, 2 * n, beta=cal.beta)
        assert s == pytest.approx(s_star, rel=1e-12) and cal.factor * s == pytest.approx(2 * s_star)
    far = M.smooth_noise_calibration(0.1, 0.01)
    assert round(M.smooth_sensitivity(100, 200, beta=far.beta), 6) == 0.392877
    cauchy = M.smooth_noise_calibration(1.0, 0.0)
    assert cauchy.beta == pytest.approx(1 / 6) and cauchy.factor * M.smooth_sensitivity(1000, 2000, beta=cauchy.beta) == pytest.approx(0.006)
    # Untruncated E|noise| = scale for Laplace: the release's unclipped error has mean absolute value = scale.
    rng = np.random.default_rng(4)
    scores = np.r_[rng.normal(0, 1, 1000), rng.normal(1, 1, 1000)]
    labels = np.r_[np.zeros(1000), np.ones(1000)].astype(int)
    truth = M.dp_auc(scores, labels, epsilon=1e12, delta=0.01, rng=rng).unclipped
    errs = [abs(M.dp_auc(scores, labels, epsilon=1, delta=0.01, rng=rng).unclipped - truth) for _ in range(3000)]
    assert np.mean(errs) == pytest.approx(0.002, rel=0.08)


def test_t9_ap_local_and_smooth_sensitivity():
    expected = {10: (0.593599, 0.574029), 100: (0.092302, 0.083946), 1000: (0.013818, 0.012973)}
    for n, (log, harmonic) in expected.items():
        assert round(M.ap_local_sensitivity(n, bound="log"), 6) == log
        assert round(M.ap_local_sensitivity(n, bound="harmonic"), 6) == harmonic
    assert M.ap_local_sensitivity(2) == 1.0 and M.ap_local_sensitivity(1) == 1.0  # capped
    cal = M.smooth_noise_calibration(1.0, 0.01)
    assert round(M.smooth_sensitivity(100, 200, beta=cal.beta, statistic="ap"), 6) == 0.092302


def test_t10_binormal_roc():
    a, tpr = M.dp_binormal_roc(0.75, [0.1, 0.5])
    assert round(a, 6) == 0.953873 and [round(v, 6) for v in tpr] == [0.371577, 0.829926]
    # The curve's area is the AUC it came from.
    grid = np.linspace(0, 1, 200_001)
    assert np.trapezoid(M.dp_binormal_roc(0.75, grid)[1], grid) == pytest.approx(0.75, abs=1e-5)


def test_smooth_noise_tails():
    # gamma = 3 by the beta-prime construction against the density 1/(1 + |z|^3) integrated numerically.
    cal = M.smooth_noise_calibration(1.0, 0.0, gamma=3.0)
    z = M.smooth_noise(cal, rng=np.random.default_rng(1), size=20_000)
    norm = integrate.quad(lambda t: 1 / (1 + abs(t) ** 3), -np.inf, np.inf)[0]
    assert norm == pytest.approx(2 * math.pi / (3 * math.sin(math.pi / 3)))

    def cdf(x):
        return np.array([integrate.quad(lambda t: 1 / (1 + abs(t) ** 3), -np.inf, v)[0] / norm for v in np.atleast_1d(x)])

    assert stats.kstest(z[:3000], cdf).pvalue > 0.01
    cauchy = M.smooth_noise(M.smooth_noise_calibration(1.0, 0.0), rng=np.random.default_rng(2), size=5000)
    assert stats.kstest(cauchy, "cauchy").pvalue > 0.01


def test_dp_releases_are_clipped_and_use_the_stated_scale():
    rng = np.random.default_rng(8)
    scores, labels = rng.random(60), np.r_[np.zeros(30), np.ones(30)].astype(int)
    for _ in range(50):
        r = M.dp_auc(scores, labels, epsilon=0.1, rng=rng)
        assert 0.0 <= r.value <= 1.0 and r.value == min(max(r.unclipped, 0.0), 1.0)
        assert r.scale == pytest.approx(60 * M.smooth_sensitivity(30, 60, beta=0.1 / 6))
    ap = M.dp_average_precision(scores, labels, epsilon=1.0, delta=0.01, rng=rng, bound="harmonic")
    cal = M.smooth_noise_calibration(1.0, 0.01)
    assert ap.smooth_sensitivity == M.smooth_sensitivity(30, 60, beta=cal.beta, statistic="ap", bound="harmonic")


# ---- FedAUC -----------------------------------------------------------------------------------------


def test_rank_auc_is_the_mann_whitney_auc():
    rng = np.random.default_rng(3)
    scores, labels = np.round(rng.random(200), 2), (rng.random(200) < 0.3).astype(int)
    ranks = M.global_ranks(scores)
    assert M.rank_auc(ranks @ labels, labels.sum(), 200) == pytest.approx(empirical_auc(scores, labels), abs=1e-13)


def test_t11_debias_inverts_the_expected_noisy_auc():
    # Sun et al. Table 3 (Criteo small: clean AUC 0.749383, P = 117,317, N = 341,090).
    A, P, N = 0.749383, 117_317, 341_090
    M_ = P + N
    printed_der = {0.1: 0.509496, 0.5: 0.547199, 1: 0.592489, 2: 0.667873, 4: 0.735213, 10: 0.749346}
    printed_mean = {0.1: 0.509429, 0.5: 0.546986, 1: 0.592421, 2: 0.667666, 4: 0.735230, 10: 0.749343}
    for eps, der in printed_der.items():
        rho = M.flip_probability(eps)
        pi = P / M_
        alpha = (1 - pi) * rho / (pi * (1 - rho) + (1 - pi) * rho)
        beta = pi * rho / (pi * rho + (1 - pi) * (1 - rho))
        expected_noisy = (1 - alpha - beta) * A + (alpha + beta) / 2
        assert round(expected_noisy, 6) == der
        assert abs(expected_noisy - printed_mean[eps]) < 3e-4  # Sun's printed means (100 runs)
        p_noisy = P * (1 - rho) + N * rho  # expected flipped count
        assert M.debias_auc(expected_noisy, n_pos_noisy=p_noisy, n=M_, epsilon=eps) == pytest.approx(A, abs=1e-12)


def test_fedauc_rr_is_unbiased_by_simulation():
    rng = np.random.default_rng(10)
    scores = np.r_[rng.normal(0, 1, 1500), rng.normal(1, 1, 500)]
    labels = np.r_[np.zeros(1500), np.ones(500)].astype(int)
    truth = empirical_auc(scores, labels)
    values = np.array([M.fedauc_rr(scores, labels, epsilon=2.0, rng=rng).auc for _ in range(400)])
    assert abs(values.mean() - truth) < 4 * values.std(ddof=1) / math.sqrt(values.size)
    assert M.fedauc_rr(scores, labels, epsilon=50.0, rng=rng).auc == pytest.approx(truth, abs=1e-12)


@pytest.mark.parametrize("method", M.fedauc.LAPLACE_METHODS)
def test_fedauc_laplace_exact_at_large_epsilon_and_site_sums(method):
    rng = np.random.default_rng(12)
    scores, labels = rng.random(300), (rng.random(300) < 0.4).astype(int)
    sites = rng.integers(0, 5, 300)
    truth = empirical_auc(scores, labels)
    assert M.fedauc_laplace(scores, labels, sites=sites, epsilon=1e12, rng=rng, method=method).auc == pytest.approx(truth, abs=1e-6)


def test_fedauc_laplace_sd_matches_simulation_and_sun_formulas():
    rng = np.random.default_rng(13)
    n = 400
    scores, labels = rng.random(n), (rng.random(n) < 0.3).astype(int)
    P, N = int(labels.sum()), int(n - labels.sum())
    for method, sites in (("global", rng.integers(0, 10, n)), ("local", np.arange(n))):
        values = [M.fedauc_laplace(scores, labels, sites=sites, epsilon=1.0, rng=rng, method=method, exact_counts=True).auc
                  for _ in range(2000)]
        k = 10 if method == "global" else n
        formula = M.fedauc_laplace_sd(n_pos=P, n_neg=N, n_sites=k, epsilon=1.0, method=method)
        # local, one patient per site: Delta_k = its rank (0..M-1, no ties); global: Delta_k = M - 1.
        assert np.std(values, ddof=1) == pytest.approx(formula, rel=0.08)
    # Sun's printed formula values (Table 2).
    assert M.fedauc_laplace_sd(n_pos=117_317, n_neg=341_090, n_sites=10, epsilon=1.0) == pytest.approx(5.12e-5, rel=2e-3)
    assert M.fedauc_laplace_sd(n_pos=117_317, n_neg=341_090, n_sites=458_407, epsilon=1.0) == pytest.approx(1.097e-2, rel=1e-3)
    assert M.fedauc_laplace_sd(n_pos=117_317, n_neg=341_090, n_sites=458_407, epsilon=1.0, method="local") == pytest.approx(6.33e-3, rel=1e-3)


def test_adaptive_split_decomposes_the_rank_sum():
    # r = r_bar 1 + v: the adaptive release with zero noise equals the site's rank sum.
    rng = np.random.default_rng(14)
    ranks = rng.permutation(50).astype(float)
    y = (rng.random(50) < 0.5).astype(float)
    r_bar = ranks.mean()
    assert r_bar * y.sum() + (ranks - r_bar) @ y == pytest.approx(ranks @ y)


_BAD_DATA = [
    ({"epsilon": 0.0}, "epsilon must be a positive finite number"),
    ({"epsilon": -1.0}, "epsilon must be a positive finite number"),
    ({"labels": [1, 1, 1, 1]}, "negatives"),
    ({"labels": [0, 0, 0, 0]}, "positives"),
    ({"labels": [0, 1, 2, 1]}, "labels must contain only 0 and 1"),
    ({"scores": [0.1, np.nan, 0.3, 0.4]}, "scores contains 1 non-finite"),
]
_BAD_DELTA = [({"delta": 1.0}, "delta must be a number in \\[0, 1\\)"), ({"delta": -0.1}, "delta must be a number in \\[0, 1\\)")]
_CALLS = {
    "dp_auc": lambda a, rng: M.dp_auc(a["scores"], a["labels"], epsilon=a["epsilon"], delta=a["delta"], rng=rng),
    "dp_ap": lambda a, rng: M.dp_average_precision(a["scores"], a["labels"], epsilon=a["epsilon"], delta=a["delta"], rng=rng),
    "rr": lambda a, rng: M.fedauc_rr(a["scores"], a["labels"], epsilon=a["epsilon"], rng=rng),
    "lap": lambda a, rng: M.fedauc_laplace(a["scores"], a["labels"], sites=np.zeros(4, int), epsilon=a["epsilon"], rng=rng),
}
_CASES = [(c, kw, m) for c in _CALLS for kw, m in _BAD_DATA] + [(c, kw, m) for c in ("dp_auc", "dp_ap") for kw, m in _BAD_DELTA]


@pytest.mark.parametrize("call, kwargs, match", _CASES)
def test_bad_input(call, kwargs, match):
    args = {"scores": [0.1, 0.2, 0.3, 0.4], "labels": [0, 1, 0, 1], "epsilon": 1.0, "delta": 0.01}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        _CALLS[call](args, np.random.default_rng(0))


def test_smooth_sensitivity_bad_counts():
    with pytest.raises(ValueError, match="n1 must not exceed n"):
        M.smooth_sensitivity(5, 3, beta=0.1)
    with pytest.raises(ValueError, match="beta"):
        M.smooth_sensitivity(1, 3, beta=0.0)
    with pytest.raises(ValueError, match="rng"):
        M.dp_auc([0.1, 0.9], [0, 1], epsilon=1.0, rng=1)


def test_site_combination_is_the_stratified_auc():
    # With exact counts, weights n1_k n0_k make the combination the stratified Mann-Whitney AUC.
    rng = np.random.default_rng(21)
    per_site, auc, n1s, ns = [], [], [], []
    for k in range(4):
        n = int(rng.integers(30, 80))
        s, y = rng.normal(size=n) + 0.3 * k, (rng.random(n) < 0.4).astype(int)
        y[:2] = [0, 1]
        per_site.append((s, y))
        auc.append(brute_auc_strict(s, y)); n1s.append(y.sum()); ns.append(n)
    pairs = sum(((y == 1).sum() * (y == 0).sum()) for _, y in per_site)
    stratified = sum(brute_auc_strict(s, y) * (y == 1).sum() * (y == 0).sum() for s, y in per_site) / pairs
    assert M.combine_site_releases(auc, n1s, ns) == pytest.approx(stratified, abs=1e-14)
    noisy1, noisy0 = M.dp_class_count(np.array(n1s), np.array(ns), epsilon=1.0, rng=rng)
    assert np.allclose(noisy1 + noisy0, ns)


def test_batched_release_has_the_scalar_calibration():
    rng = np.random.default_rng(30)
    stat = np.full((400, 3), 0.7)
    n1 = np.array([20, 200, 600])
    rel = M.smooth_sensitivity_release(stat, n1, 1000, epsilon=1.0, delta=1e-3, rng=rng)
    cal = M.smooth_noise_calibration(1.0, 1e-3)
    for j in range(3):
        scale = cal.factor * M.smooth_sensitivity(int(n1[j]), 1000, beta=cal.beta)
        assert rel.scale[0, j] == pytest.approx(scale)
        # Laplace: E|noise| = scale (unclipped), within 4 standard errors.
        dev = np.abs(rel.unclipped[:, j] - 0.7)
        assert abs(dev.mean() - scale) < 4 * dev.std(ddof=1) / np.sqrt(400)
    assert np.array_equal(rel.value, np.clip(rel.unclipped, 0, 1))


def test_site_release_sums_equal_fedauc_laplace():
    # fedauc_laplace is site_rank_statistics + site_release + rank_auc: same generator state, same answer.
    rng_data = np.random.default_rng(31)
    scores, labels, sites = rng_data.random(200), (rng_data.random(200) < 0.4).astype(int), rng_data.integers(0, 6, 200)
    for method in M.fedauc.LAPLACE_METHODS:
        a = M.fedauc_laplace(scores, labels, sites=sites, epsilon=0.7, rng=np.random.default_rng(5), method=method)
        stats_ = M.site_rank_statistics(M.global_ranks(scores), labels, sites)
        noisy_sum, noisy_p = M.site_release(stats_, method=method, epsilon=0.7, rng=np.random.default_rng(5))
        assert a.auc == pytest.approx(M.rank_auc(noisy_sum.sum(), noisy_p.sum(), 200), abs=1e-14)
        # The statistics by hand, site by site.
        ranks = M.global_ranks(scores)
        for k in range(6):
            mine = sites == k
            assert stats_.rank_sum[k] == pytest.approx(ranks[mine] @ labels[mine])
            assert stats_.max_rank[k] == ranks[mine].max()
            assert stats_.spread[k] == pytest.approx(np.abs(ranks[mine] - ranks[mine].mean()).max())


@pytest.mark.parametrize("delta", [2.225073858507203e-309, 1e-310, 1e-300, 1e-5])
def test_smooth_noise_calibration_holds_at_subnormal_delta(delta):
    """beta = epsilon / (2 ln(2 / delta)) for every delta > 0, against the decimal module (2 / delta overflows a
    float below ~1.1e-308; the site answered INTERNAL there before)."""
    from decimal import Decimal, getcontext

    getcontext().prec = 40
    exact = Decimal(0.3) / (2 * (Decimal(2) / Decimal(delta)).ln())
    calibration = boyd.smooth_noise_calibration(0.3, delta)
    assert calibration.beta > 0 and math.isclose(calibration.beta, float(exact), rel_tol=1e-12)
