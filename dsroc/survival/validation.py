"""Survival validation of a release: every estimate at a horizon with an interval of sampling and privacy noise.

One bootstrap (:func:`dsroc.survival.intervals.survival_replicates`: the released cells resampled, fresh noise of
the release's SD added) gives every interval at once, so the intervals of all estimates come from the same
replicates and include both the sampling error and the privacy noise. Each site's own release gives that site's
estimates (its own noise), pooled across sites by the random-effects meta-analysis of the binary validation
(:func:`dsroc.multicentre.random_effects`; AUC(t) and C-indices on the logit scale, O/E on the log scale).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .bootstrap import Stacked, bootstrap, interval_from
from .calibration import check_groups
from .counts import SurvivalHistogram, check_number
from .discrimination import UnoTruncation, case_weights, uno_truncation
from .intervals import SurvivalInterval
from .kaplan_meier import censoring_survival, check_level, kaplan_meier
from .recalibration import grouped_calibration
from ..multicentre.meta_analysis import PooledEstimate
from .pooling import SiteRelease, SiteSurvival, pool_sites, site_estimates

__all__ = ["INCLUDES", "CurveBand", "RiskGroup", "SurvivalValidation",
           "default_groups", "survival_validation"]

INCLUDES = ("sampling and the privacy noise (one bootstrap of the released cells with fresh noise of the "
            "release's SD per cell)")
#: a risk group holds at least this many (noisy) patients and ten times its summed noise SD
MIN_GROUP = 20.0
#: time points of the AUC(t) curve at most (evenly spread over the grid's; the horizon's AUC is always estimated)
AUC_TIMES = 8


@dataclass(frozen=True)
class CurveBand:
    """A statistic over time with pointwise intervals (sampling and privacy noise)."""

    times: np.ndarray
    values: np.ndarray
    se: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


@dataclass(frozen=True)
class RiskGroup:
    """Observed (1 - Kaplan-Meier at the horizon) against mean predicted risk for score bins ``score_bins``.

    ``survival`` is the group's Kaplan-Meier curve at the grid's time points (for the plot of observed survival
    against the mean predicted survival at the horizon, ``1 - expected``).
    """

    score_bins: tuple[int, int]
    lower_score: float
    upper_score: float
    patients: float
    observed: SurvivalInterval
    expected: SurvivalInterval
    ratio: SurvivalInterval
    survival: np.ndarray


@dataclass(frozen=True)
class SurvivalValidation:
    """Every estimate of a survival validation at ``horizon`` from the summed release, with per-site pooling.

    Intervals (``SurvivalInterval``: value, se, lower, upper, draws) include :data:`INCLUDES`. Counts are the
    noisy released sums: ``patients``, ``events`` (events by the horizon), ``event_free`` (followed beyond it),
    ``censored`` (censored by it). ``roc`` is the IPCW ROC at the horizon at the score edges (``(fpr, tpr)``,
    from (0, 0) to (1, 1)). ``calibration_intercept`` and ``calibration_slope`` come from the grouped
    proportional-hazards fit of :mod:`dsroc.survival.recalibration`. ``risk_events``, ``risk_event_free`` and
    ``risk_censored`` split the score bins by the status at the horizon (the risk histogram by outcome).
    """

    horizon: float
    tau: float
    level: float
    includes: str
    count_sd: float
    sums_sd: float
    patients: float
    events: float
    event_free: float
    censored: float
    survival: CurveBand
    censoring: CurveBand
    auc: SurvivalInterval
    auc_curve: CurveBand
    roc: tuple[np.ndarray, np.ndarray]
    harrell_c: SurvivalInterval
    uno_c: SurvivalInterval
    brier: SurvivalInterval
    integrated_brier: SurvivalInterval
    scaled_brier: SurvivalInterval
    oe: SurvivalInterval
    expected: SurvivalInterval
    observed: SurvivalInterval
    groups: tuple[RiskGroup, ...]
    calibration_intercept: SurvivalInterval
    calibration_slope: SurvivalInterval
    calibration_method: str
    score_edges: np.ndarray
    risk_events: np.ndarray
    risk_event_free: np.ndarray
    risk_censored: np.ndarray
    sites: tuple[SiteSurvival, ...]
    pooled: Mapping[str, PooledEstimate]
    notes: tuple[str, ...]


CALIBRATION_METHOD = ("grouped proportional-hazards fit of the released cells up to the horizon (Prentice-Gloeckler "
                      "binomial GLM, complementary log-log link, on x = log(-log(1 - mean predicted risk)) per risk "
                      "group): slope b of x (1 ideal); intercept log(sum_k exp(alpha_k)) with b fixed at 1 (0 ideal)")


def default_groups(hist: SurvivalHistogram, count_sd: float) -> np.ndarray:
    """Risk groups from the score bins merged upwards until each holds at least ``MIN_GROUP`` patients and ten
    times the noise SD of its count (``count_sd`` per cell, over its ``K x 2`` cells per score bin); the last group
    joins its neighbour when it falls short. Boundaries ``0 = b_0 < ... < b_G = J``."""
    per_bin = hist.counts.sum(axis=(0, 1))
    cells = hist.shape[0] * 2
    bounds, held, merged = [0], 0.0, 0
    for j, n in enumerate(per_bin):
        held, merged = held + n, merged + 1
        if held >= max(MIN_GROUP, 10.0 * count_sd * np.sqrt(cells * merged)):
            bounds.append(j + 1)
            held, merged = 0.0, 0
    if bounds[-1] != per_bin.size:
        if len(bounds) > 1:
            bounds[-1] = per_bin.size
        else:
            bounds.append(per_bin.size)
    return np.asarray(bounds, dtype=np.int64)


class _Plan:
    """What to estimate on every replicate, laid out as one vector (one bootstrap for all)."""

    def __init__(self, hist, horizon, tau, groups, auc_times=None):
        self.horizon, self.tau, self.groups = horizon, tau, check_groups(hist, groups)
        if auc_times is None:
            last = hist.time_edges[-2] if np.isinf(hist.time_edges[-1]) else hist.time_edges[-1]
            points = hist.time_points[hist.time_points <= last]
            keep = np.unique(np.round(np.linspace(0, points.size - 1, min(points.size, AUC_TIMES))).astype(int))
            self.auc_times = points[keep]
        else:
            times = np.atleast_1d(np.asarray(auc_times, dtype=np.float64))
            if times.ndim != 1 or times.size == 0:
                raise ValueError("auc_times must be a non-empty sequence of times")
            for t in times:
                hist.horizon_index(t, name="auc_times")  # each in (0, last finite time edge], as the horizon
            self.auc_times = np.unique(times)
        self.auc_index = np.searchsorted(hist.time_points, self.auc_times, side="right")
        self.kh = hist.horizon_index(horizon)
        k, m, g = hist.shape[0], self.auc_times.size, groups.size - 1
        sizes = {"survival": k, "censoring": k, "auc_curve": m, "scalars": 10, "observed": g, "expected": g,
                 "ratio": g}
        self.slices, start = {}, 0
        for name, size in sizes.items():
            self.slices[name] = slice(start, start + size)
            start += size
        self.size = start

    SCALARS = ("auc", "harrell_c", "uno_c", "brier", "integrated_brier", "scaled_brier", "oe", "expected",
               "observed", "intercept")

    def estimates(self, x: Stacked) -> np.ndarray:
        """Every estimate (columns) of every histogram of the stack (rows)."""
        out = np.full((x.counts.shape[0], self.size + 1), np.nan)  # the last column: the calibration slope
        out[:, self.slices["survival"]] = x.survival
        out[:, self.slices["censoring"]] = x.censoring.survival
        out[:, self.slices["auc_curve"]] = x.auc(self.auc_index)
        kh, groups = self.kh, self.groups
        overall = x.observed_expected(kh, 0, x.counts.shape[-1])
        fits = [grouped_calibration(x.cells.histogram(i), self.horizon, groups) for i in range(out.shape[0])]
        out[:, self.slices["scalars"]] = np.column_stack([
            x.auc(kh), x.harrell_c(), x.uno_c(self.tau) if np.isfinite(self.tau) else np.full(out.shape[0], np.nan),
            x.brier(kh), x.integrated_brier(kh), x.scaled_brier(kh),
            overall[2], overall[1], overall[0], [f.intercept for f in fits]])
        by_group = [x.observed_expected(kh, a, b) for a, b in zip(groups[:-1], groups[1:])]
        for i, name in enumerate(("observed", "expected", "ratio")):
            out[:, self.slices[name]] = np.column_stack([g[i] for g in by_group])
        out[:, -1] = [f.slope for f in fits]
        return out


def _curve(times, values, reps, level, bounds=(0.0, 1.0)) -> CurveBand:
    parts = [interval_from(v, reps[:, i], level, bounds=bounds) for i, v in enumerate(values)]
    return CurveBand(np.asarray(times, dtype=np.float64), np.asarray(values, dtype=np.float64),
                     np.array([p.se for p in parts]), np.array([p.lower for p in parts]),
                     np.array([p.upper for p in parts]))


def _roc_at(hist: SurvivalHistogram, kh: int) -> tuple[np.ndarray, np.ndarray]:
    c = np.maximum(hist.counts, 0.0)
    cases = (case_weights(hist)[:kh, None] * c[:kh, 1, :]).sum(axis=0)
    controls = c[kh:].sum(axis=(0, 1))
    above = lambda v: np.concatenate([np.cumsum(v[::-1])[::-1], [0.0]]) / max(v.sum(), 1e-300)  # noqa: E731
    return above(controls)[::-1], above(cases)[::-1]


def truncation_notes(cut: UnoTruncation, site: str = "") -> list[str]:
    """Why Uno's C is truncated earlier than asked, or not estimated, or nothing. ``site``: the note of that site's own
    estimate, which is not reported rather than truncated (the sites' estimates are pooled at one tau)."""
    if not cut.truncated:
        return []
    rule = (f"the released censoring survival G({cut.tau:g}-) = {cut.censoring_asked:.3f} is below the minimum "
            f"{cut.minimum:g} (policy: survival_min_censoring_survival)")
    if site:
        return [f"site {site}: its own Uno's C is not reported: {rule.replace('the released', 'its released')}"]
    if np.isnan(cut.used):
        return [f"Uno's C is not reported: {rule}, already at the first time point"]
    return [f"Uno's C is truncated at tau = {cut.used:g} instead of {cut.tau:g}: {rule}; "
            f"G({cut.used:g}-) = {cut.censoring_used:.3f}"]


def survival_validation(hist: SurvivalHistogram, horizon, *, count_sd: float, sums_sd: float = 0.0,
                        sites: Mapping[str, SiteRelease] | None = None, tau=None, min_censoring: float = 0.0,
                        groups=None, auc_times=None, level: float = 0.95, draws: int = 100, seed=0,
                        notes=()) -> SurvivalValidation:
    """Every survival estimate at ``horizon`` from the summed release ``hist``, with intervals and per-site pooling.

    Parameters
    ----------
    hist : SurvivalHistogram
        The release summed over the sites; its risks are predictions of an event by ``horizon``.
    horizon : float
        In ``(0, last finite time edge]``.
    count_sd, sums_sd : float
        SD of the summed noise of each count and of each offset sum (in score-bin widths, as
        :func:`~dsroc.survival.intervals.survival_replicates` takes them).
    sites : mapping of str to SiteRelease, optional
        Each site's own release and noise: per-site estimates and their random-effects pooling (two sites or more).
    tau : float, optional
        Truncation time of Uno's C asked for; default the horizon.
    min_censoring : float
        The smallest censoring survival ``G(tau-)`` of ``hist`` Uno's C may use (:func:`~dsroc.survival.
        discrimination.uno_truncation`): below it ``tau`` moves earlier, or Uno's C is not reported (NaN), with a
        note; ``SurvivalValidation.tau`` is the ``tau`` used. Each site's own Uno's C (at that ``tau``) needs its
        own ``SiteRelease.min_censoring``, else it is NaN.
    groups : sequence of int, optional
        Risk-group boundaries on the score bins (``0 = b_0 < ... < b_G = J``); default :func:`default_groups`.
    auc_times : sequence of float, optional
        Times of the AUC(t) curve, each in ``(0, last finite time edge]`` and read as the horizon is (a time inside
        a bin counts its patients as event-free); default up to 8 time points spread over the grid.
    level : float
        Confidence level of every interval.
    draws : int
        Bootstrap replicates (each site's: half as many, at least 20).
    seed
        Seed of the bootstrap.
    notes : sequence of str
        Notes of the caller, reported first (e.g. why ``tau`` is not the one asked for).
    """
    level = check_level(level)
    kh = hist.horizon_index(horizon)
    horizon = float(horizon)
    cut = uno_truncation(censoring_survival(hist), horizon if tau is None else check_number(tau, name="tau"),
                         min_censoring)
    tau, notes = cut.used, list(notes) + truncation_notes(cut)
    bounds = default_groups(hist, count_sd) if groups is None else np.asarray(groups, dtype=np.int64)
    plan = _Plan(hist, horizon, tau, bounds, auc_times)
    value, reps = bootstrap(hist, plan.estimates, count_sd=count_sd, sums_sd=sums_sd, draws=draws, seed=seed)
    sl = plan.slices
    scalars = dict(zip(_Plan.SCALARS, range(sl["scalars"].start, sl["scalars"].stop)))

    def one(name, bounds_=(0.0, 1.0)):
        i = scalars[name]
        return interval_from(value[i], reps[:, i], level, bounds=bounds_)

    positive = (0.0, np.inf)
    group_list = []
    for g, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        i = [sl[k].start + g for k in ("observed", "expected", "ratio")]
        group_list.append(RiskGroup(
            (int(a), int(b)), float(hist.score_edges[a]), float(hist.score_edges[b]),
            float(hist.counts[:, :, a:b].sum()),
            *(interval_from(value[j], reps[:, j], level, bounds=bd)
              for j, bd in zip(i, ((0.0, 1.0), (0.0, 1.0), positive))),
            kaplan_meier(hist, score_bins=(int(a), int(b))).survival))
    c = hist.counts
    auc_ok = np.isfinite(value[sl["auc_curve"]])
    auc_curve = _curve(plan.auc_times[auc_ok], value[sl["auc_curve"]][auc_ok], reps[:, sl["auc_curve"]][:, auc_ok],
                       level)
    # a site's SE only weighs it in the pooling: half the replicates (SE within about 10 % at 50) are enough
    site_rows = []
    for name, s in (sites or {}).items():
        own = uno_truncation(censoring_survival(s.histogram), tau, s.min_censoring) if np.isfinite(tau) else None
        notes += truncation_notes(own, name) if own is not None else []
        site_rows.append(site_estimates(name, s, horizon, tau if own is None or not own.truncated else np.nan,
                                        level=level, draws=max(20, draws // 2), seed=seed))
    site_rows = tuple(site_rows)
    notes += [(f"Uno's C truncated at tau = {tau:g}; " if np.isfinite(tau) else "") + "the integrated Brier score "
              f"over the grid's time points up to the horizon {horizon:g}",
              "times are grouped in the time bins: Kaplan-Meier curves are life tables, two patients in one bin "
              "count half a comparable pair; competing risks are not handled"]
    if not np.isfinite(value[scalars["intercept"]]) or not np.isfinite(value[-1]):
        notes.append("the calibration intercept or slope could not be estimated (no event before the horizon, one "
                     "score bin with patients, or no convergence of the grouped fit)")
    return SurvivalValidation(
        horizon=horizon, tau=float(tau), level=level, includes=INCLUDES, count_sd=float(count_sd),
        sums_sd=float(sums_sd), patients=float(c.sum()), events=float(c[:kh, 1].sum()), event_free=float(c[kh:].sum()),
        censored=float(c[:kh, 0].sum()),
        survival=_curve(hist.time_points, value[sl["survival"]], reps[:, sl["survival"]], level),
        censoring=_curve(hist.time_points, value[sl["censoring"]], reps[:, sl["censoring"]], level),
        auc=one("auc"), auc_curve=auc_curve, roc=_roc_at(hist, kh), harrell_c=one("harrell_c"), uno_c=one("uno_c"),
        brier=one("brier"), integrated_brier=one("integrated_brier"), scaled_brier=one("scaled_brier", (-np.inf, 1.0)),
        oe=one("oe", positive), expected=one("expected"), observed=one("observed"), groups=tuple(group_list),
        calibration_intercept=one("intercept", (-np.inf, np.inf)),
        calibration_slope=interval_from(value[-1], reps[:, -1], level),
        calibration_method=CALIBRATION_METHOD, score_edges=hist.score_edges,
        risk_events=c[:kh, 1].sum(axis=0), risk_event_free=c[kh:].sum(axis=(0, 1)), risk_censored=c[:kh, 0].sum(axis=0),
        sites=site_rows, pooled=pool_sites(site_rows, level=level), notes=tuple(notes))
