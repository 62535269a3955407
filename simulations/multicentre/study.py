"""Multicentre study: heterogeneity across sites, subgroups, decision curves and two models compared.

Each analysis is simulated as the histogram protocol computes it: every site counts its patients on a
public grid and adds discrete Laplace noise of the per-site scale for epsilon to every cell, as the site
calibrates it (:func:`dsroc.histogram.stages.laplace_release_scales`, add/remove one patient changes one cell by one);
the analyst computes from the releases with :mod:`dsroc.multicentre` and the histogram AUC estimator
(:func:`dsroc.histogram.estimates.histogram_auc_estimates`). The truth is the pooled unbinned data
(or, for a new site, its population AUC).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit, logit

from dsroc import delong_variance, empirical_auc
from dsroc.histogram.estimates import histogram_auc_estimates
from dsroc.histogram.grid import bin_index, histogram_edges, recommended_n_bins
from dsroc.histogram.release import draw_release
from dsroc.histogram.stages import (STAGE2_BINS, first_stage_grid, laplace_release_scales, laplace_two_stage_plan,
                                   policy_candidates, second_stage_grid)
from dsroc.multicentre import (decision_curve, joint_grid, logit_auc, paired_auc_difference, random_effects,
                               subgroup_analysis)
from dsroc.privacy.laplace import discrete_laplace_noise, discrete_laplace_variance

from ..stress.study import POLICY_BINS, POLICY_LOGIT_RANGE

__all__ = ["heterogeneity", "subgroups", "decision_curves", "paired_comparison", "DECISION_EDGES"]

DELTA = 1e-5
# Edges that resolve the usual 5-50 % risk thresholds of a decision curve.
DECISION_EDGES = np.array([0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 1.0])


def _binormal(rng, n, auc, prevalence):
    """Scores in (0, 1) whose population AUC is ``auc`` (binormal latent, equal variances), and labels."""
    y = rng.random(n) < prevalence
    latent = rng.normal(size=n) + np.sqrt(2) * stats.norm.ppf(auc) * y
    return expit(latent - 1.0), y


def _site_releases(scores, y, site, sites: int, edges, scale: float, noise, *, parts=None, n_parts: int = 1):
    """Every site's noisy counts ``(sites, 2, cells)`` (float): the sites' own draw
    (:func:`dsroc.histogram.release.draw_release`) of discrete Laplace noise of ``scale`` from ``noise``."""
    release = draw_release(scores, np.asarray(y, dtype=np.int64), edges, noise=noise, rng=None, sigma=scale,
                           parts=parts, n_parts=n_parts, groups=site, n_groups=sites)
    return release.counts.astype(np.float64)


def _at_once(rng):
    """Noise for every site in one draw from ``rng``."""
    return lambda scale, shape: discrete_laplace_noise(scale, shape, rng)


def _site_by_site(rng):
    """Noise drawn site after site from ``rng``, as each site would draw its own."""
    return lambda scale, shape: np.stack([discrete_laplace_noise(scale, shape[1:], rng) for _ in range(shape[0])])


def _noise(epsilon: float, score_sums: bool = False) -> tuple[float, float]:
    """A site's discrete Laplace scale of a count in one release at ``epsilon`` and that noise's variance."""
    scale = laplace_release_scales(epsilon, score_sums=score_sums)[0]
    return scale, discrete_laplace_variance(scale)


def heterogeneity(reps: int = 200, *, sites: int = 10, n: int = 2000, epsilon: float = 1.0, tau2: float = 0.04,
                  mean_auc: float = 0.75, seed: int = 0) -> dict:
    """Per-site AUCs from each site's own release, pooled on the logit scale (REML, Hartung-Knapp).

    Site AUCs are drawn with ``logit(AUC) ~ N(logit(mean_auc), tau2)``. Returns the coverage of a new
    site's AUC by the 95 % prediction interval, the mean tau^2 estimate with its Monte-Carlo SE, and the
    coverage of the pooled mean.
    """
    rng = np.random.default_rng(seed)
    sigma, var = _noise(epsilon)
    sd = np.sqrt(var)
    edges = histogram_edges(recommended_n_bins(sd))
    covered, mean_covered, tau2_hat = [], [], []
    for _ in range(reps):
        site_aucs = expit(rng.normal(logit(mean_auc), np.sqrt(tau2), sites + 1))
        data = [_binormal(rng, n, a, 0.3) for a in site_aucs[:sites]]
        released = _site_releases(np.concatenate([d[0] for d in data]), np.concatenate([d[1] for d in data]),
                                  np.repeat(np.arange(sites), n), sites, edges, sigma, _at_once(rng))
        est = histogram_auc_estimates(released[:, 0], released[:, 1], sigma=sd, noise_draws=40,
                                      seeds=rng.integers(2**31, size=sites).tolist())
        y, v = logit_auc(np.clip(est.auc, 1e-6, 1 - 1e-6), est.variance)
        m = random_effects(y, v)
        lo, hi = expit(m.prediction_interval[0]), expit(m.prediction_interval[1])
        covered.append(lo <= site_aucs[sites] <= hi)
        mean_covered.append(m.ci[0] <= logit(mean_auc) <= m.ci[1])
        tau2_hat.append(m.tau2)
    t = np.asarray(tau2_hat)
    return {"analysis": "heterogeneity", "epsilon": epsilon, "reps": reps, "sites": sites, "n_per_site": n,
            "tau2_true": tau2, "pi_coverage_new_site": float(np.mean(covered)),
            "mean_ci_coverage": float(np.mean(mean_covered)), "tau2_mean": float(t.mean()),
            "tau2_mc_se": float(t.std(ddof=1) / np.sqrt(reps))}


def _validation_grid(rng, scores, y, site, sites, epsilon):
    """The grid of the analyst's default histogram validation, which the stratified and joint releases reuse
    (analyst.protocols.histogram.release.quantile_grid): a first release of every site's negatives and positives on
    the fine logit grid at the first stage's noise, summed over the sites; edges at the quantiles of the classes'
    balanced mixture, as many as the estimated class sizes over the second stage's summed noise call for
    (:func:`dsroc.histogram.stages.second_stage_grid`; at most 12, which a default policy's 400 cells per class
    allow for two strata and for 12 x 12 pairs of bins), each an edge the default policy allows."""
    stages = laplace_two_stage_plan(epsilon, DELTA)
    fine = first_stage_grid([POLICY_BINS], *POLICY_LOGIT_RANGE)
    bins = fine.size - 1
    h = _site_releases(scores, y, site, sites, fine, _noise(stages.epsilon1)[0], _site_by_site(rng)).sum(axis=0)
    interior = second_stage_grid(h[0], h[1], fine, stages.sigma2 * np.sqrt(sites), most=STAGE2_BINS[-1][1],
                                 candidates=policy_candidates([POLICY_BINS], fine, "logit", lo=POLICY_LOGIT_RANGE[0],
                                                              hi=POLICY_LOGIT_RANGE[1]),
                                 first_sigma=stages.sigma1 * np.sqrt(sites))
    return np.concatenate([[0.0], interior, [1.0]])


def subgroups(reps: int = 200, *, sites: int = 5, n: int = 10_000, epsilon: float = 1.0, aucs=(0.70, 0.80),
              grid: str = "validation", seed: int = 1) -> dict:
    """Two strata (half the patients each) released as per-stratum histograms in one release.

    A patient is in one stratum, so one release of the stratified histograms has the sensitivity of one
    histogram. As ``HistogramOptions(strata=...)`` makes it: at the validation's (epsilon, delta) with the score
    sums, on the validation's grid (``grid="validation"``; ``"equal12"``: 12 equal bins, the first version),
    each stratum's ROC-GLM AUC (:func:`dsroc.multicentre.subgroup_analysis`). Returns the coverage of the pooled
    empirical difference (stratum 2 - stratum 1) and the mean half-width relative to the noise-free unbinned
    DeLong interval.
    """
    rng = np.random.default_rng(seed)
    sigma, var = _noise(epsilon, score_sums=True)
    sd_sum = np.sqrt(sites * var)
    covered, ratio, bins = [], [], []
    for _ in range(reps):
        data = [_binormal(rng, n // 2, a, 0.3) for a in aucs]
        s = np.concatenate([d[0] for d in data])
        y = np.concatenate([d[1] for d in data]).astype(int)
        stratum = np.repeat([0, 1], [d[0].size for d in data])
        site = rng.integers(sites, size=s.size)
        edges = _validation_grid(rng, s, y, site, sites, epsilon) if grid == "validation" else histogram_edges(12)
        m = edges.size - 1
        released = _site_releases(s, y, site, sites, edges, sigma, _site_by_site(rng), parts=stratum,
                                  n_parts=2).sum(axis=0).reshape(2, m, 2)
        a = subgroup_analysis(released[0], released[1], edges, sigma=sd_sum)
        d = next(d for d in a.differences if d.statistic == "AUC")
        truth = [empirical_auc(s[stratum == k], y[stratum == k]) for k in (0, 1)]
        free = sum(delong_variance(s[stratum == k], y[stratum == k]) for k in (0, 1))
        covered.append(d.ci[0] <= truth[1] - truth[0] <= d.ci[1])
        ratio.append(d.se / np.sqrt(free))
        bins.append(m)
    return {"analysis": "subgroups", "epsilon": epsilon, "reps": reps, "n": n, "sites": sites, "grid": grid,
            "mean_bins": float(np.mean(bins)), "coverage": float(np.mean(covered)),
            "halfwidth_ratio_to_noise_free": float(np.mean(ratio))}


def decision_curves(reps: int = 200, *, sites: int = 5, n: int = 10_000, epsilon: float = 1.0,
                    thresholds=(0.1, 0.2, 0.3), seed: int = 2) -> dict:
    """Net benefit of a calibrated model at ``thresholds`` (edges of :data:`DECISION_EDGES`) against the
    pooled unbinned truth (MAE, interval coverage) and the population's (coverage): the interval is for the
    population (sampling and noise), so it over-covers the pooled value, which differs by the noise only."""
    rng = np.random.default_rng(seed)
    sigma, var = _noise(epsilon)
    var_cell = sites * var
    at = np.searchsorted(DECISION_EDGES[1:-1], thresholds)
    t = np.asarray(thresholds)

    def draw(size):
        risk = expit(-1.6 + 1.1 * rng.normal(size=size))
        return risk, rng.random(size) < risk

    def net_benefit(risk, y):
        return np.array([np.mean(y & (risk >= u)) - np.mean(~y & (risk >= u)) * u / (1 - u) for u in t])

    population = net_benefit(*draw(4_000_000))  # MC SE ~1e-4, well below the intervals' half-widths
    err, hit, hit_pop = [], [], []
    for _ in range(reps):
        risk, y = draw(n)
        site = rng.integers(sites, size=n)
        released = _site_releases(risk, y, site, sites, DECISION_EDGES, sigma, _site_by_site(rng)).sum(axis=0)
        dc = decision_curve(released[0], released[1], DECISION_EDGES, noise_variance=var_cell)
        truth = net_benefit(risk, y)
        err.append(dc.net_benefit[at] - truth)
        hit.append((dc.lower[at] <= truth) & (truth <= dc.upper[at]))
        hit_pop.append((dc.lower[at] <= population) & (population <= dc.upper[at]))
    err, hit, hit_pop = np.array(err), np.array(hit), np.array(hit_pop)
    return {"analysis": "decision curve", "epsilon": epsilon, "reps": reps, "n": n, "sites": sites,
            **{f"mae@{u:g}": float(np.abs(err[:, i]).mean()) for i, u in enumerate(thresholds)},
            **{f"coverage@{u:g}": float(hit[:, i].mean()) for i, u in enumerate(thresholds)},
            **{f"coverage_population@{u:g}": float(hit_pop[:, i].mean()) for i, u in enumerate(thresholds)}}


def paired_comparison(reps: int = 200, *, sites: int = 5, n: int = 10_000, epsilon: float = 1.0,
                      delta_auc: float = 0.03, grid: str = "validation", seed: int = 3) -> dict:
    """Two correlated models on the same patients, released as one joint 2-D histogram per class.

    Model A has AUC 0.78, model B ``0.78 - delta_auc`` (population). As ``HistogramOptions(compare=...)`` makes
    it: one joint release at the validation's (epsilon, delta) on every second edge of the validation's grid of
    model A (``grid="validation"``, :func:`dsroc.multicentre.joint_grid`; ``"validation-full"``: on all its edges, as
    before; ``"equal10"``: 10 equal bins, the first version). Returns the coverage of the pooled empirical difference
    and of the population's (``delta_auc``), the power of the test of no difference at 5 %, beside the noise-free,
    unbinned DeLong test's power, and the mean SE over that test's.
    """
    rng = np.random.default_rng(seed)
    sigma, var = _noise(epsilon)
    var_cell = sites * var
    auc_a, auc_b = 0.78, 0.78 - delta_auc
    da, db = np.sqrt(2) * stats.norm.ppf(auc_a), np.sqrt(2) * stats.norm.ppf(auc_b)
    covered, covered_pop, reject, reject_free, bins, ratio = [], [], [], [], [], []
    for _ in range(reps):
        y = rng.random(n) < 0.3
        common = rng.normal(size=n)
        # correlation 0.6 between the two models' latent noise
        xa = da * y + common
        xb = db * y + 0.6 * common + 0.8 * rng.normal(size=n)
        sa, sb = expit(xa - 1.0), expit(xb - 1.0)
        site = rng.integers(sites, size=n)
        edges = (_validation_grid(rng, sa, y, site, sites, epsilon) if grid.startswith("validation")
                 else histogram_edges(10))
        edges = joint_grid(edges) if grid == "validation" else edges
        m = edges.size - 1
        joint = _site_releases(sa, y, site, sites, edges, sigma, _site_by_site(rng), parts=bin_index(sb, edges),
                               n_parts=m).sum(axis=0).reshape(2, m, m)
        res = paired_auc_difference(joint[0], joint[1], noise_variance=var_cell)
        yi = y.astype(int)
        truth = empirical_auc(sa, yi) - empirical_auc(sb, yi)
        covered.append(res.ci[0] <= truth <= res.ci[1])
        covered_pop.append(res.ci[0] <= delta_auc <= res.ci[1])
        reject.append(res.p_value < 0.05)
        p_free, se_free = _delong_paired_p(sa, sb, y)
        reject_free.append(p_free < 0.05)
        ratio.append(res.se / se_free)
        bins.append(m)
    return {"analysis": "paired comparison", "epsilon": epsilon, "reps": reps, "n": n, "sites": sites,
            "grid": grid, "mean_bins": float(np.mean(bins)), "delta_auc": delta_auc, "coverage": float(np.mean(covered)),
            "coverage_population": float(np.mean(covered_pop)), "power": float(np.mean(reject)),
            "power_noise_free_unbinned": float(np.mean(reject_free)), "se_ratio_to_unbinned": float(np.mean(ratio))}


def _delong_paired_p(sa, sb, y):
    """Two-sided p and SE of DeLong's paired test on the unbinned pooled scores (placement values in O(n log n))."""
    def components(s):
        s0, s1 = np.sort(s[~y]), np.sort(s[y])
        v10 = (np.searchsorted(s0, s[y], "left") + np.searchsorted(s0, s[y], "right")) / (2 * s0.size)
        v01 = 1 - (np.searchsorted(s1, s[~y], "left") + np.searchsorted(s1, s[~y], "right")) / (2 * s1.size)
        return v10, v01
    a10, a01 = components(sa)
    b10, b01 = components(sb)
    var = np.var(a10 - b10, ddof=1) / a10.size + np.var(a01 - b01, ddof=1) / a01.size
    z = (a10.mean() - b10.mean()) / np.sqrt(var)
    return 2 * stats.norm.sf(abs(z)), float(np.sqrt(var))


def run_multicentre(reps: int = 200, *, seed: int = 0) -> pd.DataFrame:
    """Every analysis at the study's settings: one row each (heterogeneity at epsilon 1 and 5)."""
    rows = [heterogeneity(reps, epsilon=1.0, seed=seed), heterogeneity(reps, epsilon=5.0, seed=seed + 10),
            subgroups(reps, seed=seed + 1), subgroups(reps, grid="equal12", seed=seed + 1),
            decision_curves(reps, seed=seed + 2), paired_comparison(reps, seed=seed + 3),
            paired_comparison(reps, grid="equal10", seed=seed + 3),
            paired_comparison(reps, delta_auc=0.02, seed=seed + 3),  # issue 35's target: power >= 0.9
            paired_comparison(reps, delta_auc=0.02, grid="validation-full", seed=seed + 3)]
    return pd.DataFrame(rows)
