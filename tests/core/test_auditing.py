"""The disclosure auditor against a brute-force solver: every 0/1 group of atoms, rank tests in exact arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import null_space

from dsroc.privacy.auditing import CountQuery, atoms, audit_counts, small_determined_group


def brute_force(rows: np.ndarray, counts: np.ndarray, q: int) -> list[tuple[int, ...]]:
    """Every group of atoms whose indicator is in the row space and whose size is 1 to q-1.

    Independent of the auditor's modular elimination: all 2^atoms groups at once, a group being in
    the row space when it is orthogonal to the null space (floating-point SVD; exact enough for 0/1
    matrices of this size).
    """
    occupied = np.flatnonzero(counts > 0)  # empty atoms count as known to be empty
    rows, counts = rows[:, occupied], counts[occupied]
    m = rows.shape[1]
    groups = ((np.arange(2**m)[:, None] >> np.arange(m)) & 1).astype(float)
    null = null_space(rows.astype(float))
    inside = np.all(np.abs(groups @ null) < 1e-8, axis=1) if null.size else np.ones(len(groups), bool)
    sizes = groups @ counts
    return [tuple(occupied[np.flatnonzero(g)]) for g in groups[inside & (sizes >= 1) & (sizes < q)]]


def _check(rows, counts, q):
    result = small_determined_group(rows, counts, q)
    truth = brute_force(rows, counts, q)
    assert not result.undecided
    assert (result.group is None) == (not truth), (rows.astype(int).tolist(), counts.tolist(), q, truth)
    if result.group is not None:
        assert result.group in truth  # the witness itself is a determined small group
    return result


@pytest.mark.parametrize("seed", range(200))
def test_random_count_matrices_agree_with_brute_force(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 13))
    rows = rng.random((int(rng.integers(1, 7)), m)) < rng.uniform(0.2, 0.8)
    counts = rng.integers(0, 8, size=m) * (rng.random(m) < 0.8)
    _check(rows, counts, int(rng.integers(2, 7)))


def _random_queries(rng, sources, lattice):
    queries = [CountQuery(), CountQuery("y", 0), CountQuery("y", 1)]
    for _ in range(int(rng.integers(1, 4))):
        s = str(rng.choice(sources))
        if rng.random() < 0.5:  # a confusion matrix at t
            t = float(rng.choice(lattice))
            queries += [CountQuery("y", c, s, lo, hi) for c in (0, 1) for lo, hi in ((t, math.inf), (-math.inf, t))]
        else:  # calibration bins between random edges: count and positives of each bin (some withheld)
            edges = np.sort(rng.choice(lattice, size=int(rng.integers(1, 3)), replace=False))
            bounds = [-math.inf, *edges.tolist(), math.inf]
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                if rng.random() < 0.7:
                    queries += [CountQuery(source=s, lo=lo, hi=hi), CountQuery("y", 1, s, lo, hi)]
    return queries


@pytest.mark.parametrize("seed", range(200))
def test_random_confusion_and_calibration_answers_agree_with_brute_force(seed):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(5, 40))
    labels = {"y": (rng.random(n) < 0.4).astype(int)}
    lattice = np.round(np.linspace(0.1, 0.9, 9), 2)
    scores = {"a": np.round(rng.random(n), 2)}
    sources = ["a"]
    if rng.random() < 0.3:
        scores["b"] = np.round(np.clip(scores["a"] + rng.normal(0, 0.1, n), 0, 1), 2)
        sources.append("b")
    queries = _random_queries(rng, sources, lattice)
    rows, counts = atoms(queries, labels, scores)
    keep = np.flatnonzero(counts > 0)[:14]  # the brute force enumerates 2^atoms groups
    rows, counts = rows[:, keep], counts[keep]
    _check(rows, counts, int(rng.integers(2, 7)))


def test_atoms_count_patients_per_label_and_interval():
    labels = {"y": np.array([0, 1, 1, 0, 1])}
    scores = {"s": np.array([0.1, 0.2, 0.5, 0.7, 0.7])}
    queries = [CountQuery("y", 1, "s", 0.5, math.inf), CountQuery(source="s", hi=0.5)]
    rows, counts = atoms(queries, labels, scores)
    # atoms: (y, interval) with intervals (-inf, 0.5), [0.5, inf)
    assert counts.tolist() == [1, 1, 1, 2]  # (0, low), (0, high), (1, low), (1, high)
    assert rows.astype(int).tolist() == [[0, 0, 0, 1], [1, 0, 1, 0]]
    # Both answers are over at least 2 patients, but with the class totals they give y=0 above 0.5: 1 patient.
    totals = [CountQuery("y", 0), CountQuery("y", 1)]
    assert audit_counts(queries, labels, scores, q=2).safe
    assert not audit_counts(queries + totals, labels, scores, q=2).safe


def test_a_cell_below_q_recovered_from_calibration_and_confusion_is_found():
    """The suppressed-cell attack in miniature: a withheld bin is the difference of a confusion row and released bins."""
    rng = np.random.default_rng(3)
    scores = {"s": np.concatenate([rng.uniform(0.0, 0.3, 20), [0.35, 0.36], rng.uniform(0.4, 1.0, 30)])}
    labels = {"y": (rng.random(52) < 0.4).astype(int)}
    edges = [-math.inf, 0.3, 0.4, 0.7, 0.8, math.inf]
    released = [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:]) if (lo, hi) not in ((0.3, 0.4), (0.7, 0.8))]
    calibration = [CountQuery(source="s", lo=lo, hi=hi) for lo, hi in released]
    base = [CountQuery()] + calibration
    assert audit_counts(base, labels, scores, q=5).safe  # withheld together: 2 + bin 7's patients >= q
    confusion = [CountQuery("y", c, "s", lo, hi) for c in (0, 1) for lo, hi in ((0.7, math.inf), (-math.inf, 0.7))]
    result = audit_counts(base + confusion, labels, scores, q=5)
    assert not result.safe and result.group is not None


def test_count_queries_are_validated():
    with pytest.raises(ValueError, match="outcome together with a label"):
        CountQuery("y")
    with pytest.raises(ValueError, match="without a score source"):
        CountQuery(lo=0.5)
    with pytest.raises(ValueError, match="lo < hi"):
        CountQuery(source="s", lo=0.5, hi=0.5)


def test_a_second_source_with_the_same_scores_cannot_difference_a_sparse_band():
    """Cuts of two sources whose scores agree (a GLM reproducing a score column): the cells between them are empty."""
    rng = np.random.default_rng(5)
    s = np.concatenate([rng.uniform(0, 0.3, 40), [0.31, 0.315], rng.uniform(0.32, 1, 40)])
    labels, scores = {"y": (rng.random(s.size) < 0.5).astype(int)}, {"col": s, "glm": s.copy()}
    cuts = [CountQuery(source="col", lo=0.3), CountQuery(source="glm", lo=0.32)]
    assert not audit_counts(cuts, labels, scores, q=5).safe  # the band [0.3, 0.32) holds 2 patients
    assert audit_counts(cuts[:1] + [CountQuery(source="glm", lo=0.3)], labels, scores, q=5).safe
