"""The numpy helpers dsroc installs into dp-accounting give its own helpers' numbers bit for bit: on made-up pmfs,
and on the accountant's answers for secure-aggregation shares and mixed histories computed with dp-accounting's own
loops restored."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from dp_accounting.pld import common, pld_pmf

from dsroc.privacy import pld_kernels
from dsroc.privacy.accounting import (Accountant, DiscreteGaussian, DiscreteGaussianSum, DiscreteLaplace, Gaussian,
                                      discretization_for)

pld_kernels.install()


def _original(name):
    out = pld_kernels.original(name)
    assert out is not None, "dp-accounting 0.6.0 is pinned: the helpers are installed"
    return out


@contextlib.contextmanager
def _dp_accounting_own_loops():
    """dp-accounting's own helpers back in place (and the accountant's PLD caches emptied) for the duration."""
    from dsroc.privacy import accounting

    common.dictionary_to_list, pld_pmf._truncate_tails = _original("dictionary_to_list"), _original("truncate_tails")
    accounting._event_pld.cache_clear()
    accounting._gaussian_pld.cache_clear()
    try:
        yield
    finally:
        common.dictionary_to_list, pld_pmf._truncate_tails = pld_kernels.dictionary_to_list, pld_kernels.truncate_tails
        accounting._event_pld.cache_clear()
        accounting._gaussian_pld.cache_clear()


def test_installed_on_the_pinned_version():
    assert pld_kernels.installed()
    assert common.dictionary_to_list is pld_kernels.dictionary_to_list
    assert pld_kernels.dictionary_to_list is not _original("dictionary_to_list")


@pytest.mark.parametrize("seed", range(6))
def test_dictionary_to_list_is_dp_accountings(seed):
    rng = np.random.default_rng(seed)
    keys = rng.choice(np.arange(-3000, 3000), size=int(rng.integers(1, 2000)), replace=False)
    values = rng.exponential(size=keys.size) * 10.0 ** rng.integers(-300, 0, size=keys.size)
    d = {int(k): (float(v) if i % 2 else np.float64(v)) for i, (k, v) in enumerate(zip(keys, values))}
    offset, mine = pld_kernels.dictionary_to_list(d)
    theirs_offset, theirs = _original("dictionary_to_list")(d)
    assert offset == theirs_offset == min(d)
    assert mine.dtype == np.float64 and np.array_equal(mine, np.array(theirs))
    assert np.count_nonzero(mine) == np.count_nonzero(values)  # nothing but the keys' places is filled


def test_dictionary_to_list_of_one_entry_and_of_ints():
    assert [list(x) if not isinstance(x, int) else x for x in pld_kernels.dictionary_to_list({7: 0.25})] == [7, [0.25]]
    offset, mine = pld_kernels.dictionary_to_list({-2: 1, 1: 3})
    assert offset == -2 and list(mine) == [1.0, 0.0, 0.0, 3.0]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("pessimistic", [True, False])
def test_truncate_tails_is_dp_accountings(seed, pessimistic):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    probs = np.exp(-0.5 * ((np.arange(n) - n / 2) / (1 + n / 10)) ** 2)
    probs /= probs.sum()
    truncation = [1e-15, 1e-3, 0.5, 3.0][seed % 4]  # tiny, moderate, most of it, more than all of it
    as_list = seed % 3 == 0  # the sparse pmf's compose passes a list

    def run(truncate):
        try:
            return truncate(list(probs) if as_list else probs.copy(), truncation, pessimistic)
        except IndexError:  # nothing left: dp-accounting's own code fails there too
            return "IndexError", [], None

    mine, theirs = run(pld_kernels.truncate_tails), run(_original("truncate_tails"))
    assert mine[0] == theirs[0] and mine[2] == theirs[2]
    assert np.array_equal(np.asarray(mine[1]), np.asarray(theirs[1]))


def test_prefix_of_nan_and_of_nothing_above():
    assert pld_kernels.find_prefix_to_truncate(np.array([np.nan, 1.0, 2.0]), 0.5) == 3  # NaN compares false, as there
    assert pld_kernels.find_prefix_to_truncate(np.array([0.1, 0.1]), 1.0) == 2
    assert pld_kernels.find_prefix_to_truncate(np.array([0.3, 0.3, 0.3]), 0.5) == 1
    assert pld_kernels.find_prefix_to_truncate([0.3, 0.3, 0.3], 0.5) == 1


def _answers(eps):
    """The accountant's answers for secure-aggregation shares (two parts, as a round with score sums), a mixed
    history and a repeated release, at ``eps``."""
    interval = discretization_for(eps)
    shares = Accountant([DiscreteGaussianSum(1.3, 4), DiscreteGaussianSum(9.1, 4, 8)],
                        value_discretization_interval=interval)
    mixed = Accountant([DiscreteGaussian(2.0), DiscreteLaplace(3.0), Gaussian(0.5)], value_discretization_interval=interval)
    repeated = Accountant([DiscreteGaussian(4.0)] * 5 + [DiscreteLaplace(5.0)], value_discretization_interval=interval)
    return [shares.delta(eps), shares.epsilon(1e-6), mixed.delta(eps), mixed.epsilon(1e-5), repeated.delta(eps),
            repeated.epsilon(1e-5)]


@pytest.mark.parametrize("eps", [0.5, 3.0])
def test_accountant_answers_equal_with_dp_accountings_own_loops(eps):
    mine = _answers(eps)
    with _dp_accounting_own_loops():
        theirs = _answers(eps)
    assert mine == theirs  # bit for bit
    assert all(0.0 < x < 11.0 for x in mine)


def _pmf(distribution):
    pmf = distribution._pmf_remove.to_dense_pmf()
    return pmf._lower_loss, pmf._probs, pmf._infinity_mass


@pytest.mark.parametrize("sigma, sensitivity, interval", [(0.3, 1, 1e-3), (0.9, 1, 5e-4), (4.0, 2, 1e-3),
                                                          (25.0, 2, 5e-4), (0.05, 1, 1e-2)])
def test_discrete_gaussian_pld_is_dp_accountings(sigma, sensitivity, interval):
    from dp_accounting.pld import privacy_loss_distribution as pld

    bound = int(np.ceil(40.0 * sigma)) + 2
    mine = _pmf(pld_kernels.discrete_gaussian_pld(sigma, sensitivity, bound, interval))
    theirs = _pmf(pld.from_discrete_gaussian_mechanism(sigma, sensitivity=sensitivity, truncation_bound=bound,
                                                       value_discretization_interval=interval, use_connect_dots=True))
    assert mine[0] == theirs[0] and mine[2] == theirs[2] and np.array_equal(mine[1], theirs[1])
    assert mine[1].size > 10
    loss = pld_kernels._CLASSES["discrete_gaussian"](sigma, sensitivity=sensitivity, truncation_bound=bound)
    points = np.arange(-bound - sensitivity, bound + 1)
    assert loss._losses_of(points).tolist() == [loss.privacy_loss(int(x)) for x in points]


@pytest.mark.parametrize("sigma, count, sensitivity, interval", [(0.3, 5, 1, 1e-3), (1.8, 5, 2, 1e-3),
                                                                 (0.05, 3, 1, 1e-2), (3.0, 40, 2, 5e-4)])
def test_summed_shares_pld_is_the_per_loss_inverses(sigma, count, sensitivity, interval):
    """The tabulated loss of summed shares gives the same PLD with its vectorised inverse as with the parent's
    get_delta_for_epsilon calling the per-loss inverse once per epsilon."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    from dsroc.privacy.distributed import _privacy_loss_class, summed_noise_log_pmf, summed_noise_pld

    lo, log_p = summed_noise_log_pmf(sigma, count)
    vectorised = _privacy_loss_class()
    per_loss = vectorised.__bases__[0]  # the class without the vectorised inverse
    assert per_loss.get_delta_for_epsilon is not vectorised.get_delta_for_epsilon
    theirs = _pmf(pld.PrivacyLossDistribution(pld._create_pld_pmf_from_monotone_privacy_loss(
        per_loss(lo, log_p, sensitivity), pessimistic_estimate=True, value_discretization_interval=interval,
        use_connect_dots=True)))
    mine = _pmf(summed_noise_pld(sigma, count, sensitivity, interval))
    assert mine[0] == theirs[0] and mine[2] == theirs[2] and np.array_equal(mine[1], theirs[1])
    losses = np.array([-np.inf, -3.0, 0.0, 0.7, 50.0, np.inf])
    loss = vectorised(lo, log_p, sensitivity)
    assert loss._inverse_losses(losses).tolist() == [loss.inverse_privacy_loss(float(v)) for v in losses]
    points = np.arange(-loss._truncation_bound - sensitivity, loss._truncation_bound + 1)  # where it is defined
    assert loss._losses_of(points).tolist() == [loss.privacy_loss(int(x)) for x in points]


@pytest.mark.parametrize("at", [0, 1023, 1024, 1025, 5119, 5120, 90_000])
def test_prefix_across_blocks_is_the_loops(at):
    """A long prefix of tiny entries ending at ``at``, across the helper's block boundaries: the loop's index."""
    values = np.full(100_000, 1e-22)
    values[at] = 1.0
    threshold = 1e-22 * (at + 0.5) if at else 0.5
    loop = next((i for i, s in enumerate(np.cumsum(values)) if s > threshold), values.size)
    assert pld_kernels.find_prefix_to_truncate(values, threshold) == loop
    assert pld_kernels.find_prefix_to_truncate(values, 2.0) == values.size
