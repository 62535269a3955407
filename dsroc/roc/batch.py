"""Grouped (batched) versions of the core statistics: many data sets in one concatenated array, one sort.

Each function here takes data sets stacked into one array with an integer group id per element and
returns, per element or per group, exactly what the single-data-set function in :mod:`dsroc.roc.auc`,
:mod:`dsroc.roc.rocglm` or :mod:`dsroc.roc.moments` returns for that group alone (same tie conventions, same
floating-point expressions), without a Python loop over groups. They exist for the simulation study,
which evaluates hundreds of thousands of data sets, and are tested against the single-data-set
functions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import as_labels, as_scores
from .auc import check_ties, delong_variance_from_moments, survivor_from_counts
from .rocglm import rocglm_grid

__all__ = [
    "GroupedPlacements",
    "check_groups",
    "group_sizes",
    "grouped_placement_values",
    "grouped_class_placements",
    "grouped_mean",
    "grouped_variance",
    "grouped_delong_variance",
    "grouped_rocglm_counts",
    "RowPlacements",
    "row_strict_placements",
]

def check_groups(groups, size: int, n_groups: int, *, name: str = "groups") -> np.ndarray:
    """Validate group ids: integers in ``[0, n_groups)``, one per element of an array of length ``size``."""
    if isinstance(n_groups, bool) or int(n_groups) != n_groups or n_groups < 1:
        raise ValueError(f"n_groups must be a positive integer, got {n_groups!r}")
    g = np.asarray(groups)
    if g.ndim != 1 or g.size != size:
        raise ValueError(f"{name} must be one-dimensional with one id per element ({size}), got shape {g.shape}")
    if g.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integer group ids, got dtype {g.dtype}")
    if g.size and (g.min() < 0 or g.max() >= n_groups):
        raise ValueError(f"{name} must lie in [0, n_groups) = [0, {n_groups}); found [{g.min()}, {g.max()}]")
    return g.astype(np.int64, copy=False)


def group_sizes(groups, n_groups: int) -> np.ndarray:
    """Number of elements in each group (int64, length ``n_groups``)."""
    return np.bincount(groups, minlength=n_groups).astype(np.int64)


def _group_order(values: np.ndarray, groups: np.ndarray, n_groups: int) -> tuple[np.ndarray, bool]:
    """Permutation sorting the elements by (group, value), and whether it keeps every element in its
    group's slice (groups already stored one after another)."""
    if np.all(groups[1:] >= groups[:-1]):
        # Groups stored one after another (the usual batch layout): sort each slice on its own, which is
        # cache-friendly and needs no second sort key.
        bounds = np.concatenate(([0], np.cumsum(np.bincount(groups, minlength=n_groups))))
        order = np.empty(values.size, dtype=np.intp)
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            if hi > lo:
                order[lo:hi] = np.argsort(values[lo:hi])
                order[lo:hi] += lo
        return order, True
    order = np.argsort(values)
    # Small integer keys make numpy's stable sort a radix sort: O(N) for the second key.
    key_type = np.int16 if n_groups <= np.iinfo(np.int16).max else np.int64
    return order[np.argsort(groups[order].astype(key_type), kind="stable")], False


def _sorted_below_counts(values, refs, groups, n_groups, *, need_lt=True):
    """Sort by (group, value) once; for every element (in sorted order) and every reference indicator in
    ``refs``, count the reference elements of its group with a value ``<`` and ``<=`` its own.

    Ties are handled by blocks of equal (group, value). Returns ``order``, the sorted group ids and, per
    indicator, ``(lt, le, n_ref)`` with ``lt``, ``le`` in sorted order and ``n_ref`` per group (``lt`` is
    None unless ``need_lt``: the strict survivor function needs only ``le``).
    """
    n = values.size
    order, in_place = _group_order(values, groups, n_groups)
    v, g = values[order], (groups if in_place else groups[order])
    new_block = np.empty(n, dtype=bool)
    new_block[0] = True
    np.not_equal(v[1:], v[:-1], out=new_block[1:])
    new_block[1:] |= g[1:] != g[:-1]
    no_ties = bool(new_block.all())
    if not no_ties:
        first = np.flatnonzero(new_block)  # first index of each tie block
        end = np.append(first[1:], n)  # one past its last index
        block = np.cumsum(new_block) - 1
    counts = []
    for is_ref in refs:
        cum = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(is_ref[order], out=cum[1:])
        n_ref = np.bincount(groups, weights=is_ref, minlength=n_groups).astype(np.int64)
        before = np.concatenate(([0], np.cumsum(n_ref)[:-1]))[g]  # reference elements in earlier groups
        if no_ties:
            lt, le = (cum[:-1] - before if need_lt else None), cum[1:] - before
        else:
            lt, le = (cum[first][block] - before if need_lt else None), cum[end][block] - before
        counts.append((lt, le, n_ref))
    return order, g, counts


def grouped_placement_values(ref_scores, ref_groups, query_scores, query_groups, *, n_groups: int, ties: str = "mid") -> np.ndarray:
    """Survivor function of each group's reference scores at that group's query scores.

    The grouped form of :func:`dsroc.placement_values`: element ``i`` of the result equals
    ``placement_values(ref_scores[ref_groups == g], [query_scores[i]], ties=ties)`` with
    ``g = query_groups[i]``.

    Parameters
    ----------
    ref_scores, query_scores : array_like
        Finite scores, all groups concatenated.
    ref_groups, query_groups : array_like of int
        Group id in ``[0, n_groups)`` of each score.
    n_groups : int
        Number of groups; every group holding a query needs at least one reference score.
    ties : {"mid", "strict"}, default "mid"

    Returns
    -------
    ndarray
        One value in [0, 1] per query score.
    """
    check_ties(ties)
    ref = as_scores(ref_scores, name="ref_scores")
    query = as_scores(query_scores, name="query_scores")
    rg = check_groups(ref_groups, ref.size, n_groups, name="ref_groups")
    qg = check_groups(query_groups, query.size, n_groups, name="query_groups")
    groups = np.concatenate([rg, qg])
    # Lay the groups out one after another (a stable sort of the ids: one merge when both inputs are
    # stored by group), so that each group's slice is sorted on its own (see _group_order).
    layout = np.argsort(groups, kind="stable")
    values, groups = np.concatenate([ref, query])[layout], groups[layout]
    is_ref = (layout < ref.size).view(np.int8)
    order, g, ((lt, le, n_ref),) = _sorted_below_counts(values, [is_ref], groups, n_groups)
    empty = np.flatnonzero((np.bincount(qg, minlength=n_groups) > 0) & (n_ref == 0))
    if empty.size:
        raise ValueError(f"group(s) {empty[:5].tolist()} have query scores but no reference scores")
    out = np.empty(values.size)
    with np.errstate(invalid="ignore", divide="ignore"):  # groups without reference hold no query
        out[layout[order]] = survivor_from_counts(lt, le, n_ref[g], ties)
    return out[ref.size :]


class GroupedPlacements(NamedTuple):
    """Placement values of many data sets at once (see :func:`grouped_class_placements`).

    ``pv`` is aligned with the input: a positive's ``PV0 = S0(s)``, a negative's ``PV1 = S1(s)``.
    ``n0`` and ``n1`` are the class sizes per group.
    """

    pv: np.ndarray
    n0: np.ndarray
    n1: np.ndarray


def grouped_class_placements(scores, labels, groups, *, n_groups: int, ties: str = "mid") -> GroupedPlacements:
    """Placement values of both classes of many data sets, with one sort.

    For a positive, ``S0`` of its group's negatives at its score (its false positive rate, ``PV0``);
    for a negative, ``S1`` of its group's positives (``PV1``) -- what :func:`dsroc.placement_values`
    gives on each group alone. Every group needs at least one negative and one positive.
    """
    check_ties(ties)
    s = as_scores(scores, name="scores")
    y = as_labels(labels, name="labels")
    if y.size != s.size:
        raise ValueError(f"scores and labels must have the same length, got {s.size} and {y.size}")
    g = check_groups(groups, s.size, n_groups)
    mid = ties == "mid"
    order, gs, ((lt0, le0, n0), (lt1, le1, n1)) = _sorted_below_counts(s, [1 - y, y], g, n_groups, need_lt=mid)
    for name, sizes in (("negatives (label 0)", n0), ("positives (label 1)", n1)):
        missing = np.flatnonzero(sizes == 0)
        if missing.size:
            raise ValueError(f"group(s) {missing[:5].tolist()} have no {name}; both classes must be present")
    pos = y[order] == 1
    # A positive is placed among the negatives (PV0), a negative among the positives (PV1).
    lt = np.where(pos, lt0, lt1) if mid else None
    le, n_ref = np.where(pos, le0, le1), np.where(pos, n0[gs], n1[gs])
    pv = np.empty(s.size)
    pv[order] = survivor_from_counts(lt, le, n_ref, ties)
    return GroupedPlacements(pv, n0, n1)


def grouped_mean(values, groups, *, n_groups: int) -> np.ndarray:
    """Mean of each group's values (NaN for an empty group)."""
    x = np.asarray(values, dtype=np.float64)
    g = check_groups(groups, x.size, n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(g, weights=x, minlength=n_groups) / group_sizes(g, n_groups)


def grouped_variance(values, groups, *, n_groups: int) -> np.ndarray:
    """Sample variance (n - 1) of each group's values, two-pass like :func:`dsroc.pooled_variance`.

    The squared deviations are taken from each group's own mean (NaN for groups with fewer than two).
    """
    x = np.asarray(values, dtype=np.float64)
    g = check_groups(groups, x.size, n_groups)
    n = group_sizes(g, n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(g, weights=x, minlength=n_groups) / n
        ssd = np.bincount(g, weights=(x - mean[g]) ** 2, minlength=n_groups)
        return np.where(n >= 2, ssd / (n - 1), np.nan)


def grouped_delong_variance(placements: GroupedPlacements, labels, groups, *, n_groups: int) -> np.ndarray:
    """DeLong variance per group, ``var(PV1)/n0 + var(PV0)/n1`` as :func:`dsroc.delong_variance_from_moments`.

    NaN for a group with fewer than two negatives or positives.
    """
    y = as_labels(labels, name="labels")
    g = check_groups(groups, y.size, n_groups)
    # One grouped variance over (group, class) cells: cell 2g holds PV1 of the negatives, 2g + 1 PV0.
    var = grouped_variance(placements.pv, 2 * g + y, n_groups=2 * n_groups).reshape(n_groups, 2)
    return delong_variance_from_moments(var_pv0=var[:, 1], n1=placements.n1, var_pv1=var[:, 0], n0=placements.n0)


def grouped_rocglm_counts(pv0, groups, grid=None, *, n_groups: int) -> np.ndarray:
    """ROC-GLM counts ``k_j = #{i in group : PV0_i <= t_j}`` for every group, shape (n_groups, nT).

    The grouped form of :func:`dsroc.rocglm_counts`.
    """
    pv = as_scores(pv0, name="pv0", score_range=(0.0, 1.0))
    g = check_groups(groups, pv.size, n_groups)
    grid = rocglm_grid(grid)
    nt = grid.size
    # First threshold index j with pv <= t_j; the value counts for every threshold from there on.
    first = np.searchsorted(grid, pv, side="left")
    hist = np.bincount(g * (nt + 1) + first, minlength=n_groups * (nt + 1)).reshape(n_groups, nt + 1)
    return np.cumsum(hist[:, :nt], axis=1, dtype=np.int64)


# Many data sets over the same patients (one row each, e.g. the noise settings of one replication): every
# row has the same labels and size, so a row-wise sort replaces the grouped bookkeeping.

class RowPlacements(NamedTuple):
    """Strict placement values of many rows over the same labels (see :func:`row_strict_placements`).

    ``pv0`` (R, n1) and ``pv1`` (R, n0) in ascending score order within each row; ``counts`` (R, nT) the
    ROC-GLM counts ``#{PV0 <= t_j}`` of each row.
    """

    pv0: np.ndarray
    pv1: np.ndarray
    counts: np.ndarray


def row_strict_placements(scores, labels, grid=None, *, overwrite_scores: bool = False) -> RowPlacements:
    """Strict placement values of both classes of every row of ``scores`` (shape (R, n), non-negative), the
    labels shared by all rows, and the ROC-GLM counts of the positives' ones on ``grid``.

    ``PV0 = #{negatives > s} / n0`` of each positive and ``PV1 = #{positives > s} / n1`` of each negative,
    as :func:`grouped_class_placements` with ``ties="strict"`` gives for each row alone (the same counts and
    expression), in ascending score order within each row; the counts as :func:`grouped_rocglm_counts`.

    One integer sort per row: a non-negative double's bits order like its value (as unsigned integers,
    -0.0 shifted to 0.0), so the bits shifted left with the label in the lowest bit sort by value and,
    within ties, negatives first; the same keys with the label bit flipped, sorted again (nearly sorted
    already: a merge of runs), put the positives first. The rest is integer arithmetic on the whole batch
    at once: the sorted positions of a class, laid out one row after another, give each of its elements'
    count of the other class at or below it, offset by the row so that they increase over the whole batch
    (one search finds every row's ROC-GLM counts).

    With ``overwrite_scores`` a writeable C-contiguous float64 ``scores`` array holds the sort keys
    (its values are lost; no copy of the batch is made).
    """
    x = np.asarray(scores, dtype=np.float64)
    y = as_labels(labels, name="labels")
    if x.ndim != 2 or x.shape[1] != y.size:
        raise ValueError(f"scores must have shape (rows, {y.size}), one column per label; got {x.shape}")
    if x.size and not (x.min() >= 0.0 and x.max() < np.inf):  # NaN fails both
        raise ValueError("scores must be finite and non-negative (e.g. probabilities)")
    grid = rocglm_grid(grid)
    rows, n = x.shape
    n1 = int(y.sum())
    n0 = n - n1
    if n0 == 0 or n1 == 0:
        raise ValueError("both classes must be present (labels 0 and 1)")
    if overwrite_scores and x.flags.writeable and x.flags.c_contiguous:
        keys = x.view(np.uint64)
        keys <<= np.uint64(1)
    else:
        keys = np.left_shift(np.ascontiguousarray(x).view(np.uint64), np.uint64(1))
    keys |= y.astype(np.uint64)
    keys.sort(axis=1)
    flat = keys.ravel()
    pos = flat.astype(np.uint8)
    pos &= 1
    pos = pos.view(bool)
    # Positives: flat index r n + j of the k-th positive of row r (k = r n1 + i) minus k is r n0 plus the
    # negatives at or below it (all come before it: negatives first within ties), nondecreasing over the batch.
    below0 = np.flatnonzero(pos)
    below0 -= np.arange(below0.size)
    r = np.arange(rows)[:, None]
    pv0 = (n0 * (r + 1) - below0.reshape(rows, n1)) / n0
    # Negatives: the same with the label bit flipped (positives first within ties) gives the positives at or
    # below each. The flipped keys are out of order only inside tied blocks: numpy's stable sort (a merge
    # of runs) takes a twentieth of the first sort's time on them.
    keys ^= np.uint64(1)
    keys.sort(axis=1, kind="stable")
    neg = flat.astype(np.uint8)
    neg &= 1
    below1 = np.flatnonzero(neg.view(bool))
    below1 -= np.arange(below1.size)
    pv1 = (n1 * (r + 1) - below1.reshape(rows, n0)) / n1
    # ROC-GLM counts: PV0 = i / n0 <= t_j for i < c_j, i.e. for below0 - r n0 >= n0 - c_j + 1 (in [1, n0]
    # for thresholds inside (0, 1)): every element of a later row lies above that, none of an earlier row.
    c = np.searchsorted(np.arange(n0 + 1) / n0, grid, side="right")
    counts = (r + 1) * n1 - np.searchsorted(below0, n0 * r + (n0 + 1 - c), side="left")
    return RowPlacements(pv0, pv1, counts)
