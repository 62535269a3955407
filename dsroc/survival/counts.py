"""The survival histogram: counts per (time bin, status, score bin) on public grids, their binning and pooling.

A patient with follow-up time ``T`` falls in time bin ``k`` (``0 .. K-1``) if ``e_k < T <= e_{k+1}`` for the
public time edges ``0 = e_0 < e_1 < ... < e_K`` (``T = 0`` goes to the first bin; the last edge may be
``+inf``), and in the binned analysis her time is the bin's right edge ``e_{k+1}``. For an infinite last
edge the representative time is ``2 e_{K-1} - e_{K-2}`` (one more width of the previous bin): it only needs
to exceed every finite edge, since horizons are at most the last finite edge. Scores are predicted risks in
``[0, 1]`` on the public score edges ``0 = s_0 < ... < s_J = 1`` (bin ``j`` is ``[s_j, s_{j+1})``, the last
bin closed); a binned score is its bin's midpoint unless the per-cell sums of the risks are given.
Binning time is not free: the censorings inside a bin count as after all of the bin's events (grouped
times), which raises the Kaplan-Meier curve a little; a finer time grid shrinks the gap.

Noisy releases are real-valued and may be negative. The estimators use the released sums as they are
(sums of unbiased noise are unbiased, and clipping each cell at zero would add phantom patients to the
empty cells, pulling a concordance towards 1/2), and keep only what must stay in range: the event and
censoring counts per time point (summed over the score bins) are clipped at zero before they form risk
sets, hazards lie in ``[0, 1]``, and each final estimate is clipped into its range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Real

import numpy as np

from .._checks import as_labels, as_scores

__all__ = ["SurvivalHistogram", "sum_histograms", "risk_sums_of", "check_time_edges", "check_score_edges",
           "check_number"]


def check_time_edges(time_edges) -> np.ndarray:
    """Validate time edges: 1-D, ``e_0 = 0``, strictly increasing, finite except possibly the last (``+inf``)."""
    e = np.asarray(time_edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 2:
        raise ValueError(f"time_edges must be one-dimensional with at least 2 values (1 bin), got shape {e.shape}")
    if e[0] != 0.0:
        raise ValueError(f"time_edges must start at 0, got {e[0]}")
    if not np.isfinite(e[:-1]).all() or np.isnan(e[-1]):
        raise ValueError("time_edges must be finite, except that the last edge may be +inf")
    if np.any(np.diff(e) <= 0.0):
        raise ValueError("time_edges must be strictly increasing")
    if np.isinf(e[-1]) and e.size < 3:
        raise ValueError("time_edges with an infinite last edge need a finite positive edge before it")
    return e


def check_score_edges(score_edges) -> np.ndarray:
    """Validate score edges: 1-D, finite, strictly increasing from 0 to 1 (risks are probabilities)."""
    s = np.asarray(score_edges, dtype=np.float64)
    if s.ndim != 1 or s.size < 2:
        raise ValueError(f"score_edges must be one-dimensional with at least 2 values (1 bin), got shape {s.shape}")
    if not np.isfinite(s).all() or s[0] != 0.0 or s[-1] != 1.0:
        raise ValueError(f"score_edges must be finite and run from 0 to 1, got [{s[0]}, {s[-1]}]")
    if np.any(np.diff(s) <= 0.0):
        raise ValueError("score_edges must be strictly increasing")
    return s


def check_number(value, *, name: str) -> float:
    """A real number (not a bool, string or array) as float, or ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


def _frozen(values) -> np.ndarray:
    arr = np.array(values, dtype=np.float64)
    arr.setflags(write=False)
    return arr


def _cells(values, name: str, shape: tuple[int, ...]) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape (K, 2, J) = {shape} for the grids, got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite")
    return _frozen(arr)


def survival_cells(time, event, risk, time_edges, score_edges) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each patient's time bin ``k`` (``e_k < T <= e_{k+1}``, ``T = 0`` in the first), status and score bin
    ``j`` (``[s_j, s_{j+1})``, the last closed) for already validated data on validated grids."""
    e, s = np.asarray(time_edges, dtype=np.float64), np.asarray(score_edges, dtype=np.float64)
    k = np.maximum(np.searchsorted(e, time, side="left"), 1) - 1
    j = np.minimum(np.searchsorted(s, risk, side="right") - 1, s.size - 2)
    return k, np.asarray(event, dtype=np.int64), j


@dataclass(frozen=True, eq=False)
class SurvivalHistogram:
    """Counts of patients per (time bin, status, score bin), possibly noisy sums over sites.

    Parameters
    ----------
    counts : array of shape (K, 2, J)
        ``counts[k, s, j]``: patients in time bin ``k`` with status ``s`` (0 censored, 1 event) and score
        bin ``j``. Real values are allowed (noisy released sums).
    time_edges : array of shape (K + 1,)
        ``0 = e_0 < ... < e_K``; the last edge may be ``+inf``.
    score_edges : array of shape (J + 1,)
        ``0 = s_0 < ... < s_J = 1`` on the predicted risk.
    score_sum, score_sq_sum : array of shape (K, 2, J), optional
        Per-cell sums of the predicted risks and of their squares (for Brier and calibration); both or
        neither.
    """

    counts: np.ndarray
    time_edges: np.ndarray
    score_edges: np.ndarray
    score_sum: np.ndarray | None = None
    score_sq_sum: np.ndarray | None = None
    time_points: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        e, s = check_time_edges(self.time_edges), check_score_edges(self.score_edges)
        shape = (e.size - 1, 2, s.size - 1)
        object.__setattr__(self, "time_edges", _frozen(e))
        object.__setattr__(self, "score_edges", _frozen(s))
        object.__setattr__(self, "counts", _cells(self.counts, "counts", shape))
        if (self.score_sum is None) != (self.score_sq_sum is None):
            raise ValueError("score_sum and score_sq_sum must be given together (both or neither)")
        if self.score_sum is not None:
            object.__setattr__(self, "score_sum", _cells(self.score_sum, "score_sum", shape))
            object.__setattr__(self, "score_sq_sum", _cells(self.score_sq_sum, "score_sq_sum", shape))
        points = e[1:].copy()
        if np.isinf(points[-1]):
            points[-1] = 2.0 * e[-2] - e[-3]
        object.__setattr__(self, "time_points", _frozen(points))

    @classmethod
    def from_patients(cls, time, event, risk, *, time_edges, score_edges) -> "SurvivalHistogram":
        """The exact (noise-free) histogram of per-patient data, with the per-cell risk sums.

        Parameters
        ----------
        time : array of shape (n,)
            Follow-up times, finite and ``>= 0``, at most the last time edge.
        event : array of shape (n,)
            Status, 1 event and 0 censored.
        risk : array of shape (n,)
            Predicted risk of an event by the horizon, in ``[0, 1]``.
        time_edges, score_edges : array
            The public grids (see the class).
        """
        e, s = check_time_edges(time_edges), check_score_edges(score_edges)
        t = as_scores(time, name="time")
        if t.min() < 0.0:
            raise ValueError(f"time must be >= 0 (follow-up times); found a minimum of {t.min()}")
        if t.max() > e[-1]:
            raise ValueError(f"time must be at most the last time edge {e[-1]}; found {t.max()}")
        d = as_labels(event, name="event")
        r = as_scores(risk, name="risk", score_range=(0.0, 1.0))
        if not t.size == d.size == r.size:
            raise ValueError(f"time, event and risk must have the same length, got {t.size}, {d.size}, {r.size}")
        k_bins, j_bins = e.size - 1, s.size - 1
        k, d, j = survival_cells(t, d, r, e, s)
        flat = (k * 2 + d) * j_bins + j
        size = k_bins * 2 * j_bins

        def cells(weights=None):
            return np.bincount(flat, weights=weights, minlength=size).reshape(k_bins, 2, j_bins)

        return cls(cells(), e, s, score_sum=cells(r), score_sq_sum=cells(r * r))

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(K, 2, J)``."""
        return self.counts.shape

    @property
    def score_midpoints(self) -> np.ndarray:
        """The score standing for each bin when no risk sums are given: ``(s_j + s_{j+1}) / 2``."""
        return 0.5 * (self.score_edges[:-1] + self.score_edges[1:])

    def risk_sums(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-cell sums of the risks ``r`` and of ``r^2``, each ``(K, 2, J)``.

        The released ``score_sum`` and ``score_sq_sum``; without them every patient takes her bin's
        midpoint ``m``: ``N m`` and ``N m^2`` for a cell of ``N`` patients.
        """
        return risk_sums_of(self.counts, self.score_sum, self.score_sq_sum, self.score_midpoints)

    def horizon_index(self, horizon, *, name: str = "horizon") -> int:
        """The number of time points ``<= horizon``: bins before it hold the cases, the rest the controls.

        ``horizon`` must be finite, positive and at most the last finite time edge. A horizon inside a bin
        counts that bin's patients as still event-free (their binned time is the right edge).
        """
        h = check_number(horizon, name=name)
        last = self.time_edges[-2] if np.isinf(self.time_edges[-1]) else self.time_edges[-1]
        if not (np.isfinite(h) and 0.0 < h <= last):
            raise ValueError(f"{name} must lie in (0, {last}] (the last finite time edge), got {horizon!r}")
        return int(np.searchsorted(self.time_points, h, side="right"))

    def __add__(self, other: "SurvivalHistogram") -> "SurvivalHistogram":
        """Pool two sites' histograms on the same grids (cell-wise sums)."""
        if not isinstance(other, SurvivalHistogram):
            return NotImplemented
        if not np.array_equal(self.time_edges, other.time_edges):
            raise ValueError("time_edges differ: histograms can be pooled only on the same public time grid")
        if not np.array_equal(self.score_edges, other.score_edges):
            raise ValueError("score_edges differ: histograms can be pooled only on the same public score grid")
        if (self.score_sum is None) != (other.score_sum is None):
            raise ValueError("score_sum is present in one histogram only: pool histograms of the same release")
        sums = {}
        if self.score_sum is not None:
            sums = {"score_sum": self.score_sum + other.score_sum, "score_sq_sum": self.score_sq_sum + other.score_sq_sum}
        return SurvivalHistogram(self.counts + other.counts, self.time_edges, self.score_edges, **sums)


def risk_sums_of(counts, score_sum, score_sq_sum, midpoints) -> tuple[np.ndarray, np.ndarray]:
    """The risk sums of :meth:`SurvivalHistogram.risk_sums` for cells ``(..., K, 2, J)`` (the released sums, else
    each patient at her score bin's midpoint)."""
    if score_sum is None:
        return counts * midpoints, counts * midpoints * midpoints
    return score_sum, score_sq_sum


def sum_histograms(histograms) -> SurvivalHistogram:
    """Pool the sites' histograms (same grids, same fields): the cell-wise sum of one or more histograms."""
    items = list(histograms)
    if not items:
        raise ValueError("histograms is empty: pool at least one site's histogram")
    total = items[0]
    for other in items[1:]:
        total = total + other
    return total
