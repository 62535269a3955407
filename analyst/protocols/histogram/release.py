"""The histogram protocol's releases at the analyst: asking every site for one, and planning the quantile grid's bins."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import grpc
import numpy as np

from dsroc import analytic_gaussian_sigma
from dsroc.histogram.estimates import ESTIMATORS
from dsroc.histogram.grid import recommended_n_bins
from dsroc.histogram.stages import (STAGE1_BINS, STAGE2_BINS, first_stage_bins, first_stage_edges, laplace_count_sd,
                                    policy_candidates, second_stage_grid)
from dsroc.histogram.thresholds import off_policy
from dsroc.v1 import site_pb2 as pb

from analyst.connection import SiteError
from analyst.result.parts import num

__all__ = ["HistogramSite", "allowed_n_bins", "check_grid_options", "check_threshold_policies", "collect_histograms",
           "default_n_bins", "fine_release", "quantile_bin_cap", "quantile_grid"]


@dataclass(frozen=True)
class HistogramSite:
    """One site's histogram release: noisy counts, noise, guarantee and its budget after the release.

    ``sigma`` is the noise parameter of a count (the discrete Laplace's scale), ``noise_sd`` its SD; ``mechanism``
    the site's noise (``"discrete_laplace"``; ``"discrete_gaussian"`` from sites before it).
    """

    negatives: np.ndarray
    positives: np.ndarray
    sigma: float
    noise_sd: float
    epsilon: float
    delta: float
    release_id: str
    repeated: bool
    epsilon_spent: float
    scalars: Mapping[str, float]
    scalar_sd: float
    negative_sums: np.ndarray | None = None
    positive_sums: np.ndarray | None = None
    sums_sd: float = 0.0
    mechanism: str = "discrete_laplace"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        sums = {} if self.negative_sums is None else {
            "negative_sums": [num(v) for v in self.negative_sums], "positive_sums": [num(v) for v in self.positive_sums],
            "sums_sd": num(self.sums_sd)}
        return {**sums, "negatives": self.negatives.tolist(), "positives": self.positives.tolist(), "sigma": num(self.sigma),
                "noise_sd": num(self.noise_sd), "epsilon": num(self.epsilon), "delta": num(self.delta),
                "release_id": self.release_id, "repeated": self.repeated, "epsilon_spent": num(self.epsilon_spent),
                "scalars": {k: num(v) for k, v in self.scalars.items()}, "scalar_sd": num(self.scalar_sd),
                "mechanism": self.mechanism}


def check_grid_options(n_bins, spacing: str, estimator: str) -> None:
    """Refuse a histogram or secagg validation's grid options: ``n_bins`` None or a positive integer, ``spacing``
    ``"quantile"``, ``"equal"`` or ``"logit"``, ``estimator`` one of :data:`dsroc.histogram.estimates.ESTIMATORS`."""
    if n_bins is not None and (isinstance(n_bins, bool) or int(n_bins) != n_bins or n_bins < 1):
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    if spacing not in ("quantile", "equal", "logit"):
        raise ValueError(f"spacing must be 'quantile', 'equal' or 'logit', got {spacing!r}")
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")


def collect_histograms(session, *, epsilon: float, delta: float, n_bins: int, spacing: str,
                       scalars: tuple[str, ...], score_sums: bool = False, interior=None,
                       following: Mapping | None = None, follow_ups: Mapping[str, str] | None = None,
                       held: dict | None = None) -> tuple[np.ndarray, dict[str, HistogramSite]]:
    """Ask every site of a :class:`analyst.session.ValidationSession` for its histogram release.

    ``interior``: explicit interior edges instead of ``n_bins`` and ``spacing`` (each site adds its range's ends).
    ``following``: the ``epsilon``, ``delta``, ``n_bins``, ``scalars`` and ``score_sums`` of the release that follows
    in this session (the quantile grid's second stage), held with this one; ``held`` is filled with those holds, to
    pass as the next release's ``follow_ups``, which the sites take over.
    Returns the public grid (every site must use the same) and each site's release.
    """
    if interior is not None:
        n_bins, spacing = len(interior) + 1, ""

    def request(conn, held):
        return pb.HistogramRequest(session_id=session.session_ids[conn.name], epsilon=float(epsilon),
                                   delta=float(delta), n_bins=0 if interior is not None else int(n_bins),
                                   spacing=spacing, scalars=list(scalars), score_sums=bool(score_sums),
                                   reservation_id=held, edges=[] if interior is None else [float(v) for v in interior])

    def ask(conn, held):
        r = conn.call("ReleaseHistogram", request(conn, held))
        if score_sums and len(r.negative_sums) != n_bins:
            raise ValueError(f"site {conn.name} did not release the per-bin score sums asked for (an older site?)")
        sums = ((np.asarray(r.negative_sums, dtype=np.float64), np.asarray(r.positive_sums, dtype=np.float64),
                 r.sums_noise_sd) if score_sums else (None, None, 0.0))
        site = HistogramSite(
            np.asarray(r.negatives, dtype=np.int64), np.asarray(r.positives, dtype=np.int64), r.sigma, r.noise_sd,
            r.epsilon, r.delta, r.release_id, r.repeated, r.epsilon_spent, {s.name: s.value for s in r.scalars},
            max([s.noise_sd for s in r.scalars], default=0.0), *sums, r.mechanism or "discrete_gaussian")
        session.progress("histogram release", conn.name, f"{n_bins} bins, noise SD {r.noise_sd:.3g}")
        return np.asarray(r.edges, dtype=np.float64), site

    # All or nothing: every site checks the request and holds its budget before any site releases.
    def prepare(conn):
        out = pb.PrepareRequest(histogram=request(conn, ""),
                                follow_up_reservation_id=(follow_ups or {}).get(conn.name, ""))
        if following is not None:  # its grid is not known yet; its noise, all that its hold depends on, is
            # the decision thresholds, when given, are its only known edges: the site checks them against its policy
            # with this hold, before anything is charged (their noise does not depend on the grid either)
            known = [float(v) for v in following.get("edges", ())]
            out.follow_up.CopyFrom(pb.HistogramRequest(
                session_id=session.session_ids[conn.name], epsilon=float(following["epsilon"]),
                delta=float(following["delta"]), n_bins=0 if known else int(following["n_bins"]),
                spacing="" if known else "equal", edges=known, scalars=list(following["scalars"]),
                score_sums=bool(following["score_sums"])))
        return out

    holds = session.hold("histogram release", prepare, follow_ups=held)
    replies = session.commit("histogram release", holds, ask)
    edges = replies[0][0]
    for (other, _), name in zip(replies, session.sites):
        if other.shape != edges.shape or not np.allclose(other, edges, rtol=0, atol=1e-12):
            raise ValueError(f"site {name} used another grid than {session.sites[0]} (different score ranges?); "
                             "histograms on different grids cannot be summed")
    return edges, {name: site for name, (_, site) in zip(session.sites, replies)}


def fine_release(session, release):
    """The quantile grid's first release, ``release(**grid)`` with ``grid`` either ``interior`` or ``n_bins`` and
    ``spacing``, over the sites of ``session``. For probabilities a logit grid: where every site has the same logit
    range, the explicit grid of :func:`dsroc.histogram.stages.first_stage_edges` (fine where most scores lie, a few
    bins for the tails), else the finest uniform logit grid every site allows up to ``STAGE1_BINS`` bins
    (:func:`dsroc.histogram.stages.first_stage_bins`); where a site refuses it before holding or charging anything
    (not probabilities, or not in its policy), equal-width. Returns ``(spacing, what release returned, (lo, hi))``:
    the range of the policies' grids whose edges the second stage may use (``(None, None)``: the first grid's ends;
    :func:`dsroc.histogram.stages.policy_candidates`)."""
    policies = list(session.policies.values())
    allowed = [p.histogram_bins for p in policies]
    fine = first_stage_bins(allowed)
    if fine is None:
        raise ValueError(f"the quantile grid needs a fine first release; no bin count up to {STAGE1_BINS} is allowed "
                         "by every site (policy: histogram_bins)")
    ranges = {(p.histogram_logit_min, p.histogram_logit_max) for p in policies}
    lo, hi = next(iter(ranges)) if len(ranges) == 1 else (0.0, 0.0)
    explicit = first_stage_edges(allowed, lo, hi) if 0.0 < lo < hi < 1.0 else None
    try:
        if explicit is not None:
            return "logit", release(interior=explicit), (lo, hi)
        return "logit", release(n_bins=fine, spacing="logit"), (None, None)
    except SiteError as refused:
        if refused.code not in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED):
            raise
        return "equal", release(n_bins=fine, spacing="equal"), (None, None)


def quantile_grid(session, stages, n_bins: int | None, allowed, *, most: int = STAGE2_BINS[-1][1],
                  following: Mapping | None = None, held: dict | None = None, thresholds=(),
                  grid_most: int | None = None) -> tuple[np.ndarray, dict[str, HistogramSite], np.ndarray]:
    """First stage of the quantile grid: every site's release of both classes' counts on a fine grid
    (:func:`fine_release`) at ``stages.epsilon1``, and the second stage's interior edges at the quantiles of the
    class-balanced mixture of the summed counts, for ``n_bins`` bins or, when None, as many as the first stage's
    estimated class sizes and the second stage's summed noise call for (at most ``most``;
    :func:`dsroc.histogram.stages.second_stage_grid`), each an edge every site's policy allows
    (:func:`dsroc.histogram.stages.policy_candidates`): post-processing of the first release. ``following`` and
    ``held``: the second stage, held with the first (:func:`collect_histograms`); ``thresholds``: decision thresholds
    added as edges exactly (checked first by :func:`check_threshold_policies`), the grid at most ``grid_most`` bins."""
    spacing, (edges, releases), (lo, hi) = fine_release(session, lambda **grid: collect_histograms(
        session, epsilon=stages.epsilon1, delta=stages.delta1, scalars=(), following=following, held=held,
        **{"n_bins": 0, "spacing": "", **grid}))
    h0 = np.sum([r.negatives for r in releases.values()], axis=0).astype(np.float64)
    h1 = np.sum([r.positives for r in releases.values()], axis=0).astype(np.float64)
    interior = second_stage_grid(h0, h1, edges, stages.sigma2 * math.sqrt(len(releases)), most=most, n_bins=n_bins,
                                 candidates=policy_candidates(allowed, edges, spacing, lo=lo, hi=hi),
                                 first_sigma=math.sqrt(sum(r.noise_sd**2 for r in releases.values())),
                                 thresholds=thresholds, grid_most=grid_most, small_noise=True)
    return interior, releases, edges


def check_threshold_policies(session, thresholds, most: int) -> None:
    """Refuse decision thresholds before any site is asked for a release: more than ``most - 1`` of them (the
    largest grid every site's policy allows in this validation, :func:`quantile_bin_cap`), or one that is not an
    edge of a grid some site's policy allows for probabilities (:func:`dsroc.histogram.thresholds.off_policy`). Each
    site checks them again with the first stage's hold (the second stage's known edges), on its own score range."""
    if not thresholds:
        return
    if len(thresholds) + 1 > most:
        raise ValueError(f"thresholds: {len(thresholds)} thresholds make {len(thresholds) + 1} bins, more than the "
                         f"{most} every site's policy allows in this validation (policy: histogram_bins, "
                         "histogram_max_cells); nothing was held or charged at any site")
    for name in session.sites:  # in federation order: the same site named every time
        p = session.policies[name]
        off = off_policy(thresholds, p.histogram_bins, p.histogram_spacings,
                         (p.histogram_logit_min, p.histogram_logit_max))
        if off:
            raise ValueError(f"thresholds: {off[0]!r} is not an edge of a grid site {name}'s policy allows "
                             f"(histogram_bins {list(p.histogram_bins)} x histogram_spacings "
                             f"{list(p.histogram_spacings)}: e.g. an equal grid's edge on [0, 1]); nothing was held "
                             "or charged at any site")


def quantile_bin_cap(partitions, allowed, *, top: int = STAGE2_BINS[-1][1]) -> int:
    """The most bins the quantile grid's second stage may have, checked before any release: every site's largest
    allowed bin count (an explicit grid's limit) and, with strata or a second model, the cells each site's
    ``histogram_max_cells`` allows (the largest count up to ``top``, by default :data:`dsroc.histogram.stages.
    STAGE2_BINS`' largest, that passes; a refusal even at 2 bins is raised)."""
    top = min(int(top), *(max(a) for a in allowed))
    for bins in range(top, 1, -1):
        try:
            partitions.check(bins)
            return bins
        except ValueError:
            if bins == 2:
                raise
    return top


def default_n_bins(federation, *, epsilon: float, delta: float, score_sums: bool = True, scalars: int = 0) -> int:
    """The simulation study's bin count for the noise of one histogram release at ``epsilon``, among those all sites
    allow.

    :func:`dsroc.histogram.grid.recommended_n_bins` at the per-site noise SD of a count (discrete Laplace,
    :func:`dsroc.histogram.stages.laplace_count_sd`); when a site's policy does not list that count, the nearest
    count every answering site allows (ties: the smaller).
    """
    policies = [answer["policy"]["histogram_bins"] for answer in federation.describe().values()]
    return allowed_n_bins(policies, epsilon=epsilon, delta=delta,
                          noise_sd=laplace_count_sd(epsilon, score_sums=score_sums, scalars=scalars))


def allowed_n_bins(allowed_per_site, *, epsilon: float, delta: float, shares: int = 1,
                   noise_sd: float | None = None) -> int:
    """:func:`default_n_bins` from each site's allowed bin counts.

    ``noise_sd``: the per-site SD of a count's noise; default the analytic Gaussian sigma of (epsilon, delta) at
    sensitivity 1 (within a few per cent of the discrete one: the secure-aggregation protocol's) split into
    ``shares`` shares (secagg), each about ``sigma / sqrt(shares)``; the count is the study's for one share.
    """
    sd = analytic_gaussian_sigma(epsilon, delta, 1.0) if noise_sd is None else float(noise_sd)
    wanted = recommended_n_bins(sd / math.sqrt(shares))
    sets = [set(a) for a in allowed_per_site]
    allowed = set.intersection(*sets) if sets else set()
    if not allowed or wanted in allowed:
        return wanted
    return min(allowed, key=lambda b: (abs(b - wanted), b))
