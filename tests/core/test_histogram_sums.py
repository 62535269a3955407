"""Per-bin score sums: within-bin means, Brier, O/E, calibration and the resolved AUC against brute force on
the unbinned scores (sigma = 0), and the linear-density identity behind the resolved within-bin pairs."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.special import expit, logit

from dsroc import empirical_auc, histogram_validation
from dsroc.histogram import bin_index, bin_scores, histogram_edges
from dsroc.histogram.calibration import histogram_recalibration
from dsroc.histogram.sums import bin_means, resolved_auc, within_offsets


def _sample(seed, n=4000, prevalence=0.2):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < prevalence).astype(int)
    s = expit(np.where(y == 1, -0.5, -1.7) + rng.standard_normal(n))
    return s, y


def _offset_sums(s, y, edges):
    b = bin_index(s, edges)
    u = (np.clip(s, edges[0], edges[-1]) - edges[b]) / np.diff(edges)[b]
    m = edges.size - 1
    return np.bincount(b[y == 0], u[y == 0], m), np.bincount(b[y == 1], u[y == 1], m), b


@pytest.mark.parametrize("edges", [histogram_edges(10), histogram_edges(8, lo=0.005, hi=0.995, spacing="logit")])
def test_with_exact_sums_brier_oe_and_calibration_use_the_within_bin_means(edges):
    s, y = _sample(1)
    s = np.clip(s, edges[0], edges[-1])  # the grid's range (a site clips the same way)
    h0, h1 = bin_scores(s, y, edges)
    t0, t1, b = _offset_sums(s, y, edges)
    v = histogram_validation(h0, h1, edges, sigma=0.0, sums0=t0, sums1=t1, sums_sigma=0.0)
    # O/E = sum y / sum p exactly; each merged bin's predicted value is the mean score of its patients.
    assert v.oe.value == pytest.approx(y.sum() / s.sum(), rel=1e-12)
    for i, (a, c) in enumerate(v.calibration.groups):
        inside = (b >= a) & (b <= c)
        assert v.calibration.predicted[i] == pytest.approx(s[inside].mean(), rel=1e-12)
        assert v.calibration.observed[i] == pytest.approx(y[inside].mean(), rel=1e-12)
    # Brier: class means exact; the within-bin variance is estimated, so within the binning bound of the truth
    # (it can miss by at most the bins' largest within-bin variance, w^2 / 4 per patient), and much closer
    # than the midpoints' binned Brier.
    truth = np.mean((y - s) ** 2)
    bound = np.mean(np.diff(edges)[b] ** 2) / 4
    assert abs(v.brier.value - truth) <= bound
    midpoints = histogram_validation(h0, h1, edges, sigma=0.0)
    assert abs(v.brier.value - truth) < abs(midpoints.brier.value - truth) / 3
    # The slope on the bins' mean scores: statsmodels' grouped logistic fit on (logit of the bin mean, y).
    means = np.array([s[b == k].mean() if np.any(b == k) else 0.5 for k in range(edges.size - 1)])
    glm = sm.GLM(y, sm.add_constant(logit(means[b])), family=sm.families.Binomial()).fit()
    assert [v.recalibration.intercept, v.recalibration.slope] == pytest.approx(glm.params, rel=1e-7)


def test_resolved_auc_is_exact_for_linear_within_bin_densities():
    """Within each bin, both classes' offsets have linear densities (drawn by inverting their CDFs): the
    resolved AUC equals the Mann-Whitney AUC of the unbinned scores up to sampling of the within-bin pairs."""
    rng = np.random.default_rng(3)
    edges = histogram_edges(4)
    m, n = edges.size - 1, 200_000
    slopes = {0: np.array([-1.5, -0.5, 0.5, 1.0]), 1: np.array([1.5, 1.0, -1.0, 2.0])}  # density 1 + a (x - 1/2)
    weights = {0: np.array([0.4, 0.3, 0.2, 0.1]), 1: np.array([0.1, 0.2, 0.3, 0.4])}
    scores, labels = [], []
    for label in (0, 1):
        b = rng.choice(m, n, p=weights[label])
        a, q = slopes[label][b], rng.random(n)
        # CDF x + a (x^2 - x) / 2 = q, solved for x in [0, 1]
        x = np.where(np.abs(a) < 1e-12, q, ((a / 2 - 1) + np.sqrt((1 - a / 2) ** 2 + 2 * a * q)) / a)
        scores.append(edges[b] + np.diff(edges)[b] * x)
        labels.append(np.full(n, label))
    s, y = np.concatenate(scores), np.concatenate(labels)
    h0, h1 = bin_scores(s, y, edges)
    t0, t1, _ = _offset_sums(s, y, edges)
    u0, u1 = within_offsets(h0, t0, sums_sigma=0.0), within_offsets(h1, t1, sums_sigma=0.0)
    np.testing.assert_allclose(u0, 0.5 + slopes[0] / 12, atol=5e-3)  # the mean offset of 1 + a (x - 1/2)
    assert resolved_auc(h0, h1, u0, u1) == pytest.approx(empirical_auc(s, y), abs=2e-3)
    binned = histogram_validation(h0, h1, edges, sigma=0.0).auc_empirical
    assert abs(binned - empirical_auc(s, y)) > 0.01  # the ties' one half is far off here


def test_sums_with_noise_stay_inside_their_bins_and_bad_sums_are_refused():
    edges = histogram_edges(5)
    u = within_offsets(np.array([0.0, 3.0, 50.0, 0.0, 1.0]), np.array([4.0, -9.0, 20.0, 0.0, 30.0]), sums_sigma=2.0)
    # (T + k/2) / (h + k) with k = 2, clipped into the bin: 5/2 -> 1, -8/5 -> 0, 21/52, 1/2 (empty), 31/3 -> 1
    np.testing.assert_allclose(u, [1.0, 0.0, 21 / 52, 0.5, 1.0], rtol=1e-12)
    # towards a per-bin prior in place of the middle: (T + k p) / (h + k); an empty bin gives its prior
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.05])
    u = within_offsets(np.array([0.0, 3.0, 50.0, 0.0, 1.0]), np.array([4.0, -9.0, 20.0, 0.0, 0.0]), sums_sigma=2.0,
                       prior=p)
    np.testing.assert_allclose(u, [1.0, 0.0, 20.6 / 52, 0.4, 0.1 / 3], rtol=1e-12)
    with pytest.raises(ValueError, match="sums0, sums1 and sums_sigma"):
        histogram_validation([10, 20, 5, 5, 1], [3, 4, 5, 6, 7], edges, sigma=1.0, sums0=np.ones(5))
    with pytest.raises(ValueError, match="sums1 must have one count per bin"):
        histogram_validation([10, 20, 5, 5, 1], [3, 4, 5, 6, 7], edges, sigma=1.0, sums0=np.ones(5), sums1=np.ones(4),
                             sums_sigma=1.0)


def test_the_slopes_variance_includes_the_noise_of_counts_and_sums():
    """One calibrated data set, 300 independent noisy releases of its counts and score sums: the slope's SD over
    the releases is the noise part of its reported variance (counts' noise plus the noisy within-bin means in
    the regressor), within Monte Carlo error; without the regressor's part it would fall short."""
    rng = np.random.default_rng(11)
    n = 10_000
    x = rng.normal(-1.0, 1.2, n)
    s, y = expit(x), (rng.random(n) < expit(x)).astype(int)
    edges = np.concatenate([[0.0], np.quantile(s, [0.2, 0.4, 0.6, 0.8]), [1.0]])
    h0, h1 = bin_scores(s, y, edges)
    t0, t1, _ = _offset_sums(s, y, edges)
    sigma, sums_sigma = 6.0, 18.0
    m = edges.size - 1
    slopes, noise_var, counts_only = [], [], []
    for _ in range(300):
        t = t0 + t1 + sums_sigma * np.sqrt(2.0) * rng.standard_normal(m)  # the two classes' sums, summed
        v = histogram_validation(h0 + sigma * rng.standard_normal(m), h1 + sigma * rng.standard_normal(m), edges,
                                 sigma=sigma, sums0=t0 + sums_sigma * rng.standard_normal(m), sums1=t - t0,
                                 sums_sigma=sums_sigma, noise_draws=2)
        # the regressor the validation used: logit of the bins' mean scores from the summed sums
        r = bin_means(edges, within_offsets(v.counts0 + v.counts1, t, sums_sigma=sums_sigma * np.sqrt(2.0)))
        sampling = histogram_recalibration(v.counts0, v.counts1, r, sigma=0.0).cov[1, 1]
        slopes.append(v.recalibration.slope)
        noise_var.append(v.recalibration.cov[1, 1] - sampling)
        counts_only.append(histogram_recalibration(v.counts0, v.counts1, r, sigma=sigma).cov[1, 1] - sampling)
    sd = np.std(slopes, ddof=1)
    assert sd == pytest.approx(np.sqrt(np.mean(noise_var)), rel=0.2)
    assert np.sqrt(np.mean(counts_only)) < 0.8 * sd


@pytest.mark.parametrize("end", ["lowest", "highest"])
def test_the_slope_leaves_out_a_bin_whose_noisy_mean_score_is_clipped_to_the_grids_end(end):
    """The sums' noise pushes the mean score of the bin at the grid's end to 0 or 1 (no logit): the slope is still
    estimated, by the grouped fit on the other bins (statsmodels' binomial GLM on their counts at the logit of their
    patients' mean score), and a note counts the patients left out."""
    s, y = _sample(4, n=3000)
    s = np.where(s > 0.9, 0.97, s)  # some patients in the top bin
    edges = np.array([0.0, 0.05, 0.15, 0.3, 0.5, 0.75, 1.0])
    h0, h1 = bin_scores(s, y, edges)
    t0, t1, b = _offset_sums(s, y, edges)
    last = 0 if end == "lowest" else edges.size - 2
    assert h0[last] + h1[last] > 0
    # a bin's summed offsets pushed by the noise beyond [0, count]: its mean offset is clipped to 0 or 1
    t0[last] = -3.0 if end == "lowest" else h0[last] + h1[last] + 3.0
    t1[last] = 0.0
    v = histogram_validation(h0, h1, edges, sigma=0.0, sums0=t0, sums1=t1, sums_sigma=0.0)
    assert "recalibration" not in v.unavailable
    keep = (np.arange(edges.size - 1) != last) & (h0 + h1 > 0)
    mean_score = np.bincount(b, s, edges.size - 1)[keep] / (h0 + h1)[keep]
    fit = sm.GLM(np.column_stack([h1[keep], h0[keep]]), sm.add_constant(logit(mean_score)),
                 family=sm.families.Binomial()).fit(tol=1e-12)
    assert v.recalibration.intercept == pytest.approx(fit.params[0], abs=1e-7)
    assert v.recalibration.slope == pytest.approx(fit.params[1], abs=1e-7)
    assert v.recalibration.cov[1, 1] == pytest.approx(fit.cov_params()[1, 1], rel=1e-6)
    left_out = int(h0[last] + h1[last])
    assert any(f"leaves out an estimated {left_out} patients" in note for note in v.notes)
