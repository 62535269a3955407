"""Decision curves from histograms against a brute-force net benefit on the unbinned scores, and the noise by Monte Carlo."""

import numpy as np
import pytest

from dsroc import bin_scores
from dsroc.multicentre import decision_curve


def _data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    risk = 1 / (1 + np.exp(-(-1.5 + 1.2 * x)))
    return risk, (rng.random(n) < risk).astype(int)


def _brute_force(risk, y, t):
    treated = risk >= t
    n = risk.size
    return np.sum(treated & (y == 1)) / n - np.sum(treated & (y == 0)) / n * t / (1 - t)


def test_noise_free_net_benefit_equals_brute_force_at_every_edge():
    risk, y = _data()
    edges = np.r_[0.0, np.arange(0.05, 0.55, 0.05), 0.7, 1.0]
    h0, h1 = bin_scores(risk, y, edges)
    dc = decision_curve(h0, h1, edges)
    np.testing.assert_allclose(dc.thresholds, edges[1:-1])
    expected = [_brute_force(risk, y, t) for t in dc.thresholds]
    np.testing.assert_allclose(dc.net_benefit, expected, rtol=0, atol=1e-15)
    all_expected = y.mean() - (1 - y.mean()) * dc.thresholds / (1 - dc.thresholds)
    np.testing.assert_allclose(dc.treat_all, all_expected, atol=1e-15)
    assert (dc.lower < dc.net_benefit).all() and (dc.upper > dc.net_benefit).all()


def test_sampling_interval_covers_the_population_net_benefit():
    # Monte Carlo of the sampling: the population NB is the brute force on a very large sample.
    edges = np.array([0.0, 0.1, 0.2, 0.3, 1.0])
    risk, y = _data(n=400_000, seed=9)
    truth = np.array([_brute_force(risk, y, t) for t in edges[1:-1]])
    hits = np.zeros(3)
    for seed in range(400):
        r, yy = _data(n=2000, seed=100 + seed)
        dc = decision_curve(*bin_scores(r, yy, edges), edges)
        hits += (dc.lower <= truth) & (truth <= dc.upper)
    assert ((hits / 400) > 0.92).all(), hits / 400


def test_noise_variance_matches_monte_carlo_of_the_release_noise():
    risk, y = _data(n=3000, seed=3)
    edges = np.array([0.0, 0.1, 0.2, 0.3, 0.5, 1.0])
    h0, h1 = bin_scores(risk, y, edges)
    sigma2 = 5 * 4.0**2  # five sites' noise per cell
    rng = np.random.default_rng(5)
    draws = np.array([decision_curve(h0 + rng.normal(0, np.sqrt(sigma2), h0.size),
                                     h1 + rng.normal(0, np.sqrt(sigma2), h1.size), edges).net_benefit
                      for _ in range(4000)])
    exact = decision_curve(h0, h1, edges)
    noisy = decision_curve(h0, h1, edges, noise_variance=sigma2)
    z = 1.959963984540054
    predicted = ((noisy.upper - noisy.lower) / (2 * z)) ** 2 - ((exact.upper - exact.lower) / (2 * z)) ** 2
    np.testing.assert_allclose(draws.var(axis=0), predicted, rtol=0.1)  # MC error of a variance from 4000 draws: ~2.2 %


def test_bad_input_names_the_rule():
    with pytest.raises(ValueError, match="edges must increase"):
        decision_curve([1, 2], [3, 4], [0, 0.5, 0.4])
    with pytest.raises(ValueError, match="one count per bin"):
        decision_curve([1, 2], [3, 4], [0, 1])
    with pytest.raises(ValueError, match="noise_variance"):
        decision_curve([1, 2], [3, 4], [0, 0.5, 1], noise_variance=-1)
