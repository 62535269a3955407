"""Lattice points sorted by counting (dsroc.privacy.lattice.sort_points) equal a comparison sort."""

from __future__ import annotations

import numpy as np

from dsroc.privacy.lattice import lattice_gaussian, sort_points


def test_counted_and_compared_sorts_agree_on_narrow_and_wide_points():
    rng = np.random.default_rng(8)
    narrow = rng.integers(-40_000, 40_000, 10_000)  # spans more points than it has: counted up to 4 n + 65 536
    wide = rng.integers(-(2**62), 2**62, 10_000)  # sorted in place
    for points in (narrow, wide, narrow[:1], narrow[:0], np.full(7, -3)):
        expected = np.sort(points)
        got = sort_points(points.copy())
        assert got.dtype == np.int64 and np.array_equal(got, expected)


def test_a_release_is_sorted_and_on_its_lattice():
    noise = lattice_gaussian(2.0, 1e-5, 0.1)
    scores = np.random.default_rng(1).uniform(0.0, 1.0, 20_000)
    points = noise.sorted_noisy_points(scores)
    assert points.size == scores.size and np.all(np.diff(points) >= 0)
    # The noise is centred on the snapped scores: the means agree within 5 standard errors.
    assert abs(points.mean() - noise.snap(scores).mean()) < 5 * np.sqrt(noise.t * noise.r / scores.size)
