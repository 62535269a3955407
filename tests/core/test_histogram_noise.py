"""Histogram protocol variances against a Monte-Carlo of the known noise, and CI coverage of the binned AUC."""

import numpy as np
import pytest
from scipy.special import expit

from dsroc import histogram_validation
from dsroc.histogram.grid import bin_representatives, bin_scores, consistent_counts, histogram_edges
from dsroc.histogram.auc import (
    histogram_auc,
    histogram_auc_noise_variance,
    histogram_rocglm,
    histogram_rocglm_noise_variance,
)
from dsroc.histogram.calibration import histogram_brier, histogram_recalibration

SIGMA = 8.34  # five sites at epsilon = 1, delta = 1e-5: sqrt(5) * 3.73
DRAWS = 3000


def _counts(n=20000, n_bins=8, seed=0):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(int)
    s = expit(np.where(y == 1, -0.35, -1.35) + rng.standard_normal(n))
    edges = histogram_edges(n_bins)
    h0, h1 = bin_scores(s, y, edges)
    return h0.astype(float), h1.astype(float), edges


def _noisy(h, rng, draws=DRAWS):
    return consistent_counts(h + SIGMA * rng.standard_normal((draws, h.size)))


def _mc_ratio(estimates, predicted):
    return np.var(estimates, ddof=1) / predicted


def test_empirical_auc_noise_variance_matches_monte_carlo():
    h0, h1, _ = _counts()
    rng = np.random.default_rng(1)
    auc = histogram_auc(_noisy(h0, rng), _noisy(h1, rng))
    # MC relative SE of a variance from 3000 draws is about 2.6 %: 10 % is a 4-SE band.
    assert _mc_ratio(auc, histogram_auc_noise_variance(h0, h1, sigma=SIGMA)) == pytest.approx(1.0, abs=0.10)


def test_rocglm_bootstrap_noise_variance_matches_monte_carlo():
    h0, h1, _ = _counts()
    rng = np.random.default_rng(2)
    auc = histogram_rocglm(_noisy(h0, rng, 600), _noisy(h1, rng, 600), tail_count=5 * SIGMA).auc
    boot = histogram_rocglm_noise_variance(h0, h1, sigma=SIGMA, draws=600, seed=3, tail_count=5 * SIGMA)
    # Two independent estimates of one variance from 600 draws each: relative SE about 8 % for the ratio.
    assert _mc_ratio(auc, boot) == pytest.approx(1.0, abs=0.25)


def test_brier_and_recalibration_noise_variances_match_monte_carlo():
    h0, h1, edges = _counts()
    r = bin_representatives(edges)
    rng = np.random.default_rng(4)
    n0s, n1s = _noisy(h0, rng, 1500), _noisy(h1, rng, 1500)
    brier = [histogram_brier(a, b, r, sigma=0.0).value for a, b in zip(n0s, n1s)]
    noise_only = histogram_brier(h0, h1, r, sigma=SIGMA).variance - histogram_brier(h0, h1, r, sigma=0.0).variance
    assert _mc_ratio(brier, noise_only) == pytest.approx(1.0, abs=0.15)
    fits = np.array([[f.intercept, f.slope] for f in (histogram_recalibration(a, b, r, sigma=0.0) for a, b in zip(n0s, n1s))])
    cov = histogram_recalibration(h0, h1, r, sigma=SIGMA).cov - histogram_recalibration(h0, h1, r, sigma=0.0).cov
    assert np.var(fits[:, 1], ddof=1) / cov[1, 1] == pytest.approx(1.0, abs=0.15)
    assert np.var(fits[:, 0], ddof=1) / cov[0, 0] == pytest.approx(1.0, abs=0.15)


def test_validation_interval_covers_the_binned_auc_at_its_level():
    """Fixed data, noise redrawn: the reported interval (sampling + noise) covers the noise-free binned AUC
    at least as often as its level; the noise part alone is what varies here, so coverage is high."""
    h0, h1, edges = _counts(n=1000, seed=6)
    truth = histogram_auc(h0, h1)
    rng = np.random.default_rng(7)
    hits = []
    for _ in range(100):
        res = histogram_validation(h0 + SIGMA * rng.standard_normal(h0.size), h1 + SIGMA * rng.standard_normal(h1.size),
                                   edges, sigma=SIGMA, estimator="empirical", noise_draws=20)
        hits.append(res.auc_ci[0] <= truth <= res.auc_ci[1])
        assert res.auc_variance > res.sampling_variance
    assert np.mean(hits) >= 0.95
