"""Analytic Gaussian mechanism and Gaussian-DP composition against SPEC section 8 and their definitions."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from dsroc import (
    add_gaussian_noise,
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    gdp_release_mu,
)

VECTORS = [
    (math.sqrt(30), 6, 0.5, 1.4659731497780966),
    (math.sqrt(30), 6, 1e-5, 4.182602139814776),
    (10, 0.1, 1e-5, 307.49566132862844),
    (10, 0.1, 0.5, 7.016745810753165),
    (math.sqrt(0.1), 0.1, 5e-5, 8.370597761781507),
    (1, 1, 1e-5, 3.7306316348),
]


def balle_wang_delta(sigma, epsilon, sensitivity):
    """Theorem 8 of Balle and Wang (2018), written with plain scipy CDFs (an independent form)."""
    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
    return norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b)


@pytest.mark.parametrize("sensitivity, epsilon, delta, sigma", VECTORS)
def test_public_vectors(sensitivity, epsilon, delta, sigma):
    assert analytic_gaussian_sigma(epsilon, delta, sensitivity) == pytest.approx(sigma, rel=1e-8)


@pytest.mark.parametrize("epsilon", np.geomspace(0.01, 50, 9))
@pytest.mark.parametrize("delta", [1e-12, 1e-9, 1e-6, 1e-3, 0.05, 0.5])
def test_sigma_is_the_smallest_satisfying_the_condition(epsilon, delta):
    sigma = analytic_gaussian_sigma(epsilon, delta, 1.0)
    # The direct form underflows for tiny deltas at large epsilon; compare there in log space.
    assert balle_wang_delta(sigma, epsilon, 1.0) <= delta * (1 + 1e-9)
    assert gdp_delta(1 / sigma, epsilon) <= delta
    assert gdp_delta(1 / (0.999 * sigma), epsilon) > delta


def test_sigma_scales_linearly_with_sensitivity():
    assert analytic_gaussian_sigma(2, 1e-4, 0.3) == pytest.approx(0.3 * analytic_gaussian_sigma(2, 1e-4, 1), rel=1e-10)


def test_analytic_is_tighter_than_classical_where_both_apply():
    for eps in (0.1, 0.5, 0.9):
        assert analytic_gaussian_sigma(eps, 1e-5, 1) < classical_gaussian_sigma(eps, 1e-5, 1)


def test_classical_refuses_epsilon_at_least_one():
    with pytest.raises(ValueError, match="only valid for epsilon < 1"):
        classical_gaussian_sigma(1.0, 1e-5, 1)
    assert classical_gaussian_sigma(0.5, 1e-5, 1) == pytest.approx(math.sqrt(2 * math.log(1.25e5)) / 0.5)


@pytest.mark.parametrize(
    "args, match",
    [((0, 1e-5, 1), "epsilon"), ((1, 0, 1), "delta"), ((1, 1.0, 1), "delta"), ((1, 1e-5, -1), "sensitivity"), ((math.nan, 0.1, 1), "epsilon")],
)
def test_bad_privacy_parameters(args, match):
    with pytest.raises(ValueError, match=match):
        analytic_gaussian_sigma(*args)


def test_gdp_composition_public_vector():
    sigma = analytic_gaussian_sigma(1, 1e-5, 1)
    mu = gdp_mu([gdp_release_mu(1, sigma)] * 10)
    assert mu == pytest.approx(math.sqrt(10) / sigma)
    assert gdp_epsilon(mu, 1e-5) == pytest.approx(3.619, abs=5e-4)


def test_gdp_epsilon_inverts_gdp_delta():
    for mu in (0.1, 0.5, 1.0, 3.0):
        for delta in (1e-8, 1e-5, 1e-2):
            eps = gdp_epsilon(mu, delta)
            assert gdp_delta(mu, eps) == pytest.approx(delta, rel=1e-6)
    assert gdp_epsilon(0.01, 0.4) == 0.0  # already (0, 0.4)-DP
    assert gdp_mu([]) == 0.0


def test_add_gaussian_noise_has_the_requested_spread_and_leaves_input_alone():
    rng = np.random.default_rng(0)
    s = np.linspace(0, 1, 200_000)
    noisy = add_gaussian_noise(s, 0.3, rng)
    assert s[0] == 0 and s[-1] == 1
    assert np.std(noisy - s) == pytest.approx(0.3, rel=0.01)


def test_classical_gaussian_sigma_is_finite_at_subnormal_delta():
    """sqrt(2 ln(1.25 / delta)) / epsilon against the decimal module where 1.25 / delta overflows a float."""
    from decimal import Decimal, getcontext

    getcontext().prec = 40
    delta = 1e-309
    exact = (2 * (Decimal(1.25) / Decimal(delta)).ln()).sqrt() / Decimal(0.5)
    assert math.isclose(classical_gaussian_sigma(0.5, delta, 1), float(exact), rel_tol=1e-12)
