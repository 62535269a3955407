"""Coverage of the pooled calibration-in-the-large and slope by the analyst's intervals, through the sites' own
release (dsroc.histogram.release.draw_release) and the analyst's result (simulations.stress.calibration)."""

import numpy as np
import pytest
import statsmodels.api as sm

from simulations.stress.calibration import SETTINGS, calibration_rows, coverage_summary, pooled_citl, site_of


def test_sites_get_blocks_of_their_shares_and_the_pooled_citl_is_the_offset_glm():
    site = site_of(1_000, (0.4, 0.25, 0.15, 0.12, 0.08))
    assert np.bincount(site).tolist() == [400, 250, 150, 120, 80]
    assert np.all(np.diff(site) >= 0)
    rng = np.random.default_rng(1)
    lp = rng.normal(-1, 1, 500)
    y = (rng.random(500) < 1 / (1 + np.exp(-(lp + 0.3)))).astype(float)
    # independent: the logistic regression of y on a constant with lp as offset, by statsmodels' Logit
    assert pooled_citl(y, lp) == pytest.approx(sm.Logit(y, np.ones(500), offset=lp).fit(disp=0).params[0], abs=1e-7)


def test_at_five_unequal_sites_the_citl_interval_covers_the_pooled_citl():
    """Prevalence 0.1, 3 000 patients over sites of 40/25/15/12/8 %, epsilon 1: an interval with the counts' noise only
    covered the pooled CITL in 0.82 of 100 replications (its estimate's spread 1.6 x its SE)."""
    summary = coverage_summary(calibration_rows(SETTINGS["5 unequal sites"], range(100), seed=35, noise_draws=10))
    citl = summary.set_index("estimand").loc["citl"]
    assert citl["available"] == 1.0
    assert citl["coverage"] >= 0.93
    assert citl["spread_over_se"] <= 1.1


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SETTINGS))
def test_citl_and_slope_intervals_cover_the_pooled_fits(name):
    """300 replications per setting (about two minutes each). The interval includes the sampling variance, which the
    pooled value shares with the estimate, so it covers the pooled CITL more often than 0.95; its SE is not
    overstated (the estimate's spread about the pooled value is at least 0.75 of it)."""
    summary = coverage_summary(calibration_rows(SETTINGS[name], range(300), seed=35)).set_index("estimand")
    citl = summary.loc["citl"]
    assert citl["coverage"] >= 0.93
    assert 0.75 <= citl["spread_over_se"] <= 1.1
    assert abs(citl["bias"]) <= 0.5 * citl["mean_se"]
    assert summary.loc["slope", "coverage"] >= 0.93


def test_at_3_x_150_patients_the_slope_is_estimated_where_a_bins_noisy_mean_reaches_the_grids_end():
    """Replication 1 of 3 x 150 patients at prevalence 0.1, epsilon 1: the sums' noise clips the mean score of a bin
    at the grid's end to 0 or 1; the slope is still reported (from the other bins) and its interval holds the pooled
    slope (statsmodels on the patients)."""
    rows = calibration_rows(SETTINGS["3 x 150 at prevalence 0.1"], [1], seed=35, noise_draws=10)
    slope = rows.set_index("estimand").loc["slope"]
    assert slope["failure"] == ""
    assert slope["lower"] <= slope["pooled"] <= slope["upper"]


def test_net_benefit_and_calibration_at_the_thresholds_cover_the_pooled_values_on_one_release():
    """Issue 35, item 3: 3 000 patients at prevalence 0.2 over 5 sites, epsilon 1, thresholds 0.1, 0.2, 0.3 on the
    quantile grid (the study's release runs the analyst's second_stage_grid with them): every replication's grid has
    them as edges, and the net benefit there (brute force on the replication's patients) and the CITL, slope and O/E
    are each covered in at least 0.93 of 100 replications."""
    from simulations.stress.cells import StressCell
    from simulations.stress.study import generate_data, quantile_release

    setting = SETTINGS["thresholds 0.1/0.2/0.3"]
    data = generate_data(setting.design, setting.n, range(5), 35)
    release = quantile_release(data, StressCell(setting.design, setting.n, 5, 1.0), 35,
                               site=site_of(setting.n, setting.shares), thresholds=setting.thresholds)
    assert all(set(setting.thresholds) <= set(e.tolist()) for e in release.edges)
    summary = coverage_summary(calibration_rows(setting, range(100), seed=35, noise_draws=10)).set_index("estimand")
    names = ["citl", "slope", "oe"] + [f"net benefit at {t:g}" for t in setting.thresholds]
    assert list(summary.index) == names
    assert (summary["available"] == 1.0).all()
    assert (summary["coverage"] >= 0.93).all(), summary["coverage"]
    assert (summary["bias"].abs() <= 0.5 * summary["mean_se"]).all()
