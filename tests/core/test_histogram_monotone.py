"""The monotone (PCHIP) AUC of binned counts against scipy's PchipInterpolator and the unbinned AUC."""

import numpy as np
import pytest
from scipy.interpolate import PchipInterpolator
from scipy.stats import mannwhitneyu

from dsroc.histogram.monotone import monotone_auc, roc_points


def _scipy_auc(c0, c1):
    """The same curve built point by point with scipy: each bin without negatives is a vertical jump of the curve,
    its area a rectangle to the right of it; the points without the jumps are interpolated."""
    f = np.concatenate([[0.0], np.cumsum(c0[::-1])]) / c0.sum()
    t = np.concatenate([[0.0], np.cumsum(c1[::-1])]) / c1.sum()
    xs, ys, lift, rectangles = [0.0], [0.0], 0.0, 0.0
    for i in range(1, f.size):
        if f[i] == f[i - 1]:
            lift += t[i] - t[i - 1]
            rectangles += (t[i] - t[i - 1]) * (1.0 - f[i])
        else:
            xs.append(f[i])
            ys.append(t[i] - lift)
    if len(xs) == 1:
        return rectangles
    return float(PchipInterpolator(xs, ys).integrate(0.0, 1.0)) + rectangles


def test_matches_scipy_pchip_on_random_counts_with_empty_bins():
    rng = np.random.default_rng(7)
    for bins in (2, 3, 4, 7, 12):
        c0 = rng.integers(0, 40, size=(300, bins)).astype(float)
        c1 = rng.integers(0, 40, size=(300, bins)).astype(float)
        c0[rng.random(c0.shape) < 0.3] = 0.0  # vertical runs of the curve
        c1[rng.random(c1.shape) < 0.3] = 0.0  # horizontal runs
        c0[:, 0] += 1.0
        c1[:, -1] += 1.0
        got = monotone_auc(c0, c1)
        want = np.array([_scipy_auc(a, b) for a, b in zip(c0, c1)])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_close_to_the_unbinned_auc_on_a_smooth_design_and_better_than_the_trapezoid():
    rng = np.random.default_rng(3)
    neg, pos = rng.normal(0.0, 1.0, 20_000), rng.normal(1.0, 1.0, 8_000)
    exact = mannwhitneyu(pos, neg).statistic / (pos.size * neg.size)
    edges = np.quantile(np.concatenate([neg, pos]), np.linspace(0, 1, 9))
    edges[0], edges[-1] = -np.inf, np.inf
    c0, c1 = np.histogram(neg, edges)[0].astype(float), np.histogram(pos, edges)[0].astype(float)
    fpr, tpr = roc_points(c0, c1)
    trapezoid = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
    assert abs(monotone_auc(c0, c1) - exact) < 0.002
    assert abs(monotone_auc(c0, c1) - exact) < abs(trapezoid - exact) / 4


def test_an_empty_class_gives_nan_and_shapes_are_kept():
    assert np.isnan(monotone_auc([3.0, 4.0], [0.0, 0.0]))
    out = monotone_auc(np.ones((2, 3, 5)), np.ones((2, 3, 5)))
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out, 0.5, atol=1e-12)  # identical classes: the diagonal


@pytest.mark.parametrize("c0, c1, want", [([0.0, 5.0], [5.0, 0.0], 0.0), ([5.0, 0.0], [0.0, 5.0], 1.0)])
def test_perfectly_separated_classes(c0, c1, want):
    assert monotone_auc(c0, c1) == pytest.approx(want, abs=1e-12)


def _skewed_release(rng, n=40_000, bins=10, sigma=3.0, sums_sigma=9.0):
    """Skewed scores (a type-I generalised logistic latent score, the negatives' shifted by 1.2 for the positives),
    a grid at the quantiles of all scores, per-class noisy counts and noisy sums of within-bin offsets."""
    y = (rng.random(n) < 0.3).astype(int)
    x = -np.log(rng.random(n) ** -4.0 - 1.0) + 1.2 * y
    s = 1.0 / (1.0 + np.exp(-x))
    edges = np.quantile(s, np.linspace(0.0, 1.0, bins + 1))
    edges[0], edges[-1] = 0.0, 1.0
    b = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, bins - 1)
    u = (s - edges[b]) / np.diff(edges)[b]
    out = []
    for c in (0, 1):
        out.append(np.bincount(b[y == c], minlength=bins) + sigma * rng.standard_normal(bins))
    for c in (0, 1):
        out.append(np.bincount(b[y == c], weights=u[y == c], minlength=bins) + sums_sigma * rng.standard_normal(bins))
    return s, y, edges, out


def test_the_rule_reports_the_monotone_curve_where_it_agrees_and_it_beats_the_resolved_auc_on_skewed_scores():
    """Skewed scores with the noise of a default release (counts' SD 4.4, sums' 31 bin widths, as 5 sites at
    epsilon 1): over a few data sets the monotone curve is closer to the unbinned AUC than the resolved AUC, the
    rule reports it where the ROC-GLM is not used and the two agree (and says so), and every interval covers the
    unbinned AUC; asked for, the monotone AUC is reported whatever the ROC-GLM does."""
    from dsroc.histogram.validation import histogram_validation

    rng = np.random.default_rng(11)
    errors, used = {"monotone": [], "resolved": []}, []
    for _ in range(6):
        s, y, edges, (h0, h1, t0, t1) = _skewed_release(rng, sigma=4.4, sums_sigma=31.0)
        truth = mannwhitneyu(s[y == 1], s[y == 0]).statistic / ((y == 1).sum() * (y == 0).sum())
        v = histogram_validation(h0, h1, edges, sigma=4.4, sums0=t0, sums1=t1, sums_sigma=31.0)
        used.append(v.estimator)
        if v.estimator == "monotone":
            assert v.notes[0].startswith("AUC: the monotone (PCHIP) ROC curve") and "agrees with the resolved AUC" in v.notes[0]
            assert v.auc == pytest.approx(v.auc_monotone)
        assert v.auc_ci[0] <= truth <= v.auc_ci[1]
        errors["monotone"].append(abs(v.auc_monotone - truth))
        errors["resolved"].append(abs(v.auc_resolved - truth))
    assert "monotone" in used
    assert np.mean(errors["monotone"]) < np.mean(errors["resolved"])
    forced = histogram_validation(h0, h1, edges, sigma=4.4, sums0=t0, sums1=t1, sums_sigma=31.0, estimator="monotone")
    assert forced.estimator == "monotone" and forced.auc == pytest.approx(v.auc_monotone)
    assert forced.auc_ci[0] <= truth <= forced.auc_ci[1]
