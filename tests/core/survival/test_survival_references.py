"""The binned survival estimators against scikit-survival and lifelines on continuous, tie-free data.

scikit-survival is GPL: imported here, in tests, only; the package never imports it. On a per-patient grid
(a time edge at every follow-up time, a score edge between every two predicted risks) the histogram loses
nothing, so the estimators must match the references to rounding. sksurv weights a case by ``G(T)``,
``dsroc`` by ``G(T-)``: the same without ties. Its score-tie tolerance is set to 0 (exact ties, as here). Its IPCW needs a training set; here it is the same data.
On a coarser public grid the binned estimates differ from the per-patient ones by the binning only.
"""

import numpy as np
import pytest

lifelines = pytest.importorskip("lifelines")
sksurv_metrics = pytest.importorskip("sksurv.metrics")
from lifelines.utils import concordance_index  # noqa: E402
from sksurv.nonparametric import kaplan_meier_estimator  # noqa: E402
from sksurv.util import Surv  # noqa: E402

from dsroc.survival import (  # noqa: E402
    SurvivalHistogram, brier_score, calibration_at, censoring_survival, cumulative_dynamic_auc, harrell_c,
    integrated_brier_score, kaplan_meier, uno_c,
)

HORIZONS = (0.5, 1.0, 1.5)
TAU = 1.8
EXACT = 1e-13  # measured: at most 7e-15


def weibull_cohort(seed=20261203, n=2000):
    """Weibull event times (shape 1.5) with a proportional-hazards covariate, exponential censoring ~40%."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    scale = np.exp(-0.6 * x)
    event_time = scale * rng.weibull(1.5, n)
    censor_time = rng.exponential(1.4, n)
    time = np.minimum(event_time, censor_time)
    event = (event_time <= censor_time).astype(int)
    # predicted risk by t = 1 of a slightly mis-specified model: continuous, no ties
    risk = 1.0 - np.exp(-((1.0 / (1.1 * scale)) ** 1.4))
    return time, event, risk


@pytest.fixture(scope="module")
def cohort():
    time, event, risk = weibull_cohort()
    assert np.unique(time).size == time.size and np.unique(risk).size == risk.size
    assert 0.3 < 1.0 - event.mean() < 0.5
    sorted_risk = np.sort(risk)
    exact = SurvivalHistogram.from_patients(
        time, event, risk, time_edges=np.r_[0.0, np.sort(time)],
        score_edges=np.r_[0.0, 0.5 * (sorted_risk[1:] + sorted_risk[:-1]), 1.0])
    y = Surv.from_arrays(event.astype(bool), time)
    return time, event, risk, exact, y


def test_kaplan_meier_matches_lifelines(cohort):
    time, event, _, hist, _ = cohort
    fitter = lifelines.KaplanMeierFitter(alpha=0.05).fit(time, event)
    km = kaplan_meier(hist, level=0.95)
    reference = fitter.survival_function_.iloc[1:, 0].to_numpy()  # lifelines' first row is time 0
    assert np.array_equal(fitter.survival_function_.index[1:], hist.time_points)
    assert np.max(np.abs(km.survival - reference)) < EXACT
    ci = fitter.confidence_interval_.iloc[1:].to_numpy()
    inner = (km.survival > 0) & (km.survival < 1)
    assert np.max(np.abs(km.lower - ci[:, 0])[inner]) < EXACT
    assert np.max(np.abs(km.upper - ci[:, 1])[inner]) < EXACT


def test_censoring_survival_matches_sksurv_reverse_km(cohort):
    time, event, _, hist, _ = cohort
    times, g = kaplan_meier_estimator(event.astype(bool), time, reverse=True)
    assert np.array_equal(times, hist.time_points)
    assert np.max(np.abs(censoring_survival(hist).survival - g)) < 1e-12


def test_grouped_times_cost_little_on_twenty_time_bins():
    # 20 quantile time bins (a score edge between every two risks): the life-table curves and the censoring weight
    # inside a case's bin keep Kaplan-Meier within 3e-3 of lifelines and Brier(t) within 4e-4 of sksurv. The
    # tied-times reading before (all censored of a bin at risk of its events, weights G at the bin's start) was
    # 0.014-0.015 and 0.0009 off on these data.
    time, event, risk = weibull_cohort(seed=2, n=4000)
    y = Surv.from_arrays(event.astype(bool), time)
    edges = np.unique(np.r_[0.0, np.quantile(time, np.linspace(0.05, 0.95, 19)), HORIZONS, np.inf])
    sorted_risk = np.sort(risk)
    hist = SurvivalHistogram.from_patients(time, event, risk, time_edges=edges,
                                           score_edges=np.r_[0.0, 0.5 * (sorted_risk[1:] + sorted_risk[:-1]), 1.0])
    fitter = lifelines.KaplanMeierFitter().fit(time, event)
    finite = hist.time_points[:-1]
    assert np.max(np.abs(kaplan_meier(hist).survival[:-1] - fitter.survival_function_at_times(finite).to_numpy())) < 3e-3
    _, bs = sksurv_metrics.brier_score(y, y, np.tile(1.0 - risk[:, None], (1, 3)), np.array(HORIZONS))
    assert np.max(np.abs([brier_score(hist, t) for t in HORIZONS] - bs)) < 4e-4


def test_cumulative_dynamic_auc_matches_sksurv(cohort):
    _, _, risk, hist, y = cohort
    reference, _ = sksurv_metrics.cumulative_dynamic_auc(y, y, risk, times=np.array(HORIZONS), tied_tol=0.0)
    ours = np.array([cumulative_dynamic_auc(hist, t).value for t in HORIZONS])
    assert np.max(np.abs(ours - reference)) < EXACT


def test_harrell_c_matches_sksurv_and_lifelines(cohort):
    time, event, risk, hist, _ = cohort
    ours = harrell_c(hist)
    assert abs(ours - sksurv_metrics.concordance_index_censored(event.astype(bool), time, risk, tied_tol=0.0)[0]) < EXACT
    assert abs(ours - concordance_index(time, -risk, event)) < EXACT  # lifelines: higher score, longer survival


def test_uno_c_matches_sksurv(cohort):
    _, _, risk, hist, y = cohort
    for tau in (1.0, TAU):
        assert abs(uno_c(hist, tau) - sksurv_metrics.concordance_index_ipcw(y, y, risk, tau=tau, tied_tol=0.0)[0]) < EXACT


def test_brier_and_integrated_brier_match_sksurv(cohort):
    time, _, risk, hist, y = cohort
    survival = 1.0 - risk  # sksurv scores predicted survival probabilities
    _, reference = sksurv_metrics.brier_score(y, y, np.tile(survival[:, None], (1, len(HORIZONS))), np.array(HORIZONS))
    ours = np.array([brier_score(hist, t) for t in HORIZONS])
    assert np.max(np.abs(ours - reference)) < EXACT
    points = hist.time_points[(hist.time_points >= 0.1) & (hist.time_points <= TAU)]
    ibs = sksurv_metrics.integrated_brier_score(y, y, np.tile(survival[:, None], (1, points.size)), points)
    assert abs(integrated_brier_score(hist, TAU, start=0.1) - ibs) < EXACT


def test_a_public_coarse_grid_costs_only_binning(cohort):
    # 200 time bins at quantiles, 100 equal score bins, the horizons on edges; bounds ~3x the measured gaps.
    # The KM gap is what grouping leaves of the order within a bin (life-table curves; measured 0.0019).
    time, event, risk, _, y = cohort
    edges = np.unique(np.r_[0.0, np.quantile(time, np.linspace(0.005, 1.0, 200)), HORIZONS, TAU])
    hist = SurvivalHistogram.from_patients(time, event, risk, time_edges=edges, score_edges=np.linspace(0.0, 1.0, 101))
    fitter = lifelines.KaplanMeierFitter().fit(time, event)
    gap = np.abs(kaplan_meier(hist).survival - fitter.survival_function_at_times(hist.time_points).to_numpy())
    assert np.max(gap) < 5e-3
    auc, _ = sksurv_metrics.cumulative_dynamic_auc(y, y, risk, times=np.array(HORIZONS), tied_tol=0.0)
    assert np.max(np.abs([cumulative_dynamic_auc(hist, t).value for t in HORIZONS] - auc)) < 1e-3
    harrell = sksurv_metrics.concordance_index_censored(event.astype(bool), time, risk, tied_tol=0.0)[0]
    assert abs(harrell_c(hist) - harrell) < 1e-3  # measured 2.5e-4
    assert abs(uno_c(hist, TAU) - sksurv_metrics.concordance_index_ipcw(y, y, risk, tau=TAU, tied_tol=0.0)[0]) < 1e-3
    for t in HORIZONS:  # O/E against lifelines' Kaplan-Meier over the mean risk; measured at most 2e-4
        oe = (1.0 - fitter.survival_function_at_times(t).iloc[0]) / risk.mean()
        assert abs(calibration_at(hist, t, [0, 100]).overall.ratio - oe) < 1e-3
    _, bs = sksurv_metrics.brier_score(y, y, np.tile(1.0 - risk[:, None], (1, 3)), np.array(HORIZONS))
    assert np.max(np.abs([brier_score(hist, t) for t in HORIZONS] - bs)) < 3e-4
    points = hist.time_points[hist.time_points <= TAU]
    ibs = sksurv_metrics.integrated_brier_score(y, y, np.tile(1.0 - risk[:, None], (1, points.size)), points)
    assert abs(integrated_brier_score(hist, TAU) - ibs) < 1e-5


def test_concordance_on_grouped_times_counts_pairs_within_a_time_bin_half():
    # 20 quantile time bins, a score edge between every two risks: only the time grouping differs from sksurv.
    # Pairs within one time bin are in either order; counting them not comparable (the convention before) was
    # 0.006 (Harrell) and 0.009 (Uno) too high here, counting them half leaves under 1e-3.
    time, event, risk = weibull_cohort(seed=1, n=4000)
    y = Surv.from_arrays(event.astype(bool), time)
    edges = np.unique(np.r_[0.0, np.quantile(time, np.linspace(0.05, 0.95, 19)), TAU, np.inf])
    sorted_risk = np.sort(risk)
    hist = SurvivalHistogram.from_patients(time, event, risk, time_edges=edges,
                                           score_edges=np.r_[0.0, 0.5 * (sorted_risk[1:] + sorted_risk[:-1]), 1.0])
    harrell = sksurv_metrics.concordance_index_censored(event.astype(bool), time, risk, tied_tol=0.0)[0]
    assert abs(harrell_c(hist) - harrell) < 1e-3
    assert abs(uno_c(hist, TAU) - sksurv_metrics.concordance_index_ipcw(y, y, risk, tau=TAU, tied_tol=0.0)[0]) < 1e-3
