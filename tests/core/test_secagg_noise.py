"""Distributed discrete Gaussian noise against an independent computation of the summed law.

The reference pmf of a sum of ``count`` shares ``N_Z(0, s^2)`` comes from its characteristic function,
not from a convolution: by Poisson summation ``N_Z(0, s^2)`` has characteristic function
``phi(t) = sum_k exp(-s^2 (t - 2 pi k)^2 / 2) / sum_k exp(-2 pi^2 s^2 k^2)`` (a theta function), the sum
has ``phi^count``, and its pmf is the inverse DFT of ``phi^count`` sampled on a fine grid (exact for a
periodic integrand up to aliasing below 1e-300). The exact (epsilon, delta) curve is the hockey-stick
divergence between the sum and the sum shifted by one, summed directly; epsilon(delta) by root finding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from dsroc.privacy.accounting import Accountant, DiscreteGaussian, DiscreteGaussianSum, decode_event, encode_event, discretization_for
from dsroc.privacy.noise import discrete_gaussian_delta, discrete_gaussian_noise
from dsroc.secagg import honest_shares, share_sigma, summed_noise_log_pmf, summed_noise_variance


# Absolute accuracy of a hockey-stick sum over the reference pmf (the DFT's ~1e-16 per point, ~200 points).
_REFERENCE_ERROR = 5e-14


def _reference_pmf(sigma: float, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Integers and pmf of the sum by the inverse DFT of the theta-function characteristic function."""
    half = int(math.ceil(12.0 * sigma * math.sqrt(count))) + 8  # the sum's mass beyond: < 1e-30
    n = 2 * half + 1
    t = 2.0 * math.pi * np.arange(n) / n
    k = np.arange(-3, 4)[:, None]
    theta = np.exp(-0.5 * sigma**2 * (t[None, :] - 2.0 * math.pi * k) ** 2).sum(axis=0)
    phi = theta / np.exp(-2.0 * math.pi**2 * sigma**2 * k[:, 0] ** 2).sum()
    x = np.arange(-half, half + 1)
    pmf = np.real(np.exp(-1j * np.outer(x, t)) @ phi ** count) / n
    return x, np.maximum(pmf, 0.0)


def _exact_delta(x: np.ndarray, p: np.ndarray, epsilon: float) -> float:
    """Hockey-stick divergence of the sum against the sum shifted by one (either direction: symmetric)."""
    shifted = np.concatenate([[0.0], p[:-1]])  # P[Z + 1 = x]
    return float(np.sum(np.maximum(p - math.exp(epsilon) * shifted, 0.0)))


def _exact_epsilon(x, p, delta: float) -> float:
    return brentq(lambda e: _exact_delta(x, p, e) - delta, 1e-6, 50.0, xtol=1e-14, rtol=1e-15)


@pytest.mark.parametrize("sigma,count", [(1.6728, 5), (0.9, 3), (2.5, 2), (1.2, 12)])
def test_summed_pmf_equals_the_characteristic_function_inversion(sigma, count):
    lo, log_p = summed_noise_log_pmf(sigma, count)
    x_ref, p_ref = _reference_pmf(sigma, count)
    got = np.zeros_like(p_ref)
    xs = lo + np.arange(log_p.size)
    inside = (xs >= x_ref[0]) & (xs <= x_ref[-1])
    got[xs[inside] - x_ref[0]] = np.exp(log_p[inside])
    assert np.max(np.abs(got - p_ref)) < 1e-15
    big = p_ref > 1e-6  # the DFT is accurate to ~1e-16 absolute
    np.testing.assert_allclose(got[big], p_ref[big], rtol=1e-9)
    # the variance is count times one share's (independent shares)
    one = np.exp(summed_noise_log_pmf(sigma, 1)[1])
    x1 = summed_noise_log_pmf(sigma, 1)[0] + np.arange(one.size)
    assert summed_noise_variance(sigma, count) == pytest.approx(count * float(np.sum(one * x1**2)), rel=1e-12)


@pytest.mark.parametrize("sigma,count", [(1.6728, 5), (0.9, 3), (2.5, 2), (1.2, 12)])
def test_accountant_epsilon_is_within_1e6_of_the_exact_curve_and_never_below(sigma, count):
    x, p = _reference_pmf(sigma, count)
    accountant = Accountant([DiscreteGaussianSum(sigma, count)], value_discretization_interval=discretization_for(1.0))
    for delta in (1e-5, 1e-3):
        exact = _exact_epsilon(x, p, delta)
        got = accountant.epsilon(delta)
        assert got >= exact
        assert got == pytest.approx(exact, rel=1e-6)
    for epsilon in (0.5, 1.0, 2.0):
        exact = _exact_delta(x, p, epsilon)
        if exact < 1e-12:  # below the reference's own accuracy (the DFT's ~1e-16 per point)
            continue
        assert accountant.delta(epsilon) >= exact - _REFERENCE_ERROR
        assert accountant.delta(epsilon) == pytest.approx(exact, rel=2e-3)


def test_one_share_is_the_discrete_gaussian():
    for sigma in (0.8, 3.7):
        a, b = Accountant([DiscreteGaussianSum(sigma, 1)]), Accountant([DiscreteGaussian(sigma)])
        assert a.epsilon(1e-5) == pytest.approx(b.epsilon(1e-5), rel=1e-10)
        assert a.delta(1.0) == pytest.approx(discrete_gaussian_delta(sigma, 1.0), rel=2e-3)


@pytest.mark.parametrize("epsilon,delta,honest", [(1.0, 1e-5, 5), (1.0, 1e-5, 3), (0.5, 1e-6, 4), (4.0, 1e-3, 2)])
def test_share_sigma_is_safe_and_nearly_smallest(epsilon, delta, honest):
    sigma = share_sigma(epsilon, delta, honest)
    x, p = _reference_pmf(sigma, honest)
    assert _exact_delta(x, p, epsilon) <= delta + _REFERENCE_ERROR
    x, p = _reference_pmf(sigma * (1 - 1e-3), honest)
    assert _exact_delta(x, p, epsilon) > delta
    # the honest shares' sum needs (nearly) the central discrete Gaussian's variance, not more
    central = share_sigma(epsilon, delta, 1)
    assert summed_noise_variance(sigma, honest) == pytest.approx(summed_noise_variance(central, 1), rel=2e-3)


def test_fewer_honest_shares_than_assumed_weaken_the_guarantee():
    # sized for 4 honest of 5, a coalition of 2 leaves 3 shares: epsilon above the target
    sigma = share_sigma(1.0, 1e-5, honest_shares(5, 1))
    assert Accountant([DiscreteGaussianSum(sigma, honest_shares(5, 1))]).delta(1.0) <= 1e-5
    assert Accountant([DiscreteGaussianSum(sigma, honest_shares(5, 2))]).epsilon(1e-5) > 1.05


def test_the_event_round_trips_and_checks_its_fields():
    event = DiscreteGaussianSum(1.5, 4)
    assert decode_event(encode_event(event)) == event
    for bad in ({"sigma": 0.0, "count": 2}, {"sigma": 1.0, "count": 0}, {"sigma": 1.0, "count": 2.0}):
        with pytest.raises(ValueError, match="sigma|count"):
            DiscreteGaussianSum(**bad)
    with pytest.raises(ValueError, match="colluders"):
        honest_shares(5, 5)


def test_sampled_shares_sum_to_the_tabulated_law():
    # 5 x 40 000 shares from the studies' sampler, summed: the law of the sum (chi-square over the bulk)
    from scipy.stats import chisquare

    rng = np.random.default_rng(7)
    sigma, count = 1.6728, 5
    sums = discrete_gaussian_noise(sigma, (count, 40_000), rng).sum(axis=0)
    lo, log_p = summed_noise_log_pmf(sigma, count)
    values = np.arange(-8, 9)
    expected = np.exp(log_p[values - lo]) * sums.size
    observed = np.array([(sums == v).sum() for v in values])
    rest_e, rest_o = sums.size - expected.sum(), sums.size - observed.sum()
    assert chisquare(np.append(observed, rest_o), np.append(expected, rest_e)).pvalue > 1e-4


def _exact_delta_joint(counts, sums, epsilon: float) -> float:
    """Hockey-stick divergence of the pair (counts + Z1, sums + Z2) against the pair shifted by (1, 2): the
    exact curve of a release of a count and a sensitivity-2 sum, summed directly over the product pmf."""
    (x1, p1), (x2, p2) = counts, sums
    q1 = np.concatenate([[0.0], p1[:-1]])
    q2 = np.concatenate([[0.0, 0.0], p2[:-2]])
    return float(np.sum(np.maximum(np.outer(p1, p2) - math.exp(epsilon) * np.outer(q1, q2), 0.0)))


@pytest.mark.parametrize("epsilon,delta,honest", [(1.0, 1e-5, 5), (2.0, 1e-4, 3)])
def test_share_sigma_of_counts_and_score_sums_is_safe_and_nearly_smallest(epsilon, delta, honest):
    """The secagg protocol's counts and score sums (ratio 3, sensitivity 2) share one scale: the exact joint
    curve of the honest shares' sums meets the target at that scale and misses it 0.1 % below."""
    parts = ((1, 1.0), (2, 3.0))
    sigma = share_sigma(epsilon, delta, honest, parts=parts)

    def exact(s):
        return _exact_delta_joint(_reference_pmf(s, honest), _reference_pmf(6.0 * s, honest), epsilon)

    assert exact(sigma) <= delta + _REFERENCE_ERROR
    assert exact(sigma * (1 - 1e-3)) > delta
    with pytest.raises(ValueError, match="parts"):
        share_sigma(epsilon, delta, honest, parts=((1, 0.0),))


def test_the_two_rounds_of_the_quantile_grid_compose_to_the_request():
    """Both secagg rounds (fine grid; counts and sums on the quantile grid) as the ledger charges them compose to
    the validation's epsilon at its delta, within the split's rounding, and the summed noise of each round is
    the central plan's."""
    from dsroc.histogram.stages import release_parts, two_stage_plan

    epsilon, delta, k = 1.0, 1e-5, 5
    plan = two_stage_plan(epsilon, delta, score_sums=True)
    s1 = share_sigma(plan.epsilon1, plan.delta1, k)
    s2 = share_sigma(plan.epsilon2, plan.delta2, k, parts=tuple(release_parts(score_sums=True)))
    composed = Accountant([DiscreteGaussianSum(s1, k), DiscreteGaussianSum(s2, k), DiscreteGaussianSum(6 * s2, k, 2)])
    assert composed.epsilon(delta) == pytest.approx(epsilon, rel=2e-3)
    assert math.sqrt(summed_noise_variance(s1, k)) == pytest.approx(plan.sigma1, rel=1e-3)
    assert math.sqrt(summed_noise_variance(s2, k)) == pytest.approx(plan.sigma2, rel=1e-3)


def test_a_hint_is_taken_only_within_a_tenth_of_a_percent_of_the_smallest_share():
    exact = share_sigma(1.0, 1e-5, 5)
    assert share_sigma(1.0, 1e-5, 5, hint=exact * 1.0005) == exact * 1.0005  # meets, and 0.1 % less does not
    for wrong in (exact * 1.01, exact * 0.99, 50.0):  # wasteful or unsafe: the search's answer instead
        assert share_sigma(1.0, 1e-5, 5, hint=wrong) == pytest.approx(exact, rel=1e-9)


def test_a_share_too_small_for_its_target_is_refused_and_never_crashes_the_accountant():
    """``shares_meet`` refuses a share only when the accountant (and, where it resolves the sum, the exact hockey-stick
    delta of the characteristic-function pmf) finds it short; below sigma ~1e-10, where the accountant's arrays
    overflowed, its bound refuses without it."""
    from dsroc.secagg import shares_meet

    refused = 0
    for epsilon, delta in ((0.1, 1e-8), (1.0, 1e-5), (5.0, 1e-3), (50.0, 0.01), (400.0, 0.01)):
        for sigma in np.geomspace(0.05, 3.0, 15):
            sigma = float(sigma)
            if shares_meet(sigma, epsilon, delta, 4):
                continue
            accountant = Accountant([DiscreteGaussianSum(sigma, 4)],
                                    value_discretization_interval=discretization_for(epsilon))
            assert accountant.delta(epsilon) > delta
            if sigma >= 0.2 and epsilon <= 50:
                x, p = _reference_pmf(sigma, 4)
                assert _exact_delta(x, p, epsilon) > delta - _REFERENCE_ERROR
            refused += 1
    assert refused > 20
    for sigma in (5e-324, 1e-300, 1e-30, 1e-10):
        assert not shares_meet(sigma, 1.0, 1e-5, 4)
        assert not shares_meet(sigma, 4000.0, 0.01, 4, parts=((1, 1.0), (2, 6.0)))
