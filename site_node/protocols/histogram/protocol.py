"""The histogram protocol at the site: one noisy release of per-class histograms (and scalars), charged once."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

import dsroc  # bin_index: looked up at first use (dsroc.histogram.grid imports scipy.optimize)

from ...data.datasets import strata_values
from ...errors import InvalidArgument
from ...rules.guard import analyst_input, check_release_parameters, require_privacy_level
from ...sessions import Session
from ...store.ledger import BudgetStatus, Release, ReleaseKey, ReleasePlan
from ..base import SiteProtocol
from .partitions import check_cells, joint_partition, part_index, partition_fingerprint, strata_partition
from .release import HistogramPlan, decode_histogram, draw_histogram, histogram_grid, plan_histogram

__all__ = ["HistogramRelease", "HistogramProtocol"]


@dataclass(frozen=True)
class HistogramRelease:
    """A histogram release: the noisy counts per class, the noisy scalars and the population's budget after it."""

    release: Release
    plan: HistogramPlan
    negatives: np.ndarray
    positives: np.ndarray
    scalars: dict
    charged: bool
    budget: BudgetStatus
    sums: tuple | None = None  # per-bin score sums (T0, T1) in bin widths, when asked for


class HistogramProtocol(SiteProtocol):
    """The histogram protocol's one call: the noisy histograms of a session's scores."""

    name = "histogram"

    def release(self, session: Session, *, epsilon: float, delta: float, n_bins: int, spacing: str,
                scalars=(), score_sums: bool = False, reservation: str = "", interior=(), strata: str = "",
                compare: Session | None = None) -> HistogramRelease:
        """Noisy per-class histograms (and scalars, score sums) of the session's scores: one release, charged
        once (using the hold ``reservation`` when given). ``strata`` (a column the policy lists) or ``compare``
        (another session of the analyst on the same dataset and outcome) split every bin further
        (:mod:`site_node.protocols.histogram.partitions`)."""
        release_plan, plan = self.plan(session, epsilon=epsilon, delta=delta, n_bins=n_bins, spacing=spacing,
                                       scalars=scalars, score_sums=score_sums, interior=interior, strata=strata,
                                       compare=compare)
        release, charged = self.site.charge(release_plan, reservation)
        h0, h1, values, sums = decode_histogram(plan, release.payload)
        budget = self.site.budget_of(self.site.datasets.config(session.data.dataset))
        return HistogramRelease(release, plan, h0, h1, values, charged, budget, sums)

    def plan(self, session: Session, *, epsilon: float, delta: float, n_bins: int, spacing: str,
             scalars=(), score_sums: bool = False, interior=(), strata: str = "",
             compare: Session | None = None) -> tuple[ReleasePlan, HistogramPlan]:
        """Check a histogram release and plan it (what PrepareRelease holds and the release charges).

        No model checks (every answer is covered by the noise, whatever the model), but each class must
        hold q patients: a one-class or tiny dataset gives histograms no analysis can use, and is
        refused before anything is charged (a disclosure of "fewer than q", as under every protocol).
        """
        self.require()
        if strata and compare is not None:
            raise InvalidArgument("give strata_column or compare_session_id, not both: one release is split one way")
        epsilon, delta = check_release_parameters(self.policy, epsilon, delta)
        data = session.data
        partition = strata_partition(self.policy, strata) if strata else None  # before anything about the data
        with analyst_input("epsilon, delta"):
            plan = plan_histogram(self.policy, data.score_range, epsilon=epsilon, delta=delta, n_bins=n_bins,
                                  spacing=spacing, scalars=scalars, interval=self.site.ledger_interval,
                                  score_sums=score_sums, interior=list(interior))
        if compare is not None:
            other = compare.data
            if (other.dataset, other.outcome) != (data.dataset, data.outcome):
                raise InvalidArgument(f"compare_session_id: the second model's session must be on the same dataset and "
                                      f"outcome ({data.dataset!r}, {data.outcome!r}), not ({other.dataset!r}, "
                                      f"{other.outcome!r})")
            edges2 = histogram_grid(self.policy, other.score_range, n_bins=n_bins, spacing=spacing,
                                    interior=list(interior))[0]
            partition = joint_partition(other.spec.key, edges2)
        q = self.policy.privacy_level
        require_privacy_level(data.n_negatives, q, "each class of a histogram (negatives)")
        require_privacy_level(data.n_positives, q, "each class of a histogram (positives)")
        parts, fingerprint = None, data.fingerprint
        if partition is not None:
            check_cells(self.policy, plan.n_bins, partition)
            plan = replace(plan, partition=partition)
            values = (compare.data.scores if compare is not None else
                      strata_values(self.site.datasets.table(data.dataset), data.dataset, strata))
            parts = part_index(partition, values)
            cells = dsroc.bin_index(data.scores, plan.edges) * partition.parts + parts
            fingerprint = partition_fingerprint(data.fingerprint, data.labels, cells, plan.n_cells)

        def make(seed: bytes) -> tuple[bytes, int, int]:
            rng = np.random.default_rng(int.from_bytes(seed, "big"))
            return draw_histogram(plan, data.scores, data.labels, rng, parts), 0, 0

        return ReleasePlan(ReleaseKey(*data.key, "histogram", plan.request), data.dataset, session.analyst,
                           plan.events, epsilon, delta, "histogram", fingerprint, make, True), plan
