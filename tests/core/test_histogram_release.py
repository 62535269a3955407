"""The one histogram release the site sends and the study simulates: counts, sums and scalars against loops."""

import numpy as np
import pytest

from dsroc.histogram.release import decode_release, draw_release, encode_release
from dsroc.histogram.stages import SCALAR_RESOLUTION, SUMS_RESOLUTION

EDGES = np.array([0.0, 0.1, 0.25, 0.5, 0.8, 1.0])


def _zero(scale, shape):
    return np.zeros(shape, dtype=np.int64)


def _data(seed=0, n=500):
    rng = np.random.default_rng(seed)
    return rng.random(n) ** 1.5, (rng.random(n) < 0.3).astype(int), rng


def test_counts_and_sums_match_a_patient_by_patient_loop():
    s, y, rng = _data()
    parts = np.arange(s.size) % 3
    r = draw_release(s, y, EDGES, noise=_zero, rng=rng, sigma=1.0, score_sums=True, sums_sigma=1.0,
                     parts=parts, n_parts=3)
    counts = np.zeros((2, 15), dtype=int)
    low = np.zeros((2, 15))
    for si, yi, k in zip(s, y, parts):
        b = min(max(np.searchsorted(EDGES, si, side="right") - 1, 0), 4)
        counts[yi, b * 3 + k] += 1
        low[yi, b * 3 + k] += (si - EDGES[b]) / (EDGES[b + 1] - EDGES[b])
    assert np.array_equal(r.counts[0], counts)
    # each offset randomly rounded to 1/SUMS_RESOLUTION: a sum is within one unit per patient of the exact one
    assert np.all(np.abs(r.sums[0] / SUMS_RESOLUTION - low) <= counts / SUMS_RESOLUTION + 1e-12)


def test_random_rounding_is_unbiased():
    s, y, _ = _data(n=50)
    exact = np.where(s < 0.5, s / 0.5, (s - 0.5) / 0.5).sum()
    draws = [draw_release(s, y, [0.0, 0.5, 1.0], noise=_zero, rng=np.random.default_rng(i), sigma=1.0, score_sums=True,
                          sums_sigma=1.0).total()[1].sum() for i in range(400)]
    # SD of one draw <= sqrt(50) / (2 * SUMS_RESOLUTION); the mean of 400 within 5 of its SDs
    assert abs(np.mean(draws) - exact) < 5 * np.sqrt(50) / (2 * SUMS_RESOLUTION) / 20


def test_scalars_are_the_rounded_sums_of_their_terms():
    s, y, rng = _data()
    r = draw_release(s, y, EDGES, noise=_zero, rng=rng, sigma=1.0, scalars=("sum_p", "sum_sq", "sum_y"),
                     scalar_sigma=1.0)
    exact = np.array([s.sum(), ((y - s) ** 2).sum(), y.sum()])
    assert np.all(np.abs(r.scalars[0] / SCALAR_RESOLUTION - exact) <= s.size / SCALAR_RESOLUTION)
    assert r.scalars[0, 2] == y.sum() * SCALAR_RESOLUTION


def test_one_patient_moves_each_part_by_at_most_its_sensitivity():
    s, y, _ = _data(n=300)
    kw = dict(noise=_zero, sigma=1.0, score_sums=True, sums_sigma=1.0, scalars=("sum_p", "sum_sq"),
              scalar_sigma=1.0)
    for drop in range(0, 300, 37):
        keep = np.arange(300) != drop
        a = draw_release(s, y, EDGES, rng=np.random.default_rng(1), **kw)
        b = draw_release(s[keep], y[keep], EDGES, rng=np.random.default_rng(1), **kw)
        assert np.abs(a.counts - b.counts).sum() == 1
        # the rounding streams differ after the removed patient, so compare against the worst case of all
        assert np.abs(a.sums - b.sums).max() <= SUMS_RESOLUTION + 300
        assert np.abs(a.scalars - b.scalars).max() <= SCALAR_RESOLUTION + 300


def test_groups_are_separate_releases_and_noise_is_added_once_per_cell():
    s, y, _ = _data()
    site = np.arange(s.size) % 4
    calls = []

    def ones(scale, shape):
        calls.append((scale, shape))
        return np.ones(shape, dtype=np.int64)

    r = draw_release(s, y, EDGES, noise=ones, rng=np.random.default_rng(0), sigma=2.0, groups=site, n_groups=4)
    for k in range(4):
        alone = draw_release(s[site == k], y[site == k], EDGES, noise=_zero, rng=None, sigma=1.0)
        assert np.array_equal(r.counts[k], alone.counts[0] + 1)
    assert calls == [(2.0, (4, 2, 5))]
    nothing = draw_release(s, y, EDGES, noise=ones, rng=None, sigma=0.0)
    assert nothing.counts.sum() == s.size  # scale 0 adds no noise at all


def test_encoding_round_trips_and_refuses_several_groups():
    s, y, rng = _data()
    r = draw_release(s, y, EDGES, noise=lambda sc, sh: rng.integers(-9, 9, sh), rng=rng, sigma=1.0,
                     score_sums=True, sums_sigma=1.0, scalars=("sum_y",), scalar_sigma=1.0)
    h0, h1, scalars, sums = decode_release(encode_release(r), cells=5, score_sums=True, scalars=("sum_y",))
    assert np.array_equal(h0, r.counts[0, 0]) and np.array_equal(h1, r.counts[0, 1])
    assert np.allclose(sums[1], r.sums[0, 1] / SUMS_RESOLUTION)
    assert scalars["sum_y"] == r.scalars[0, 0] / SCALAR_RESOLUTION
    two = draw_release(s, y, EDGES, noise=_zero, rng=rng, sigma=1.0, groups=np.arange(s.size) % 2, n_groups=2)
    with pytest.raises(ValueError, match="one group"):
        encode_release(two)
