"""The calibration hierarchy from released cells, against statsmodels on the pooled data."""

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.special import expit, logit
from statsmodels.stats.proportion import proportion_confint

import dsroc

TRUE_A, TRUE_B = 0.3, 0.7  # a miscalibrated model: intercept 0.3, slope 0.7


def sites(seed=3, n_sites=5, n=2000):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sites):
        p = expit(rng.normal(-0.5, 1.3, n))
        y = rng.binomial(1, expit(TRUE_A + TRUE_B * logit(p)))
        out.append((p, y))
    return out


def hierarchy(data, n_bins=20, q=5):
    edges = dsroc.calibration_edges(n_bins)
    curve = dsroc.aggregate_calibration([dsroc.calibration_parts(p, y, edges, privacy_level=q) for p, y in data])
    return curve, dsroc.calibration_hierarchy(curve)


def released_cells(data, curve):
    """(events, patients, mean prediction) of every released cell, computed from the raw data."""
    k, m, r = [], [], []
    for (p, y), site in zip(data, curve.per_site.values()):
        idx = np.clip(np.searchsorted(curve.edges, p, side="right") - 1, 0, curve.edges.size - 2)
        for b in site.bins:
            sel = idx == b
            k.append(y[sel].sum()), m.append(sel.sum()), r.append(p[sel].mean())
    return np.array(k, float), np.array(m, float), np.array(r)


def test_matches_statsmodels_grouped_logistic_on_the_same_cells():
    data = sites()
    curve, h = hierarchy(data)
    k, m, r = released_cells(data, curve)
    assert h.cells == k.size and h.n == m.sum() and h.observed == k.sum()
    endog = np.column_stack([k, m - k])
    weak = sm.GLM(endog, sm.add_constant(logit(r)), family=sm.families.Binomial()).fit(tol=1e-12)
    np.testing.assert_allclose([h.recalibration.intercept, h.slope.value], weak.params, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(h.recalibration.cov, weak.cov_params(), rtol=1e-6)
    lo, hi = weak.conf_int()[1]
    assert (h.slope.lower, h.slope.upper) == pytest.approx((lo, hi), rel=1e-6)
    citl = sm.GLM(endog, np.ones((k.size, 1)), family=sm.families.Binomial(), offset=logit(r)).fit(tol=1e-12)
    assert h.intercept.value == pytest.approx(citl.params[0], abs=1e-9)
    assert h.intercept.variance == pytest.approx(citl.cov_params()[0, 0], rel=1e-6)
    assert h.oe.value == pytest.approx(k.sum() / np.sum(m * r), rel=1e-12)
    ok = curve.count > 0
    wl, wu = proportion_confint(np.rint(curve.observed[ok] * curve.count[ok]), curve.count[ok], alpha=0.05,
                                method="wilson")
    np.testing.assert_allclose(h.curve_lower[ok], wl, rtol=1e-9)
    np.testing.assert_allclose(h.curve_upper[ok], wu, rtol=1e-9)


def test_close_to_the_patient_level_fit_on_pooled_data():
    data = sites()
    _, h = hierarchy(data, n_bins=20)
    p = np.concatenate([d[0] for d in data])
    y = np.concatenate([d[1] for d in data])
    weak = sm.GLM(y, sm.add_constant(logit(p)), family=sm.families.Binomial()).fit()
    citl = sm.GLM(y, np.ones((y.size, 1)), family=sm.families.Binomial(), offset=logit(p)).fit()
    # grouping by bins of width 0.05 moves the estimates by far less than their standard errors
    assert abs(h.slope.value - weak.params[1]) < 0.5 * weak.bse[1]
    assert abs(h.recalibration.intercept - weak.params[0]) < 0.5 * weak.bse[0]
    assert abs(h.intercept.value - citl.params[0]) < 0.5 * citl.bse[0]
    assert h.oe.value == pytest.approx(y.sum() / p.sum(), abs=0.01)  # a few top cells below q = 5 are withheld
    assert h.oe.lower < h.oe.value < h.oe.upper
    assert h.slope.lower < weak.params[1] < h.slope.upper and h.slope.upper < 1  # the slope 0.7 is detected


def test_a_perfectly_calibrated_model_has_intercept_0_and_slope_1():
    rng = np.random.default_rng(8)
    p = expit(rng.normal(0, 1.5, 40000))
    y = rng.binomial(1, p)
    _, h = hierarchy([(p, y)], n_bins=50)
    assert h.intercept.lower < 0 < h.intercept.upper
    assert h.slope.lower < 1 < h.slope.upper
    assert h.oe.lower < 1 < h.oe.upper


def test_refuses_curves_without_both_classes():
    p = np.linspace(0.1, 0.9, 50)
    with pytest.raises(ValueError, match="no events"):
        hierarchy([(p, np.zeros(50, int))], n_bins=5)
