"""Query auditing of released counts: would the answers so far determine the size of a group of 1 to q-1 patients?

Every count a site releases about a population (a confusion cell, a calibration bin's count or number
of positives, a class total) is the number of patients with some labels and a score in some interval
of some score source. Cut the scores of each source at every interval end answered so far, and the
patients fall into *atoms*: cells of (label of each outcome) x (interval of each source). Each count is
then a sum of atom counts, a 0/1 row over the atoms. Adding, subtracting and scaling answers
determines exactly the linear combinations of atom counts in the row space of those rows. A group of
atoms (a 0/1 vector) whose indicator lies in the row space has a determined size; the auditor refuses
an answer after which some group's size would be between 1 and q - 1 (Chin 1986, Kenthapadi et al.
2005 on auditing sum and count queries).

Atoms without patients are left out, as if the analyst knew they are empty (a model reproducing a
score column makes every cell between the two sources' different cuts empty, and an analyst who built
it knows); this can only find more determined groups. The search is exact. Atoms with identical rows
are merged (no answer separates them); atoms with q or more patients cannot belong to a small group, so the search runs in the subspace of row-space vectors
that vanish on them, usually {0}; what remains is enumerated with pruning. Linear algebra is modulo the
prime 2**31 - 1: a vector in the rational row space is in the modular one too (up to a denominator
divisible by the prime, probability about 1e-9 per instance), and the modular row space can only be
larger, which errs towards refusing. A search beyond ``max_nodes`` also refuses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = ["CountQuery", "AuditResult", "atoms", "small_determined_group", "audit_counts", "PRIME"]

PRIME = 2**31 - 1  # products of two residues fit in int64
_MAX_CELLS = 1_000_000


@dataclass(frozen=True)
class CountQuery:
    """A released count: patients whose ``outcome`` label is ``label`` (if ``outcome``) and whose score
    under ``source`` lies in ``[lo, hi)`` (if ``source``; ``lo`` may be -inf and ``hi`` +inf)."""

    outcome: str | None = None
    label: int | None = None
    source: str | None = None
    lo: float = -math.inf
    hi: float = math.inf

    def __post_init__(self):
        if (self.outcome is None) != (self.label is None) or self.label not in (None, 0, 1):
            raise ValueError("a count query gives an outcome together with a label in {0, 1}, or neither")
        if self.source is None and (self.lo != -math.inf or self.hi != math.inf):
            raise ValueError("a count query without a score source cannot restrict the score")
        if not self.lo < self.hi or math.isnan(self.lo) or math.isnan(self.hi):
            raise ValueError(f"a count query's interval needs lo < hi, got [{self.lo}, {self.hi})")


@dataclass(frozen=True)
class AuditResult:
    """The outcome of an audit: ``group`` (atom indices of the merged atoms) when a small group is
    determined, ``undecided`` when the search gave up (treat as determined)."""

    group: tuple[int, ...] | None = None
    undecided: bool = False

    @property
    def safe(self) -> bool:
        """No group of 1 to q-1 patients is determined."""
        return self.group is None and not self.undecided


def atoms(queries: Sequence[CountQuery], labels: Mapping[str, np.ndarray],
          scores: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The query-by-atom 0/1 matrix and the number of patients in each atom.

    Parameters
    ----------
    queries : sequence of CountQuery
    labels : mapping of outcome name to 0/1 array (one entry per patient, same order everywhere)
    scores : mapping of score source to float array (same patients)

    Returns
    -------
    rows : ndarray of bool, shape (len(queries), n_atoms)
    counts : ndarray of int64, shape (n_atoms,)
    """
    outcomes = sorted({q.outcome for q in queries if q.outcome is not None})
    sources = sorted({q.source for q in queries if q.source is not None})
    cuts = {s: np.unique([v for q in queries if q.source == s for v in (q.lo, q.hi) if math.isfinite(v)])
            for s in sources}
    shape = [2] * len(outcomes) + [cuts[s].size + 1 for s in sources]
    n_cells = int(np.prod(shape, dtype=np.float64)) if shape else 1
    if n_cells > _MAX_CELLS:
        raise ValueError(f"the answers cut the patients into {n_cells} atoms, more than the auditor handles ({_MAX_CELLS})")
    n = next(iter(labels.values())).size if labels else next(iter(scores.values())).size if scores else 0
    coords = [np.asarray(labels[o], dtype=np.int64) for o in outcomes]
    coords += [np.searchsorted(cuts[s], np.asarray(scores[s], dtype=np.float64), side="right") for s in sources]
    cell = np.ravel_multi_index(coords, shape) if shape else np.zeros(n, dtype=np.int64)
    counts = np.bincount(cell, minlength=n_cells).astype(np.int64)
    rows = np.empty((len(queries), n_cells), dtype=bool)
    for r, q in enumerate(queries):
        masks = []
        for o in outcomes:
            masks.append(np.ones(2, bool) if q.outcome != o else np.arange(2) == q.label)
        for s in sources:
            k = np.arange(cuts[s].size + 1)
            if q.source != s:
                masks.append(np.ones(k.size, bool))
                continue
            first = 0 if q.lo == -math.inf else int(np.searchsorted(cuts[s], q.lo)) + 1
            stop = k.size if q.hi == math.inf else int(np.searchsorted(cuts[s], q.hi)) + 1
            masks.append((k >= first) & (k < stop))
        row = np.ones((), bool)
        for m in masks:
            row = np.multiply.outer(row, m)
        rows[r] = row.ravel()
    return rows, counts


def _rref(m: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Reduced row echelon form modulo PRIME (nonzero rows only) and its pivot columns."""
    m = np.array(m, dtype=np.int64) % PRIME
    pivots, r = [], 0
    for c in range(m.shape[1]):
        if r == m.shape[0]:
            break
        nz = np.flatnonzero(m[r:, c])
        if nz.size == 0:
            continue
        p = r + nz[0]
        m[[r, p]] = m[[p, r]]
        m[r] = m[r] * pow(int(m[r, c]), PRIME - 2, PRIME) % PRIME
        factors = m[:, c].copy()
        factors[r] = 0
        m = (m - np.outer(factors, m[r]) % PRIME) % PRIME
        pivots.append(c)
        r += 1
    return m[:r], pivots


def _left_nullspace(m: np.ndarray) -> np.ndarray:
    """A basis (rows) of {y : y m = 0} modulo PRIME."""
    k = m.shape[0]
    if m.shape[1] == 0:
        return np.eye(k, dtype=np.int64)
    reduced, pivots = _rref(m.T)  # null space of m.T
    free = [c for c in range(k) if c not in set(pivots)]
    basis = np.zeros((len(free), k), dtype=np.int64)
    for i, f in enumerate(free):
        basis[i, f] = 1
        for row, p in enumerate(pivots):
            basis[i, p] = (-reduced[row, f]) % PRIME
    return basis


def small_determined_group(rows: np.ndarray, counts: np.ndarray, q: int, *, max_nodes: int = 200_000) -> AuditResult:
    """A 0/1 combination of atoms in the row space of ``rows`` whose patients number 1 to q-1, if any.

    Parameters
    ----------
    rows : ndarray of bool, shape (n_queries, n_atoms)
    counts : ndarray of int, shape (n_atoms,)
    q : int
        The privacy level.
    max_nodes : int
        Search nodes before giving up (the result is then ``undecided``).
    """
    rows = np.asarray(rows, dtype=bool)
    counts = np.asarray(counts, dtype=np.int64)
    # Empty atoms are taken as known to be empty: an analyst may know it (a model that reproduces a
    # score column leaves every cell between different cuts of the two empty), and assuming it can
    # only enlarge the row space, that is, refuse more.
    occupied = np.flatnonzero(counts > 0)
    rows, counts = rows[:, occupied], counts[occupied]
    if rows.size == 0 or q <= 1:
        return AuditResult()
    # Atoms no answer separates: one column.
    unique, inverse = np.unique(rows.T, axis=0, return_inverse=True)
    merged = np.bincount(inverse.ravel(), weights=counts, minlength=unique.shape[0]).astype(np.int64)
    a = unique.T.astype(np.int64)
    big, small = merged >= q, np.flatnonzero(merged < q)
    if small.size == 0:
        return AuditResult()
    # Row-space vectors that vanish on the atoms of q or more patients, restricted to the small ones.
    w = _left_nullspace(a[:, big]) @ a[:, small] % PRIME
    basis, pivots = _rref(w)
    if basis.shape[0] == 0:
        return AuditResult()
    found, undecided = _search(basis, pivots, merged[small], q, max_nodes)
    if undecided:
        return AuditResult(undecided=True)
    if found is None:
        return AuditResult()
    members = np.isin(inverse.ravel(), small[found])
    return AuditResult(group=tuple(int(i) for i in occupied[members]))


def _search(basis: np.ndarray, pivots: list[int], counts: np.ndarray, q: int, max_nodes: int):
    """Depth-first search over the 0/1 pivot values of the vectors of a RREF basis."""
    d, m = basis.shape
    last = np.full(m, -1)
    for j in range(m):
        nz = np.flatnonzero(basis[:, j])
        last[j] = nz[-1] if nz.size else -1
    done_at = [np.flatnonzero(last == i) for i in range(d)]  # columns whose value is final after variable i
    final_at = [last <= i for i in range(d)]
    nodes = 0

    def visit(i: int, total: np.ndarray):
        nonlocal nodes
        nodes += 1
        if nodes > max_nodes:
            raise _GiveUp
        if i == d:
            members = np.flatnonzero(total == 1)
            return members if 1 <= int(counts[members].sum()) < q else None
        for x in (0, 1):
            t = (total + basis[i]) % PRIME if x else total
            fixed = t[done_at[i]]
            if np.any((fixed != 0) & (fixed != 1)):
                continue
            if int(counts[final_at[i] & (t == 1)].sum()) >= q:  # counts only grow from here
                continue
            hit = visit(i + 1, t)
            if hit is not None:
                return hit
        return None

    try:
        return visit(0, np.zeros(m, dtype=np.int64)), False
    except _GiveUp:
        return None, True


class _GiveUp(Exception):
    pass


def audit_counts(queries: Sequence[CountQuery], labels: Mapping[str, np.ndarray], scores: Mapping[str, np.ndarray],
                 q: int, *, max_nodes: int = 200_000) -> AuditResult:
    """Whether the counts ``queries`` together determine the size of a group of 1 to q-1 patients.

    Raises ``ValueError`` when the answers cut the patients into too many atoms to audit (refuse then).
    """
    rows, counts = atoms(queries, labels, scores)
    return small_determined_group(rows, counts, q, max_nodes=max_nodes)
