"""The discrete Gaussian: exact delta against the hockey-stick divergence, calibration, both samplers' distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import chisquare

from dsroc.privacy.accounting import Accountant, DiscreteGaussian
from dsroc.privacy.noise import (
    discrete_gaussian_delta,
    discrete_gaussian_noise,
    discrete_gaussian_sigma,
    discrete_gaussian_variance,
    joint_discrete_gaussian_sigma,
    sample_discrete_gaussian,
)


def _pmf(sigma):
    x = np.arange(-int(40 * sigma) - 40, int(40 * sigma) + 41)
    w = -0.5 * (x / sigma) ** 2
    return x, np.exp(w - logsumexp(w))


def _hockey_stick(sigma, epsilon, shift):
    """sum_x max(P(x) - e^eps P(x - shift), 0) for P = N_Z(0, sigma^2): the exact delta, by definition."""
    x, p = _pmf(sigma)
    shifted = np.concatenate([np.zeros(shift), p[:-shift]])
    return float(np.sum(np.maximum(p - math.exp(epsilon) * shifted, 0.0)))


@pytest.mark.parametrize("sigma", [0.6, 2.0, 3.7, 15.0])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("shift", [1, 3])
def test_delta_of_theorem_7_is_the_hockey_stick_divergence(sigma, epsilon, shift):
    exact = _hockey_stick(sigma, epsilon, shift)
    assert discrete_gaussian_delta(sigma, epsilon, sensitivity=shift) == pytest.approx(exact, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-5), (0.1, 1e-6), (5.0, 0.01), (50.0, 1e-9)])
def test_calibrated_sigma_is_safe_and_nearly_smallest(epsilon, delta):
    sigma = discrete_gaussian_sigma(epsilon, delta)
    assert discrete_gaussian_delta(sigma, epsilon) <= delta
    assert _hockey_stick(sigma * (1 - 1e-4), epsilon, 1) > delta or sigma < 0.05
    # A single release at the calibration fits a budget of exactly (epsilon, delta) as the ledger checks it.
    assert Accountant([DiscreteGaussian(sigma)]).within(epsilon, delta)


def _two_part_delta(t1, t2, epsilon):
    """Exact delta of two independent discrete Gaussians (parameters t1, t2) both shifted by one: the hockey
    stick of the product distributions, summed over the joint loss ``l1 + l2`` (``l = (1 - 2x) / (2 t^2)``)."""
    (x1, p1), (x2, p2) = _pmf(t1), _pmf(t2)
    loss = (1 - 2 * x1[:, None]) / (2 * t1**2) + (1 - 2 * x2[None, :]) / (2 * t2**2)
    return float(np.sum(p1[:, None] * p2[None, :] * np.maximum(1.0 - np.exp(epsilon - loss), 0.0)))


@pytest.mark.parametrize("ratio", [1.0, 3.0])
def test_a_two_part_release_is_calibrated_to_its_exact_joint_delta(ratio):
    """Counts (sensitivity 1, noise t) and a second part at ``ratio`` times that noise (one patient shifts both
    by one noise unit of their own): the whole is (1, 1e-5)-DP by the exact product-distribution delta, and
    not much more than that (the accountant's pessimism is small)."""
    t = joint_discrete_gaussian_sigma(1.0, 1e-5, [(1, 1.0), (1, ratio)])
    assert _two_part_delta(t, ratio * t, 1.0) <= 1e-5
    assert _two_part_delta(t * 0.99, ratio * t * 0.99, 1.0) > 1e-5
    assert t > discrete_gaussian_sigma(1.0, 1e-5)  # the second part costs noise on the first
    assert joint_discrete_gaussian_sigma(1.0, 1e-5, [(1, 1.0)]) == discrete_gaussian_sigma(1.0, 1e-5)


def test_calibration_refuses_bad_parameters():
    for args in [(0.0, 1e-5), (1.0, 0.0), (1.0, 1.0), (float("inf"), 1e-5)]:
        with pytest.raises(ValueError):
            discrete_gaussian_sigma(*args)


@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.7, 20.0])
def test_variance_is_the_pmf_second_moment_and_at_most_sigma_squared(sigma):
    x, p = _pmf(sigma)
    assert discrete_gaussian_variance(sigma) == pytest.approx(float(np.sum(p * x**2)), rel=1e-12)
    assert discrete_gaussian_variance(sigma) <= sigma**2 * (1 + 1e-12)
    if sigma >= 1.0:
        assert discrete_gaussian_variance(sigma) == pytest.approx(sigma**2, rel=1e-6)


def _chi_square_p(draws, sigma):
    x, p = _pmf(sigma)
    keep = p * draws.size >= 5  # pool the tails into the end cells
    lo, hi = x[keep][0], x[keep][-1]
    clipped = np.clip(draws, lo, hi) - lo
    observed = np.bincount(clipped, minlength=hi - lo + 1)
    expected = np.array([p[x <= lo].sum(), *p[(x > lo) & (x < hi)], p[x >= hi].sum()]) * draws.size
    return chisquare(observed, expected).pvalue


@pytest.mark.parametrize("sigma", [0.7, 3.7, 11.0])
def test_numpy_sampler_has_the_discrete_gaussian_distribution(sigma):
    draws = discrete_gaussian_noise(sigma, 200_000, np.random.default_rng(7))
    assert draws.dtype == np.int64 and draws.shape == (200_000,)
    assert _chi_square_p(draws, sigma) > 1e-4
    assert discrete_gaussian_noise(sigma, (3, 4), np.random.default_rng(0)).shape == (3, 4)


@pytest.mark.parametrize("sigma", [0.7, 3.7])
def test_opendp_sampler_has_the_discrete_gaussian_distribution(sigma):
    draws = sample_discrete_gaussian(sigma, 20_000)
    assert draws.dtype == np.int64 and draws.shape == (20_000,)
    assert _chi_square_p(draws, sigma) > 1e-6  # not seedable: a false alarm once in a million runs
    assert sample_discrete_gaussian(sigma, 0).shape == (0,)
