"""The survival release at the site: one noisy (time bin x status x score bin) histogram of a survival session.

A survival session (opened with a declared time column; its outcome is the event indicator) is released once per
request on public grids: the time edges from the policy's survival grid (``policy.survival_time_edges``, the site
adds 0 and +infinity), the score grid as a histogram release's (:func:`site_node.protocols.histogram.release.
histogram_grid`, with its ends at 0 and 1: the scores are predicted risks). Each patient is one count in one cell,
optionally with her score's offset within its bin (and its square) in that cell's sums: discrete Laplace noise per
part from the site's exact sampler, at the scales of :func:`dsroc.survival.release.survival_release_scales`, drawn by
:func:`dsroc.survival.release.draw_survival_release` (the function the study calls). The whole release is pure
epsilon-DP and charged once on the ledger; the same request is a free, identical replay (docs/privacy.md,
"Survival").
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from dsroc.histogram.stages import SUMS_RESOLUTION
from dsroc.privacy.accounting import DiscreteLaplace
from dsroc.survival.release import (SurvivalRelease, decode_survival_release, draw_survival_release,
                                    encode_survival_release, survival_release_scales)

from ...config import Policy
from ...errors import FailedPrecondition, InvalidArgument, PermissionDenied
from ...rules.guard import check_release_parameters, require_privacy_level
from ...sessions import Session
from ...store.ledger import BudgetStatus, Release, ReleaseKey, ReleasePlan
from ..base import SiteProtocol
from .release import LAPLACE, MAX_SIGMA, histogram_grid, noise_sd

__all__ = ["KIND", "SurvivalPlan", "SiteSurvivalRelease", "SurvivalProtocol", "survival_time_grid", "survival_grids",
           "plan_survival", "draw_survival"]

KIND = "survival"  # the ledger's kind of release
# A requested time edge within this (relative to the edge) of a policy edge is that edge: an analyst's copy of the
# grid may be rounded (say to 9 decimals); the release uses the policy's own value, so the copy changes nothing.
_TIME_TOLERANCE = 1e-9


@dataclass(frozen=True)
class SurvivalPlan:
    """A checked survival request: its grids, noise scales and accountant events.

    ``time_edges`` is the full time grid (0 first, +infinity last), ``score_edges`` the full score grid (0 to 1);
    ``sigma`` and ``sums_sigma`` are the discrete Laplace scales of the counts and of each of the two sums (in
    ``1 / SUMS_RESOLUTION``; 0 without ``risk_sums``).
    """

    time_column: str
    time_edges: np.ndarray
    score_edges: np.ndarray
    epsilon: float
    delta: float
    sigma: float
    risk_sums: bool = False
    sums_sigma: float = 0.0

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(K, 2, J)``: time bins, status, score bins."""
        return self.time_edges.size - 1, 2, self.score_edges.size - 1

    @property
    def events(self) -> tuple:
        """The release's privacy events, composed into its one epsilon: the counts (a patient is one count), then
        the offsets' sum and the squares' sum (each moved by at most ``SUMS_RESOLUTION``)."""
        sums = [DiscreteLaplace(self.sums_sigma, SUMS_RESOLUTION)] * 2 if self.risk_sums else []
        return (DiscreteLaplace(self.sigma), *sums)

    @property
    def noise_sds(self) -> tuple[float, float]:
        """Noise SD of each count, and of each sum in ``1 / SUMS_RESOLUTION`` units (0 without the sums)."""
        return noise_sd(self.sigma, LAPLACE), noise_sd(self.sums_sigma, LAPLACE)

    @property
    def request(self) -> str:
        """Canonical text of what makes two requests the same release."""
        return json.dumps({"time": self.time_column, "epsilon": self.epsilon, "delta": self.delta,
                           "time_edges": self.time_edges[1:-1].tolist(), "edges": self.score_edges.tolist(),
                           "risk_sums": self.risk_sums, "mechanism": LAPLACE}, sort_keys=True)


@dataclass(frozen=True)
class SiteSurvivalRelease:
    """A survival release: its ledger record, plan, noisy values and the population's budget after it."""

    release: Release
    plan: SurvivalPlan
    values: SurvivalRelease
    charged: bool
    budget: BudgetStatus


def survival_time_grid(policy: Policy, interior) -> np.ndarray:
    """The full time grid ``[0, *interior, +inf]`` of a request's interior edges, each one of the policy's
    (returned as the policy's own value), at most ``survival_max_time_bins - 1`` of them; empty ``interior``: the
    policy's whole grid when it fits.

    Raises FailedPrecondition when the policy lists no grid, InvalidArgument for malformed edges, PermissionDenied
    for an edge the policy does not list or a grid finer than it allows.
    """
    grid = np.asarray(policy.survival_time_edges, dtype=np.float64)
    if grid.size == 0:
        raise FailedPrecondition("this site serves no survival release (its policy lists no survival_time_edges)")
    most = policy.survival_max_time_bins - 1
    e = np.asarray(list(interior), dtype=np.float64) if len(interior) else grid
    if len(interior) == 0 and e.size > most:
        raise PermissionDenied(f"policy: the site's whole survival grid has {e.size + 1} time bins, more than its "
                               f"limit of {most + 1} (survival_max_time_bins); give time_edges from "
                               "policy.survival_time_edges")
    if not np.isfinite(e).all() or e.min() <= 0.0 or np.any(np.diff(e) <= 0.0):
        raise InvalidArgument("time_edges must be finite, > 0 and strictly increasing")
    if e.size > most:
        raise PermissionDenied(f"policy: time_edges gives {e.size + 1} time bins; this site allows at most "
                               f"{most + 1} (survival_max_time_bins)")
    at = np.abs(grid[None, :] - e[:, None]) <= _TIME_TOLERANCE * np.maximum(1.0, np.abs(e))[:, None]
    listed = at.any(axis=1)
    if not listed.all():
        raise PermissionDenied(f"policy: every time edge must be one of this site's survival_time_edges; "
                               f"{float(e[~listed][0])!r} is not")
    chosen = grid[at.argmax(axis=1)]
    if np.any(np.diff(chosen) <= 0.0):  # two edges within the tolerance of one policy edge
        raise InvalidArgument("time_edges: two edges name the same edge of the policy's survival_time_edges")
    return np.concatenate([[0.0], chosen, [np.inf]])


def survival_grids(policy: Policy, score_range, *, time_edges, n_bins: int, spacing: str,
                   edges) -> tuple[np.ndarray, np.ndarray]:
    """The full time and score grids of a survival request (:func:`survival_time_grid`; the score grid a histogram
    release's with its ends at 0 and 1), checked against the policy's cell limit (InvalidArgument, PermissionDenied
    or FailedPrecondition naming the field)."""
    lo, hi = (float(v) for v in score_range)
    if lo < 0.0 or hi > 1.0:
        raise InvalidArgument(f"score: a survival release needs predicted risks in [0, 1]; this score source's range "
                              f"is [{lo}, {hi}]")
    full_time = survival_time_grid(policy, list(time_edges))
    score_edges = histogram_grid(policy, (lo, hi), n_bins=n_bins, spacing=spacing, interior=list(edges))[0]
    score_edges = np.concatenate([[0.0], score_edges[1:-1], [1.0]])
    cells = (full_time.size - 1) * (score_edges.size - 1)
    if cells > policy.histogram_max_cells:
        raise InvalidArgument(f"{full_time.size - 1} time bins x {score_edges.size - 1} score bins = {cells} cells per "
                              f"status is above this site's limit of {policy.histogram_max_cells} (policy: "
                              "histogram_max_cells); ask for fewer bins")
    return full_time, score_edges


def plan_survival(policy: Policy, score_range, *, time_column: str, epsilon: float, delta: float, time_edges,
                  n_bins: int, spacing: str, edges, risk_sums: bool, interval: float) -> SurvivalPlan:
    """Check a survival request's grids against the policy and calibrate its discrete Laplace noise.

    ``epsilon`` and ``delta`` must already be checked against the per-release caps; the release uses delta 0 (the
    request's delta is checked and part of its key). The score grid is a histogram release's (``n_bins`` and
    ``spacing``, or the interior ``edges``) with its ends at 0 and 1, which bins every risk as the grid's own ends
    would (scores outside them count in the end bins) and keeps each offset within its bin in [0, 1].
    """
    full_time, score_edges = survival_grids(policy, score_range, time_edges=time_edges, n_bins=n_bins,
                                            spacing=spacing, edges=edges)
    risk_sums = bool(risk_sums)
    try:
        sigma, sums_sigma = survival_release_scales(epsilon, risk_sums=risk_sums, interval=interval)
    except ValueError as exc:  # a part's epsilon below the ledger's grid (the policy allowed it): the caller's to raise
        raise InvalidArgument(f"epsilon: {exc}") from None
    if noise_sd(sigma, LAPLACE) > MAX_SIGMA:
        raise InvalidArgument(f"epsilon {epsilon} needs noise of SD above {MAX_SIGMA:g} per cell; this site makes "
                              "survival releases at larger epsilon only")
    return SurvivalPlan(time_column, full_time, score_edges, epsilon, delta, sigma, risk_sums, sums_sigma)


def draw_survival(plan: SurvivalPlan, times: np.ndarray, events: np.ndarray, risks: np.ndarray,
                  rng: np.random.Generator, sample=None) -> SurvivalRelease:
    """The noisy release (:func:`dsroc.survival.release.draw_survival_release`) with the site's exact sampler
    ``sample(scale, size)`` (default :func:`dsroc.privacy.laplace.sample_discrete_laplace`; a secagg round's share
    is :func:`dsroc.privacy.noise.sample_discrete_gaussian`); ``rng`` only rounds the offsets (any rounding into
    [0, 1] keeps the sensitivity)."""
    from dsroc.privacy.laplace import sample_discrete_laplace

    sample = sample_discrete_laplace if sample is None else sample

    def noise(scale: float, shape: tuple) -> np.ndarray:
        return np.asarray(sample(scale, int(np.prod(shape))), dtype=np.int64).reshape(shape)

    return draw_survival_release(times, events, risks, time_edges=plan.time_edges, score_edges=plan.score_edges,
                                 noise=noise, rng=rng, sigma=plan.sigma, risk_sums=plan.risk_sums,
                                 sums_sigma=plan.sums_sigma)


class SurvivalProtocol(SiteProtocol):
    """The survival release of the histogram protocol: one call on a survival session."""

    name = "histogram"

    def release(self, session: Session, *, epsilon: float, delta: float, time_edges=(), n_bins: int = 0,
                spacing: str = "", edges=(), risk_sums: bool = False, reservation: str = "") -> SiteSurvivalRelease:
        """The noisy survival histogram of the session: one release, charged once (using the hold ``reservation``
        when given), or the free replay of the same request."""
        release_plan, plan = self.plan(session, epsilon=epsilon, delta=delta, time_edges=time_edges, n_bins=n_bins,
                                       spacing=spacing, edges=edges, risk_sums=risk_sums)
        release, charged = self.site.charge(release_plan, reservation)
        k, _, j = plan.shape
        values = decode_survival_release(release.payload, time_bins=k, score_bins=j, risk_sums=plan.risk_sums)
        budget = self.site.budget_of(self.site.datasets.config(session.data.dataset))
        return SiteSurvivalRelease(release, plan, values, charged, budget)

    def plan(self, session: Session, *, epsilon: float, delta: float, time_edges=(), n_bins: int = 0,
             spacing: str = "", edges=(), risk_sums: bool = False) -> tuple[ReleasePlan, SurvivalPlan]:
        """Check a survival release and plan it (what PrepareRelease holds and the release charges).

        The session must be a survival session. As a histogram release, it needs q events: fewer give curves no
        analysis can use, and are refused before anything is charged (a disclosure of "fewer than q", as under
        every protocol).
        """
        self.require()
        epsilon, delta = check_release_parameters(self.policy, epsilon, delta)
        data = session.data
        plan = plan_survival(self.policy, data.score_range, time_column=data.time_column, epsilon=epsilon,
                             delta=delta, time_edges=list(time_edges), n_bins=n_bins, spacing=spacing,
                             edges=list(edges), risk_sums=risk_sums, interval=self.site.ledger_interval)
        require_privacy_level(data.n_positives, self.policy.privacy_level, "the events of a survival release")

        def make(seed: bytes) -> tuple[bytes, int, int]:
            rng = np.random.default_rng(int.from_bytes(seed, "big"))
            return encode_survival_release(draw_survival(plan, data.times, data.labels, data.scores, rng)), 0, 0

        return ReleasePlan(ReleaseKey(*data.key, KIND, plan.request), data.dataset, session.analyst, plan.events,
                           epsilon, delta, KIND, data.fingerprint, make, True), plan
