"""The paper protocol's lattice noise: the exact sampler's distribution, the lattice's sensitivity, the proven Gaussian-DP mu."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import chi2, chisquare, norm

from dsroc.privacy.exact import exact_variance, sample_exact_discrete_gaussian
from dsroc.privacy.gaussian import analytic_gaussian_sigma, gdp_delta
from dsroc.privacy.lattice import discrete_gaussian_gdp_mu, lattice_gaussian
from dsroc.privacy.noise import discrete_gaussian_delta


def _pmf(variance):
    sigma = math.sqrt(variance)
    x = np.arange(-int(40 * sigma) - 40, int(40 * sigma) + 41)
    w = -(x.astype(float) ** 2) / (2.0 * variance)
    return x, np.exp(w - logsumexp(w))


@pytest.mark.parametrize("t, r", [(1, 1), (2, 1), (4, 3), (7, 9)])
def test_the_exact_sampler_matches_the_discrete_gaussian_pmf(t, r):
    """Chi-square goodness of fit against P[y] ∝ exp(-y^2 / (2 t r)) (cells with at least 20 expected draws, tails pooled)."""
    n = 200_000
    draws = sample_exact_discrete_gaussian(t, r, n)
    x, p = _pmf(t * r)
    keep = p * n >= 20
    observed = np.array([(draws == v).sum() for v in x[keep]] + [0])
    observed[-1] = n - observed[:-1].sum()
    expected = np.append(p[keep] * n, n * (1.0 - p[keep].sum()))
    assert chisquare(observed, expected).pvalue > 1e-4


def test_the_exact_sampler_at_a_release_s_scale():
    """sigma about 1000 (a paper release's integer noise): chi-square on 40 equal-probability cells, mean and variance."""
    t, r = exact_variance(1000.5)
    n = 400_000
    draws = sample_exact_discrete_gaussian(t, r, n)
    x, p = _pmf(t * r)
    cdf = np.cumsum(p)
    cuts = x[np.searchsorted(cdf, np.arange(1, 40) / 40)]  # cell j: (cuts[j-1], cuts[j]]
    expected = np.diff(np.concatenate([[0.0], cdf[np.searchsorted(x, cuts)], [1.0]])) * n
    observed = np.bincount(np.searchsorted(cuts, draws, side="left"), minlength=40)
    assert chisquare(observed, expected).pvalue > 1e-4
    assert abs(draws.mean()) < 5 * math.sqrt(t * r / n)
    assert draws.var() / (t * r) == pytest.approx(1.0, abs=5 * math.sqrt(2 / n))
    assert np.issubdtype(draws.dtype, np.integer)


def test_the_sampler_refuses_bad_parameters():
    for bad in [(0, 1), (1, 0), (True, 1), (1.5, 1), (2**22, 1)]:
        with pytest.raises(ValueError, match="must be an integer"):
            sample_exact_discrete_gaussian(*bad, 10)
    with pytest.raises(ValueError, match="sigma must lie"):
        exact_variance(0.5)


@pytest.mark.parametrize("t, r, shift", [(2, 1, 1), (4, 3, 2), (11, 10, 3), (101, 100, 40)])
def test_the_proven_mu_bounds_the_exact_delta_of_theorem_7_and_is_tight(t, r, shift):
    """Independent check: CKS 2020 Thm 7's exact delta(eps) of N_Z(0, t r) at sensitivity ``shift`` never exceeds the
    Gaussian-DP curve at the proven mu, and a mu 1 % smaller is exceeded somewhere (the bound is not loose)."""
    mu = discrete_gaussian_gdp_mu(t, r, shift)
    sigma = math.sqrt(t * r)
    eps = np.linspace(0.0, 8.0, 161)
    exact = np.array([discrete_gaussian_delta(sigma, e, sensitivity=shift) for e in eps])
    assert np.all(exact <= np.array([gdp_delta(mu, e) for e in eps]) * (1 + 1e-9) + 1e-15)
    assert np.any(exact > np.array([gdp_delta(0.99 * mu, e) for e in eps]))
    assert mu == pytest.approx(shift / sigma, rel=0.05 if sigma < 10 else 1e-3)  # near the continuous Gaussian's


def _gdp_mu_on_the_whole_line(t, r, shift):
    """The proven mu as first written: every vertex n = -bound ... bound, scipy's logsumexp (the reference)."""
    from scipy.special import ndtri_exp

    variance, shift = t * r, int(shift)
    bound = int(math.ceil(39.0 * math.sqrt(variance))) + shift + 1
    half = np.arange(0, bound + 1, dtype=np.float64)
    log_w = -(half * half) / (2.0 * variance)
    log_p = log_w - np.logaddexp(log_w[0], math.log(2.0) + logsumexp(log_w[1:]))
    tail = np.empty_like(log_p)
    tail[:-1] = np.logaddexp.accumulate(log_p[::-1])[::-1][1:]
    tail[-1] = -np.inf
    with np.errstate(divide="ignore"):
        z_half, body = -ndtri_exp(tail), np.log1p(-np.exp(tail))
    z = np.concatenate([-z_half[:-1][::-1], z_half])
    log_cdf, log_sf = np.concatenate([tail[:-1][::-1], body]), np.concatenate([body[:-1][::-1], tail])
    evaluated = (log_cdf[:-shift] > -700.0) & (log_sf[shift:] > -700.0)
    return float(np.max((z[shift:] - z[:-shift])[evaluated])) + 1e-8


@pytest.mark.parametrize("t, r, shift", [(1, 1, 1), (2, 1, 1), (4, 3, 2), (11, 10, 3), (101, 100, 40), (3, 3, 5),
                                         (521, 632, 1639), (950, 917, 1639), (950, 917, 1638), (3047, 3109, 7)])
def test_the_proven_mu_is_bitwise_the_whole_line_s(t, r, shift):
    """Half the vertices (the other half mirrors them exactly) and logsumexp's operations without scipy's wrapper give
    the very float of the whole line's evaluation."""
    assert discrete_gaussian_gdp_mu.__wrapped__(t, r, shift) == _gdp_mu_on_the_whole_line(t, r, shift)


@pytest.mark.parametrize("epsilon, delta, sensitivity", [(1.0, 1e-5, 1.0), (1.0, 1e-5, 0.05), (5.0, 0.01, 0.3),
                                                         (0.1, 1e-6, 1.0), (0.01, 1e-6, 1.0)])
def test_lattice_calibration_charges_no_more_than_the_continuous_mechanism(epsilon, delta, sensitivity):
    noise = lattice_gaussian(epsilon, delta, sensitivity)
    tau0 = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    assert math.log2(noise.step) == int(math.log2(noise.step))  # a power of two: s / step is exact
    assert noise.shift * noise.step >= sensitivity > (noise.shift - 1) * noise.step
    assert noise.mu <= sensitivity / tau0 and noise.mu == pytest.approx(discrete_gaussian_gdp_mu(noise.t, noise.r,
                                                                                                 noise.shift))
    assert 1.0 <= noise.sigma / tau0 < 1.002  # at most 0.2 % more noise than the continuous mechanism
    # the charged continuous Gaussian fits (epsilon, delta), by the analytic condition (Balle and Wang 2018, Thm 8)
    mu = noise.accounted_sensitivity / noise.sigma
    assert norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * norm.cdf(-mu / 2 - epsilon / mu) <= delta


def test_snapping_moves_a_pair_within_the_sensitivity_by_at_most_the_integer_shift():
    noise = lattice_gaussian(1.0, 1e-5, 0.3)
    rng = np.random.default_rng(3)
    a = rng.uniform(-2.0, 3.0, 200_000)
    b = a + rng.uniform(-1.0, 1.0, a.size) * 0.3
    b[:1000] = a[:1000] + 0.3  # exactly the sensitivity apart
    assert np.abs(noise.snap(a) - noise.snap(b)).max() <= noise.shift
    assert np.array_equal(noise.snap(np.array([0.0, noise.step * 2.5, -noise.step * 0.5])), [0, 3, 0])
    # released values are multiples of the step, exactly: a function of the noisy integer alone
    values = noise.values(noise.noisy_points(a[:1000]))
    assert np.array_equal(values / noise.step, np.round(values / noise.step))
    with pytest.raises(ValueError, match="too large for the lattice"):
        noise.snap(np.array([1e300]))


def test_the_release_noise_has_the_discrete_gaussian_distribution():
    """The noise of a whole release (equal scores, so the noise is the released points minus one lattice point)."""
    noise = lattice_gaussian(2.0, 1e-5, 1.0)
    points = noise.noisy_points(np.full(100_000, 0.37)) - noise.snap(np.array([0.37]))[0]
    x, p = _pmf(noise.t * noise.r)
    cdf = np.cumsum(p)
    cuts = x[np.searchsorted(cdf, np.arange(1, 20) / 20)]
    expected = np.diff(np.concatenate([[0.0], cdf[np.searchsorted(x, cuts)], [1.0]])) * points.size
    observed = np.bincount(np.searchsorted(cuts, points, side="left"), minlength=20)
    assert chi2.sf(((observed - expected) ** 2 / expected).sum(), 19) > 1e-4
