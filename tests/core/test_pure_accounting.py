"""Pure epsilon-DP histories in closed form against dp-accounting's privacy-loss distributions built directly: equal at
and above the sum of the epsilons, never below anywhere; mixed histories still composed by the PLD."""

from __future__ import annotations

import math

import pytest
from dp_accounting.pld import common
from dp_accounting.pld import privacy_loss_distribution as pld

from dsroc.histogram.stages import laplace_release_scales
from dsroc.privacy.pure import pure_delta_floor
from dsroc.privacy.accounting import (VALUE_DISCRETIZATION, Accountant, ApproximateDp, DiscreteLaplace, Gaussian,
                                      PureEpsilon)
from dsroc.survival.release import survival_release_scales

IV = VALUE_DISCRETIZATION


def _direct_pld(event, interval: float = IV):
    """dp-accounting's pessimistic PLD of one pure event, built here from its own parameters."""
    if isinstance(event, DiscreteLaplace):
        return pld.from_discrete_laplace_mechanism(1.0 / event.scale, sensitivity=event.sensitivity,
                                                   value_discretization_interval=interval)
    return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(event.epsilon, 0.0),
                                       value_discretization_interval=interval)


def _composed(history, interval: float = IV):
    """The PLD of ``[(event, count), ...]`` composed by dp-accounting."""
    out = None
    for event, count in history:
        new = _direct_pld(event, interval).self_compose(count)
        out = new if out is None else out.compose(new)
    return out


def _histogram(epsilon, **parts):
    counts, sums, scalar = laplace_release_scales(epsilon, interval=IV, **parts)
    return ([DiscreteLaplace(counts)] + ([DiscreteLaplace(sums, 2)] if sums else [])
            + [DiscreteLaplace(scalar, 16) for _ in range(parts.get("scalars", 0))])


def _survival(epsilon):
    counts, sums = survival_release_scales(epsilon, risk_sums=True, interval=IV)
    return [DiscreteLaplace(counts), DiscreteLaplace(sums, 2), DiscreteLaplace(sums, 2)]


HISTORIES = {
    "one count release": [(DiscreteLaplace(1.0), 1)],
    "histogram at 1, sums and a scalar": [(e, 1) for e in _histogram(1.0, score_sums=True, scalars=1)],
    "two-stage histograms at 5, three times": [(e, 3) for e in _histogram(1.0, score_sums=False)
                                               + _histogram(4.0, score_sums=True)],
    "survival at 2 and histogram at 0.5": [(e, 1) for e in _survival(2.0) + _histogram(0.5, score_sums=True)],
    "forty small releases": [(DiscreteLaplace(1 / 0.05), 40)],
    "pure epsilon events": [(PureEpsilon(0.7), 3), (ApproximateDp(0.25, 0.0), 2)],
}


@pytest.mark.parametrize("name", sorted(HISTORIES))
def test_a_pure_history_is_never_charged_less_than_its_pld(name):
    history = HISTORIES[name]
    events = [e for e, count in history for _ in range(count)]
    closed, direct = Accountant(events), _composed(history)
    assert closed.pure and not closed.exact
    total = sum(count * e.epsilon for e, count in history)
    # The sum of the epsilons, each on the grid: the PLD's largest loss to its own grid step (its delta is 0 from
    # there on and positive half a step below), and within one step per event of the exact sum.
    assert closed.pure_epsilon == pytest.approx(closed.epsilon(1e-300), abs=1e-12)
    assert closed.delta(closed.pure_epsilon) == 0.0 == closed.delta(1000.0)  # a large budget's epsilon too
    assert direct.get_delta_for_epsilon(closed.pure_epsilon) <= 1e-14  # its floating-point tail of 1e-15
    assert direct.get_delta_for_epsilon(closed.pure_epsilon - IV / 2) > 0.0
    assert total <= closed.pure_epsilon <= total + len(events) * IV
    for delta in (1e-10, 1e-6, 1e-3, 0.05):
        assert closed.epsilon(delta) >= direct.get_epsilon_for_delta(delta) - 1e-12
    for fraction in (0.1, 0.5, 0.9, 0.99, 1.0, 1.2):
        epsilon = fraction * closed.pure_epsilon
        assert closed.delta(epsilon) >= direct.get_delta_for_epsilon(epsilon) - 1e-15
        # the budget check: what the closed form accepts, the PLD accepts too
        for budget_delta in (1e-6, 0.05):
            assert not closed.within(epsilon, budget_delta) or direct.get_delta_for_epsilon(epsilon) <= budget_delta
        # the floor that refuses without a PLD: every release at its largest loss, with probability 1 / (1 + e^-rate)
        # (the discrete Laplace's rate 1 / scale, a pure event's worst case randomized response at its epsilon)
        log_top = sum(count * -math.log1p(math.exp(-(1.0 / e.scale if isinstance(e, DiscreteLaplace) else e.epsilon)))
                      for e, count in history)
        assert pure_delta_floor(total, log_top, epsilon) <= direct.get_delta_for_epsilon(epsilon) * (1 + 1e-9)


@pytest.mark.parametrize("name", ["one count release", "histogram at 1, sums and a scalar",
                                  "survival at 2 and histogram at 0.5"])
def test_one_or_two_releases_are_charged_what_their_pld_says(name):
    # Where few releases are composed the PLD's epsilon at a small delta is their sum less O(delta / P[top loss]): the
    # closed form gives the same number to a fifth of the grid step.
    history = HISTORIES[name]
    closed, direct = Accountant([e for e, count in history for _ in range(count)]), _composed(history)
    for delta in (1e-10, 1e-6):
        assert closed.epsilon(delta) == pytest.approx(direct.get_epsilon_for_delta(delta), abs=IV / 5)


def test_many_small_releases_are_charged_basic_composition_above_the_pld():
    # The price of the closed form: at delta > 0 the PLD composes forty releases at 0.05 to less than their sum.
    history = HISTORIES["forty small releases"]
    closed, direct = Accountant([DiscreteLaplace(1 / 0.05)] * 40), _composed(history)
    assert direct.get_epsilon_for_delta(1e-3) < 0.8 * closed.epsilon(1e-3)
    assert closed.epsilon(1e-3) == pytest.approx(2.0 + math.log1p(-1e-3), abs=40 * IV)


def test_incremental_equals_batch_and_mixing_turns_to_the_pld():
    events = _histogram(1.0, score_sums=True) * 3
    incremental = Accountant()
    for event in events:
        incremental = incremental.add(event)
    batch = Accountant(events)
    assert incremental.pure and incremental.pure_epsilon == batch.pure_epsilon
    assert incremental.epsilon(1e-5) == batch.epsilon(1e-5)
    # With an approximate release or a Gaussian the whole history goes to the PLD, exactly as dp-accounting composes it.
    boyd = ApproximateDp(0.4, 1e-6)
    mixed = incremental.add(boyd)
    assert not mixed.pure and not mixed.exact
    direct = _composed([(e, 1) for e in events]).compose(
        pld.from_privacy_parameters(common.DifferentialPrivacyParameters(0.4, 1e-6), value_discretization_interval=IV))
    for delta in (1e-5, 1e-3):
        assert mixed.epsilon(delta) == pytest.approx(direct.get_epsilon_for_delta(delta), rel=1e-9)
    with_gaussian = pld.from_gaussian_mechanism(3.0, value_discretization_interval=IV).compose(
        _composed([(e, 1) for e in events]))
    for history in ([Gaussian(3.0)] + events, events + [Gaussian(3.0)]):
        assert Accountant(history).epsilon(1e-5) == pytest.approx(with_gaussian.get_epsilon_for_delta(1e-5), rel=1e-9)



# The regression the hybrid repairs: (budget epsilon, budget delta, release epsilon) -> histogram releases with score sums
# the PLD allows on the accountant's default grid (basic composition alone: 20, 20, 100).
PLD_COUNTS = {(20.0, 0.05, 1.0): 35, (20.0, 1e-5, 1.0): 21, (10.0, 1e-6, 0.1): 428}


def _pld_fits(release, k: int, epsilon: float, delta: float) -> bool:
    """Whether dp-accounting's PLD of ``k`` releases of ``release``, built directly, is (epsilon, delta)-DP."""
    return _composed([(e, k) for e in release]).get_delta_for_epsilon(epsilon) <= delta


@pytest.mark.parametrize("budget", sorted(PLD_COUNTS))
def test_a_budget_allows_as_many_pure_releases_as_the_pld(budget):
    epsilon, delta, release_epsilon = budget
    release = _histogram(release_epsilon, score_sums=True)
    count = PLD_COUNTS[budget]
    # the count the PLD allows, by dp-accounting directly: k releases fit, k + 1 do not
    assert _pld_fits(release, count, epsilon, delta) and not _pld_fits(release, count + 1, epsilon, delta)
    assert count > math.floor(epsilon / release_epsilon + 1e-9)  # more than basic composition allows
    assert Accountant().releases_left(release, epsilon, delta) == (count, False)
    # and after some of them, the rest (the history crossed basic composition's reach or not)
    for spent in (count // 2, count - 1):
        history = Accountant(release * spent)
        assert history.within(epsilon, delta)
        assert history.releases_left(release, epsilon, delta) == (count - spent, False)


def test_the_switch_is_charged_between_the_pld_and_basic_composition():
    # Releases at 1 one by one at the init template's budget on its ledger's grid: basic composition accepts 20, the
    # PLD 35, checked where the bound changes and at its ends.
    epsilon, delta, interval = 20.0, 0.05, 5e-3
    counts, sums, _ = laplace_release_scales(1.0, score_sums=True, interval=interval)
    release = [DiscreteLaplace(counts), DiscreteLaplace(sums, 2)]
    history = Accountant(value_discretization_interval=interval)
    for k in range(1, 37):
        history = history.add(release[0]).add(release[1])
        basic = history.pure_epsilon <= epsilon - math.log1p(-delta)  # basic composition alone suffices
        assert history.pure and history.accounting(epsilon, delta) == (
            "pure epsilon-dp (basic composition)" if basic else "privacy loss distribution (pessimistic)")
        assert basic == (k <= 20)
        if k not in (1, 19, 20, 21, 22, 34, 35, 36):
            continue
        direct = _composed([(e, k) for e in release], interval)
        assert history.within(epsilon, delta) == (k <= 35) == (direct.get_delta_for_epsilon(epsilon) <= delta)
        for tight in (False, True):
            spent = history.epsilon(delta, tight=tight)
            # never below the PLD's epsilon, never above basic composition's
            assert direct.get_epsilon_for_delta(delta) - 1e-12 <= spent <= history.pure_epsilon + math.log1p(-delta) + 1e-12
            # (the PLD keeps a floating-point tail of 1e-15 beyond its largest loss)
            assert (direct.get_delta_for_epsilon(epsilon) - 1e-14 <= history.delta(epsilon, tight=tight)
                    <= max(0.0, -math.expm1(epsilon - history.pure_epsilon)) + 1e-15)
        # the tight bound is the PLD's (to its floating point), the default one basic composition's
        assert history.epsilon(delta, tight=True) == pytest.approx(
            min(direct.get_epsilon_for_delta(delta), history.pure_epsilon + math.log1p(-delta)), rel=1e-9)
        assert history.epsilon(delta) == pytest.approx(history.pure_epsilon + math.log1p(-delta), abs=1e-12)


def test_a_pure_history_is_refused_without_its_pld_where_its_top_loss_alone_exceeds_the_budget(monkeypatch):
    # Three survival releases at 5 beyond a budget of 10: the probability that every part has its largest loss is
    # a lower bound on the PLD's delta far above the budget's; the PLD, built directly, refuses too.
    release = _survival(5.0)
    assert _composed([(e, 3) for e in release]).get_delta_for_epsilon(10.0) > 1e-5
    import dsroc.privacy.accounting as accounting

    def no_pld(event, interval):
        raise AssertionError("a privacy-loss distribution was built")

    monkeypatch.setattr(accounting, "_event_pld", no_pld)
    history = Accountant(release * 3)
    assert not history.within(10.0, 1e-5)  # refused without a PLD
    assert history.within(15.0, 1e-5)  # accepted by basic composition
    with pytest.raises(AssertionError, match="privacy-loss distribution"):
        history.within(14.5, 0.1)  # neither decides: the PLD is asked
