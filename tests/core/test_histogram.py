"""Histogram protocol maths: with sigma = 0 every estimate equals brute force on the binned data; consistency properties."""

import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit, logit
from scipy.stats import norm

from dsroc import delong_variance, empirical_auc, histogram_validation
from dsroc.histogram.grid import (
    bin_index,
    bin_representatives,
    bin_scores,
    consistent_counts,
    histogram_confusion,
    histogram_edges,
    histogram_pr,
    histogram_roc,
)
from dsroc.histogram.auc import histogram_auc, histogram_delong_variance, histogram_rocglm
from dsroc.histogram.calibration import histogram_brier, histogram_calibration_curve, histogram_recalibration


def _sample(seed, n=3000):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(int)
    s = expit(np.where(y == 1, -0.35, -1.35) + rng.standard_normal(n))
    return s, y


GRIDS = [histogram_edges(10), histogram_edges(7, lo=0.02, hi=0.9, spacing="logit"), histogram_edges(4, lo=0.1, hi=0.6)]


@pytest.mark.parametrize("edges", GRIDS)
def test_exact_counts_equal_brute_force_on_binned_scores(edges):
    s, y = _sample(1)
    h0, h1 = bin_scores(s, y, edges)
    b = bin_index(s, edges)
    # Binning by brute force: the bin whose [lower, upper) holds the clipped score, last bin closed.
    clipped = np.clip(s, edges[0], edges[-1])
    brute = np.array([np.flatnonzero((edges[:-1] <= v) & ((v < edges[1:]) | (np.arange(edges.size - 1) == edges.size - 2)))[0] for v in clipped])
    assert np.array_equal(b, brute)
    assert h0.sum() + h1.sum() == s.size
    # AUC and DeLong of the histograms = Mann-Whitney and DeLong of the bin indices.
    assert histogram_auc(h0, h1) == pytest.approx(empirical_auc(b, y), abs=1e-12)
    assert histogram_delong_variance(h0, h1) == pytest.approx(delong_variance(b, y), rel=1e-10)
    # ROC and PR points at the edges: predicted positive when the score is at least the edge.
    fpr, tpr = histogram_roc(h0, h1)
    for k, e in enumerate(edges):
        pred = clipped >= e if k < edges.size - 1 else np.zeros(s.size, bool)
        assert fpr[k] == pytest.approx(pred[y == 0].mean())
        assert tpr[k] == pytest.approx(pred[y == 1].mean())
    recall, precision = histogram_pr(h0, h1)
    k = edges.size // 2
    pred = clipped >= edges[k]
    assert recall[k] == pytest.approx(pred[y == 1].mean())
    assert precision[k] == pytest.approx(y[pred].mean())
    cells = histogram_confusion(h0, h1, k)
    assert (cells["tp"], cells["fp"], cells["fn"], cells["tn"]) == (
        np.sum(pred & (y == 1)), np.sum(pred & (y == 0)), np.sum(~pred & (y == 1)), np.sum(~pred & (y == 0)))


def test_brier_calibration_and_recalibration_equal_brute_force():
    s, y = _sample(2)
    edges = histogram_edges(10)
    h0, h1 = bin_scores(s, y, edges)
    r = bin_representatives(edges)
    rb = r[bin_index(s, edges)]
    brier = histogram_brier(h0, h1, r, sigma=0.0)
    assert brier.value == pytest.approx(np.mean((y - rb) ** 2), rel=1e-12)
    assert brier.variance == pytest.approx(np.var((y - rb) ** 2, ddof=1) / y.size, rel=1e-10)
    curve = histogram_calibration_curve(h0, h1, r, sigma=0.0, min_count=1)
    occupied = np.flatnonzero(h0 + h1)
    for i, (a, b_) in enumerate(curve.groups):
        inside = (bin_index(s, edges) >= a) & (bin_index(s, edges) <= b_)
        assert curve.observed[i] == pytest.approx(y[inside].mean())
        assert curve.predicted[i] == pytest.approx(rb[inside].mean())
    assert sum(b_ - a + 1 for a, b_ in curve.groups) == edges.size - 1 and len(curve.groups) <= occupied.size
    # Grouped logistic recalibration = statsmodels' GLM on the unbinned (logit of representative, y).
    recal = histogram_recalibration(h0, h1, r, sigma=0.0)
    glm = sm.GLM(y, sm.add_constant(logit(rb)), family=sm.families.Binomial()).fit()
    assert [recal.intercept, recal.slope] == pytest.approx(glm.params, rel=1e-7)
    assert recal.cov == pytest.approx(glm.cov_params(), rel=1e-6)


def test_validation_with_sigma_zero_reports_the_brute_force_values():
    s, y = _sample(3)
    edges = histogram_edges(12)
    h0, h1 = bin_scores(s, y, edges)
    b = bin_index(s, edges)
    rb = bin_representatives(edges)[b]
    res = histogram_validation(h0, h1, edges, sigma=0.0, sum_sq=float(((y - s) ** 2).sum()), sum_p=float(s.sum()),
                               sum_y=float(y.sum()), scalar_sigma=0.0, estimator="empirical")
    assert (res.n0, res.n1) == (np.sum(y == 0), np.sum(y == 1))
    assert res.auc == pytest.approx(empirical_auc(b, y), abs=1e-12)
    assert res.auc_variance == pytest.approx(delong_variance(b, y), rel=1e-10)
    assert res.brier.value == pytest.approx(np.mean((y - rb) ** 2))
    assert res.brier_scalar.value == pytest.approx(np.mean((y - s) ** 2))
    assert res.oe.value == pytest.approx(y.sum() / s.sum())
    cells = res.confusion(5)
    pred = s >= edges[5]
    assert cells["sensitivity"] == pytest.approx(pred[y == 1].mean())
    assert cells["ppv"] == pytest.approx(y[pred].mean())


def test_rocglm_through_the_edges_equals_a_probit_glm_on_the_roc_points():
    s, y = _sample(4, n=5000)
    edges = histogram_edges(9)
    h0, h1 = bin_scores(s, y, edges)
    fit = histogram_rocglm(h0, h1)
    # Independent: statsmodels' binomial probit GLM of TPR(e_b) on probit(FPR(e_b)), n1 trials each.
    clipped, keep = np.clip(s, 0, 1), []
    fpr = np.array([(clipped[y == 0] >= e).mean() for e in edges[1:-1]])
    tpr = np.array([(clipped[y == 1] >= e).mean() for e in edges[1:-1]])
    keep = (fpr > 0) & (fpr < 1)
    n1 = int(y.sum())
    glm = sm.GLM(tpr[keep], sm.add_constant(norm.ppf(fpr[keep])), family=sm.families.Binomial(sm.families.links.Probit()),
                 var_weights=np.full(keep.sum(), n1)).fit(tol=1e-12)
    assert fit.params == pytest.approx(glm.params, rel=1e-6)
    assert fit.auc == pytest.approx(norm.cdf(glm.params[0] / np.sqrt(1 + glm.params[1] ** 2)), rel=1e-6)
    # The binormal truth of this design has AUC Phi(1/sqrt 2); the fit through the edges finds it.
    assert fit.auc == pytest.approx(norm.cdf(1 / np.sqrt(2)), abs=0.02)


count_rows = st.lists(st.integers(-30, 60), min_size=2, max_size=25)


@settings(max_examples=60, deadline=None)
@given(count_rows)
def test_consistent_counts_are_nonnegative_monotone_and_idempotent(row):
    c = consistent_counts(np.array(row, dtype=float))
    assert c.min() >= -1e-9
    assert np.all(np.diff(np.cumsum(c)) >= -1e-9)
    assert consistent_counts(c) == pytest.approx(c, abs=1e-9)
    # The cumulative sums are the closest monotone, non-negative ones: no worse than the naive clip.
    naive = np.maximum.accumulate(np.maximum(np.cumsum(row), 0))
    assert np.sum((np.cumsum(c) - np.cumsum(row)) ** 2) <= np.sum((naive - np.cumsum(row)) ** 2) + 1e-6


@given(st.lists(st.integers(0, 50), min_size=2, max_size=25))
def test_consistent_counts_leave_consistent_counts_unchanged(row):
    assert np.array_equal(consistent_counts(np.array(row)), np.array(row, dtype=float))


def test_batched_rows_equal_one_at_a_time():
    rng = np.random.default_rng(5)
    rows = rng.integers(-5, 40, size=(6, 8)).astype(float)
    assert np.array_equal(consistent_counts(rows), np.stack([consistent_counts(r) for r in rows]))
    c0, c1 = consistent_counts(rows[:3]), consistent_counts(rows[3:])
    assert histogram_auc(c0, c1) == pytest.approx([histogram_auc(a, b) for a, b in zip(c0, c1)])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: histogram_edges(1), "n_bins"),
        (lambda: histogram_edges(5, spacing="log"), "spacing"),
        (lambda: histogram_edges(5, lo=0.0, spacing="logit"), "logit spacing"),
        (lambda: histogram_validation([1, 2], [3, 4, 5], [0, 0.5, 1], sigma=1), "h1 must have one count per bin"),
        (lambda: histogram_validation([10, 20], [30, 40], [0, 0.5, 0.4], sigma=1), "strictly increasing"),
        (lambda: histogram_validation([10, 20], [30, 40], [0, 0.5, 1], sigma=-1), "sigma"),
        (lambda: histogram_validation([10, 20], [30, 40], [0, 0.5, 1], sigma=1, estimator="mle"), "estimator"),
        (lambda: histogram_validation([10, 20], [30, 40], [0, 0.5, 1], sigma=1, sum_sq=3.0), "scalar_sigma"),
        (lambda: histogram_validation([10, np.nan], [30, 40], [0, 0.5, 1], sigma=1), "finite"),
    ],
)
def test_bad_input_is_refused_with_the_field_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_valid_release_never_raises_and_says_what_is_missing():
    """Noise that leaves one class empty, no patient at all, or everyone in one bin: an answer, not an error."""
    edges = histogram_edges(4)
    # Negatives swamped by the noise: no AUC or ROC; the Brier score of the positives alone by brute force.
    v = histogram_validation([-10, 1, -3, 0], [3, 5, 1, 2], edges, sigma=3.0)
    assert np.isnan(v.auc) and v.estimator == "none" and np.isnan(v.fpr).all()
    assert "n0 = 0.0" in v.unavailable["auc"] and "roc" in v.unavailable
    r = bin_representatives(edges)
    assert v.brier.value == pytest.approx(np.sum(np.array([3, 5, 1, 2]) * (1 - r) ** 2) / 11, abs=1e-12)
    assert any(n.startswith("no AUC: too few patients") for n in v.notes)
    # Nobody left: nothing but the counts.
    v = histogram_validation([-2, -1, 0, -4], [0, -3, -1, 0], edges, sigma=3.0)
    assert set(v.unavailable) == {"auc", "roc", "brier", "calibration", "oe", "citl", "recalibration"}
    assert v.brier is None and v.calibration is None and v.oe is None and v.recalibration is None
    # One positive: a ROC curve (its rates have denominators) but no AUC with a variance.
    v = histogram_validation([10, 20, 30, 5], [0, 0, 1, 0], edges, sigma=0.0)
    assert np.isnan(v.auc) and "auc" in v.unavailable and "roc" not in v.unavailable
    assert v.tpr.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_point_auc_is_the_validations_auc_and_survives_tiny_classes():
    from dsroc.histogram.estimates import histogram_point_auc

    s, y = _sample(6, n=4000)
    edges = histogram_edges(8)
    h0, h1 = bin_scores(s, y, edges)
    rng = np.random.default_rng(0)
    n0 = consistent_counts(h0 + 8 * rng.standard_normal((5, 8)))
    n1 = consistent_counts(h1 + 8 * rng.standard_normal((5, 8)))
    point = histogram_point_auc(n0, n1, sigma=8.0)
    for i in range(5):
        assert point[i] == pytest.approx(histogram_validation(n0[i], n1[i], edges, sigma=8.0, noise_draws=10).auc, abs=1e-12)
    # A class with a single patient: no ROC-GLM, the binned empirical AUC (here exact: 1 positive in the top bin).
    one = histogram_point_auc(np.array([[5.0, 5.0, 0.0]]), np.array([[0.0, 0.0, 1.0]]), sigma=1.0)
    assert one[0] == pytest.approx(1.0)


def test_rocglm_is_kept_where_coarse_bins_bias_the_empirical_auc():
    """Five bins at n = 20 000 and little noise: the binned AUC is biased low by far more than its SD, and
    the ROC-GLM through the edges (close to the pooled AUC) must still be reported."""
    s, y = _sample(7, n=20000)
    edges = histogram_edges(5)
    h0, h1 = bin_scores(s, y, edges)
    res = histogram_validation(h0, h1, edges, sigma=1.0, noise_draws=10)
    truth = empirical_auc(s, y)
    assert truth - res.auc_empirical > 5 * np.sqrt(res.auc_empirical_variance)  # the binning bias
    assert res.estimator == "rocglm" and abs(res.auc - truth) < 0.004


def test_the_empirical_auc_interval_holds_what_the_binning_can_hide():
    """The same coarse bins, empirical AUC: its DeLong-plus-noise interval misses the unbinned AUC, the reported
    one is widened by half the share of within-bin pairs (counted by brute force over all pairs) and covers it."""
    s, y = _sample(7, n=20000)
    edges = histogram_edges(5)
    h0, h1 = bin_scores(s, y, edges)
    res = histogram_validation(h0, h1, edges, sigma=1.0, estimator="empirical")
    truth = empirical_auc(s, y)
    b = bin_index(s, edges)
    same = np.mean(b[y == 0][:, None] == b[y == 1][None, :])
    z = norm.ppf(0.975)
    half = z * np.sqrt(res.auc_empirical_variance)
    assert truth > res.auc_empirical + 2 * half  # DeLong + noise alone would miss it (the logit CI is close to this)
    lo, hi = res.auc_ci
    assert lo < truth < hi
    assert hi - lo == pytest.approx(same + 2 * half, rel=0.05)  # logit interval ~ Wald at this n, plus the band
    assert any("widened by" in n for n in res.notes)
