"""Decision thresholds on the histogram grid (dsroc.histogram.thresholds): exact edges, the policy's rule, the bin cap,
and the net benefit at the thresholds against a brute force on the unbinned scores."""

import numpy as np
import pytest

from dsroc import bin_scores
from dsroc.histogram.stages import first_stage_grid, policy_candidates, second_stage_grid
from dsroc.histogram.thresholds import check_thresholds, off_policy, with_thresholds
from dsroc.multicentre import decision_curve

BINS = (5, 8, 10, 12, 20, 50, 100, 200)
LOGIT = (0.0001, 0.9999)


def test_thresholds_are_added_exactly_and_near_edges_become_them():
    e = with_thresholds([0.05, 0.1 + 1e-14, 0.25, 0.5], [0.1, 0.2, 0.3], most=12)
    assert e.tolist() == [0.05, 0.1, 0.2, 0.25, 0.3, 0.5]


def test_past_the_cap_the_quantile_edges_nearest_a_threshold_give_way():
    # logit distances to the nearest threshold: 0.12 -> 0.2, 0.4 -> 0.44, 0.6 -> 0.8, 0.9 -> 1.9
    e = with_thresholds([0.12, 0.4, 0.6, 0.9], [0.1, 0.3], most=5)
    assert e.tolist() == [0.1, 0.3, 0.6, 0.9]
    with pytest.raises(ValueError, match=r"thresholds: 3 thresholds make 4 bins; every site's policy allows at most 3"):
        with_thresholds([0.5], [0.1, 0.2, 0.3], most=3)


def test_the_policy_rule_is_an_allowed_grids_edge():
    # independently: t is an edge of the equal grid of b bins on [0, 1] when t * b is an integer
    ts = [0.1, 0.2, 0.3, 0.07, 0.0725, 0.123, 0.125, 0.005, 0.0125]
    equal_only = off_policy(ts, BINS, ("equal",), LOGIT)
    brute = [t for t in ts if not any(abs(t * b - round(t * b)) < 1e-9 for b in BINS)]
    assert equal_only == brute == [0.0725, 0.123, 0.0125]
    assert off_policy(ts, (10,), ("equal",), LOGIT) == [t for t in ts if t not in (0.1, 0.2, 0.3)]
    assert off_policy([0.5, 0.2], (10,), ("logit",), LOGIT) == [0.2]  # the logit grid's middle edge is 1/2
    assert off_policy([0.5], BINS, (), LOGIT) == [0.5]


def test_check_thresholds_sorts_and_names_the_rule():
    assert check_thresholds([0.3, 0.1]) == (0.1, 0.3)
    for bad, rule in (([0.0], "strictly between 0 and 1"), ([np.nan], "strictly between"), ([0.2, 0.2], "distinct"),
                      (["a"], "numbers"), ([True], "numbers"), (0.1, "a sequence")):
        with pytest.raises(ValueError, match=rf"thresholds.*{rule}"):
            check_thresholds(bad)


def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    risk = 1 / (1 + np.exp(-(-1.5 + 1.2 * x)))
    return risk, (rng.random(n) < risk).astype(int)


def test_the_second_stage_grid_holds_the_thresholds_and_the_net_benefit_there_is_the_brute_force():
    risk, y = _data()
    fine = first_stage_grid([BINS], *LOGIT)
    h0, h1 = bin_scores(risk, y, fine)
    candidates = policy_candidates([BINS], fine, "logit", lo=LOGIT[0], hi=LOGIT[1])
    plain = second_stage_grid(h0, h1, fine, 1.0, most=12, n_bins=7, candidates=candidates)
    interior = second_stage_grid(h0, h1, fine, 1.0, most=12, n_bins=7, candidates=candidates,
                                 thresholds=(0.1, 0.2, 0.3), grid_most=200)
    assert {0.1, 0.2, 0.3} <= set(interior.tolist()) and set(plain.tolist()) <= set(interior.tolist())
    edges = np.concatenate([[0.0], interior, [1.0]])
    dc = decision_curve(*bin_scores(risk, y, edges), edges, thresholds=(0.1, 0.2, 0.3))
    brute = [np.mean((y == 1) & (risk >= t)) - np.mean((y == 0) & (risk >= t)) * t / (1 - t) for t in (0.1, 0.2, 0.3)]
    assert dc.thresholds.tolist() == [0.1, 0.2, 0.3]
    np.testing.assert_allclose(dc.net_benefit, brute, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(dc.tp + dc.fn, np.full(3, y.sum()))
    np.testing.assert_array_equal(dc.fp, [np.sum((y == 0) & (risk >= t)) for t in (0.1, 0.2, 0.3)])
    with pytest.raises(ValueError, match=r"thresholds: 0.15 is not an interior edge"):
        decision_curve(*bin_scores(risk, y, edges), edges, thresholds=(0.15,))
