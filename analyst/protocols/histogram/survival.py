"""The survival release at the analyst: a session opened with a time column, one held release per site, their sum.

Each site answers one ``ReleaseSurvival``: a (time bin x status x score bin) histogram of its patients with discrete
Laplace noise, on public grids (the time edges from the sites' ``policy.survival_time_edges``, the score grid as
the histogram release's), held at every site before any site releases (all or nothing, as every release). Every
estimate is post-processing of the summed release (:func:`dsroc.survival.validation.survival_validation`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from dsroc.survival.pooling import SiteRelease
from dsroc.survival.release import SurvivalRelease, decode_survival_release
from dsroc.survival.validation import survival_validation
from dsroc.v1 import site_pb2 as pb

from analyst.protocols.base import Protocol, ProtocolOptions, ValidationRequest
from analyst.protocols.histogram.survival_result import SURVIVAL_GUARANTEE, SurvivalSite, survival_result

__all__ = ["SURVIVAL", "SurvivalOptions", "SurvivalProtocol", "UnoRule", "checked_time_grid", "collect_survival",
           "survival_time_grid", "uno_rule"]


@dataclass(frozen=True)
class SurvivalOptions(ProtocolOptions):
    """Options of a survival validation (``Federation.validate(..., time=COLUMN, horizon=T)``).

    Parameters
    ----------
    horizon : float
        The time at which the risks are predicted (e.g. 730 days): AUC(t), Brier(t) and calibration are at it.
    time_edges : sequence of float, optional
        Interior time edges of the release, each one of every site's ``policy.survival_time_edges``; default the
        grid the sites share, thinned evenly (keeping the horizon) to the fewest ``survival_max_time_bins``.
    n_bins : int, default 10
        Score bins, equal width on the predicted risk's range [0, 1] (a count every site's ``histogram_bins``
        lists), unless ``edges`` gives the interior score edges.
    edges : sequence of float, optional
        Interior score edges (from the grids the sites' policies allow).
    risk_sums : bool, default False
        Also release each cell's noisy sums of the risks (a fifth of the epsilon): Brier and calibration at the
        patients' own risks instead of the bin midpoints. Each score bin's sum then carries the noise of its
        ``K x 2`` cells: with many time bins it costs more than the midpoints' bias (GBSG2 at epsilon 5, 22 time bins:
        the mean predicted risk's SD 0.05 with the sums, 0.016 without).
    tau : float, optional
        Truncation time of Uno's C; default the horizon (or the smallest ``policy.survival_max_tau`` of the sites
        when the horizon lies beyond it). A ``tau`` beyond a site's ``survival_max_tau`` is refused before any hold;
        where the released censoring survival falls below a site's ``survival_min_censoring_survival``, Uno's C is
        truncated earlier, with a note (:class:`UnoRule`).
    auc_times : sequence of float, optional
        Times of the AUC(t) curve (e.g. 365, 730, 1095), each within the time grid; default up to 8 grid times.
    by_site : bool, default True
        Also each site's estimates from its own release and their random-effects pooling (no further release).
    draws : int, default 100
        Bootstrap replicates of the intervals (sampling and privacy noise); 100 give each SE within about 7 %.
    seed : int, default 0
        Seed of the bootstrap.
    """

    horizon: float | None = None
    time_edges: tuple | None = None
    n_bins: int = 10
    edges: tuple | None = None
    risk_sums: bool = False
    tau: float | None = None
    auc_times: tuple | None = None
    by_site: bool = True
    draws: int = 100
    seed: int = 0

    def __post_init__(self):
        h = self.horizon
        if h is None:
            raise ValueError("horizon is required for a survival validation (the time the risks are predicted at)")
        if isinstance(h, bool) or not isinstance(h, (int, float)) or not (math.isfinite(h) and h > 0):
            raise ValueError(f"horizon must be a positive finite time, got {h!r}")
        if isinstance(self.n_bins, bool) or int(self.n_bins) != self.n_bins or self.n_bins < 1:
            raise ValueError(f"n_bins must be a positive integer, got {self.n_bins!r}")
        for name in ("time_edges", "edges"):
            value = getattr(self, name)
            if value is not None:
                e = np.asarray(value, dtype=np.float64)
                if e.ndim != 1 or e.size == 0 or not np.isfinite(e).all() or np.any(np.diff(e) <= 0) or e[0] <= 0:
                    raise ValueError(f"{name} must be a non-empty list of finite, positive, strictly increasing values")
                if name == "edges" and e[-1] >= 1:
                    raise ValueError("edges (interior score edges) must lie strictly between 0 and 1")
                object.__setattr__(self, name, tuple(float(v) for v in e))
        if self.tau is not None and not (isinstance(self.tau, (int, float)) and math.isfinite(self.tau)
                                         and self.tau > 0):
            raise ValueError(f"tau must be a positive finite time, got {self.tau!r}")
        if self.auc_times is not None:
            t = np.atleast_1d(np.asarray(self.auc_times, dtype=np.float64))
            if t.ndim != 1 or t.size == 0 or not (np.isfinite(t).all() and (t > 0).all()):
                raise ValueError(f"auc_times must be a non-empty list of positive finite times, got {self.auc_times!r}")
            object.__setattr__(self, "auc_times", tuple(float(v) for v in t))
        if isinstance(self.draws, bool) or int(self.draws) != self.draws or self.draws < 20:
            raise ValueError(f"draws must be an integer >= 20, got {self.draws!r}")


def survival_time_grid(policies: Mapping[str, pb.Policy], horizon: float, requested=None) -> tuple[float, ...]:
    """The release's interior time edges: ``requested``, or the edges every site's policy lists thinned evenly to
    the fewest ``survival_max_time_bins - 1`` (the horizon kept when it is an edge). ``ValueError`` when no grid is
    shared or the horizon lies beyond its last edge (the last bin is open: nobody is known to be followed there)."""
    grids = {name: np.asarray(p.survival_time_edges, dtype=np.float64) for name, p in policies.items()}
    none = sorted(name for name, g in grids.items() if g.size == 0)
    if none:
        raise ValueError(f"site(s) {', '.join(none)} serve no survival release (policy.survival_time_edges is empty)")
    if requested is not None:
        edges = np.asarray(requested, dtype=np.float64)
    else:
        shared = set(np.round(next(iter(grids.values())), 9))
        for g in grids.values():
            shared &= set(np.round(g, 9))
        if not shared:
            raise ValueError("the sites' survival_time_edges have no edge in common: give time_edges explicitly")
        edges = np.array(sorted(shared))
        most = min(int(p.survival_max_time_bins) or 24 for p in policies.values()) - 1
        if edges.size > most:
            keep = set(np.round(np.linspace(0, edges.size - 1, most)).astype(int))
            at = np.flatnonzero(np.isclose(edges, horizon, rtol=1e-9, atol=0))
            if at.size and at[0] not in keep:  # swap the kept edge nearest the horizon for the horizon itself
                keep.discard(min(keep, key=lambda i: abs(i - at[0])))
                keep.add(int(at[0]))
            edges = edges[sorted(keep)]
    if not horizon <= edges[-1]:
        raise ValueError(f"horizon {horizon:g} lies beyond the last finite time edge {edges[-1]:g} of the survival "
                         "grid: the sites' policies list no edge at or beyond it")
    return tuple(float(v) for v in edges)


def checked_time_grid(policies: Mapping[str, pb.Policy], o: SurvivalOptions) -> tuple[float, ...]:
    """The release's interior time edges (:func:`survival_time_grid`), with the AUC(t) times and the cells checked
    against every site's policy here rather than by the sites, before any hold (``ValueError``)."""
    time_edges = survival_time_grid(policies, float(o.horizon), o.time_edges)
    if o.auc_times is not None and max(o.auc_times) > time_edges[-1]:  # before any hold, as the horizon
        raise ValueError(f"auc_times: {max(o.auc_times):g} lies beyond the release's last finite time edge "
                         f"{time_edges[-1]:g} (the last bin is open)")
    for name, p in policies.items():
        cells = (len(time_edges) + 1) * (len(o.edges) + 1 if o.edges is not None else o.n_bins)
        if p.histogram_max_cells and cells > p.histogram_max_cells:
            raise ValueError(f"site {name}: {len(time_edges) + 1} time bins x {cells // (len(time_edges) + 1)} "
                             f"score bins = {cells} cells, more than its policy's histogram_max_cells "
                             f"{p.histogram_max_cells}: give fewer time_edges or n_bins")
    return time_edges


@dataclass(frozen=True)
class UnoRule:
    """The sites' rules for Uno's C, as their policies publish them: the ``tau`` to ask for, the smallest censoring
    survival ``G(tau-)`` of the summed release (the largest of the sites' minimums: each site's patients are in the
    sum), each site's own minimum (for its own estimate), and a note when ``tau`` is not the default horizon's."""

    tau: float
    min_censoring: float
    site_min_censoring: Mapping[str, float]
    notes: tuple[str, ...] = ()


def uno_rule(policies: Mapping[str, pb.Policy], o: SurvivalOptions) -> UnoRule:
    """Uno's C's ``tau`` and minimum censoring survival from every site's policy (``survival_max_tau``,
    ``survival_min_censoring_survival``; 0: no rule). ``o.tau`` beyond a site's ``survival_max_tau`` is a
    ``ValueError`` naming ``tau``, the site and the key, before any hold: ``tau`` is never sent to a site (Uno's C is
    post-processing of the release), so the analyst library applies the sites' rule. Without ``o.tau``: the horizon,
    or the smallest ``survival_max_tau`` when the horizon lies beyond it (noted)."""
    mins = {name: float(p.survival_min_censoring_survival) for name, p in policies.items()}
    limits = {name: float(p.survival_max_tau) for name, p in policies.items() if p.survival_max_tau > 0}
    strict = min(sorted(limits), key=limits.get) if limits else None  # ties: the first name, whatever the answer order
    tau, notes = float(o.horizon) if o.tau is None else float(o.tau), ()
    if strict is not None and tau > limits[strict]:
        if o.tau is not None:
            raise ValueError(f"tau: {tau:g} lies beyond site {strict}'s largest truncation time of Uno's C "
                             f"{limits[strict]:g} (policy: survival_max_tau); give tau <= {limits[strict]:g}")
        notes = (f"Uno's C is truncated at site {strict}'s largest tau {limits[strict]:g} (policy: survival_max_tau), "
                 f"before the horizon {tau:g}",)
        tau = limits[strict]
    return UnoRule(tau, max(mins.values(), default=0.0), mins, notes)


def _request(session, conn, o: SurvivalOptions, request: ValidationRequest, time_edges,
             held: str) -> pb.SurvivalRequest:
    grid = dict(edges=list(o.edges)) if o.edges is not None else dict(n_bins=int(o.n_bins), spacing="equal")
    return pb.SurvivalRequest(session_id=session.session_ids[conn.name], epsilon=request.epsilon, delta=request.delta,
                              time_edges=list(time_edges), risk_sums=bool(o.risk_sums), reservation_id=held, **grid)


def _site(conn, r: pb.SurvivalResponse, risk_sums: bool) -> SurvivalSite:
    k, j = len(r.time_edges) - 1, len(r.edges) - 1
    values = list(r.counts) + (list(r.offsets) + list(r.squares) if risk_sums else [])
    try:
        release = decode_survival_release(np.asarray(values, dtype=np.int64).tobytes(), time_bins=k, score_bins=j,
                                          risk_sums=risk_sums)
    except ValueError as exc:
        raise ValueError(f"site {conn.name}: its survival release does not fit its grids ({exc})") from None
    resolution = r.sums_resolution or 1.0
    return SurvivalSite(release, np.asarray(r.time_edges, dtype=np.float64), np.asarray(r.edges, dtype=np.float64),
                        r.sigma, r.noise_sd, r.sums_noise_sd / resolution, r.epsilon, r.delta, r.release_id, r.repeated,
                        r.epsilon_spent, r.mechanism or "discrete_laplace")


def collect_survival(session, request: ValidationRequest, o: SurvivalOptions, time_edges) -> dict[str, SurvivalSite]:
    """Every site's held survival release (PrepareRelease at all sites, then ReleaseSurvival), decoded; the sites
    must answer on the same grids."""

    def ask(conn, held):
        r = conn.call("ReleaseSurvival", _request(session, conn, o, request, time_edges, held))
        if o.risk_sums and not len(r.offsets):
            raise ValueError(f"site {conn.name} did not release the risk sums asked for")
        site = _site(conn, r, o.risk_sums)
        session.progress("survival release", conn.name, f"{site.release.counts.size} cells, noise SD {r.noise_sd:.3g}")
        return site

    holds = session.hold("survival release", lambda c: pb.PrepareRequest(
        survival=_request(session, c, o, request, time_edges, "")))
    sites = dict(zip(session.sites, session.commit("survival release", holds, ask)))
    first = next(iter(sites.values()))
    for name, s in sites.items():
        if not (np.array_equal(s.time_edges, first.time_edges) and np.allclose(s.score_edges, first.score_edges,
                                                                               rtol=0, atol=1e-12)):
            raise ValueError(f"site {name} released on other grids than {session.sites[0]}: releases on different "
                             "grids cannot be summed")
    return sites


class SurvivalProtocol(Protocol):
    """A survival validation: one discrete Laplace (time bin x status x score bin) release per site, summed."""

    name = "histogram"
    guarantee = SURVIVAL_GUARANTEE
    privacy_unit = "add or remove one patient"
    options_type = SurvivalOptions

    def run(self, s, request: ValidationRequest, o: SurvivalOptions, *, executor=None, timing=None):
        timing = {} if timing is None else timing
        clock = time.perf_counter()
        time_edges, uno = checked_time_grid(s.policies, o), uno_rule(s.policies, o)
        sites = collect_survival(s, request, o, time_edges)
        budgets = s.budget()
        timing["release"] = time.perf_counter() - clock
        clock = time.perf_counter()
        first = next(iter(sites.values()))
        summed = SurvivalRelease(np.concatenate([x.release.counts for x in sites.values()]),
                                 *((np.concatenate([x.release.offsets for x in sites.values()]),
                                    np.concatenate([x.release.squares for x in sites.values()])) if o.risk_sums
                                   else (None, None)))
        hist = summed.histogram(first.time_edges, first.score_edges)
        own = ({name: SiteRelease(x.histogram, x.noise_sd, x.sums_sd, uno.site_min_censoring[name])
                for name, x in sites.items()} if o.by_site else None)
        v = survival_validation(hist, float(o.horizon), count_sd=math.sqrt(sum(x.noise_sd**2 for x in sites.values())),
                                sums_sd=math.sqrt(sum(x.sums_sd**2 for x in sites.values())), sites=own, tau=uno.tau,
                                min_censoring=uno.min_censoring, auc_times=o.auc_times, level=request.level,
                                draws=int(o.draws), seed=o.seed, notes=uno.notes)
        result = survival_result(request.common(s, self), v, sites, budgets, time_column=request.time, timing=timing,
                                 risk_sums=o.risk_sums, on_edge=float(o.horizon) in time_edges)
        timing["analysis"] = time.perf_counter() - clock
        return result


#: The survival validation's strategy (``Federation.validate(..., time=...)``).
SURVIVAL = SurvivalProtocol()
