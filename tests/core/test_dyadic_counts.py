"""Survivor functions of values on a power-of-two grid, counted per cell (dsroc.roc.dyadic), against brute force."""

from __future__ import annotations

import numpy as np
import pytest

import dsroc
from dsroc.privacy.lattice import lattice_gaussian
from dsroc.roc import dyadic
from dsroc.roc.dyadic import DyadicCounts


def brute(ref, queries, ties):
    """S(q) by counting every pair (O(n m)), the definition."""
    greater = (ref[None, :] > queries[:, None]).sum(axis=1)
    equal = (ref[None, :] == queries[:, None]).sum(axis=1)
    return (greater + (0.5 * equal if ties == "mid" else 0.0)) / ref.size


def released(rng, n, epsilon=5.0, sensitivity=0.1):
    """Noisy scores as a site releases them: lattice points of the exact sampler, sorted."""
    noise = lattice_gaussian(epsilon, 0.01, sensitivity)
    return noise.values(np.sort(noise.noisy_points(rng.uniform(0.0, 1.0, n))))


@pytest.mark.parametrize("ties", ["mid", "strict"])
def test_pooled_releases_are_counted_on_their_grid_exactly(ties):
    rng = np.random.default_rng(7)
    # Two sites with different sensitivities: two lattices, the finer one holds both.
    ref = np.concatenate([released(rng, 1500), released(rng, 1200, sensitivity=0.37), released(rng, 900)])
    f = dsroc.SurvivorFunction(ref)
    assert f._grid is not None and f._sorted is None
    queries = np.concatenate([rng.uniform(-0.5, 1.5, 400), rng.choice(ref, 300), [ref.min(), ref.max()],
                              [-1e9, 1e9, 0.0, -0.0, 5e-324, -5e-324, 1e-300], np.nextafter(ref[:50], np.inf),
                              np.nextafter(ref[:50], -np.inf)])
    assert np.array_equal(f(queries, ties=ties), brute(ref, queries, ties))
    assert np.array_equal(f.sorted_values, np.sort(ref))
    assert f.n == ref.size


def test_the_same_counts_as_sorting_and_searching_bit_for_bit():
    rng = np.random.default_rng(11)
    ref = np.concatenate([released(rng, 40_000) for _ in range(5)])
    queries = rng.uniform(0.0, 1.0, 20_000)
    grid = dsroc.SurvivorFunction(ref)
    searched = dsroc.SurvivorFunction(ref)
    searched._grid, searched._sorted = None, np.sort(ref, kind="stable")
    assert grid._grid is not None
    for ties in ("mid", "strict"):
        assert np.array_equal(grid(queries, ties=ties), searched(queries, ties=ties))
        assert np.array_equal(grid(ref, ties=ties), searched(ref, ties=ties))


def test_reference_in_several_passes_counts_the_same(monkeypatch):
    rng = np.random.default_rng(3)
    ref = rng.permutation(np.concatenate([released(rng, 3000), -released(rng, 2000)]))
    whole = DyadicCounts.of(ref, max_cells=10**6)
    monkeypatch.setattr(dyadic, "_CHUNK", 777)
    chunked = DyadicCounts.of(ref, max_cells=10**6)
    assert (whole.step, whole.first) == (chunked.step, chunked.first)
    assert np.array_equal(whole.below, chunked.below)
    assert whole.n == ref.size and whole.step == 2.0 ** np.round(np.log2(whole.step))


def test_values_off_a_small_grid_are_sorted_and_searched_instead():
    rng = np.random.default_rng(5)
    assert DyadicCounts.of(rng.uniform(0.0, 1.0, 1000), max_cells=10**6) is None  # full-precision values
    assert DyadicCounts.of(np.array([0.1, 0.2, 0.3]), max_cells=10**6) is None  # not dyadic
    assert DyadicCounts.of(np.array([2.0**40, 2.0**-14]), max_cells=10**6) is None  # grid too large
    assert DyadicCounts.of(np.zeros(5), max_cells=10**6) is None
    few = DyadicCounts.of(np.array([0.5, 0.25, 0.75, 0.25]), max_cells=10)
    assert (few.step, few.first, few.below.tolist()) == (0.25, 1, [0, 2, 3, 4])
    ref = rng.uniform(0.0, 1.0, 500)
    f = dsroc.SurvivorFunction(ref)
    assert f._grid is None
    queries = rng.uniform(-0.1, 1.1, 200)
    assert np.array_equal(f(queries), brute(ref, queries, "mid"))


def test_sorted_blocks_are_the_sorted_values_in_order():
    rng = np.random.default_rng(9)
    ref = np.concatenate([released(rng, 5000), released(rng, 3000)])
    for f in (dsroc.SurvivorFunction(ref), dsroc.SurvivorFunction(rng.uniform(0.0, 1.0, 7000))):
        blocks = list(f.sorted_blocks(1000))
        assert all(b.size <= 1000 or np.all(b == b[0]) for b in blocks)  # a block is one cell when larger
        assert np.array_equal(np.concatenate(blocks), np.sort(f.sorted_values)) and len(blocks) > 5
