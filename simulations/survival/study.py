"""One block of replications of a survival cell: cohorts, the sites' DP releases, the estimates and their intervals.

A cell is a design (:mod:`simulations.survival.designs`), a number of patients ``n``, of sites and a privacy budget
``epsilon``. Each replication draws its cohort from its own stream ``[seed, cell, rep]`` and splits it over the
sites with shares ``1 : 2 : ... : sites`` (unequal sizes). The sites' releases of a whole block of replications are
drawn in one call of :func:`dsroc.survival.release.draw_survival_release`, the function the site daemon calls, with
one group per (replication, site) and the discrete Laplace noise of :func:`dsroc.privacy.laplace.discrete_laplace_noise`
seeded by ``[seed, cell, first rep]`` (blocks are fixed by the plan, never by the number of workers). The release
carries the risk sums (Brier and O/E need them), so its epsilon is shared 0.8 / 0.1 / 0.1
(:func:`dsroc.survival.release.survival_release_scales`).

The grids are public, as a site policy would fix them: the time edges at :data:`TIME_BINS` quantiles of the
population's follow-up (with the horizon, the AUC's time and Uno's tau added as edges, the last edge open), the
score edges at :data:`SCORE_BINS` quantiles of the population's scores, a bin wider than :data:`MAX_SCORE_WIDTH`
split evenly (a score sum's noise is proportional to its bin's width: the open top bin of a rare event would
otherwise drown the expected risk). Each estimate comes with the bootstrap
interval of :func:`dsroc.survival.intervals.survival_interval` (cells resampled, fresh noise of the release's SD).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtri

from dsroc.histogram.stages import SUMS_RESOLUTION
from dsroc.privacy.laplace import discrete_laplace_noise, discrete_laplace_sd
from dsroc.survival import (
    SurvivalHistogram, brier_score, calibration_at, cumulative_dynamic_auc, harrell_c, uno_c,
)
from dsroc.survival.intervals import survival_interval
from dsroc.survival.release import SurvivalRelease, draw_survival_release, survival_release_scales

from .designs import HORIZON, SIGMA, Design, baseline, population, sample
from .reference import pooled_estimates

__all__ = ["TIME_BINS", "SCORE_BINS", "MAX_SCORE_WIDTH", "DRAWS", "STATISTICS", "Cell", "Grids", "grids", "site_of",
           "run_block"]

TIME_BINS = 20
SCORE_BINS = 20
MAX_SCORE_WIDTH = 0.1  # score bins wider than this are split evenly
DRAWS = 100  # bootstrap draws per interval
STATISTICS = ("auc", "uno", "harrell", "brier", "oe")


@dataclass(frozen=True)
class Cell:
    """A design at ``n`` patients over ``sites`` sites and privacy budget ``epsilon`` (None: no noise)."""

    design: Design
    n: int
    sites: int
    epsilon: float | None

    @property
    def name(self) -> str:
        eps = "none" if self.epsilon is None else f"{self.epsilon:g}"
        return f"{self.design.name}_n={self.n}_sites={self.sites}_eps={eps}"

    @property
    def stream(self) -> int:
        """The cell's fixed part of every random stream (a checksum of its name)."""
        return zlib.crc32(self.name.encode())


@dataclass(frozen=True)
class Grids:
    """A design's public grids and the times its statistics are evaluated at."""

    time_edges: np.ndarray
    score_edges: np.ndarray
    auc_time: float
    tau: float


def grids(design: Design, time_bins: int = TIME_BINS, score_bins: int = SCORE_BINS) -> Grids:
    """Time edges at quantiles of the follow-up (plus the evaluation times, last edge open), score edges at
    quantiles of the score, both from the population (public knowledge of the design)."""
    pop = population(design)
    quantiles = pop.follow_up_quantiles(np.linspace(0.0, 0.99, time_bins)[1:])
    time_edges = np.unique(np.r_[0.0, quantiles, HORIZON, pop.median_time, pop.tau, np.inf])
    a, b = design.score_coefficients
    eta = SIGMA * ndtri(np.arange(1, score_bins) / score_bins)
    quantiles = np.r_[0.0, -np.expm1(-pop.scale * baseline(design.model, HORIZON) * np.exp(a + b * eta)), 1.0]
    # the noise of a bin's risk sum grows with its width whatever it holds: split the wide top bin evenly
    pieces = np.ceil(np.diff(quantiles) / MAX_SCORE_WIDTH).astype(int)
    score_edges = np.unique(np.concatenate([np.linspace(lo, hi, k + 1) for lo, hi, k in
                                            zip(quantiles[:-1], quantiles[1:], pieces)]))
    return Grids(time_edges, score_edges, pop.median_time, pop.tau)


def site_of(n: int, sites: int, rng: np.random.Generator) -> np.ndarray:
    """Each patient's site, with shares ``1 : 2 : ... : sites``."""
    shares = np.arange(1.0, sites + 1.0)
    return rng.choice(sites, size=n, p=shares / shares.sum())


def _statistics(g: Grids) -> dict:
    return {"auc": lambda h: cumulative_dynamic_auc(h, g.auc_time).value, "uno": lambda h: uno_c(h, g.tau),
            "harrell": harrell_c, "brier": lambda h: brier_score(h, HORIZON),
            "oe": lambda h: calibration_at(h, HORIZON, [0, h.shape[2]]).overall.ratio}


def _safe(stat, hist) -> float:
    try:
        return float(stat(hist))
    except ValueError:  # a degenerate noisy release (no cases, no comparable pairs): the row records NaN
        return float("nan")


def run_block(cell: Cell, reps, seed: int, *, draws: int = DRAWS, time_bins: int = TIME_BINS,
              score_bins: int = SCORE_BINS) -> pd.DataFrame:
    """The rows ``(cell, rep, statistic)`` of replications ``reps``: population, pooled (unbinned, noise-free),
    binned (noise-free histogram), the DP estimate, its SE and interval."""
    reps = list(reps)
    pop, g = population(cell.design), grids(cell.design, time_bins, score_bins)
    stats = _statistics(g)
    cohorts, pooled, binned = [], [], []
    for rep in reps:
        rng = np.random.default_rng([seed, cell.stream, rep])
        time, event, risk = sample(cell.design, cell.n, rng)
        cohorts.append((time, event, risk, site_of(cell.n, cell.sites, rng)))
        pooled.append(pooled_estimates(time, event, risk, auc_time=g.auc_time, tau=g.tau, horizon=HORIZON))
        exact = SurvivalHistogram.from_patients(time, event, risk, time_edges=g.time_edges, score_edges=g.score_edges)
        binned.append({name: _safe(stat, exact) for name, stat in stats.items()})
    time, event, risk, site = (np.concatenate(parts) for parts in zip(*cohorts))
    groups = np.repeat(np.arange(len(reps)), cell.n) * cell.sites + site
    if cell.epsilon is None:
        sigma = sums_sigma = 0.0
    else:
        sigma, sums_sigma = survival_release_scales(cell.epsilon, risk_sums=True)
    rng = np.random.default_rng([seed, cell.stream, reps[0], 1])
    release = draw_survival_release(time, event, risk, time_edges=g.time_edges, score_edges=g.score_edges,
                                    noise=lambda scale, shape: discrete_laplace_noise(scale, shape, rng), rng=rng,
                                    sigma=sigma, risk_sums=True, sums_sigma=sums_sigma, groups=groups,
                                    n_groups=len(reps) * cell.sites)
    # the summed noise SD of a count and of an offset sum (in score-bin widths), as the analyst knows them
    count_sd = np.sqrt(cell.sites) * discrete_laplace_sd(sigma)
    sums_sd = np.sqrt(cell.sites) * discrete_laplace_sd(sums_sigma) / SUMS_RESOLUTION
    rows = []
    for i, rep in enumerate(reps):
        part = slice(i * cell.sites, (i + 1) * cell.sites)
        hist = SurvivalRelease(release.counts[part], release.offsets[part], release.squares[part]).histogram(
            g.time_edges, g.score_edges)
        for name, stat in stats.items():
            failure = ""
            try:
                ci = survival_interval(hist, stat, count_sd=count_sd, sums_sd=sums_sd, draws=draws,
                                       seed=[seed, cell.stream, rep])
                estimate, se, lower, upper = ci.value, ci.se, ci.lower, ci.upper
            except ValueError as exc:
                estimate = se = lower = upper = float("nan")
                failure = str(exc)[:120]
            rows.append({"cell": cell.name, "model": cell.design.model, "risk": cell.design.risk,
                         "censoring": cell.design.censoring, "calibration": cell.design.calibration, "n": cell.n,
                         "sites": cell.sites, "epsilon": np.nan if cell.epsilon is None else cell.epsilon,
                         "rep": rep, "statistic": name, "population": pop.values()[name], "pooled": pooled[i][name],
                         "binned": binned[i][name], "estimate": estimate, "se": se, "lower": lower, "upper": upper,
                         "failure": failure})
    return pd.DataFrame(rows)
