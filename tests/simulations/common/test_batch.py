"""The grouped statistics of dsroc.roc.batch equal the single-data-set dsroc functions on every group."""

import numpy as np
import pytest

from dsroc import auc_ci, auc_ci_batch, delong_variance, empirical_auc, placement_values, rocglm_counts, rocglm_grid
from dsroc.roc.batch import (
    grouped_class_placements,
    grouped_delong_variance,
    grouped_mean,
    grouped_placement_values,
    grouped_rocglm_counts,
    grouped_variance,
    row_strict_placements,
)


def _random_groups(rng, n_groups, *, ties, shuffle):
    sizes = rng.integers(4, 60, n_groups)
    groups = np.repeat(np.arange(n_groups), sizes)
    scores = rng.normal(size=groups.size)
    if ties:  # coarse values: many ties within and across classes
        scores = np.round(scores, 1)
    labels = (rng.random(groups.size) < 0.4).astype(np.int8)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    labels[starts], labels[starts + 1], labels[starts + 2], labels[starts + 3] = 0, 0, 1, 1  # both classes, >= 2 each
    if shuffle:  # groups need not be stored one after another
        perm = rng.permutation(groups.size)
        groups, scores, labels = groups[perm], scores[perm], labels[perm]
    return scores, labels, groups


@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("convention", ["mid", "strict"])
def test_class_placements_equal_single_data_set(ties, shuffle, convention):
    rng = np.random.default_rng(7)
    s, y, g = _random_groups(rng, 12, ties=ties, shuffle=shuffle)
    placed = grouped_class_placements(s, y, g, n_groups=12, ties=convention)
    for b in range(12):
        m = g == b
        s0, s1 = s[m & (y == 0)], s[m & (y == 1)]
        np.testing.assert_array_equal(placed.pv[m & (y == 1)], placement_values(s0, s1, ties=convention))
        np.testing.assert_array_equal(placed.pv[m & (y == 0)], placement_values(s1, s0, ties=convention))
        assert placed.n0[b] == s0.size and placed.n1[b] == s1.size


@pytest.mark.parametrize("convention", ["mid", "strict"])
def test_placement_values_of_separate_reference_and_query(convention):
    rng = np.random.default_rng(3)
    ref_g = rng.integers(0, 6, 200)
    qry_g = rng.integers(0, 6, 150)
    ref, qry = np.round(rng.random(200), 2), np.round(rng.random(150), 2)
    out = grouped_placement_values(ref, ref_g, qry, qry_g, n_groups=6, ties=convention)
    for b in range(6):
        np.testing.assert_array_equal(out[qry_g == b], placement_values(ref[ref_g == b], qry[qry_g == b], ties=convention))


def test_auc_and_delong_match_and_brute_force():
    rng = np.random.default_rng(11)
    s, y, g = _random_groups(rng, 9, ties=True, shuffle=True)
    placed = grouped_class_placements(s, y, g, n_groups=9)
    auc = grouped_mean(placed.pv[y == 0], g[y == 0], n_groups=9)
    var = grouped_delong_variance(placed, y, g, n_groups=9)
    for b in range(9):
        m = g == b
        s0, s1 = s[m & (y == 0)], s[m & (y == 1)]
        brute = np.mean((s1[:, None] > s0[None, :]) + 0.5 * (s1[:, None] == s0[None, :]))  # Mann-Whitney
        assert auc[b] == pytest.approx(brute, abs=1e-12)
        assert auc[b] == pytest.approx(empirical_auc(s[m], y[m]), abs=1e-12)
        assert var[b] == pytest.approx(delong_variance(s[m], y[m]), rel=1e-10)


def test_grouped_variance_against_numpy():
    rng = np.random.default_rng(5)
    g = rng.integers(0, 4, 100)
    x = rng.normal(size=100)
    var = grouped_variance(x, g, n_groups=5)  # group 4 is empty
    for b in range(4):
        assert var[b] == pytest.approx(np.var(x[g == b], ddof=1), rel=1e-12)
    assert np.isnan(var[4])


def test_rocglm_counts_equal_single_data_set_including_values_on_the_grid():
    grid = rocglm_grid()
    rng = np.random.default_rng(2)
    g = rng.integers(0, 5, 400)
    pv = rng.random(400)
    pv[:40] = grid[rng.integers(0, grid.size, 40)]  # exactly on thresholds
    pv[40:45] = [0.0, 1.0, 0.0, 1.0, 0.5]
    counts = grouped_rocglm_counts(pv, g, grid, n_groups=5)
    assert counts.shape == (5, grid.size)
    for b in range(5):
        np.testing.assert_array_equal(counts[b], rocglm_counts(pv[g == b], grid))


def test_ci_batch_equals_auc_ci_and_marks_undefined():
    auc = np.array([0.5, 0.73, 0.99, 1.0, 0.0, np.nan])
    var = np.array([0.01, 0.002, 1e-4, 0.001, 0.001, 0.01])
    for method in ("logit", "wald"):
        ci = auc_ci_batch(auc, var, level=0.9, method=method)
        for a, v, lo, hi, ok in zip(auc, var, ci.lower, ci.upper, ci.defined):
            if not np.isfinite(a):
                assert not ok and np.isnan(lo)
                continue
            try:
                expected = auc_ci(a, v, level=0.9, method=method)
            except ValueError:
                assert not ok and np.isnan(lo) and np.isnan(hi)
            else:
                assert ok
                assert (lo, hi) == pytest.approx(expected, abs=1e-14)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="groups must lie in"):
        grouped_class_placements([0.1, 0.2], [0, 1], [0, 3], n_groups=2)
    with pytest.raises(ValueError, match="no positives"):
        grouped_class_placements([0.1, 0.2, 0.3], [0, 1, 0], [0, 0, 1], n_groups=2)
    with pytest.raises(ValueError, match="ties must be"):
        grouped_class_placements([0.1, 0.2], [0, 1], [0, 0], n_groups=1, ties="low")
    with pytest.raises(ValueError, match="no reference scores"):
        grouped_placement_values([0.1], [0], [0.2, 0.3], [0, 1], n_groups=2)
    with pytest.raises(ValueError, match="non-finite"):
        grouped_class_placements([0.1, np.nan], [0, 1], [0, 0], n_groups=1)


def test_row_strict_placements_equal_single_data_set_with_ties():
    # Rows as the study's settings make them: one replication's scores with noise, truncated to [0, 1]
    # (many ties at 0 and 1), the noise-free row, coarse values (ties inside) with -0.0 beside 0.0, and
    # scores above 2 (whose bits reach the sign bit of a shifted 64-bit integer) and tied runs of both classes.
    rng = np.random.default_rng(5)
    n = 300
    s, z = rng.random(n), rng.standard_normal(n)
    y = (rng.random(n) < 0.3).astype(np.int8)
    rows = np.vstack([s, np.clip(s + 0.4 * z, 0.0, 1.0), np.clip(s + 3.0 * z, 0.0, 1.0), np.round(s, 1),
                      1.5 + 3.0 * np.round(s, 2), np.where(s < 0.5, 0.0, 1e300)])
    rows[3, :5] = -0.0
    rows[3, 5:10] = 0.0
    for grid in (rocglm_grid(), rocglm_grid(np.array([0.001, 0.3, 0.5, 0.999])), rocglm_grid(7)):
        placed = row_strict_placements(rows, y, grid)
        assert placed.pv0.shape == (6, int(y.sum())) and placed.pv1.shape == (6, int((y == 0).sum()))
        for r, x in enumerate(rows):
            s0, s1 = x[y == 0], x[y == 1]
            # Brute force: the strict survivor function counts the other class strictly above.
            want0 = np.array([(s0 > v).sum() / s0.size for v in s1])
            want1 = np.array([(s1 > v).sum() / s1.size for v in s0])
            # In ascending score order within the row, each value as the single-data-set function's.
            np.testing.assert_array_equal(placed.pv0[r], want0[np.argsort(s1, kind="stable")])
            np.testing.assert_array_equal(placed.pv1[r], want1[np.argsort(s0, kind="stable")])
            np.testing.assert_array_equal(placed.counts[r], rocglm_counts(want0, grid))
            np.testing.assert_array_equal(placed.pv0[r], placement_values(s0, s1, ties="strict")[np.argsort(s1, kind="stable")])
        # The same from the scores' own buffer (overwritten with the sort keys).
        buffer = rows.copy()
        again = row_strict_placements(buffer, y, grid, overwrite_scores=True)
        for mine, theirs in zip(again, placed):
            np.testing.assert_array_equal(mine, theirs)
        assert not np.array_equal(buffer, rows)


def test_row_strict_placements_of_random_batches_equal_brute_force():
    # Many shapes: few or many of a class, heavy ties, values on the thresholds (i / n0 equal to t_j).
    rng = np.random.default_rng(21)
    grid = rocglm_grid(np.array([0.1, 0.25, 0.5, 0.75]))
    for _ in range(30):
        n = int(rng.integers(4, 40))
        y = np.zeros(n, dtype=np.int8)
        y[rng.choice(n, int(rng.integers(1, n)), replace=False)] = 1
        rows = np.round(rng.random((int(rng.integers(1, 5)), n)) * rng.integers(1, 6), 0) / 4.0
        placed = row_strict_placements(rows, y, grid)
        for r, x in enumerate(rows):
            s0, s1 = x[y == 0], x[y == 1]
            want0 = (s0[None, :] > s1[:, None]).sum(1) / s0.size
            np.testing.assert_array_equal(np.sort(placed.pv0[r]), np.sort(want0))
            np.testing.assert_array_equal(np.sort(placed.pv1[r]), np.sort((s1[None, :] > s0[:, None]).sum(1) / s1.size))
            np.testing.assert_array_equal(placed.counts[r], [(want0 <= t).sum() for t in grid])


def test_row_strict_placements_refuses_negative_or_one_class_rows():
    for bad in (-0.2, np.nan, np.inf):
        with pytest.raises(ValueError, match="non-negative"):
            row_strict_placements(np.array([[0.1, bad, 0.3]]), np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="both classes"):
        row_strict_placements(np.array([[0.1, 0.2, 0.3]]), np.array([1, 1, 1]))
