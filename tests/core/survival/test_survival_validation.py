"""Bad inputs to the survival histogram and its estimators raise ValueError naming the field and the rule."""

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from dsroc.survival import (
    SurvivalHistogram, brier_score, calibration_at, cumulative_dynamic_auc, harrell_c, integrated_brier_score,
    kaplan_meier, sum_histograms, uno_c,
)

EDGES = np.array([0.0, 1.0, 2.0, 4.0])
SCORES = np.array([0.0, 0.5, 1.0])


def good(**changes):
    values = {"time": [0.5, 1.5, 3.0, 2.0], "event": [1, 0, 1, 1], "risk": [0.9, 0.2, 0.4, 0.6]} | changes
    return SurvivalHistogram.from_patients(values["time"], values["event"], values["risk"], time_edges=EDGES,
                                           score_edges=SCORES)


@pytest.mark.parametrize("changes, match", [
    ({"time": [0.5, -1.0, 3.0, 2.0]}, "time must be >= 0"),
    ({"time": [0.5, np.nan, 3.0, 2.0]}, "time contains 1 non-finite"),
    ({"time": [0.5, 1.5, 5.0, 2.0]}, "time must be at most the last time edge"),
    ({"time": [[0.5, 1.5, 3.0, 2.0]]}, "time must be one-dimensional"),
    ({"event": [1, 0, 2, 1]}, "event must contain only 0 and 1"),
    ({"event": ["a", "b", "c", "d"]}, "event must be numeric"),
    ({"risk": [0.9, 1.2, 0.4, 0.6]}, r"risk must lie in \[0.0, 1.0\]"),
    ({"risk": [0.9, 0.2, 0.4]}, "time, event and risk must have the same length"),
])
def test_patients_are_checked_field_by_field(changes, match):
    with pytest.raises(ValueError, match=match):
        good(**changes)


@pytest.mark.parametrize("edges, match", [
    ([0.5, 1.0, 2.0], "time_edges must start at 0"),
    ([0.0, 2.0, 1.0], "time_edges must be strictly increasing"),
    ([0.0, np.inf, 3.0], "time_edges must be finite, except that the last"),
    ([0.0, np.nan], "time_edges must be finite"),
    ([0.0, np.inf], "time_edges with an infinite last edge need a finite positive edge"),
    ([0.0], "time_edges must be one-dimensional with at least 2"),
])
def test_time_edges_are_checked(edges, match):
    with pytest.raises(ValueError, match=match):
        SurvivalHistogram(np.zeros((max(len(edges) - 1, 1), 2, 2)), edges, SCORES)


@pytest.mark.parametrize("edges, match", [
    ([0.0, 0.5, 0.9], "score_edges must be finite and run from 0 to 1"),
    ([0.0, 0.6, 0.4, 1.0], "score_edges must be strictly increasing"),
    ([1.0], "score_edges must be one-dimensional"),
])
def test_score_edges_are_checked(edges, match):
    with pytest.raises(ValueError, match=match):
        SurvivalHistogram(np.zeros((3, 2, max(len(edges) - 1, 1))), EDGES, edges)


def test_cells_are_checked():
    with pytest.raises(ValueError, match=r"counts must have shape \(K, 2, J\) = \(3, 2, 2\)"):
        SurvivalHistogram(np.zeros((3, 2, 3)), EDGES, SCORES)
    with pytest.raises(ValueError, match="counts must be finite"):
        SurvivalHistogram(np.full((3, 2, 2), np.nan), EDGES, SCORES)
    with pytest.raises(ValueError, match="score_sum and score_sq_sum must be given together"):
        SurvivalHistogram(np.zeros((3, 2, 2)), EDGES, SCORES, score_sum=np.zeros((3, 2, 2)))
    with pytest.raises(ValueError, match="score_sq_sum must have shape"):
        SurvivalHistogram(np.zeros((3, 2, 2)), EDGES, SCORES, score_sum=np.zeros((3, 2, 2)), score_sq_sum=np.zeros(2))


def test_a_histogram_is_immutable():
    hist = good()
    with pytest.raises(dataclasses.FrozenInstanceError):
        hist.counts = np.zeros((3, 2, 2))
    with pytest.raises(ValueError, match="read-only"):
        hist.counts[0, 0, 0] = 5.0


@pytest.mark.parametrize("horizon, match", [
    (0.0, r"horizon must lie in \(0, 4.0\]"), (4.5, "horizon must lie in"), (np.nan, "horizon must lie in"),
    (True, "horizon must be a number"), ("1", "horizon must be a number"), ([1.0], "horizon must be a number"),
])
def test_horizons_are_checked(horizon, match):
    hist = good()
    for estimator in (brier_score, cumulative_dynamic_auc):
        with pytest.raises(ValueError, match=match):
            estimator(hist, horizon)
    with pytest.raises(ValueError, match=match):
        calibration_at(hist, horizon, [0, 2])


def test_an_auc_needs_cases_and_controls():
    with pytest.raises(ValueError, match="no events at or before the horizon"):
        cumulative_dynamic_auc(good(event=[0, 0, 1, 1]), 1.0)
    with pytest.raises(ValueError, match="nobody is followed beyond the horizon"):
        cumulative_dynamic_auc(good(), 4.0)


def test_concordance_needs_comparable_pairs_and_a_valid_tau():
    with pytest.raises(ValueError, match="no comparable pairs"):
        harrell_c(good(event=[0, 0, 0, 0]))
    for tau, match in ((0.0, "tau must be a positive finite time"), (-1.0, "tau must be a positive"),
                       (np.inf, "tau must be a positive"), ("2", "tau must be a number"), (True, "tau must be a number")):
        with pytest.raises(ValueError, match=match):
            uno_c(good(), tau)


def test_integrated_brier_needs_two_points_and_a_valid_start():
    with pytest.raises(ValueError, match=r"tau must lie in \(0, 4.0\]"):
        integrated_brier_score(good(), 5.0)
    with pytest.raises(ValueError, match="tau .*at least two time points"):
        integrated_brier_score(good(), 1.5)
    with pytest.raises(ValueError, match="start must be a finite time"):
        integrated_brier_score(good(), 4.0, start=np.nan)


def test_levels_groups_and_score_bins_are_checked():
    hist = good()
    for level in (0.0, 1.0, 95, "0.95"):
        with pytest.raises(ValueError, match="level must (lie strictly between 0 and 1|be a number)"):
            kaplan_meier(hist, level=level)
    for groups in ([0, 1], [1, 2], [0, 1, 1, 2], [0.0, 2.0], 2):
        with pytest.raises(ValueError, match="groups must"):
            calibration_at(hist, 2.0, groups)
    for bins in ((0, 3), (1, 1), "ab", 2):
        with pytest.raises(ValueError, match="score_bins must"):
            kaplan_meier(hist, score_bins=bins)


def test_only_histograms_of_one_grid_and_release_pool():
    hist = good()
    other = SurvivalHistogram(hist.counts, [0.0, 1.0, 2.0, 5.0], SCORES)
    with pytest.raises(ValueError, match="time_edges differ"):
        hist + other
    with pytest.raises(ValueError, match="score_edges differ"):
        hist + SurvivalHistogram(hist.counts, EDGES, [0.0, 0.4, 1.0])
    with pytest.raises(ValueError, match="score_sum is present in one histogram only"):
        hist + SurvivalHistogram(hist.counts, EDGES, SCORES)
    with pytest.raises(ValueError, match="histograms is empty"):
        sum_histograms([])
    with pytest.raises(TypeError):
        hist + 1


def test_a_release_with_no_patients_is_refused():
    empty = SurvivalHistogram(-np.ones((3, 2, 2)), EDGES, SCORES)
    with pytest.raises(ValueError, match="hist holds no patients"):
        brier_score(empty, 2.0)


def test_the_package_never_imports_the_gpl_reference():
    # scikit-survival is GPL and a test-only reference: running every estimator must not load it (nor scipy)
    code = ("import sys, numpy as np, dsroc, dsroc.survival as s\n"
            "h = s.SurvivalHistogram.from_patients([1, 2, 3, 2.5], [1, 0, 1, 0], [0.7, 0.2, 0.5, 0.4],"
            " time_edges=[0, 1, 2, 3, 4], score_edges=[0, 0.5, 1])\n"
            "s.kaplan_meier(h); s.cumulative_dynamic_auc(h, 2); s.harrell_c(h); s.uno_c(h, 3)\n"
            "s.integrated_brier_score(h, 3); s.scaled_brier(h, 2); s.calibration_at(h, 2, [0, 1, 2])\n"
            "print(sorted(m for m in ('sksurv', 'lifelines', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
