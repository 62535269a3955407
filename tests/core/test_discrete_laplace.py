"""The discrete Laplace mechanism of the histogram protocol: its accountant event against the closed form, its exact
sampler and the studies' sampler against the pmf, and the calibration of a release's parts against the accountant."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dsroc.privacy.accounting import Accountant, DiscreteGaussian, DiscreteLaplace, Gaussian, decode_event, encode_event
from dsroc.privacy.laplace import (discrete_laplace_noise, discrete_laplace_scales, discrete_laplace_sd,
                                   discrete_laplace_variance, sample_discrete_laplace)


def _closed_form_delta(scale: float, sensitivity: int, epsilon: float) -> float:
    """Hockey-stick divergence of DLap(0, b) against DLap(k, b) at e^eps, by brute force over the support."""
    x = np.arange(-4000, 4001)
    log_p = -np.abs(x) / scale
    log_q = -np.abs(x - sensitivity) / scale
    z = np.log(np.sum(np.exp(log_p)))
    p, q = np.exp(log_p - z), np.exp(log_q - z)
    e = math.exp(epsilon)
    return float(max(np.sum(np.maximum(p - e * q, 0.0)), np.sum(np.maximum(q - e * p, 0.0))))


@pytest.mark.parametrize("scale,sensitivity", [(1.25, 1), (10.0, 1), (20.0, 2), (160.0, 16)])
def test_event_is_pure_epsilon_at_sensitivity_over_scale(scale, sensitivity):
    eps = sensitivity / scale
    event = DiscreteLaplace(scale, sensitivity)
    assert event.epsilon == pytest.approx(eps, rel=1e-15)
    accountant, pld = Accountant([event]), event.pld(5e-4)  # its PLD composes it with other mechanisms
    # Pure eps-DP: delta 0 at eps (the grid step above it for the pessimistic rounding), positive just below.
    assert accountant.delta(eps + 5e-4) == 0.0 == pld.get_delta_for_epsilon(eps + 5e-4)
    assert accountant.delta(eps - 0.01) > 0.0
    # Against the brute-force hockey stick below eps: the PLD never below the exact value and close to it; the
    # accountant's closed form of a pure history never below the PLD.
    for e in (0.25 * eps, 0.75 * eps):
        exact = _closed_form_delta(scale, sensitivity, e)
        assert exact > 0.0
        assert exact - 1e-12 <= pld.get_delta_for_epsilon(e) <= exact + 2e-3
        assert accountant.delta(e) >= pld.get_delta_for_epsilon(e)
    assert accountant.epsilon(1e-300) == pytest.approx(eps, abs=5e-4)


def test_composition_of_k_releases_is_k_times_epsilon():
    eps, k = 0.3, 7
    accountant = Accountant([DiscreteLaplace(1.0 / eps)] * k)
    assert accountant.delta(k * eps + 5e-4 * k) == 0.0
    assert accountant.delta(k * eps - 0.02) > 0.0
    # and never more than basic composition at any delta: the PLD's epsilon at delta 1e-6 lies below k eps
    assert accountant.epsilon(1e-6) <= k * eps + k * 5e-4
    # mixed with a Gaussian: more than either part alone
    mixed = Accountant([DiscreteLaplace(1.0 / eps)] * k + [Gaussian(3.0)])
    assert mixed.epsilon(1e-6) > accountant.epsilon(1e-6)


@pytest.mark.parametrize("event", [DiscreteLaplace(3.5), DiscreteLaplace(40.0, 16), DiscreteGaussian(2.0, 2)])
def test_events_round_trip_through_their_encoding(event):
    data = encode_event(event)
    assert data["kind"] in ("discrete_laplace", "discrete_gaussian")
    back = decode_event(data)
    assert back == event and type(back) is type(event)


@pytest.mark.parametrize("bad", [lambda: DiscreteLaplace(0.0), lambda: DiscreteLaplace(float("inf")),
                                 lambda: DiscreteLaplace(1.0, 0), lambda: DiscreteLaplace(1.0, 1.5),
                                 lambda: discrete_laplace_scales(0.0, [(1, 1.0)]),
                                 lambda: discrete_laplace_scales(1.0, []),
                                 lambda: discrete_laplace_scales(1.0, [(1, 0.0)]),
                                 lambda: discrete_laplace_scales(1e-4, [(1, 1.0)], interval=5e-4)])
def test_bad_arguments_are_refused(bad):
    with pytest.raises(ValueError):
        bad()


@pytest.mark.parametrize("scale", [0.7, 3.0, 12.5])
def test_variance_is_the_pmf_second_moment(scale):
    x = np.arange(-20000, 20001, dtype=np.float64)
    w = np.exp(-np.abs(x) / scale)
    assert discrete_laplace_variance(scale) == pytest.approx(float(np.sum(w * x**2) / np.sum(w)), rel=1e-10)
    assert discrete_laplace_sd(scale) ** 2 == pytest.approx(discrete_laplace_variance(scale), rel=1e-12)
    assert discrete_laplace_variance(0.0) == 0.0


def _chi_square_p(draws: np.ndarray, scale: float) -> float:
    """Goodness of fit of integer draws to DLap(scale) (cells |x| <= c, the tails pooled)."""
    a = math.exp(-1.0 / scale)
    c = int(3 * scale) + 2
    support = np.arange(-c, c + 1)
    pmf = (1 - a) / (1 + a) * a ** np.abs(support)
    tail = (1.0 - pmf.sum()) / 2.0
    observed = np.array([np.sum(draws < -c), *[np.sum(draws == v) for v in support], np.sum(draws > c)])
    expected = draws.size * np.array([tail, *pmf, tail])
    return float(stats.chisquare(observed, expected).pvalue)


@pytest.mark.parametrize("scale", [1.25, 4.6])
def test_exact_sampler_has_the_discrete_laplace_pmf(scale):
    draws = sample_discrete_laplace(scale, 40_000)
    assert draws.dtype == np.int64 and draws.shape == (40_000,)
    assert _chi_square_p(draws, scale) > 1e-4
    # the variance within 4 standard errors (the fourth moment of the pmf gives the SE)
    x = np.arange(-4000, 4001, dtype=np.float64)
    w = np.exp(-np.abs(x) / scale)
    w /= w.sum()
    var, m4 = float(np.sum(w * x**2)), float(np.sum(w * x**4))
    assert abs(draws.var() - var) < 4 * math.sqrt((m4 - var**2) / draws.size)
    assert abs(draws.mean()) < 4 * math.sqrt(var / draws.size)


def test_study_sampler_has_the_same_pmf_and_is_reproducible():
    scale = 2.2
    draws = discrete_laplace_noise(scale, (200, 250), np.random.default_rng(3))
    assert draws.shape == (200, 250) and draws.dtype == np.int64
    assert _chi_square_p(draws.ravel(), scale) > 1e-4
    assert np.array_equal(draws, discrete_laplace_noise(scale, (200, 250), np.random.default_rng(3)))
    assert not discrete_laplace_noise(0.0, 5, np.random.default_rng(0)).any()


@pytest.mark.parametrize("epsilon,parts", [(1.0, [(1, 1.0)]), (0.9, [(1, 1.25), (2, 10.0)]),
                                           (1.0, [(1, 1.25), (2, 10.0), (16, 10.0), (16, 10.0)]),
                                           (0.1, [(1, 1.0)]), (7.3, [(1, 1.0), (2, 3.0)])])
def test_calibration_is_charged_the_asked_epsilon_by_the_accountant(epsilon, parts):
    interval = 5e-4
    scales = discrete_laplace_scales(epsilon, parts, interval=interval)
    # closed form of the shared scale: part i gets epsilon (1 / r_i) / sum_j (1 / r_j), less than a grid step below
    weights = np.array([1.0 / r for _, r in parts])
    shares = epsilon * weights / weights.sum()
    got = np.array([k / s for (k, _), s in zip(parts, scales)])
    assert np.all(got <= shares) and np.all(shares - got < interval)
    events = [DiscreteLaplace(s, k) for (k, _), s in zip(parts, scales)]
    accountant = Accountant(events, value_discretization_interval=interval)
    assert accountant.delta(epsilon) < 1e-12  # the ledger's check of this epsilon: delta 0 (up to truncated tails)
    assert accountant.delta(epsilon - len(parts) * interval - 1e-3) > 0.0  # nothing much is left unused
