"""Paper mode: the published study, batched -- noise on all scores, truncated, strict survivor, pooled ROC-GLM."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pandas as pd

from dsroc import auc_ci_batch, delong_variance_from_moments, fit_rocglm_batch, rocglm_grid
from dsroc.roc.batch import grouped_class_placements, grouped_delong_variance, row_strict_placements

from ..common.curves import roc_area_between
from ..common.dgp import generate_batch
from ..common.records import failure_codes, replication_columns, settings_frame, tau_of
from ..common.truth import pooled_truth

__all__ = ["run_paper_chunk"]


def run_paper_chunk(seed: int, reps, settings, *, grid=None, n: int | None = None) -> pd.DataFrame:
    """Run replications ``reps`` in every setting, as the paper's published code does.

    Per replication: the empirical AUC and the DeLong variance of the true scores are computed once.
    Per setting: ``tau * noise`` is added to all scores, which are truncated to [0, 1]; the ROC-GLM is
    fitted to the pooled noisy scores with the strict survivor function ``#{s0 > c} / n0`` on the
    28-point grid; both CIs are centred at the empirical (logit) AUC, one with the DeLong variance of
    the true scores, one with that of the noisy scores (strict placements, as the published code's
    ``ecdf``). ``n`` fixes the size of every replication (default: drawn as in the paper). Each
    replication's settings are placed together (:func:`dsroc.roc.batch.row_strict_placements`), and each
    setting's fits of all replications of the chunk together (:func:`dsroc.fit_rocglm_batch`).

    Returns
    -------
    DataFrame
        One row per (setting, replication), columns :data:`simulations.common.records.COLUMNS`.
    """
    grid = rocglm_grid(grid)
    batch = generate_batch(seed, reps, n)
    n_groups = batch.size
    auc_emp, var_true, ref = pooled_truth(batch)
    counts, var_noisy = _noisy_replications(batch, [tau_of(setting) for setting in settings], grid)
    free = [j for j, setting in enumerate(settings) if tau_of(setting) == 0.0]
    if free:
        # Without noise, the placement values in the patients' order, as the truth's: its CI is the truth's, exactly.
        placed = grouped_class_placements(batch.scores, batch.labels, batch.groups, n_groups=n_groups, ties="strict")
        var_noisy[free] = grouped_delong_variance(placed, batch.labels, batch.groups, n_groups=n_groups)
    # Every setting's fits at once: the rows are fitted independently, so this is each setting's fit.
    fits = fit_rocglm_batch(counts.reshape(-1, grid.size), np.tile(batch.n1, len(settings)), grid)
    results = []
    for j, setting in enumerate(settings):
        fit = _rows(fits, j * n_groups, (j + 1) * n_groups)
        app = auc_ci_batch(auc_emp, var_noisy[j])
        columns = {
            **replication_columns(batch, auc_emp),
            "auc_rocglm": fit.auc,
            "delta_auc": auc_emp - fit.auc,
            "gamma1": fit.params[:, 0],
            "gamma2": fit.params[:, 1],
            "iterations": fit.iterations,
            "converged": fit.converged,
            "failure": failure_codes(fit.degenerate, fit.converged, ref.defined),
            "ci_lower": ref.lower,
            "ci_upper": ref.upper,
            "ci_lower_dist": app.lower,
            "ci_upper_dist": app.upper,
            "delta_ci": np.abs(app.lower - ref.lower) + np.abs(app.upper - ref.upper),
            "var_true": var_true,
            "var_dist": var_noisy[j],
        }
        if setting.noise_free:
            columns["area_between"] = _areas(batch, fit.params)
        results.append((setting, columns))
    return settings_frame(results)


def _noisy_replications(batch, taus, grid) -> tuple[np.ndarray, np.ndarray]:
    """ROC-GLM counts (setting, replication, threshold) and DeLong variance (setting, replication) of the
    noisy scores of every setting.

    One replication at a time, all its settings as the rows of one array: the rows share the labels and
    the size, so one row-wise sort per replication places every setting's scores
    (:func:`dsroc.roc.batch.row_strict_placements`): the counts equal the grouped functions' on each
    setting's replications exactly, the variances to rounding (another order of summation, ~1e-16).
    """
    taus = np.asarray(taus, dtype=np.float64)[:, None]
    noise_free = taus[:, 0] == 0.0
    counts = np.empty((taus.size, batch.size, grid.size), dtype=np.int64)
    variance = np.empty((taus.size, batch.size))
    bounds = np.concatenate(([0], np.cumsum(batch.n)))
    for b in range(batch.size):
        sl = slice(bounds[b], bounds[b + 1])
        s, y, z = batch.scores[sl], batch.labels[sl], batch.noise[sl]
        noisy = taus * z
        noisy += s
        np.maximum(noisy, 0.0, out=noisy)  # truncated to [0, 1]: np.clip's values, without its overhead
        np.minimum(noisy, 1.0, out=noisy)
        noisy[noise_free] = s
        pv0, pv1, counts[:, b] = row_strict_placements(noisy, y, grid, overwrite_scores=True)
        variance[:, b] = delong_variance_from_moments(var_pv0=np.var(pv0, axis=1, ddof=1), n1=pv0.shape[1],
                                                      var_pv1=np.var(pv1, axis=1, ddof=1), n0=pv1.shape[1])
    return counts, variance


def _rows(fits, start: int, stop: int):
    """The fits of rows ``start`` to ``stop`` of a :class:`dsroc.RocGlmBatchResult`."""
    return replace(fits, **{f.name: getattr(fits, f.name)[start:stop] for f in fields(fits)})


def _areas(batch, params) -> np.ndarray:
    """Area between the empirical and the fitted ROC curve per replication (NaN where the fit failed)."""
    bounds = np.concatenate(([0], np.cumsum(batch.n)))
    out = np.full(batch.size, np.nan)
    for b in range(batch.size):
        if np.isfinite(params[b]).all():
            sl = slice(bounds[b], bounds[b + 1])
            out[b] = roc_area_between(batch.scores[sl], batch.labels[sl], params[b])
    return out
