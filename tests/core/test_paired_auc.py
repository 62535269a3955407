"""Paired AUC difference from joint histograms against a brute-force DeLong test on the tied scores and Monte Carlo noise."""

import numpy as np
import pytest
from scipy import stats

from dsroc.multicentre import paired_auc_difference


def _tied_patients(n=600, bins=8, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.35
    latent = rng.normal(size=n) + 1.0 * y
    a = np.digitize(latent + 0.4 * rng.normal(size=n), np.linspace(-1.5, 2.5, bins - 1))
    b = np.digitize(latent + 0.9 * rng.normal(size=n), np.linspace(-1.5, 2.5, bins - 1))
    return a, b, y


def _joint(a, b, y, bins):
    return [np.histogram2d(a[y == c], b[y == c], bins=bins, range=[[-0.5, bins - 0.5]] * 2)[0] for c in (0, 1)]


def _brute_force_delong(a, b, y):
    """DeLong et al. (1988) by definition: psi over every (positive, negative) pair, O(n0 n1)."""
    def psi(s):
        pos, neg = s[y][:, None], s[~y][None, :]
        return (pos > neg) + 0.5 * (pos == neg)
    pa, pb = psi(a), psi(b)
    v10 = np.c_[pa.mean(1), pb.mean(1)]
    v01 = np.c_[pa.mean(0), pb.mean(0)]
    s = np.cov(v10, rowvar=False) / y.sum() + np.cov(v01, rowvar=False) / (~y).sum()
    return pa.mean(), pb.mean(), s[0, 0] + s[1, 1] - 2 * s[0, 1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noise_free_difference_equals_brute_force_delong(seed):
    a, b, y = _tied_patients(seed=seed)
    auc_a, auc_b, var = _brute_force_delong(a, b, y)
    res = paired_auc_difference(*_joint(a, b, y, 8))
    assert res.auc_a == pytest.approx(auc_a, abs=1e-14) and res.auc_b == pytest.approx(auc_b, abs=1e-14)
    u = stats.mannwhitneyu(a[y], a[~y]).statistic / (y.sum() * (~y).sum())  # scipy's U, ties one half
    assert res.auc_a == pytest.approx(u, abs=1e-14)
    assert res.se == pytest.approx(np.sqrt(var), rel=1e-12) and res.se_noise == 0
    z = (auc_a - auc_b) / np.sqrt(var)
    assert res.p_value == pytest.approx(2 * stats.norm.sf(abs(z)), rel=1e-10)


def test_noise_part_matches_monte_carlo():
    a, b, y = _tied_patients(n=3000, seed=4)
    h0, h1 = _joint(a, b, y, 8)
    sigma2 = 5 * 3.0**2
    rng = np.random.default_rng(1)
    draws = [paired_auc_difference(h0 + rng.normal(0, np.sqrt(sigma2), h0.shape),
                                   h1 + rng.normal(0, np.sqrt(sigma2), h1.shape)).difference for _ in range(3000)]
    predicted = paired_auc_difference(h0, h1, noise_variance=sigma2).se_noise
    assert np.std(draws) == pytest.approx(predicted, rel=0.06)  # delta method and MC error (~1.3 %)


def test_bad_input():
    with pytest.raises(ValueError, match="2-D histogram"):
        paired_auc_difference(np.ones(4), np.ones(4))
    with pytest.raises(ValueError, match="same cells"):
        paired_auc_difference(np.ones((2, 3)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="at least two patients"):
        paired_auc_difference(np.zeros((2, 2)), np.ones((2, 2)))


def test_the_joint_grid_keeps_every_second_edge_and_halves_the_noise_at_little_sampling_cost():
    from dsroc.multicentre import joint_grid

    edges = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert joint_grid(edges).tolist() == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert joint_grid(edges[:6]).tolist() == [0.0, 0.2, 0.4, 0.5]  # 5 bins -> 3, the last one narrow
    assert joint_grid(edges[:4]).tolist() == edges[:4].tolist()  # 3 bins are kept
    with pytest.raises(ValueError, match="at least 2 bins"):
        joint_grid([0.0, 1.0])
    rng = np.random.default_rng(5)
    y = rng.random(20_000) < 0.3
    common = rng.normal(size=y.size)
    sa = 1 / (1 + np.exp(-(1.1 * y + common - 1)))
    sb = 1 / (1 + np.exp(-(0.9 * y + 0.6 * common + 0.8 * rng.normal(size=y.size) - 1)))
    fine = np.quantile(np.r_[sa, sb], np.linspace(0, 1, 11))
    fine[0], fine[-1] = 0.0, 1.0
    res = {}
    for name, e in (("fine", fine), ("joint", joint_grid(fine))):
        ia, ib = np.digitize(sa, e[1:-1]), np.digitize(sb, e[1:-1])  # independent of dsroc's binning
        k = e.size - 1
        h = [np.bincount(ia[y == c] * k + ib[y == c], minlength=k * k).reshape(k, k) for c in (False, True)]
        res[name] = paired_auc_difference(*h, noise_variance=10.0)
    assert res["joint"].se_noise < 0.6 * res["fine"].se_noise  # 25 cells per class instead of 100
    assert res["joint"].se_sampling < 1.05 * res["fine"].se_sampling  # both models lose alike to the coarser bins
    assert res["joint"].se < 0.9 * res["fine"].se
