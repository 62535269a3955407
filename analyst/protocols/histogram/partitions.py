"""Partitioned histogram releases at the analyst: one more release per site, split by strata or by a second model's bins.

``HistogramOptions(strata=COLUMN)`` and ``HistogramOptions(compare=SCORE2)`` each add one release per site
at the validation's (epsilon, delta), on the grid of the validation's own release (for the default
quantile grid: its edges at the quantiles of the first stage), held at every site before any site
releases (all or nothing, as every release). Every site must list the strata column in its policy
(``policy.strata``) and allow the cells (``policy.histogram_max_cells``); this is checked from the
policies the sites sent with their sessions before anything is released.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dsroc.v1 import site_pb2 as pb

from analyst.result.parts import num
from analyst.session import ValidationSession, score_source

__all__ = ["PartitionedSite", "PartitionedRelease", "check_partition_policies", "collect_partitioned",
           "compare_session"]


@dataclass(frozen=True)
class PartitionedSite:
    """One site's partitioned release: noisy counts per (bin, part), noise, guarantee and the budget after it."""

    negatives: np.ndarray
    positives: np.ndarray
    noise_sd: float
    epsilon: float
    delta: float
    release_id: str
    repeated: bool
    epsilon_spent: float
    negative_sums: np.ndarray | None = None
    positive_sums: np.ndarray | None = None
    sums_sd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (cells as nested lists: bins x parts)."""
        cells = np.vectorize(num, otypes=[object])
        sums = {} if self.negative_sums is None else {"negative_sums": cells(self.negative_sums).tolist(),
                                                      "positive_sums": cells(self.positive_sums).tolist(),
                                                      "sums_sd": num(self.sums_sd)}
        return {**sums, "negatives": self.negatives.tolist(), "positives": self.positives.tolist(),
                "noise_sd": num(self.noise_sd), "epsilon": num(self.epsilon), "delta": num(self.delta),
                "release_id": self.release_id, "repeated": self.repeated, "epsilon_spent": num(self.epsilon_spent)}


@dataclass(frozen=True)
class PartitionedRelease:
    """Every site's partitioned release on one grid: ``parts`` (strata, or the second model's bins)."""

    edges: np.ndarray
    parts: int
    strata_cuts: tuple[float, ...]
    compare_edges: np.ndarray | None
    sites: dict[str, PartitionedSite]

    def summed(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Summed counts of negatives and positives (bins x parts) and the summed noise SD per cell."""
        h0 = np.sum([s.negatives for s in self.sites.values()], axis=0).astype(np.float64)
        h1 = np.sum([s.positives for s in self.sites.values()], axis=0).astype(np.float64)
        return h0, h1, float(np.sqrt(sum(s.noise_sd**2 for s in self.sites.values())))

    def summed_sums(self) -> tuple[np.ndarray, np.ndarray, float] | None:
        """Summed score sums per cell and their noise SD (None when not released)."""
        if any(s.negative_sums is None for s in self.sites.values()):
            return None
        return (np.sum([s.negative_sums for s in self.sites.values()], axis=0),
                np.sum([s.positive_sums for s in self.sites.values()], axis=0),
                float(np.sqrt(sum(s.sums_sd**2 for s in self.sites.values()))))


def check_partition_policies(session: ValidationSession, *, strata: str | None, n_bins: int, compare: bool) -> None:
    """Refuse, before anything is released, a partition some site's policy would refuse (the sites check again)."""
    for name in session.sites:
        policy = session.policies[name]
        limit = policy.histogram_max_cells
        if strata is not None:
            listed = {s.column: list(s.cuts) for s in policy.strata}
            if strata not in listed:
                raise ValueError(f"strata {strata!r}: site {name}'s policy does not list it (policy.strata: "
                                 f"{sorted(listed)}); nothing was released")
            cells = n_bins * (len(listed[strata]) + 1)
        else:
            cells = n_bins * n_bins if compare else n_bins
        if limit and cells > limit:
            raise ValueError(f"{'strata' if strata is not None else 'compare'}: {cells} cells per class on the "
                             f"validation's {n_bins} bins is above site {name}'s limit of {limit} (policy: "
                             "histogram_max_cells); ask for fewer bins (n_bins); nothing was released")


def compare_session(session: ValidationSession, compare) -> ValidationSession:
    """A session at every site for the second model (a score column name or a GLM), opened as the first was."""
    source = score_source(score=compare) if isinstance(compare, str) else score_source(model=compare)
    return ValidationSession(session.connections, dataset=session.dataset, outcome=session.outcome, source=source,
                             progress=session.progress, executor=session.executor)


def collect_partitioned(session: ValidationSession, step: str, *, epsilon: float, delta: float, edges,
                        strata: str = "", compare: ValidationSession | None = None,
                        score_sums: bool = False) -> PartitionedRelease:
    """Every site's release of the grid ``edges`` (its interior edges, the site adds its range's ends) split by
    ``strata`` or by the bins of ``compare``'s scores; held at every site first (all or nothing)."""
    interior = [float(v) for v in np.asarray(edges)[1:-1]]

    def request(conn, held):
        return pb.HistogramRequest(session_id=session.session_ids[conn.name], epsilon=float(epsilon),
                                   delta=float(delta), edges=interior, score_sums=bool(score_sums),
                                   reservation_id=held, strata_column=strata,
                                   compare_session_id=compare.session_ids[conn.name] if compare is not None else "")

    def ask(conn, held):
        r = conn.call("ReleaseHistogram", request(conn, held))
        session.note_release(conn.name, r.release_id)
        shape = (len(r.edges) - 1, r.parts)
        if (r.parts < 2 or len(r.negatives) != shape[0] * shape[1]
                or (score_sums and len(r.negative_sums) != len(r.negatives))):
            raise ValueError(f"site {conn.name} did not release the partitioned histogram asked for (an older site?)")
        sums = ((np.reshape(r.negative_sums, shape), np.reshape(r.positive_sums, shape), r.sums_noise_sd)
                if score_sums else (None, None, 0.0))
        site = PartitionedSite(np.reshape(np.asarray(r.negatives, dtype=np.int64), shape),
                               np.reshape(np.asarray(r.positives, dtype=np.int64), shape), r.noise_sd, r.epsilon,
                               r.delta, r.release_id, r.repeated, r.epsilon_spent, *sums)
        session.progress(step, conn.name, f"{shape[0]} x {shape[1]} cells, noise SD {r.noise_sd:.3g}")
        return (np.asarray(r.edges), tuple(r.strata_cuts), np.asarray(r.compare_edges)), site

    holds = session.hold(step, lambda c: pb.PrepareRequest(histogram=request(c, "")))
    replies = session.commit(step, holds, ask)
    (grid, cuts, grid2), _ = replies[0]
    for ((other, other_cuts, other2), _), name in zip(replies, session.sites):
        if (other.shape != grid.shape or not np.allclose(other, grid, rtol=0, atol=1e-12) or other_cuts != cuts
                or other2.shape != grid2.shape or not np.allclose(other2, grid2, rtol=0, atol=1e-12)):
            raise ValueError(f"site {name} used another grid or other strata than {session.sites[0]}; partitioned "
                             "histograms on different cells cannot be summed")
    sites = {name: site for name, (_, site) in zip(session.sites, replies)}
    parts = next(iter(sites.values())).negatives.shape[1]
    return PartitionedRelease(grid, parts, cuts, grid2 if compare is not None else None, sites)
