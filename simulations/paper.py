"""Paper mode: the published study, batched -- noise on all scores, truncated, strict survivor, pooled ROC-GLM."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dsroc import auc_ci_batch, fit_rocglm_batch, rocglm_grid
from dsroc.roc.batch import grouped_class_placements, grouped_delong_variance, grouped_rocglm_counts

from .curves import roc_area_between
from .dgp import generate_batch
from .records import failure_codes, setting_frame, tau_of
from .truth import pooled_truth

__all__ = ["run_paper_chunk"]


def run_paper_chunk(seed: int, reps, settings, *, grid=None, n: int | None = None) -> pd.DataFrame:
    """Run replications ``reps`` in every setting, as the paper's published code does.

    Per replication: the empirical AUC and the DeLong variance of the true scores are computed once.
    Per setting: ``tau * noise`` is added to all scores, which are truncated to [0, 1]; the ROC-GLM is
    fitted to the pooled noisy scores with the strict survivor function ``#{s0 > c} / n0`` on the
    28-point grid; both CIs are centred at the empirical (logit) AUC, one with the DeLong variance of
    the true scores, one with that of the noisy scores (strict placements, as the published code's
    ``ecdf``). ``n`` fixes the size of every replication (default: drawn as in the paper). All data sets of the chunk are processed together by :mod:`dsroc.roc.batch` and
    :func:`dsroc.fit_rocglm_batch`.

    Returns
    -------
    DataFrame
        One row per (setting, replication), columns :data:`simulations.records.COLUMNS`.
    """
    grid = rocglm_grid(grid)
    batch = generate_batch(seed, reps, n)
    n_groups, g, y = batch.size, batch.groups, batch.labels
    pos = y == 1
    auc_emp, var_true, ref = pooled_truth(batch)
    frames = []
    for setting in settings:
        tau = tau_of(setting)
        noisy = batch.scores if tau == 0.0 else np.clip(batch.scores + tau * batch.noise, 0.0, 1.0)
        placed = grouped_class_placements(noisy, y, g, n_groups=n_groups, ties="strict")
        counts = grouped_rocglm_counts(placed.pv[pos], g[pos], grid, n_groups=n_groups)
        fit = fit_rocglm_batch(counts, batch.n1, grid)
        var_noisy = grouped_delong_variance(placed, y, g, n_groups=n_groups)
        app = auc_ci_batch(auc_emp, var_noisy)
        columns = {
            "rep": batch.reps,
            "n": batch.n,
            "n1": batch.n1,
            "auc_emp": auc_emp,
            "auc_pop": batch.auc_population,
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
            "var_dist": var_noisy,
        }
        if setting.noise_free:
            columns["area_between"] = _areas(batch, fit.params)
        frames.append(setting_frame(setting, columns))
    return pd.concat(frames, ignore_index=True)


def _areas(batch, params) -> np.ndarray:
    """Area between the empirical and the fitted ROC curve per replication (NaN where the fit failed)."""
    bounds = np.concatenate(([0], np.cumsum(batch.n)))
    out = np.full(batch.size, np.nan)
    for b in range(batch.size):
        if np.isfinite(params[b]).all():
            sl = slice(bounds[b], bounds[b + 1])
            out[b] = roc_area_between(batch.scores[sl], batch.labels[sl], params[b])
    return out
