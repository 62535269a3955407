"""The resolved AUC (within-bin pairs ordered by the score sums) and the rule that picks the reported AUC: the
tilt concordance against Monte Carlo, the resolved AUC against the unbinned AUC (sigma = 0), its noise variance
against Monte Carlo of the noise, and the rule on designs where each estimator must be chosen."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from dsroc import empirical_auc, histogram_validation
from dsroc.histogram import bin_index, bin_scores, histogram_edges
from dsroc.histogram.auc import histogram_delong_variance
from dsroc.histogram.estimates import histogram_auc_estimates
from dsroc.histogram.resolved import concordance_auc, shape_offsets, tilt_concordance, tilt_rate
from dsroc.histogram.sums import resolved_auc, within_offsets


def _truncated_exponential(rate, q):
    """Inverse CDF of the density proportional to exp(rate t) on [0, 1]."""
    rate = np.asarray(rate, dtype=np.float64)
    safe = np.where(np.abs(rate) < 1e-12, 1.0, rate)
    return np.where(np.abs(rate) < 1e-12, q, np.log1p(q * np.expm1(safe)) / safe)


@pytest.mark.parametrize("u0, u1", [(0.5, 0.5), (0.3, 0.6), (0.02, 0.05), (0.9, 0.97), (0.2, 0.1)])
def test_tilt_concordance_matches_monte_carlo_of_truncated_exponentials(u0, u1):
    rng = np.random.default_rng(1)
    lam0, lam1 = tilt_rate(u0), tilt_rate(u1)
    x0 = _truncated_exponential(lam0, rng.random(400_000))
    x1 = _truncated_exponential(lam1, rng.random(400_000))
    assert x0.mean() == pytest.approx(u0, abs=2e-3) and x1.mean() == pytest.approx(u1, abs=2e-3)
    assert float(tilt_concordance(u0, u1)) == pytest.approx(np.mean(x0 < x1), abs=3e-3)


def _offset_sums(s, y, edges):
    b = bin_index(s, edges)
    u = (np.clip(s, edges[0], edges[-1]) - edges[b]) / np.diff(edges)[b]
    m = edges.size - 1
    return np.bincount(b[y == 0], u[y == 0], m), np.bincount(b[y == 1], u[y == 1], m)


def test_resolved_auc_equals_the_unbinned_auc_for_tilted_within_bin_scores():
    """Within each bin each class's offsets are truncated exponentials (the model): with exact counts and sums
    the resolved AUC is the Mann-Whitney AUC of the unbinned scores, where the binned one is far off."""
    rng = np.random.default_rng(3)
    edges = np.array([0.0, 0.2, 0.45, 0.7, 1.0])
    m, n = edges.size - 1, 200_000
    rates = {0: np.array([-6.0, -1.0, 0.5, -3.0]), 1: np.array([-2.0, 1.5, 3.0, 8.0])}
    weights = {0: np.array([0.4, 0.3, 0.2, 0.1]), 1: np.array([0.1, 0.2, 0.3, 0.4])}
    scores, labels = [], []
    for label in (0, 1):
        b = rng.choice(m, n, p=weights[label])
        t = _truncated_exponential(rates[label][b], rng.random(n))
        scores.append(edges[b] + np.diff(edges)[b] * t)
        labels.append(np.full(n, label))
    s, y = np.concatenate(scores), np.concatenate(labels)
    h0, h1 = bin_scores(s, y, edges)
    t0, t1 = _offset_sums(s, y, edges)
    u0, u1 = within_offsets(h0, t0, sums_sigma=0.0), within_offsets(h1, t1, sums_sigma=0.0)
    np.testing.assert_allclose(tilt_rate(u0), rates[0], atol=0.1)
    truth = empirical_auc(s, y)
    assert resolved_auc(h0, h1, u0, u1) == pytest.approx(truth, abs=1e-3)
    v = histogram_validation(h0, h1, edges, sigma=0.0, sums0=t0, sums1=t1, sums_sigma=0.0, estimator="resolved")
    assert v.estimator == "resolved" and v.auc == pytest.approx(truth, abs=1e-3)
    assert v.auc_ci[0] <= truth <= v.auc_ci[1]
    assert abs(v.auc_empirical - truth) > 0.02  # the ties' one half is far off here
    # the concordance 1/2 everywhere is the binned AUC
    assert concordance_auc(h0, h1, np.full(m, 0.5)) == pytest.approx(v.auc_empirical, abs=1e-12)


def _logistic_scores(seed, n, bimodal=False, prevalence=0.3):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < prevalence).astype(int)
    if bimodal:  # two modes per class, shifted: a ROC far from binormal
        x = np.where(rng.random(n) < 0.5, -1.5, 1.5) + 0.5 * rng.standard_normal(n) + 0.9 * y
    else:
        x = rng.standard_normal(n) + 1.0 * y
    return expit(0.9 * x - 1.0), y


def _quantile_edges(s, bins):
    inner = np.quantile(s, np.arange(1, bins) / bins)
    return np.concatenate([[0.0], inner, [1.0]])


def _release(s, y, edges, sigma, sums_sigma, rng):
    h0, h1 = bin_scores(s, y, edges)
    t0, t1 = _offset_sums(s, y, edges)
    m = edges.size - 1
    return (h0 + sigma * rng.standard_normal(m), h1 + sigma * rng.standard_normal(m),
            t0 + sums_sigma * rng.standard_normal(m), t1 + sums_sigma * rng.standard_normal(m))


def test_resolved_noise_variance_matches_monte_carlo_of_the_noise():
    """One data set, 400 independent noisy releases of its counts and sums: the SD of the resolved AUC over the
    releases is the noise part of the reported variance (the parametric bootstrap), within Monte Carlo error."""
    s, y = _logistic_scores(4, 5000)
    edges = _quantile_edges(s, 5)
    sigma, sums_sigma = 6.0, 18.0
    rng = np.random.default_rng(5)
    rel = np.array([_release(s, y, edges, sigma, sums_sigma, rng) for _ in range(400)])
    est = histogram_auc_estimates(rel[:, 0], rel[:, 1], sigma=sigma, sums0=rel[:, 2], sums1=rel[:, 3],
                                  sums_sigma=sums_sigma, estimator="resolved", noise_draws=100)
    u0 = within_offsets(est.counts0, rel[:, 2], sums_sigma=sums_sigma)
    u1 = within_offsets(est.counts1, rel[:, 3], sums_sigma=sums_sigma)
    sampling = histogram_delong_variance(est.counts0, est.counts1, tilt_concordance(u0, u1))
    reported_noise_sd = np.sqrt(np.mean(est.variance_resolved - sampling))
    assert np.all(est.estimator == "resolved")
    assert np.std(est.auc_resolved, ddof=1) == pytest.approx(reported_noise_sd, rel=0.2)


def test_the_rule_keeps_the_rocglm_on_binormal_scores_and_drops_it_on_bimodal_ones():
    """Binormal latent scores: the ROC-GLM fits and is reported (it smooths the noise). Bimodal ones: its AUC is
    far from the resolved one, and so is the monotone curve through the ROC points (it cannot see the bins' two
    modes): the resolved AUC is reported, its interval covering the unbinned AUC; each result says which and why."""
    rng = np.random.default_rng(8)
    for bimodal, expected in ((False, "rocglm"), (True, "resolved")):
        s, y = _logistic_scores(9, 40_000, bimodal=bimodal)
        edges = _quantile_edges(s, 5)
        h0, h1, t0, t1 = _release(s, y, edges, 3.0, 9.0, rng)
        v = histogram_validation(h0, h1, edges, sigma=3.0, sums0=t0, sums1=t1, sums_sigma=9.0)
        truth = empirical_auc(s, y)
        assert v.estimator == expected, v.notes[0]
        assert v.notes[0].startswith("AUC: the ROC-GLM" if expected == "rocglm" else "AUC: the resolved AUC")
        assert v.auc_ci[0] <= truth <= v.auc_ci[1]
        if bimodal:
            assert "does not fit" in v.notes[0] and "the monotone curve does not agree" in v.notes[0]
            assert abs(v.rocglm_auc - truth) > 0.005 and abs(v.auc - truth) < 0.01
    # Asked for the binned empirical AUC: reported, widened by half the within-bin share.
    v = histogram_validation(h0, h1, edges, sigma=3.0, sums0=t0, sums1=t1, sums_sigma=9.0, estimator="empirical")
    assert v.estimator == "empirical" and "half the share of within-bin pairs" in v.notes[0]


def test_the_rocglm_fit_test_holds_its_level_on_binormal_scores_and_rejects_bimodal_ones():
    """Monte Carlo of whole data sets (sampling and noise): on binormal latent scores the chi-square's p-value
    falls below 0.05 in about 5 % of them; on bimodal ones (5 quantile bins, n = 20 000) nearly always."""
    from dsroc.histogram import consistent_counts, histogram_rocglm
    from dsroc.histogram.fit_test import rocglm_fit_pvalue

    rng = np.random.default_rng(12)
    sigma = 4.0
    for bimodal, low, high in ((False, 0.01, 0.11), (True, 0.9, 1.0)):
        pvalues = []
        for rep in range(150):
            s, y = _logistic_scores(100 + rep, 20_000, bimodal=bimodal)
            edges = _quantile_edges(s, 5)
            h0, h1 = bin_scores(s, y, edges)
            c0 = consistent_counts(h0 + sigma * rng.standard_normal(5))
            c1 = consistent_counts(h1 + sigma * rng.standard_normal(5))
            fit = histogram_rocglm(c0, c1)
            pvalues.append(rocglm_fit_pvalue(c0, c1, fit.params, sigma=sigma)[0])
        assert low <= np.mean(np.asarray(pvalues) < 0.05) <= high


def test_with_the_first_stage_histogram_the_resolved_auc_follows_a_calibrated_models_skewed_bins():
    """A calibrated model at prevalence 0.14: the top bin of a quantile grid spans [~0.25, 1] with scores crowding at
    its lower edge. With exact counts and sums (sigma = 0) the tilt model misses the unbinned AUC by 0.0013; with
    the fine histogram of all scores (the quantile grid's first release) the logistic model on its shape, exact for
    a calibrated model, matches it."""
    from dsroc.histogram import histogram_edges, quantile_edges

    rng = np.random.default_rng(21)
    n = 300_000
    x = rng.normal(-2.5, 1.5, n)
    s, y = expit(x), (rng.random(n) < expit(x)).astype(int)
    fine = histogram_edges(50, lo=0.005, hi=0.995, spacing="logit")
    g = np.bincount(bin_index(s, fine), minlength=50).astype(float)
    edges = np.concatenate([[0.0], quantile_edges(g, fine, 5), [1.0]])
    h0, h1 = bin_scores(s, y, edges)
    t0, t1 = _offset_sums(s, y, edges)
    truth = empirical_auc(s, y)
    tilt = histogram_validation(h0, h1, edges, sigma=0.0, sums0=t0, sums1=t1, sums_sigma=0.0, estimator="resolved")
    shaped = histogram_validation(h0, h1, edges, sigma=0.0, sums0=t0, sums1=t1, sums_sigma=0.0, estimator="resolved",
                                  grid_edges=fine, grid_counts=g, grid_sigma=0.0)
    assert abs(shaped.auc - truth) < 5e-4 < 1e-3 < abs(tilt.auc - truth)
    assert shaped.auc_ci[0] <= truth <= shaped.auc_ci[1]
    with pytest.raises(ValueError, match="go together"):
        histogram_validation(h0, h1, edges, sigma=0.0, sums0=t0, sums1=t1, sums_sigma=0.0, grid_counts=g)


def test_shape_offsets_are_the_finer_histograms_mean_offset_in_each_bin():
    """Against numerical integration: the finer histogram is uniform within each fine bin (the outer ones reaching
    the grid's ends), and a bin's mean offset is the integral of its survivor function over the bin."""
    rng = np.random.default_rng(7)
    fine = histogram_edges(40, spacing="logit", lo=0.005, hi=0.995)
    counts = rng.uniform(0.0, 30.0, (3, 40))
    counts[2, 30:] = 0.0
    edges = np.array([0.0, 0.03, 0.2, 0.21, 0.6, 0.99, 1.0])
    got = shape_offsets(edges, fine, counts)
    f = fine.copy()
    f[0], f[-1] = 0.0, 1.0
    for r in range(3):
        cdf = np.concatenate([[0.0], np.cumsum(counts[r])])
        for b, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
            x = np.linspace(lo, hi, 200_001)
            c = np.interp(x, f, cdf)
            if c[-1] - c[0] == 0:
                assert got[r, b] == 0.5  # an empty bin
                continue
            survivor = (c[-1] - c) / (c[-1] - c[0])
            assert got[r, b] == pytest.approx(np.trapezoid(survivor, x) / (hi - lo), abs=1e-8)
