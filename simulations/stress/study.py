"""The stress study: the histogram protocol (and the paper protocol) on an independent generator, per design cell.

Each replication draws ``n`` patients of a :class:`simulations.stress.designs.Design` from its own stream
``default_rng([seed, design, n, rep])`` and splits them over ``sites`` (patients are i.i.d., so patient
``i`` goes to site ``i mod sites``). Its pooled truth: empirical AUC (mid-rank), unbinned Brier score,
O/E and the logistic calibration slope of ``y`` on ``logit p`` (statsmodels); its population truth:
:func:`simulations.stress.designs.population_truth`. Protocols (``PROTOCOLS``):

- ``histogram``: as the sites and the analyst run it by default (``spacing="quantile"``, per-bin score sums).
  Stage 1: every site counts its negatives and positives on the fine logit grid its default policy gives
  (:func:`dsroc.histogram.stages.first_stage_grid`) plus discrete Laplace noise
  (:func:`dsroc.privacy.laplace.discrete_laplace_noise`) at the scale the site plans for the first stage's
  epsilon1 of :func:`dsroc.histogram.stages.laplace_two_stage_plan`; the analyst sums them over sites, chooses
  the second grid's bin count from the estimated class sizes and puts its edges at the quantiles of the classes'
  balanced mixture (:func:`dsroc.histogram.stages.second_stage_grid`, the site's explicit grid around them). Stage 2: every
  site counts per class on those edges and sums its patients' randomly rounded offsets within their bins,
  with noise at the second stage's epsilon2; the analyst sums the releases and calls
  :func:`dsroc.histogram_validation` as ``analyst.protocols.histogram.protocol`` does (default estimator). The sites have
  a default site policy (``POLICY_BINS``, ``POLICY_LOGIT_RANGE``) and each noise scale comes from the parts the
  site composes (:func:`site_sigmas`); the
  study does not import ``site_node``: a test asks a real site for the same two stages and compares;
- ``histogram_equal``: the analyst's one-release grid (``spacing="equal"``: ``allowed_n_bins`` equal bins on
  [0, 1]) with score sums at the whole epsilon: the default before the quantile grid;
- ``flat20``: counts only on 20 equal bins, binned empirical AUC (SPEC-private's baseline), discrete Laplace too;
- ``secagg``: the secagg protocol as the analyst and sites run it by default: the two stages of ``histogram``
  (per-class counts, then counts and score sums; the same grid choice and the first stage passed on to the
  validation), each site adding its share of a distributed discrete Gaussian (:func:`dsroc.secagg.share_sigma`
  of each stage for all ``sites`` shares, no coalition) at :func:`dsroc.histogram.stages.two_stage_plan`'s split,
  summed, as ``analyst.protocols.histogram.secagg``;
- ``paper``: the paper protocol with the noise-corrected AUC (:func:`simulations.protocol.pipeline.run_protocol_chunk`,
  five sites) at a recommended setting (AUC only; its other answers are exact, q-protected).

A valid release that ``histogram_validation`` cannot turn into an estimate (it raised before commit de4eb30;
now its ``unavailable`` map says so) is recorded as a failure of that estimand with its reason: the sites
were charged all the same.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import pandas as pd
import statsmodels.api as sm

from analyst.protocols.histogram.release import allowed_n_bins
from dsroc import histogram_edges, histogram_validation
from dsroc.histogram.estimates import DEFAULT_ESTIMATOR
from dsroc.histogram.release import draw_release
from dsroc.histogram.stages import (SUMS_RATIO, SUMS_RESOLUTION, first_stage_grid, laplace_count_sd,
                                   laplace_release_scales, laplace_two_stage_plan, policy_candidates, release_parts,
                                   second_stage_grid, two_stage_plan)
from dsroc.privacy.accounting import VALUE_DISCRETIZATION
from dsroc.roc.batch import grouped_class_placements, grouped_mean
from dsroc.secagg import share_sigma

from ..common.dgp import N_SITES, Batch
from ..histogram.study import NOISE
from ..protocol.pipeline import run_protocol_chunk
from .cells import PaperCell, StressCell
from .designs import Design, population_truth, sample_design

__all__ = ["LEVEL", "PROTOCOLS", "ESTIMANDS",
           "RESULT_COLUMNS", "HISTOGRAM_PROTOCOLS", "SCORE_SUMS", "POLICY_BINS", "POLICY_LOGIT_RANGE",
           "DataSet", "generate_data", "default_grid", "Release", "site_sigmas", "QuantilePlan",
           "quantile_plan", "histogram_release", "quantile_release", "release_validation", "histogram_rows", "paper_rows"]

LEVEL = 0.95  # the analyst's default confidence level
PROTOCOLS = ("histogram", "histogram_equal", "flat20", "secagg", "paper")
HISTOGRAM_PROTOCOLS = PROTOCOLS[:4]
ESTIMANDS = ("auc", "brier", "oe", "slope")
# The analyst asks for per-bin score sums by default (analyst.protocols.histogram.protocol).
SCORE_SUMS = True
RESULT_COLUMNS = ["cell", "protocol", "shape", "prevalence", "design_auc", "n", "sites", "epsilon", "delta", "tau",
                  "rep", "n1", "estimand", "estimate", "lower", "upper", "se", "pooled", "population", "failure",
                  "estimator"]


def _salt(text: str) -> int:
    return zlib.crc32(text.encode())


@dataclass(frozen=True)
class DataSet:
    """Replications of one design and n, stacked (a :class:`simulations.common.dgp.Batch`), with their pooled truth."""

    batch: Batch
    logits: np.ndarray
    pooled: dict


def generate_data(design: Design, n: int, reps, seed: int, *, slope: bool = True) -> DataSet:
    """Replications ``reps`` of ``design`` with ``n`` patients and their pooled truth per replication
    (``slope=False``: no calibration slope, NaN; the paper protocol's cells need the AUC only)."""
    reps = [int(r) for r in reps]
    draws = [sample_design(design, n, np.random.default_rng([seed, _salt(design.name), n, r])) for r in reps]
    p, y, lp = (np.concatenate([d[i] for d in draws]) for i in range(3))
    size = len(reps)
    groups = np.repeat(np.arange(size), n)
    batch = Batch(reps=np.array(reps, dtype=np.int64), scores=p, labels=y,
                  sites=(np.tile(np.arange(n) % N_SITES, size)).astype(np.int8), noise=np.zeros(p.size), groups=groups,
                  n=np.full(size, n, dtype=np.int64), n1=np.bincount(groups, weights=y, minlength=size).astype(np.int64),
                  auc_population=np.full(size, population_truth(design).auc))
    # Mann-Whitney AUC = mean placement value of the negatives (mid-ranks); NaN without both classes.
    both = (batch.n1 > 0) & (batch.n1 < n)
    auc = np.full(size, np.nan)
    if both.any():
        keep = both[groups]
        g = (np.cumsum(both) - 1)[groups[keep]]
        placed = grouped_class_placements(p[keep], y[keep], g, n_groups=int(both.sum()), ties="mid")
        neg = y[keep] == 0
        auc[both] = grouped_mean(placed.pv[neg], g[neg], n_groups=int(both.sum()))
    brier = np.bincount(groups, weights=(y - p) ** 2, minlength=size) / n
    oe = batch.n1 / np.bincount(groups, weights=p, minlength=size)
    slope = np.array([_logistic_slope(y[g * n:(g + 1) * n], lp[g * n:(g + 1) * n]) if slope else np.nan
                      for g in range(size)])
    return DataSet(batch, lp, {"auc": auc, "brier": brier, "oe": oe, "slope": slope})


def _logistic_slope(y, lp) -> float:
    """Slope of the logistic regression of ``y`` on ``logit p`` (statsmodels); NaN if it cannot be fitted."""
    if y.min() == y.max():
        return float("nan")
    try:
        return float(sm.Logit(y, sm.add_constant(lp, has_constant="add")).fit(disp=0, maxiter=100).params[1])
    except (np.linalg.LinAlgError, sm.tools.sm_exceptions.PerfectSeparationError, ValueError):
        return float("nan")


# A site's default policy (site_node.config.Policy, which the study does not import; a test checks they agree):
# the bin counts it allows and the range of its logit grids. Every score source has range [0, 1].
POLICY_BINS = (5, 8, 10, 12, 20, 50, 100, 200)
POLICY_LOGIT_RANGE = (0.0001, 0.9999)


def default_grid(epsilon: float, delta: float, score_sums: bool = SCORE_SUMS) -> np.ndarray:
    """The analyst's one-release grid (``spacing="equal"``) at (epsilon, delta):
    :func:`analyst.protocols.histogram.release.allowed_n_bins` under the default policy at the sites' count noise
    (:func:`dsroc.histogram.stages.laplace_count_sd`), equal bins."""
    return histogram_edges(allowed_n_bins([POLICY_BINS], epsilon=epsilon, delta=delta,
                                          noise_sd=laplace_count_sd(epsilon, score_sums=score_sums)))



class Release(NamedTuple):
    """Every site's noisy release, summed over the sites, per replication, as the analyst receives it."""

    edges: list  # per replication: the grid of the (second-stage) release, (B_r + 1,)
    counts: list  # per replication: (2, B_r) noisy counts of negatives and positives
    sums: list | None  # per replication: (2, B_r) noisy per-bin sums of score offsets (bin widths); None without
    sigma: float  # per-site noise parameter of a count (the second stage's for the quantile grid): the discrete
    # Laplace's scale (secagg: the discrete Gaussian share's sigma)
    total_sd: float  # noise SD of a summed count
    sums_sd: float  # noise SD of a summed score sum (bin widths)
    first: dict | None = None  # the quantile grid's first stage as the analyst passes it on: its fine edges, per
    # replication its counts of all scores summed over sites and classes, and their noise SD


@lru_cache(maxsize=None)
def site_sigmas(epsilon: float, delta: float, score_sums: bool) -> tuple[float, float]:
    """Per-site discrete Laplace scales of the counts and (with ``score_sums``) the score sums of one release asked
    for at epsilon (``delta`` is only checked by the policy), as ``site_node.protocols.histogram.release.plan_histogram`` calibrates
    them (:func:`dsroc.histogram.stages.laplace_release_scales`, at the ledger's default discretisation)."""
    return laplace_release_scales(epsilon, score_sums=score_sums, interval=VALUE_DISCRETIZATION)[:2]


class QuantilePlan(NamedTuple):
    """The default two-stage release of one cell: what the analyst asks for and the sites' noise."""

    fine_edges: np.ndarray  # the first stage's grid as the sites bin it (first_stage_grid)
    sigma1: float  # per-site noise of a first-stage count
    sigma2: float  # per-site noise of a second-stage count
    sums_sigma: float  # per-site noise of a second-stage score sum (integer scale)
    central2: float  # the analyst's summed noise SD of a second-stage count (its bin rule's sigma)
    noise: str = "laplace"  # the sites' noise (simulations.histogram.NOISE): "gaussian" for secagg's shares


def quantile_plan(epsilon: float, delta: float, score_sums: bool = True, shares: int = 0, sites: int = 5
                  ) -> QuantilePlan:
    """What ``analyst.protocols.histogram.protocol`` asks for under ``spacing="quantile"`` of ``sites`` sites with the default
    policy (:func:`dsroc.histogram.stages.laplace_two_stage_plan`, :func:`~dsroc.histogram.stages.first_stage_grid`)
    and the discrete Laplace noise those sites calibrate for each stage; ``shares``: the secagg protocol's two rounds
    over that many sites instead (each site's share of each stage's discrete Gaussian,
    :func:`dsroc.histogram.stages.two_stage_plan`, :func:`dsroc.secagg.share_sigma`). The second grid's bin count is
    chosen per replication from the first stage (:func:`quantile_release`) against ``central2``."""
    edges = first_stage_grid([POLICY_BINS], *POLICY_LOGIT_RANGE)
    if shares:
        stages = two_stage_plan(epsilon, delta, score_sums=score_sums)
        sigma2 = share_sigma(stages.epsilon2, stages.delta2, shares, parts=tuple(release_parts(score_sums=score_sums)))
        return QuantilePlan(edges, share_sigma(stages.epsilon1, stages.delta1, shares), sigma2,
                            SUMS_RATIO * SUMS_RESOLUTION * sigma2 if score_sums else 0.0, stages.sigma2, "gaussian")
    stages = laplace_two_stage_plan(epsilon, delta, score_sums=score_sums)
    sigma1 = site_sigmas(stages.epsilon1, stages.delta1, False)[0]
    return QuantilePlan(edges, sigma1, *site_sigmas(stages.epsilon2, stages.delta2, score_sums),
                        stages.sigma2 * float(np.sqrt(sites)))


def _summed_release(p, y, site, k: int, edges, sigma: float, sums_sigma: float, rng, score_sums: bool,
                    noise: str = "laplace"):
    """One replication's release on ``edges`` by each of ``k`` sites, the sites' own draw
    (:func:`dsroc.histogram.release.draw_release`) with ``noise`` from ``rng``, summed over the sites."""
    draw = NOISE[noise][0]
    release = draw_release(p, y, edges, noise=lambda scale, shape: draw(scale, shape, rng), rng=rng, sigma=sigma,
                           score_sums=score_sums, sums_sigma=sums_sigma, groups=site, n_groups=k)
    return release.total()


def _sds(k: int, sigma: float, sums_sigma: float, noise: str = "laplace") -> tuple[float, float]:
    """Noise SDs of a count and of a score sum (bin widths) summed over ``k`` sites."""
    variance = NOISE[noise][1]
    sums_sd = np.sqrt(k * variance(sums_sigma)) / SUMS_RESOLUTION if sums_sigma > 0 else 0.0
    return float(np.sqrt(k * variance(sigma))), float(sums_sd)


def histogram_release(data: DataSet, cell: StressCell, edges, seed: int, protocol: str, *,
                      score_sums: bool = False) -> Release:
    """Every site's noisy release on the fixed grid ``edges``, summed (``protocol`` names its noise stream).

    Per replication one stream ``[seed, cell, rep]`` draws the count noise ``(sites, 2, B)``, then with
    ``score_sums`` the offsets' random rounding and the sums' noise.
    """
    b, k, n = data.batch, cell.sites, cell.n
    site = np.arange(n) % k
    sigma, sums_sigma = site_sigmas(cell.epsilon, cell.delta, score_sums)
    salt = _salt(f"{cell.name}/{protocol}")
    counts, sums = [], []
    for i, rep in enumerate(b.reps.tolist()):
        sl = slice(i * n, (i + 1) * n)
        c, t = _summed_release(b.scores[sl], b.labels[sl], site, k, edges, sigma, sums_sigma,
                               np.random.default_rng([seed, salt, rep]), score_sums)
        counts.append(c)
        sums.append(t)
    return Release([edges] * b.size, counts, sums if score_sums else None, sigma, *_sds(k, sigma, sums_sigma))


def quantile_release(data: DataSet, cell: StressCell, seed: int, *, score_sums: bool = True,
                     protocol: str = "histogram", site=None, thresholds=()) -> Release:
    """The default two-stage release, summed: every site's noisy counts of its negatives and positives on the fine
    grid (the analyst sums them over sites); the analyst's second-stage bin count from their estimated class sizes
    and edges at the quantiles of their class-balanced mixture (:func:`dsroc.histogram.stages.second_stage_grid`;
    the site's explicit grid is its score range around them); then every site's per-class release on those edges.
    ``protocol="secagg"``: the secagg protocol's two rounds, the same grid choice (each site's noise a share).

    Per replication one stream ``[seed, cell, rep]`` draws the first stage's noise ``(sites, 2, B1)``, then the
    second stage's as :func:`histogram_release`. ``site``: each patient's site within a replication, shape ``(n,)``
    (default patient ``i`` at site ``i mod sites``: equal sites). ``thresholds``: decision thresholds put on the second
    grid as edges exactly, as ``HistogramOptions(thresholds=...)`` does (the grid at most the policy's largest count).
    """
    b, k, n = data.batch, cell.sites, cell.n
    plan = quantile_plan(cell.epsilon, cell.delta, score_sums, shares=k if protocol == "secagg" else 0, sites=k)
    fine = plan.fine_edges.size - 1
    site = np.arange(n) % k if site is None else np.asarray(site, dtype=np.int64)
    salt = _salt(f"{cell.name}/{protocol}")
    rngs = [np.random.default_rng([seed, salt, rep]) for rep in b.reps.tolist()]
    draw = NOISE[plan.noise][0]

    def first_noise(scale, shape):  # each replication's sites from that replication's stream
        return np.concatenate([draw(scale, (k, *shape[1:]), rng) for rng in rngs])

    first = draw_release(b.scores, b.labels, plan.fine_edges, noise=first_noise, rng=rngs[0], sigma=plan.sigma1,
                         groups=b.groups * k + np.tile(site, b.size), n_groups=b.size * k)
    first = first.counts.reshape(b.size, k, 2, fine).sum(axis=1).astype(np.float64)
    candidates = policy_candidates([POLICY_BINS], plan.fine_edges, "logit", lo=POLICY_LOGIT_RANGE[0],
                                   hi=POLICY_LOGIT_RANGE[1])  # the edges the default policy allows
    first_sd = _sds(k, plan.sigma1, 0.0, plan.noise)[0]  # of a first-stage count of one class, summed
    grids, counts, sums, totals = [], [], [], []
    for i, rng in enumerate(rngs):
        classes = first[i]
        totals.append(classes.sum(axis=0))
        # as analyst.protocols.histogram.release.quantile_grid and analyst.protocols.histogram.secagg
        interior = second_stage_grid(classes[0], classes[1], plan.fine_edges, plan.central2, most=max(POLICY_BINS),
                                     candidates=candidates, first_sigma=first_sd, thresholds=thresholds,
                                     small_noise=protocol != "secagg")
        edges = np.concatenate([[0.0], interior, [1.0]])  # the site's explicit grid: its score range around them
        sl = slice(i * n, (i + 1) * n)
        c, t = _summed_release(b.scores[sl], b.labels[sl], site, k, edges, plan.sigma2, plan.sums_sigma, rng,
                               score_sums, plan.noise)
        grids.append(edges)
        counts.append(c)
        sums.append(t)
    stage1 = {"edges": plan.fine_edges, "counts": totals, "sd": _sds(2 * k, plan.sigma1, 0.0, plan.noise)[0]}
    return Release(grids, counts, sums if score_sums else None, plan.sigma2,
                   *_sds(k, plan.sigma2, plan.sums_sigma, plan.noise), stage1)


def release_validation(release: Release, i: int, *, estimator: str = DEFAULT_ESTIMATOR, seed=0,
                       noise_draws: int = 100):
    """The analyst's :func:`dsroc.histogram_validation` of replication ``i`` of ``release``, with the arguments
    ``analyst.protocols.histogram.protocol`` (and ``.secagg``) passes: the score sums and the first stage when
    released (``noise_draws``: its bootstrap's, 100 as the analyst's)."""
    extra = {} if release.sums is None else {"sums0": release.sums[i][0], "sums1": release.sums[i][1],
                                             "sums_sigma": release.sums_sd}
    if extra and release.first is not None:
        extra.update(grid_edges=release.first["edges"], grid_counts=release.first["counts"][i],
                     grid_sigma=release.first["sd"])
    return histogram_validation(release.counts[i][0], release.counts[i][1], release.edges[i], sigma=release.total_sd,
                                estimator=estimator, level=LEVEL, seed=seed, noise_draws=noise_draws, **extra)


def _estimates(v) -> dict:
    """(estimate, lower, upper, se) of each estimand from a :class:`dsroc.histogram_validation.HistogramValidation`."""
    nan = (np.nan,) * 4
    out = {"auc": (v.auc, *v.auc_ci, np.sqrt(v.auc_variance))}
    for name, e in (("brier", v.brier), ("oe", v.oe)):
        out[name] = nan if e is None else (e.value, e.lower, e.upper, np.sqrt(max(e.variance, 0.0)))
    r = v.recalibration
    if r is None or not r.converged:
        out["slope"] = nan
    else:
        lo, hi = r.ci()["slope"]
        out["slope"] = (r.slope, lo, hi, float(np.sqrt(r.cov[1, 1])))
    return out


_UNAVAILABLE = {"auc": "auc", "brier": "brier", "oe": "oe", "recalibration": "slope"}


def histogram_rows(data: DataSet, cell: StressCell, seed: int, protocol: str, *,
                   score_sums: bool = SCORE_SUMS) -> pd.DataFrame:
    """One row per replication and estimand of a histogram protocol (``"histogram"``, ``"histogram_equal"``,
    ``"flat20"`` or ``"secagg"``) in ``cell``, each validation as the analyst makes it from the summed release
    (:func:`dsroc.histogram_validation` with the analyst's arguments and default estimator; ``flat20``: the binned
    empirical AUC); ``score_sums=False``: the default protocols' releases without the per-bin score sums (as
    before commit 736efc1)."""
    sums = score_sums and protocol in ("histogram", "histogram_equal", "secagg")
    if protocol in ("histogram", "secagg"):
        release = quantile_release(data, cell, seed, score_sums=sums, protocol=protocol)
    else:
        edges = histogram_edges(20) if protocol == "flat20" else default_grid(cell.epsilon, cell.delta, sums)
        release = histogram_release(data, cell, edges, seed, protocol, score_sums=sums)
    estimator = "empirical" if protocol == "flat20" else DEFAULT_ESTIMATOR
    est = {e: np.full((data.batch.size, 4), np.nan) for e in ESTIMANDS}
    failure = {e: np.full(data.batch.size, "", dtype=object) for e in ESTIMANDS}
    reported = np.full(data.batch.size, "", dtype=object)  # the AUC estimator the result says it reports
    for i in range(data.batch.size):
        try:
            v = release_validation(release, i, estimator=estimator)
        except ValueError as exc:  # a valid, charged release without an answer: counted, not hidden
            for e in ESTIMANDS:
                failure[e][i] = f"raised: {exc}"
            continue
        for e, values in _estimates(v).items():
            est[e][i] = values
        reported[i] = v.estimator
        for key, why in getattr(v, "unavailable", {}).items():  # what the result says it could not estimate
            if _UNAVAILABLE.get(key) in failure:
                failure[_UNAVAILABLE[key]][i] = why
    return _frame(data, cell, protocol, release.sigma, est, failure, reported)


def _frame(data: DataSet, cell, protocol: str, tau: float, est: dict, failure, estimator) -> pd.DataFrame:
    b, d = data.batch, cell.design
    pop = population_truth(d)
    frames = []
    for e, values in est.items():
        frames.append(pd.DataFrame({
            "cell": cell.name, "protocol": protocol, "shape": d.shape, "prevalence": d.prevalence, "design_auc": d.auc,
            "n": cell.n, "sites": cell.sites, "epsilon": getattr(cell, "epsilon", np.nan),
            "delta": getattr(cell, "delta", np.nan), "tau": tau, "rep": b.reps, "n1": b.n1, "estimand": e,
            "estimate": values[:, 0], "lower": values[:, 1], "upper": values[:, 2], "se": values[:, 3],
            "pooled": data.pooled[e], "population": getattr(pop, e), "failure": failure[e], "estimator": estimator,
        }))
    return pd.concat(frames, ignore_index=True)[RESULT_COLUMNS]


def paper_rows(data: DataSet, cell: PaperCell, seed: int) -> pd.DataFrame:
    """One row per replication of the paper protocol's noise-corrected AUC and CI in ``cell``."""
    res = run_protocol_chunk(seed, data.batch.reps, [cell.setting], batch=data.batch)
    se = np.sqrt(res["var_corr"].to_numpy())
    values = np.column_stack([res["auc_corr"], res["ci_lower_corr"], res["ci_upper_corr"], se])
    failure = res["failure"].to_numpy().astype(object)
    frame = _frame(data, cell, "paper", cell.setting.tau, {"auc": values}, {"auc": failure},
                   np.where(np.isfinite(values[:, 0]), "noise-corrected", ""))
    frame["epsilon"], frame["delta"] = cell.setting.epsilon, cell.setting.delta
    return frame
