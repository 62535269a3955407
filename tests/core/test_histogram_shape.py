"""The shape AUC (dsroc.histogram.shape) against numpy, brute force, the unbinned AUC and a Monte Carlo of the noise."""

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import mannwhitneyu

from dsroc.histogram.estimates import histogram_auc_estimates
from dsroc.histogram.grid import balanced_quantile_edges, bin_index, histogram_edges
from dsroc.histogram.monotone import monotone_auc
from dsroc.histogram.resolved import fine_base
from dsroc.histogram.shape import share_slopes, shape_auc, shape_classes, shape_concordance
from dsroc.histogram.validation import histogram_validation


def test_share_slopes_are_numpys_gradient():
    rng = np.random.default_rng(1)
    for bins in (2, 3, 5, 9):
        z = np.cumsum(rng.uniform(0.1, 2.0, size=(20, bins)), axis=-1)
        y = rng.normal(size=(20, bins))
        want = np.stack([np.gradient(y[i], z[i], edge_order=1) for i in range(20)])
        np.testing.assert_allclose(share_slopes(z, y), want, rtol=1e-12, atol=1e-12)
    assert share_slopes([0.3], [1.2]).tolist() == [0.0]


def _shape(rng, bins=5):
    edges = np.sort(np.concatenate([[0.01, 0.99], rng.uniform(0.05, 0.95, bins - 1)]))
    fine = histogram_edges(30, spacing="logit", lo=0.005, hi=0.995)
    return edges, fine_base(edges, fine, rng.uniform(1.0, 50.0, size=30))


def test_the_classes_mix_back_to_the_bins_shape_with_their_share_and_a_log_linear_ratio():
    """``share f1 + (1 - share) f0`` is the bin's shape of all scores, and ``log f1 / f0`` is linear in the
    covariate with the slope of the logit shares across the bins."""
    rng = np.random.default_rng(2)
    edges, (z, base) = _shape(rng)
    c0, c1 = rng.uniform(50, 500, 5), rng.uniform(5, 200, 5)
    f0, f1 = shape_classes(c0, c1, z, base)
    share = (c1 + 0.5) / (c0 + c1 + 1.0)
    w = base / base.sum(-1, keepdims=True)
    np.testing.assert_allclose(share[:, None] * f1 + (1 - share[:, None]) * f0, w, rtol=1e-9, atol=1e-15)
    zbar = (w * z).sum(-1)
    slope = np.gradient(np.log(share / (1 - share)), zbar, edge_order=1)
    for b in range(5):
        fitted = np.polyfit(z[b], np.log(f1[b] / f0[b]), 1)[0]
        assert fitted == pytest.approx(slope[b], rel=1e-6, abs=1e-9)


def test_concordance_is_the_pairs_in_order_by_brute_force():
    rng = np.random.default_rng(3)
    edges, (z, base) = _shape(rng)
    c0, c1 = rng.uniform(50, 500, 5), rng.uniform(5, 200, 5)
    f0, f1 = shape_classes(c0, c1, z, base)
    conc = shape_concordance(c0, c1, z, base)
    for b in range(5):
        pairs = np.outer(f0[b], f1[b])  # [i, j]: a negative at sub-point i, a positive at j
        i, j = np.indices(pairs.shape)
        assert conc[b] == pytest.approx(pairs[i < j].sum() + 0.5 * pairs[i == j].sum(), abs=1e-12)
    # the AUC orders the pairs of different bins by their bins and those within a bin by the concordance
    above = np.array([c1[b + 1:].sum() for b in range(5)])
    assert shape_auc(c0, c1, z, base) == pytest.approx((c0 * (above + conc * c1)).sum() / (c0.sum() * c1.sum()))


def _bimodal(rng, n):
    """The stress study's bimodal design at prevalence 0.1 and AUC 0.76 (simulations.stress.designs): the negatives'
    latent score a mixture of N(-1.5, 0.5^2) and N(1.5, 0.5^2), the positives' shifted, the score its logistic
    recalibration."""
    from simulations.stress.designs import Design, sample_design

    s, y, _ = sample_design(Design("bimodal", 0.1, 0.76), n, rng)
    return s, y


def _exact_release(s, y, n_bins=7):
    """A noise-free quantile release: the per-class counts on 50 logit bins, 7 bins at the class-balanced quantiles."""
    fine = histogram_edges(50, spacing="logit", lo=0.005, hi=0.995)
    first = [np.bincount(bin_index(s[y == c], fine), minlength=50).astype(float) for c in (0, 1)]
    edges = np.concatenate([[0.0], balanced_quantile_edges(*first, fine, n_bins), [1.0]])
    b = bin_index(s, edges)
    counts = [np.bincount(b[y == c], minlength=edges.size - 1).astype(float) for c in (0, 1)]
    offsets = (s - edges[b]) / np.diff(edges)[b]
    sums = [np.bincount(b[y == c], weights=offsets[y == c], minlength=edges.size - 1) for c in (0, 1)]
    return fine, first, edges, counts, sums


def test_noise_free_it_is_close_to_the_unbinned_auc_where_the_pchip_curve_cuts_across_two_modes():
    rng = np.random.default_rng(4)
    s, y = _bimodal(rng, 200_000)
    exact = mannwhitneyu(s[y == 1], s[y == 0]).statistic / ((y == 1).sum() * (y == 0).sum())
    fine, first, edges, (c0, c1), _ = _exact_release(s, y)
    got = shape_auc(c0, c1, *fine_base(edges, fine, first[0] + first[1]))
    pchip = monotone_auc(c0, c1)
    assert abs(got - exact) < 0.001
    assert abs(got - exact) < abs(pchip - exact) / 5  # the PCHIP curve errs by -0.0027 here


def test_the_rule_reports_it_with_the_first_stage_and_its_noise_variance_is_the_monte_carlos():
    """With the first stage passed on the rule's nonparametric curve is the shape AUC (the note says so); its noise
    variance (the reported variance less DeLong's on its placements) is within a fifth of a Monte Carlo's over 400
    draws of the counts' noise; without the first stage asking for it is an error that names what is missing."""
    rng = np.random.default_rng(5)
    s, y = _bimodal(rng, 20_000)
    fine, first, edges, counts, sums = _exact_release(s, y)
    grid = first[0] + first[1]
    sigma, k = 4.4, 31.0
    noisy = [c + sigma * rng.standard_normal(c.size) for c in counts]
    noisy_sums = [t + k * rng.standard_normal(t.size) for t in sums]
    v = histogram_validation(*noisy, edges, sigma=sigma, sums0=noisy_sums[0], sums1=noisy_sums[1], sums_sigma=k,
                             grid_edges=fine, grid_counts=grid, grid_sigma=0.0, estimator="shape")
    assert v.estimator == "shape" and v.auc == pytest.approx(v.auc_shape)
    assert v.notes[0].startswith("AUC: the shape AUC")
    est = histogram_auc_estimates(np.array([counts[0]]), np.array([counts[1]]), sigma=sigma, sums0=[sums[0]],
                                  sums1=[sums[1]], sums_sigma=k, edges=edges, grid=(fine, [grid], 0.0),
                                  estimator="shape", noise_draws=400)
    z, base = fine_base(edges, fine, grid)
    from dsroc.histogram.auc import histogram_delong_variance
    from dsroc.histogram.grid import consistent_counts

    conc = shape_concordance(counts[0], counts[1], z, base)
    noise_var = est.variance_shape[0] - histogram_delong_variance(counts[0][None], counts[1][None], conc[None])[0]
    draws = [shape_auc(consistent_counts(counts[0] + sigma * rng.standard_normal(7)),
                       consistent_counts(counts[1] + sigma * rng.standard_normal(7)), z, base) for _ in range(400)]
    assert noise_var == pytest.approx(np.var(draws, ddof=1), rel=0.2)
    with pytest.raises(ValueError, match="estimator 'shape' needs the first stage"):
        histogram_validation(*noisy, edges, sigma=sigma, sums0=noisy_sums[0], sums1=noisy_sums[1], sums_sigma=k,
                             estimator="shape")
