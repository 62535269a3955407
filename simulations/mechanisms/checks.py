"""The seed papers' headline numbers, reproduced by simulation: Boyd's DP error against estimation error, Sun's Tables 5 and 2.

Each check runs the :mod:`dsroc.mechanisms` functions on synthetic data of the papers' sizes (binormal
scores with the papers' AUC; the papers used UCI adult / Kaggle diabetes and Criteo) and reports the
simulated value, its Monte-Carlo standard error and the printed value, with ``within_3se`` comparing
the two within three combined standard errors (the printed SDs are themselves from 100 runs).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtri
from scipy.stats import rankdata

from dsroc.mechanisms import boyd, fedauc

__all__ = ["SUN_M", "SUN_P", "SUN_AUC", "SUN_TABLE5", "SUN_TABLE2", "boyd_headline", "sun_table5", "sun_table2", "run_checks"]

SUN_M, SUN_P, SUN_AUC = 458_407, 117_317, 0.749383  # Criteo small (Sun et al. 2022, Table 3)
# Table 5: SD of the debiased FedAUC_RR AUC over 100 runs.
SUN_TABLE5 = {0.1: 2.41e-2, 0.5: 5.39e-3, 1.0: 2.11e-3, 2.0: 9.43e-4, 4.0: 3.75e-4, 10.0: 1.77e-5}
# Table 2 (exact counts, all of epsilon = 1 on the rank sums): (method, clients) -> (printed SD, printed formula).
SUN_TABLE2 = {("global", 10): (4.84e-5, 5.12e-5), ("global", SUN_M): (1.10e-2, 1.097e-2), ("local", SUN_M): (6.44e-3, 6.33e-3)}
BOYD_EPSILONS = (0.1, 0.25, 0.5, 1.0)
BOYD_DELTAS = (0.0, 1e-6, 1e-4, 1e-2)


def _sd_se(values: np.ndarray) -> tuple[float, float]:
    """Sample SD and its standard error ``SD / sqrt(2 (runs - 1))`` (normal approximation)."""
    sd = float(np.std(values, ddof=1))
    return sd, sd / math.sqrt(2.0 * (values.size - 1))


def _binormal(rng: np.random.Generator, n_pos: int, n_neg: int, auc: float):
    shift = math.sqrt(2.0) * float(ndtri(auc))
    scores = np.concatenate([rng.standard_normal(n_neg), rng.standard_normal(n_pos) + shift])
    labels = np.concatenate([np.zeros(n_neg, np.int8), np.ones(n_pos, np.int8)])
    return scores, labels


def boyd_headline(seed: int = 1, *, reps: int = 2000, n_each: int = 1000, auc: float = 0.8) -> list[dict]:
    """Boyd et al. (2015) / Boyd (2014, ch. 5): DP error of the smooth-sensitivity AUC against the estimation error.

    ``reps`` data sets of ``n_each`` positives and negatives (binormal, population AUC ``auc``). Estimation
    error: RMSE and MAE of the empirical AUC (ties count 0) around the population AUC. DP error: RMSE
    and MAE of the clipped release around the data set's own AUC. Finding to reproduce: with Laplace
    noise (delta > 0) the DP error is below the estimation error at n1 = n0 = 1000 for epsilon > 0.25.
    """
    rng = np.random.default_rng([seed, 2015])
    shift = math.sqrt(2.0) * float(ndtri(auc))
    x = rng.standard_normal((reps, n_each))
    y = rng.standard_normal((reps, n_each)) + shift
    ranks = rankdata(np.concatenate([x, y], axis=1), axis=1, method="min")  # ties count 0 (none occur here)
    emp = (ranks[:, n_each:].sum(axis=1) - n_each * (n_each + 1) / 2.0) / (n_each * n_each)
    est_rmse, est_mae = float(np.sqrt(np.mean((emp - auc) ** 2))), float(np.mean(np.abs(emp - auc)))
    rows = []
    for delta in BOYD_DELTAS:
        for eps in BOYD_EPSILONS:
            rel = boyd.smooth_sensitivity_release(emp, n_each, 2 * n_each, epsilon=eps, delta=delta, rng=rng)
            err = rel.value - emp
            rows.append({
                "epsilon": eps, "delta": delta, "noise": "cauchy" if delta == 0 else "laplace",
                "smooth_sensitivity": float(np.max(rel.smooth_sensitivity)), "scale": float(np.max(rel.scale)),
                "dp_rmse": float(np.sqrt(np.mean(err**2))), "dp_mae": float(np.mean(np.abs(err))),
                "estimation_rmse": est_rmse, "estimation_mae": est_mae,
                "dp_below_estimation": bool(np.sqrt(np.mean(err**2)) < est_rmse),
            })
    return rows


def sun_table5(seed: int = 1, *, runs: int = 100) -> list[dict]:
    """Sun et al. (2022) Table 5: SD of the debiased FedAUC_RR AUC over ``runs`` runs on one data set of
    Criteo's size (M = 458,407, P = 117,317, AUC 0.749383, binormal)."""
    rng = np.random.default_rng([seed, 2022, 5])
    scores, labels = _binormal(rng, SUN_P, SUN_M - SUN_P, SUN_AUC)
    ranks = rankdata(scores) - 1.0
    rows = []
    for eps, printed in SUN_TABLE5.items():
        values = np.empty(runs)
        for r in range(runs):
            flipped = fedauc.randomized_response(labels, epsilon=eps, rng=rng)
            p_noisy = float(flipped.sum())
            noisy = fedauc.rank_auc(float(ranks @ flipped), p_noisy, SUN_M)
            values[r] = fedauc.debias_auc(noisy, n_pos_noisy=p_noisy, n=SUN_M, epsilon=eps)
        sd, se = _sd_se(values)
        printed_se = printed / math.sqrt(2.0 * 99)
        rows.append({"epsilon": eps, "sd": sd, "se": se, "mean": float(values.mean()), "printed_sd": printed,
                     "within_3se": bool(abs(sd - printed) <= 3 * math.hypot(se, printed_se))})
    return rows


def sun_table2(seed: int = 1, *, runs: int = 100) -> list[dict]:
    """Sun et al. (2022) Table 2: SD of FedAUC_Lap with exact counts and epsilon = 1 on the rank sums, for
    GlobalLaplace with 10 and 458,407 clients and LocalLaplace with one patient per client."""
    rng = np.random.default_rng([seed, 2022, 2])
    scores, labels = _binormal(rng, SUN_P, SUN_M - SUN_P, SUN_AUC)
    ranks = rankdata(scores) - 1.0
    rows = []
    for (method, clients), (printed, formula) in SUN_TABLE2.items():
        sites = np.arange(SUN_M) if clients == SUN_M else rng.integers(0, clients, SUN_M)
        stats = fedauc.site_rank_statistics(ranks, labels, sites, n_groups=clients)
        values = np.empty(runs)
        for r in range(runs):
            noisy_sum, noisy_p = fedauc.site_release(stats, method=method, epsilon=1.0, rng=rng, exact_counts=True)
            values[r] = fedauc.rank_auc(float(noisy_sum.sum()), float(noisy_p.sum()), SUN_M)
        sd, se = _sd_se(values)
        ours = fedauc.fedauc_laplace_sd(n_pos=SUN_P, n_neg=SUN_M - SUN_P, n_sites=clients, epsilon=1.0, method=method)
        printed_se = printed / math.sqrt(2.0 * 99)
        rows.append({"method": method, "clients": clients, "sd": sd, "se": se, "printed_sd": printed,
                     "printed_formula": formula, "formula": ours,
                     "within_3se": bool(abs(sd - printed) <= 3 * math.hypot(se, printed_se))})
    return rows


def run_checks(seed: int = 1, *, boyd_reps: int = 2000, sun_runs: int = 100) -> dict:
    """All three checks (a few seconds to a minute)."""
    return {"boyd_headline": boyd_headline(seed, reps=boyd_reps), "sun_table5": sun_table5(seed, runs=sun_runs),
            "sun_table2": sun_table2(seed, runs=sun_runs)}
