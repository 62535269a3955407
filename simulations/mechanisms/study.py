"""Mechanisms mode: every private AUC mechanism of the seed papers on the same replications (vectorised).

Per replication (n patients, binormal latent score x, model ``p = expit(x - 1)``, prevalence 0.3) and
per setting (n, K sites, epsilon), each mechanism's AUC and AP are compared with the pooled empirical
values of the true scores. All replications of a chunk are processed together: a replication is a row
of an (b, n) array, a (replication, site) pair a group of the flattened array, and every mechanism
calls the :mod:`dsroc` function that the daemon or the analyst would call, on arrays.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from dsroc import analytic_gaussian_sigma, fit_rocglm_batch, model_sensitivity, rocglm_grid
from dsroc.roc.batch import grouped_class_placements, grouped_mean, grouped_placement_values, grouped_rocglm_counts
from dsroc.histogram.grid import bin_index, consistent_counts, histogram_edges, recommended_n_bins
from dsroc.histogram.estimates import histogram_point_auc
from dsroc.mechanisms import boyd, fedauc
from dsroc.privacy.noise import discrete_gaussian_noise, discrete_gaussian_sigma
from dsroc.pr.space import average_precision_from_counts, grouped_average_precision

from .settings import DELTA, MechanismData, MechanismSetting, generate_data, predict

_histogram_sigma = lru_cache(maxsize=None)(discrete_gaussian_sigma)  # the calibration runs once per process

__all__ = ["MECHANISMS", "COUNT_SHARE", "run_mechanisms_chunk"]

COUNT_SHARE = 0.1  # Boyd per site: share of epsilon spent on the noisy class counts (the weights)

# mechanism -> (privacy unit, delta, what the estimate targets)
MECHANISMS = {
    "paper_model": ("scores", DELTA, "paper protocol, Gaussian on scores, Delta = model rule (estimate, not a bound)"),
    "paper_range": ("scores", DELTA, "paper protocol, Gaussian on scores, Delta = score range 1 (formal bound)"),
    "histogram": ("rows", DELTA, "histogram protocol, discrete Gaussian on class-wise counts, 5-12 bins (dsroc.recommended_n_bins)"),
    "boyd_site": ("rows", DELTA, "Boyd M1/M2 per site (H-B1), Laplace smooth sensitivity + noisy counts"),
    "boyd_central": ("rows", DELTA, "Boyd M1/M2 by a trusted curator on the pooled data, Laplace"),
    "boyd_central_cauchy": ("rows", 0.0, "Boyd M1/M2 by a trusted curator, pure epsilon-DP (Cauchy)"),
    "fedauc_rr": ("labels", 0.0, "Sun FedAUC_RR: randomized response on labels, debiased, clipped to [0, 1]"),
    "fedauc_lap": ("labels", 0.0, "Sun FedAUC_Lap, LocalLaplace (alpha = 0.5), clipped to [0, 1]"),
    "fedauc_lap_adaptive": ("labels", 0.0, "Sun FedAUC_Lap, adaptive split, clipped to [0, 1]"),
}
COLUMNS = ["setting", "n", "k", "epsilon", "rep", "mechanism", "unit", "delta", "auc_true", "auc", "auc_unclipped",
           "ap_true", "ap"]


def _pooled_auc(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Mann-Whitney AUC (mid-ranks) of every row."""
    n1 = labels.sum(axis=1)
    n0 = labels.shape[1] - n1
    ranks = rankdata(scores, axis=1)
    return ((ranks * labels).sum(axis=1) - n1 * (n1 + 1) / 2.0) / (n1 * n0)


def _site_groups(data: MechanismData, k: int) -> np.ndarray:
    return (np.arange(data.b)[:, None] * k + data.sites(k)).ravel()


def _site_sensitivities(data: MechanismData, k: int) -> np.ndarray:
    """The paper's model rule Delta per (replication, site): :func:`dsroc.model_sensitivity` on the site's feature."""
    sites = data.sites(k)
    out = np.empty((data.b, k))
    for b in range(data.b):
        for s in range(k):
            out[b, s] = model_sensitivity(predict, data.x[b, sites[b] == s][:, None]).value
    return out


class _Prepared:
    """What a chunk computes once per (n, K): truths, site groups, ranks, per-site statistics, noise draws."""

    def __init__(self, seed: int, data: MechanismData, k: int):
        self.data, self.k = data, k
        b, n = data.scores.shape
        s, y = data.scores.ravel(), data.labels.ravel()
        self.groups = _site_groups(data, k)
        rows = np.repeat(np.arange(b), n)
        self.auc_true = _pooled_auc(data.scores, data.labels)
        self.ap_true = grouped_average_precision(s, y, rows, n_groups=b)
        strict = grouped_class_placements(s, y, self.groups, n_groups=b * k, ties="strict")
        neg = y == 0
        self.site_auc = grouped_mean(strict.pv[neg], self.groups[neg], n_groups=b * k).reshape(b, k)
        self.site_ap = grouped_average_precision(s, y, self.groups, n_groups=b * k).reshape(b, k)
        self.site_n1 = strict.n1.reshape(b, k)
        self.site_n = (strict.n0 + strict.n1).reshape(b, k)
        pooled_strict = grouped_class_placements(s, y, rows, n_groups=b, ties="strict")
        self.auc_strict = grouped_mean(pooled_strict.pv[neg], rows[neg], n_groups=b)  # Boyd's AUC: ties count 0
        self.ranks = rankdata(data.scores, axis=1) - 1.0  # 0-based global mid-ranks per replication
        self.site_stats = fedauc.site_rank_statistics(self.ranks.ravel(), y, self.groups, n_groups=b * k)
        self.delta_model = _site_sensitivities(data, k)
        gen = [np.random.default_rng([seed, n, int(r), k, 1]) for r in data.reps]
        self.z = np.stack([g.standard_normal(n) for g in gen])  # score-release noise (common to all epsilons)


def _paper(prep: _Prepared, tau: np.ndarray):
    """Paper protocol: each site releases scores + N(0, tau_k^2); true positives placed under pooled S~0; ROC-GLM."""
    data, k = prep.data, prep.k
    b, n = data.scores.shape
    sites = data.sites(k)
    released = data.scores + tau[np.arange(b)[:, None], sites] * prep.z
    y, rows = data.labels.ravel(), np.repeat(np.arange(b), n)
    neg, pos = y == 0, y == 1
    pv0 = grouped_placement_values(released.ravel()[neg], rows[neg], data.scores.ravel()[pos], rows[pos], n_groups=b)
    grid = rocglm_grid()
    fit = fit_rocglm_batch(grouped_rocglm_counts(pv0, rows[pos], grid, n_groups=b), data.labels.sum(axis=1), grid)
    # AP as post-processing of the released scores: the PR curve of (S~0, S~1) with the known labels.
    ap = grouped_average_precision(released.ravel(), y, rows, n_groups=b)
    return fit.auc, ap


def _histogram(prep: _Prepared, sigma: float, rng: np.random.Generator):
    """Histogram protocol: per-site class-wise counts on equal bins of [0, 1] + discrete Gaussian noise, summed.

    The bin count is the analyst's default for the per-site noise (:func:`dsroc.recommended_n_bins`).
    """
    data, k = prep.data, prep.k
    b, n = data.scores.shape
    m = recommended_n_bins(sigma)
    edges = histogram_edges(m)
    bins = bin_index(data.scores.ravel(), edges).reshape(b, n)
    cell = ((np.arange(b)[:, None] * 2 + data.labels) * m + bins).ravel()
    true = np.bincount(cell, minlength=b * 2 * m).reshape(b, 2, m)
    noise = discrete_gaussian_noise(sigma, (b, k, 2, m), rng).sum(axis=1)  # each site's noise, summed
    c0, c1 = consistent_counts(true[:, 0] + noise[:, 0]), consistent_counts(true[:, 1] + noise[:, 1])
    ok = (c0.sum(axis=1) > 0) & (c1.sum(axis=1) > 0)
    total_sigma = sigma * np.sqrt(k)
    auc, ap = np.full(b, np.nan), np.full(b, np.nan)
    auc[ok] = histogram_point_auc(c0[ok], c1[ok], sigma=total_sigma)
    ap[ok] = average_precision_from_counts(c0[ok], c1[ok])
    return auc, ap


def _boyd(stat, n1, n, *, epsilon, delta, rng, statistic):
    release = boyd.smooth_sensitivity_release(stat, n1, n, epsilon=epsilon, delta=delta, rng=rng, statistic=statistic)
    return release.value, release.unclipped


def _boyd_site(prep: _Prepared, epsilon: float, rng: np.random.Generator, statistic: str):
    stat = prep.site_auc if statistic == "auc" else prep.site_ap
    value, _ = _boyd(stat, prep.site_n1, prep.site_n, epsilon=(1 - COUNT_SHARE) * epsilon, delta=DELTA, rng=rng,
                     statistic=statistic)
    noisy_n1, _ = boyd.dp_class_count(prep.site_n1, prep.site_n, epsilon=COUNT_SHARE * epsilon, rng=rng)
    return boyd.combine_site_releases(value, noisy_n1, prep.site_n, statistic=statistic)


def run_mechanisms_chunk(seed: int, reps, settings, *, n=None) -> pd.DataFrame:
    """Run replications ``reps`` of every setting through every mechanism of :data:`MECHANISMS`.

    ``n`` is the runner's data-size override of the other modes; here each setting carries its own n,
    so it must be None.

    Returns one row per (setting, replication, mechanism) with the pooled truth (``auc_true``,
    ``ap_true``) and the mechanism's release (``auc``, ``ap``; ``auc_unclipped`` before clipping to [0, 1]:
    part of Boyd's mechanisms, post-processing added to Sun's, which publish the unclipped value).
    """
    if n is not None:
        raise ValueError("the mechanisms study's settings fix n (n=250, 1000, 10000); --n does not apply")
    reps = list(reps)
    frames = []
    by_size: dict = {}
    for setting in settings:
        by_size.setdefault(setting.n, {}).setdefault(setting.k, []).append(setting)
    for n, by_k in by_size.items():
        data = generate_data(seed, reps, n)
        b = data.b
        n1 = data.labels.sum(axis=1)
        for k, group in by_k.items():
            prep = _Prepared(seed, data, k)
            for setting in group:
                eps = setting.epsilon
                rng = np.random.default_rng([seed, n, k, int(round(eps * 1000)), reps[0]])
                out = {}
                tau_model = np.vectorize(lambda d: analytic_gaussian_sigma(eps, DELTA, d))(prep.delta_model)
                out["paper_model"] = _paper(prep, tau_model)
                out["paper_range"] = _paper(prep, np.full((b, k), analytic_gaussian_sigma(eps, DELTA, 1.0)))
                out["histogram"] = _histogram(prep, _histogram_sigma(eps, DELTA), rng)
                out["boyd_site"] = (_boyd_site(prep, eps, rng, "auc"), _boyd_site(prep, eps, rng, "ap"))
                central_auc = boyd.smooth_sensitivity_release(prep.auc_strict, n1, n, epsilon=eps, delta=DELTA,
                                                              rng=rng, statistic="auc")
                central_ap = boyd.smooth_sensitivity_release(prep.ap_true, n1, n, epsilon=eps, delta=DELTA, rng=rng,
                                                             statistic="ap")
                out["boyd_central"] = (central_auc.value, central_ap.value, central_auc.unclipped)
                cauchy_auc = boyd.smooth_sensitivity_release(prep.auc_strict, n1, n, epsilon=eps, delta=0.0, rng=rng,
                                                             statistic="auc")
                cauchy_ap = boyd.smooth_sensitivity_release(prep.ap_true, n1, n, epsilon=eps, delta=0.0, rng=rng,
                                                            statistic="ap")
                out["boyd_central_cauchy"] = (cauchy_auc.value, cauchy_ap.value, cauchy_auc.unclipped)
                flipped = fedauc.randomized_response(data.labels, epsilon=eps, rng=rng)
                p_noisy = flipped.sum(axis=1)
                auc_noisy = fedauc.rank_auc((prep.ranks * flipped).sum(axis=1), p_noisy, n)
                debiased = fedauc.debias_auc(auc_noisy, n_pos_noisy=p_noisy, n=n, epsilon=eps)
                out["fedauc_rr"] = (np.clip(debiased, 0.0, 1.0), np.full(b, np.nan), debiased)
                st = prep.site_stats
                for name, method in (("fedauc_lap", "local"), ("fedauc_lap_adaptive", "adaptive")):
                    noisy_sum, noisy_p = fedauc.site_release(st, method=method, epsilon=eps, rng=rng)
                    auc = fedauc.rank_auc(noisy_sum.reshape(b, k).sum(axis=1), noisy_p.reshape(b, k).sum(axis=1), n)
                    out[name] = (np.clip(auc, 0.0, 1.0), np.full(b, np.nan), auc)
                for mech, values in out.items():
                    unit, delta, _ = MECHANISMS[mech]
                    auc, ap = values[0], values[1]
                    unclipped = values[2] if len(values) > 2 else auc
                    frames.append(pd.DataFrame({
                        "setting": setting.name, "n": n, "k": k, "epsilon": eps, "rep": data.reps, "mechanism": mech,
                        "unit": unit, "delta": delta, "auc_true": prep.auc_true, "auc": auc,
                        "auc_unclipped": unclipped, "ap_true": prep.ap_true, "ap": ap,
                    }))
    return pd.concat(frames, ignore_index=True)[COLUMNS]
