"""The privacy accountant against exact values: the GDP closed form, exact discrete-Gaussian composition,
the Laplace and randomized-response curves, and basic composition of (epsilon, delta) events."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from dsroc import analytic_gaussian_sigma, gdp_delta, gdp_epsilon, gdp_mu
from dsroc.privacy.accounting import (
    Accountant,
    ApproximateDp,
    DiscreteGaussian,
    Gaussian,
    Laplace,
    PureEpsilon,
    RandomizedResponse,
)


def test_spec_vector_ten_releases_at_one_and_1e5():
    sigma = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    accountant = Accountant([Gaussian(sigma)] * 10)
    assert accountant.exact
    assert accountant.epsilon(1e-5) == pytest.approx(3.619, abs=5e-4)


@pytest.mark.parametrize("epsilons", [[1.0] * 10, [0.3, 2.0, 0.7], [5.0], [0.05] * 40])
@pytest.mark.parametrize("delta", [1e-5, 1e-3])
def test_pld_agrees_with_the_gdp_closed_form_and_is_never_below_it(epsilons, delta):
    events = [Gaussian(analytic_gaussian_sigma(e, delta, 1.0)) for e in epsilons]
    mu = gdp_mu([1.0 / e.sigma for e in events])
    pld = Accountant(events, exact_gaussians=False)
    assert not pld.exact
    exact_eps = gdp_epsilon(mu, 1e-5)
    assert pld.epsilon(1e-5) >= exact_eps
    assert pld.epsilon(1e-5) == pytest.approx(exact_eps, rel=1e-6)
    for eps in (0.5 * exact_eps, exact_eps, 2.0 * exact_eps):
        exact_delta = gdp_delta(mu, eps)
        assert pld.delta(eps) >= exact_delta
        assert pld.delta(eps) == pytest.approx(exact_delta, rel=3e-5, abs=1e-15)  # delta is steeper than epsilon
    # The accountant's own answer for an all-Gaussian history is the closed form itself.
    assert Accountant(events).delta(exact_eps) == pytest.approx(gdp_delta(mu, exact_eps), rel=1e-12)


def _exact_composed_discrete_gaussian_delta(sigma: float, k: int, epsilon: float) -> float:
    """Hockey-stick divergence of k-fold N_Z(0, s^2) against N_Z(1, s^2), by exact convolution of the pmf.

    The loss of x against the shifted distribution is (1 - 2x) / (2 s^2); over k draws it is
    (k - 2 S) / (2 s^2) with S the sum, whose pmf is the k-fold convolution.
    """
    bound = int(40 * sigma) + 40
    x = np.arange(-bound, bound + 1)
    p = np.exp(-0.5 * (x / sigma) ** 2 - logsumexp(-0.5 * (x / sigma) ** 2))
    pk, lo = p, -bound
    for _ in range(k - 1):
        pk, lo = np.convolve(pk, p), lo - bound
    s = lo + np.arange(pk.size)
    loss = (k - 2 * s) / (2 * sigma**2)
    return float(np.sum(pk * np.maximum(1.0 - np.exp(epsilon - loss), 0.0)))


@pytest.mark.parametrize("sigma,k", [(3.7, 1), (3.7, 4), (1.3, 3), (12.0, 2)])
def test_discrete_gaussian_composition_against_exact_convolution(sigma, k):
    accountant = Accountant([DiscreteGaussian(sigma)] * k)
    for epsilon in (0.1, 0.5, 1.0, 2.0):
        exact = _exact_composed_discrete_gaussian_delta(sigma, k, epsilon)
        if exact < 1e-12:
            continue
        got = accountant.delta(epsilon)
        assert got >= exact * (1 - 1e-12)
        assert got == pytest.approx(exact, rel=2e-3)


def test_laplace_against_its_closed_form():
    # One Laplace release of scale b and sensitivity 1: delta(eps) = 1 - exp((eps - 1/b)/2) below 1/b, else 0.
    b = 0.8
    accountant = Accountant([Laplace(b)])
    for eps in (0.2, 0.6, 1.0):
        exact = max(0.0, -math.expm1((eps - 1.0 / b) / 2.0))
        assert accountant.delta(eps) >= exact - 1e-12
        assert accountant.delta(eps) == pytest.approx(exact, abs=2e-4)
    assert accountant.delta(1.0 / b + 1e-3) < 1e-12


def test_randomized_response_and_pure_epsilon():
    p, k = 0.4, 4
    epsilon = math.log(1.0 + k * (1.0 - p) / p)  # (1 - p + p/k) / (p/k)
    assert Accountant([RandomizedResponse(p, k)]).delta(epsilon + 1e-3) < 1e-12
    assert Accountant([RandomizedResponse(p, k)]).delta(epsilon - 0.05) > 0.0
    assert Accountant([PureEpsilon(0.7)] * 3).delta(2.1 + 1e-3) < 1e-12
    assert Accountant([PureEpsilon(0.7)] * 3).delta(2.0) > 0.0


def test_approximate_events_compose_no_worse_than_basic_composition():
    accountant = Accountant([ApproximateDp(0.5, 1e-6)] * 4)
    assert 1e-6 <= accountant.delta(2.0 + 1e-3) <= 4e-6 * (1 + 1e-9)


def test_mixed_history_dominates_each_part_and_incremental_equals_batch():
    sigma = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    events = [Gaussian(sigma), DiscreteGaussian(3.7), Laplace(2.0), Gaussian(2 * sigma), ApproximateDp(0.1, 1e-7)]
    batch = Accountant(events)
    incremental = Accountant()
    for event in events:
        incremental = incremental.add(event)
    assert incremental.events == tuple(events)
    assert incremental.delta(2.0) == pytest.approx(batch.delta(2.0), rel=1e-12)
    gaussians_only = Accountant([e for e in events if isinstance(e, Gaussian)])
    assert batch.delta(2.0) >= gaussians_only.delta(2.0)
    assert batch.epsilon(1e-5) > gaussians_only.epsilon(1e-5)


def test_within_is_the_budget_check_without_slack():
    sigma = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    assert Accountant([Gaussian(sigma)]).within(1.0, 1e-5)
    assert not Accountant([Gaussian(sigma * (1 - 1e-9))]).within(1.0, 1e-5)
    assert Accountant().within(1e-9, 1e-300)


@pytest.mark.parametrize("bad", [lambda: Gaussian(0.0), lambda: Gaussian(float("nan")), lambda: DiscreteGaussian(1.0, 0),
                                 lambda: DiscreteGaussian(1.0, 1.5), lambda: Laplace(-1.0),
                                 lambda: RandomizedResponse(0.0, 3), lambda: RandomizedResponse(0.5, 1),
                                 lambda: ApproximateDp(1.0, 1.0), lambda: PureEpsilon(1.0, 0.1),
                                 lambda: Accountant().delta(-1.0), lambda: Accountant().epsilon(0.0),
                                 lambda: Accountant(["gaussian"])])
def test_bad_arguments_are_refused(bad):
    with pytest.raises((ValueError, TypeError)):
        bad()
