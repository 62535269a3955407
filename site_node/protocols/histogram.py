"""The histogram protocol at the site: one noisy release of per-class histograms (and scalars), charged once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..guard import analyst_input, check_release_parameters, require_privacy_level
from ..histograms import HistogramPlan, decode_histogram, draw_histogram, plan_histogram
from ..ledger import BudgetStatus, Release, ReleaseKey, ReleasePlan
from ..sessions import Session
from .base import SiteProtocol

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
                scalars=(), score_sums: bool = False, reservation: str = "", interior=()) -> HistogramRelease:
        """Noisy per-class histograms (and scalars, score sums) of the session's scores: one release, charged
        once (using the hold ``reservation`` when given)."""
        release_plan, plan = self.plan(session, epsilon=epsilon, delta=delta, n_bins=n_bins, spacing=spacing,
                                       scalars=scalars, score_sums=score_sums, interior=interior)
        release, charged = self.site.charge(release_plan, reservation)
        h0, h1, values, sums = decode_histogram(plan, release.payload)
        budget = self.site.budget_of(self.site.datasets.config(session.data.dataset))
        return HistogramRelease(release, plan, h0, h1, values, charged, budget, sums)

    def plan(self, session: Session, *, epsilon: float, delta: float, n_bins: int, spacing: str,
             scalars=(), score_sums: bool = False, interior=()) -> tuple[ReleasePlan, HistogramPlan]:
        """Check a histogram release and plan it (what PrepareRelease holds and the release charges).

        No model checks (every answer is covered by the noise, whatever the model), but each class must
        hold q patients: a one-class or tiny dataset gives histograms no analysis can use, and is
        refused before anything is charged (a disclosure of "fewer than q", as under every protocol).
        """
        self.require()
        epsilon, delta = check_release_parameters(self.policy, epsilon, delta)
        data = session.data
        with analyst_input("epsilon, delta"):
            plan = plan_histogram(self.policy, data.score_range, epsilon=epsilon, delta=delta, n_bins=n_bins,
                                  spacing=spacing, scalars=scalars, interval=self.site.ledger_interval,
                                  score_sums=score_sums, interior=list(interior))
        q = self.policy.privacy_level
        require_privacy_level(data.negatives.size, q, "each class of a histogram (negatives)")
        require_privacy_level(data.positives.size, q, "each class of a histogram (positives)")

        def make(seed: bytes) -> tuple[bytes, int, int]:
            rng = np.random.default_rng(int.from_bytes(seed, "big"))
            return draw_histogram(plan, data.scores, data.labels, rng), 0, 0

        return ReleasePlan(ReleaseKey(*data.key, "histogram", plan.request), data.dataset, session.analyst,
                           plan.events, epsilon, delta, "histogram", data.fingerprint, make, True), plan
