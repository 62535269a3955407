"""AUC, placement values, DeLong and CIs against brute-force O(n0 n1) versions and SPEC section 8."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.stats import norm

from dsroc import (
    auc_ci,
    auc_test,
    delong_variance,
    delong_variance_from_moments,
    empirical_auc,
    SurvivorFunction,
    placement_values,
)

NEG = [0.1, 0.2, 0.3, 0.4, 0.5, 0.5, 0.7]
POS = [0.3, 0.5, 0.6, 0.8, 0.9, 0.9]


def _data(neg, pos):
    return np.r_[neg, pos], np.r_[np.zeros(len(neg)), np.ones(len(pos))]


def brute_auc_and_delong(neg, pos):
    """DeLong (1988) written directly from the kernel psi(x, y) on the n0 x n1 matrix."""
    neg, pos = np.asarray(neg, float), np.asarray(pos, float)
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    auc = psi.mean()
    v10 = psi.mean(axis=1)  # per positive
    v01 = psi.mean(axis=0)  # per negative
    var = v10.var(ddof=1) / len(pos) + v01.var(ddof=1) / len(neg)
    return auc, var


def test_public_vector_delong_with_ties():
    s, y = _data(NEG, POS)
    assert empirical_auc(s, y) == pytest.approx(23 / 28, abs=1e-15)
    var = delong_variance(s, y)
    assert var == pytest.approx(0.015239984882842, abs=1e-14)
    lo, hi = auc_ci(23 / 28, var)
    assert lo == pytest.approx(0.469172282379296, abs=1e-12)
    assert hi == pytest.approx(0.959904900043029, abs=1e-12)


# Scores drawn from a small set of values so that ties are frequent.
tied_scores = st.lists(st.integers(0, 6).map(lambda v: v / 6), min_size=2, max_size=40)


@settings(max_examples=200, deadline=None)
@given(neg=tied_scores, pos=tied_scores)
def test_auc_and_delong_match_brute_force_with_ties(neg, pos):
    s, y = _data(neg, pos)
    auc, var = brute_auc_and_delong(neg, pos)
    assert empirical_auc(s, y) == pytest.approx(auc, abs=1e-12)
    assert delong_variance(s, y) == pytest.approx(var, abs=1e-12)


def test_auc_equals_one_minus_mean_positive_placement_value_exactly():
    rng = np.random.default_rng(3)
    neg, pos = rng.integers(0, 20, 500) / 20, rng.integers(3, 23, 400) / 20
    s, y = _data(neg, pos)
    pv0 = placement_values(neg, pos)
    assert empirical_auc(s, y) == pytest.approx(1 - pv0.mean(), abs=1e-13)


def test_placement_values_tie_conventions():
    ref = [1, 2, 2, 3]
    np.testing.assert_allclose(placement_values(ref, [2, 0, 3, 4]), [(1 + 1) / 4, 1, 0.5 / 4, 0])
    np.testing.assert_allclose(placement_values(ref, [2, 0, 3, 4], ties="strict"), [1 / 4, 1, 0, 0])
    with pytest.raises(ValueError, match="ties"):
        placement_values(ref, [1], ties="weak")


def test_delong_from_moments_matches_direct():
    rng = np.random.default_rng(5)
    neg, pos = rng.normal(size=300), rng.normal(1, size=200)
    s, y = _data(neg, pos)
    pv0, pv1 = placement_values(neg, pos), placement_values(pos, neg)
    v = delong_variance_from_moments(var_pv0=pv0.var(ddof=1), n1=200, var_pv1=pv1.var(ddof=1), n0=300)
    assert v == pytest.approx(brute_auc_and_delong(neg, pos)[1], rel=1e-12)


def test_wald_ci_is_pROC_style_and_clipped():
    z = norm.ppf(0.975)
    lo, hi = auc_ci(0.8, 0.01, method="wald")
    assert (lo, hi) == pytest.approx((0.8 - z * 0.1, 0.8 + z * 0.1))
    assert auc_ci(0.99, 0.01, method="wald")[1] == 1.0


def test_logit_ci_undefined_at_boundaries_is_an_error():
    for a in (0.0, 1.0):
        with pytest.raises(ValueError, match="logit CI is undefined"):
            auc_ci(a, 0.01)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(auc=1.2, variance=0.1), "auc must lie"),
        (dict(auc=0.7, variance=-1), "variance"),
        (dict(auc=0.7, variance=0.1, level=1.0), "level"),
        (dict(auc=0.7, variance=0.1, method="exact"), "method"),
    ],
)
def test_auc_ci_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        auc_ci(**kwargs)


def test_auc_test_rejects_only_when_whole_ci_above_a0():
    assert auc_test((0.71, 0.9), 0.7) is True
    assert auc_test((0.69, 0.9), 0.7) is False


@pytest.mark.parametrize(
    "scores, labels, match",
    [
        ([0.1, 0.2, 0.3], [0, 0, 0], "positives"),
        ([0.1, 0.2, 0.3], [1, 1, 1], "negatives"),
        ([0.1, np.nan, 0.3], [0, 1, 1], "non-finite"),
        ([0.1, np.inf, 0.3], [0, 1, 1], "non-finite"),
        ([0.1, 0.2, 0.3], [0, 1, 2], "only 0 and 1"),
        ([0.1, 0.2], [0, 1, 1], "same length"),
        ([], [], "empty"),
    ],
)
def test_degenerate_input_is_a_clear_error(scores, labels, match):
    with pytest.raises(ValueError, match=match):
        empirical_auc(scores, labels)


def test_delong_needs_two_per_class():
    with pytest.raises(ValueError, match="at least 2"):
        delong_variance([0.1, 0.5, 0.6], [0, 1, 1])


@pytest.mark.parametrize("ties", ["mid", "strict"])
def test_sorted_queries_give_the_random_order_result_bit_for_bit(ties):
    # The survivor function searches its queries in ascending order; the answer must not change by a bit
    # against searching them in the given order (the straightforward algorithm, written out here).
    rng = np.random.default_rng(12)
    ref = np.round(rng.normal(size=20_000), 2)  # many ties
    query = np.round(rng.normal(0.3, size=30_000), 2)
    ordered = np.sort(ref)
    le = np.searchsorted(ordered, query, side="right")
    lt = np.searchsorted(ordered, query, side="left")
    greater = ref.size - le
    expected = greater / ref.size if ties == "strict" else (greater + 0.5 * (le - lt)) / ref.size
    np.testing.assert_array_equal(placement_values(ref, query, ties=ties), expected)
    np.testing.assert_array_equal(placement_values(ref, np.sort(query), ties=ties), np.sort(expected)[::-1])
    np.testing.assert_array_equal(SurvivorFunction(ordered).sorted_values, ordered)
