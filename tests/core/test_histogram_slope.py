"""The calibration slope's range from histograms with score sums (dsroc.histogram.slope): brute force on the unbinned
patients (statsmodels, sigma = 0), the linear programme against scipy, the noise variance against Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.optimize import linprog
from scipy.special import logit

from dsroc import histogram_validation
from dsroc.histogram import bin_index, bin_scores
from dsroc.histogram.calibration import Recalibration
from dsroc.histogram.grid import consistent_counts
from dsroc.histogram.resolved import SUBPOINTS
from dsroc.histogram.slope import BINNING_INCLUDED, logit_sum_range, recalibration_with_sums
from dsroc.histogram.sums import within_offsets

EDGES = np.array([0.0, 0.05, 0.15, 0.3, 0.5, 0.75, 1.0])
STEPS = (np.arange(SUBPOINTS) + 0.5) / SUBPOINTS


def _release(p, y, edges):
    """Exact counts and per-class offset sums on ``edges``."""
    h0, h1 = bin_scores(p, y, edges)
    b = bin_index(p, edges)
    u = (p - edges[b]) / np.diff(edges)[b]
    t0, t1 = (np.bincount(b[y == c], u[y == c], edges.size - 1) for c in (0, 1))
    return h0, h1, t0, t1


@pytest.mark.parametrize("curve", [lambda q: 0.8 * np.sqrt(q), lambda q: np.where(q < 0.3, 0.05, 0.7), lambda q: q],
                         ids=["concave", "step", "calibrated"])
def test_unbinned_fit_lies_in_the_range_and_the_grouped_fit_misses_it(curve):
    """Patients spread evenly over each bin (the finer histogram, here the grid itself, then describes the
    covariates exactly) with labels from a calibration curve that is not logistic: statsmodels' logistic fit on
    the individual patients lies in the reported ranges of intercept and slope (sigma = 0), and the interval holds
    it, where the grouped fit on the bins' mean scores alone misses it for the non-logistic curves."""
    rng = np.random.default_rng(3)
    p = np.repeat((EDGES[:-1, None] + np.diff(EDGES)[:, None] * STEPS).ravel(), 8)
    y = (rng.random(p.size) < curve(p)).astype(int)
    h0, h1, t0, t1 = _release(p, y, EDGES)
    v = histogram_validation(h0, h1, EDGES, sigma=0.0, sums0=t0, sums1=t1, sums_sigma=0.0, grid_edges=EDGES,
                             grid_counts=h0 + h1, grid_sigma=0.0)
    truth = sm.Logit(y, sm.add_constant(logit(p))).fit(disp=0).params
    r = v.recalibration
    assert r.intercept_range[0] <= truth[0] <= r.intercept_range[1]
    assert r.slope_range[0] <= truth[1] <= r.slope_range[1]
    assert r.slope_range[1] - r.slope_range[0] < 0.2  # the range is informative
    lo, hi = r.ci()["slope"]
    assert lo <= truth[1] <= hi and lo <= r.slope <= hi
    grouped_se = np.sqrt(r.cov[1, 1])
    if curve(0.5) != 0.5:
        assert abs(r.slope - truth[1]) > 1.96 * grouped_se  # the old interval (grouped fit +- z se) misses it
    assert r.includes == BINNING_INCLUDED and any(BINNING_INCLUDED in note for note in v.notes)


def test_logit_sum_range_is_the_linear_programme_and_holds_every_consistent_split():
    """The positives' sum of logits: its range equals scipy's linprog over the patients at each sub-point (given
    both classes' counts and mean offsets), and random splits with those counts and means lie inside it."""
    rng = np.random.default_rng(7)
    bins = 3
    z = np.sort(rng.normal(0, 2, (bins, SUBPOINTS)), axis=1)
    mass = rng.integers(1, 20, (bins, SUBPOINTS)).astype(float)
    share = rng.random((bins, SUBPOINTS))
    pos = share * mass
    counts = np.stack([(mass - pos).sum(1), pos.sum(1)])
    offsets = np.stack([((mass - pos) * STEPS).sum(1), (pos * STEPS).sum(1)]) / counts
    lo, hi = logit_sum_range(z, mass, counts, offsets)
    truth = (pos * z).sum(1)
    assert np.all(lo <= truth + 1e-6) and np.all(truth <= hi + 1e-6)
    for b in range(bins):
        a_eq = np.vstack([np.ones(SUBPOINTS), STEPS])
        b_eq = [counts[1, b], counts[1, b] * offsets[1, b]]
        bounds = list(zip(np.zeros(SUBPOINTS), mass[b]))
        top = -linprog(-z[b], A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs").fun
        bottom = linprog(z[b], A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs").fun
        assert hi[b] == pytest.approx(top, rel=1e-6, abs=1e-6)
        assert lo[b] == pytest.approx(bottom, rel=1e-6, abs=1e-6)


def test_noise_variance_matches_monte_carlo_of_the_release():
    """The bootstrap noise variance of the reconstructed slope (its covariance with noise minus the one without)
    against the spread of the reconstruction over releases of one data set drawn again with their noise."""
    rng = np.random.default_rng(11)
    n = 20_000
    y = (rng.random(n) < 0.3).astype(int)
    p = 1 / (1 + np.exp(-(np.where(y == 1, 0.2, -1.2) + 1.1 * rng.standard_normal(n))))
    fine = np.concatenate([[0.0], 1 / (1 + np.exp(-np.linspace(-4, 4, 31))), [1.0]])
    edges = fine[[0, 8, 12, 15, 18, 22, 32]]
    h0, h1, t0, t1 = _release(p, y, edges)
    g = np.bincount(bin_index(p, fine), minlength=fine.size - 1).astype(float)
    sigma, k, sf = 4.0, 12.0, 15.0

    def fit(c0, c1, s0, s1, gc, scale):
        c0, c1 = consistent_counts(c0), consistent_counts(c1)
        u0, u1 = within_offsets(c0, s0, sums_sigma=k), within_offsets(c1, s1, sums_sigma=k)
        return recalibration_with_sums(c0, c1, u0, u1, edges, (fine, gc, sf * scale), sigma=sigma * scale,
                                       sums_sigma=k * scale, draws=300 if scale else 3, seed=1)

    slopes, reported = [], []
    for _ in range(60):
        noisy = (h0 + sigma * rng.standard_normal(h0.size), h1 + sigma * rng.standard_normal(h1.size),
                 t0 + k * rng.standard_normal(t0.size), t1 + k * rng.standard_normal(t1.size),
                 g + sf * rng.standard_normal(g.size))
        slopes.append(fit(*noisy, 0.0).slope)
        if len(reported) < 8:
            reported.append(fit(*noisy, 1.0).cov[1, 1] - fit(*noisy, 0.0).cov[1, 1])
    assert 0.6 < np.mean(reported) / np.var(slopes, ddof=1) < 1.6


def test_interval_is_the_hull_of_the_point_and_the_widened_range():
    r = Recalibration(0.1, 1.2, np.diag([0.01, 0.04]), True, intercept_range=(-0.3, 0.0), slope_range=(0.9, 1.1),
                      range_cov=np.diag([0.04, 0.09]))
    z = 1.959963984540054
    ci = r.ci()
    assert ci["slope"] == pytest.approx((0.9 - 0.3 * z, 1.1 + 0.3 * z))  # the range's ends, each +- z of its SE
    assert ci["intercept"] == pytest.approx((-0.3 - 0.2 * z, 0.0 + 0.2 * z))
    narrow = Recalibration(0.1, 1.2, np.diag([0.01, 0.04]), True, slope_range=(1.19, 1.21), range_cov=np.zeros((2, 2)))
    assert narrow.ci()["slope"] == pytest.approx((1.2 - 0.2 * z, 1.2 + 0.2 * z))  # the point's interval holds it
    plain = Recalibration(0.1, 1.2, np.diag([0.01, 0.04]), True)
    assert plain.ci()["slope"] == pytest.approx((1.2 - 0.2 * z, 1.2 + 0.2 * z))
