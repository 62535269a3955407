"""The second-mode check of a noisy first release and the bin count it raises."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import norm

from dsroc.histogram import balanced_quantile_edges, histogram_edges
from dsroc.histogram.modes import MODE_WINDOW, valley_depth
from dsroc.histogram.stages import MODE_Z, STAGE2_BINS, second_stage_bins, second_stage_grid


def _brute_force(counts, sigma, w):
    """The definition over every (left, valley, right) triple of interior windows, none overlapping."""
    g = np.asarray(counts, dtype=np.float64)[1:-1]
    s = [g[i:i + w].sum() for i in range(g.size - w + 1)]
    best = -np.inf
    for i, j, k in itertools.combinations(range(len(s)), 3):
        if j - i >= w and k - j >= w:
            peak = min(s[i], s[k])
            sd = np.sqrt(2 * w * sigma**2 + max(peak, 0.0) + max(s[j], 0.0))
            best = max(best, (peak - s[j]) / sd)
    return best


@pytest.mark.parametrize("w", [1, 2, 3])
def test_valley_depth_is_the_deepest_valley_by_brute_force(w):
    rng = np.random.default_rng(w)
    for _ in range(20):
        counts = np.maximum(rng.normal(50.0, 40.0, rng.integers(8, 30)), 0.0)
        sigma = float(rng.uniform(0.0, 10.0))
        assert valley_depth(counts, sigma, window=w) == pytest.approx(_brute_force(counts, sigma, w), rel=1e-12)


def test_two_modes_are_found_and_one_mode_or_a_tail_heaped_in_the_end_bin_is_not():
    x = np.linspace(-4.0, 4.0, 50)
    one = 2000.0 * norm.pdf(x, 0.5, 1.0)
    two = 1000.0 * (norm.pdf(x, -1.5, 0.5) + norm.pdf(x, 1.5, 0.5))
    tail = 2000.0 * norm.pdf(x, 1.0, 1.0)
    tail[0] += 3000.0  # a long left tail clipped to the grid's end: no mode of the scores
    assert valley_depth(one, 5.0) <= 0.0 and valley_depth(tail, 5.0) <= 0.0
    assert valley_depth(two, 5.0) > 10 * MODE_Z
    # the noise decides: the same valley is lost in noise a hundred times larger
    assert valley_depth(two, 500.0) < MODE_Z
    # too few interior bins for a valley between two windows
    assert valley_depth(np.ones(2 * MODE_WINDOW + 1), 1.0) == -np.inf


def test_unimodal_counts_with_their_noise_rarely_show_a_valley_beyond_mode_z():
    """The false-alarm rate under the null, by Monte Carlo: a smooth single mode plus sampling and noise."""
    rng = np.random.default_rng(7)
    x = np.linspace(-5.3, 5.3, 50)
    mean = 10_000 * np.diff(norm.cdf(np.concatenate([[-np.inf], (x[1:] + x[:-1]) / 2, [np.inf]]), -2.0, 1.3))
    depths = [valley_depth(np.maximum(rng.poisson(mean) + rng.normal(0.0, 15.8, mean.size), 0.0), 15.8)
              for _ in range(400)]
    assert np.mean(np.array(depths) > MODE_Z) < 0.02


@pytest.mark.parametrize("most", [100, 6])
def test_a_second_mode_in_either_class_raises_the_bin_count_one_step(most):
    fine = histogram_edges(50, lo=0.005, hi=0.995, spacing="logit")
    x = np.linspace(-4.0, 4.0, 50)
    one = 7000.0 * norm.pdf(x, 0.0, 1.0) / norm.pdf(x, 0.0, 1.0).sum()
    two = 3000.0 * (norm.pdf(x, -1.5, 0.5) + norm.pdf(x, 1.5, 0.5)) / (2 * norm.pdf(x, 1.5, 0.5).sum())
    for c0, c1, second_mode in ((one, two, True), (two, one, True), (one, 0.5 * one[::-1], False)):
        base = second_stage_bins(c0.sum(), c1.sum(), 20.0, most=most)
        raised = min(next(b for _, b in STAGE2_BINS if b > base), most)
        assert raised > base
        bins = raised if second_mode else base
        got = second_stage_grid(c0, c1, fine, 20.0, most=most, first_sigma=15.0)
        np.testing.assert_array_equal(got, balanced_quantile_edges(c0, c1, fine, bins))
        # without the first stage's noise the check is not made; an asked-for count is kept
        assert second_stage_grid(c0, c1, fine, 20.0, most=most).size == base - 1
        assert second_stage_grid(c0, c1, fine, 20.0, most=most, n_bins=4, first_sigma=15.0).size == 3


@pytest.mark.parametrize("bad, match", [(dict(sigma=-1.0), "sigma"), (dict(sigma=np.nan), "sigma"),
                                        (dict(window=0), "window"), (dict(window=1.5), "window"),
                                        (dict(counts=np.ones((2, 10))), "one histogram")])
def test_valley_depth_rejects_bad_arguments(bad, match):
    args = dict(counts=np.ones(10), sigma=1.0) | bad
    window = args.pop("window", MODE_WINDOW)
    with pytest.raises(ValueError, match=match):
        valley_depth(args["counts"], args["sigma"], window=window)


def test_on_unequal_bins_the_valley_is_one_of_density_not_of_counts():
    """A smooth single mode on the first release's explicit grid (wide tail bins hold many patients each): no valley
    of density, though the counts dip next to a wide bin; two modes are still found; on equal bins the same as
    counts."""
    from scipy.special import expit, logit

    from dsroc.histogram.stages import first_stage_edges

    inner = first_stage_edges([(5, 8, 10, 12, 20, 50, 100, 200)], 0.0001, 0.9999)
    edges = np.concatenate([[0.0], inner, [1.0]])
    z = logit(np.clip(edges, 1e-12, 1 - 1e-12))
    assert np.diff(z)[1:-1].max() / np.diff(z)[1:-1].min() > 9
    one = np.diff(norm.cdf(z, -3.5, 1.5)) * 20_000
    assert valley_depth(one, 5.0) > 10 and valley_depth(one, 5.0, edges=edges) <= 0  # per bin, a wide bin is a mode
    two = (np.diff(norm.cdf(z, -6.5, 0.9)) + np.diff(norm.cdf(z, -1.0, 0.9))) * 10_000
    assert valley_depth(two, 5.0, edges=edges) > 10 * MODE_Z
    equal = histogram_edges(50, lo=0.005, hi=0.995, spacing="logit")
    counts = 1000.0 * (norm.pdf(np.linspace(-4, 4, 50), -1.5, 0.5) + norm.pdf(np.linspace(-4, 4, 50), 1.5, 0.5))
    assert valley_depth(counts, 5.0, edges=equal) == pytest.approx(valley_depth(counts, 5.0), rel=1e-9)
