"""The per-replication result record shared by both modes: column names, types and failure codes."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from .settings import Setting

__all__ = ["COLUMNS", "FAILURES", "FIT_FAILURES", "failure_codes", "replication_columns", "setting_frame",
           "settings_frame", "tau_of"]

# name -> dtype; one row per (setting, replication).
COLUMNS = {
    "setting": "object",
    "sensitivity": "float64",
    "epsilon": "float64",
    "delta": "float64",
    "tau": "float64",
    "rep": "int64",
    "n": "int64",
    "n1": "int64",
    "auc_emp": "float64",  # empirical AUC of the true pooled scores (the truth)
    "auc_pop": "float64",  # AUC of the population the replication is drawn from (simulations.common.dgp.population_auc)
    "auc_rocglm": "float64",  # (distributed) ROC-GLM AUC on the released scores
    "delta_auc": "float64",  # auc_emp - auc_rocglm
    "gamma1": "float64",
    "gamma2": "float64",
    "iterations": "int64",
    "converged": "bool",
    "failure": "object",  # "" when the replication succeeded, else one of FAILURES
    "ci_lower": "float64",  # reference CI: empirical AUC, DeLong variance of the true pooled scores
    "ci_upper": "float64",
    "ci_lower_dist": "float64",  # the mode's approximate / distributed CI
    "ci_upper_dist": "float64",
    "delta_ci": "float64",  # |l~ - l| + |r~ - r|
    "var_true": "float64",
    "var_dist": "float64",
    "area_between": "float64",  # noise-free only: area between empirical and ROC-GLM curve
    # protocol mode: the noise-corrected AUC (dsroc.noise_corrected_auc) and its CI
    "auc_corr": "float64",
    "var_corr": "float64",
    "ci_lower_corr": "float64",
    "ci_upper_corr": "float64",
}

FAILURES = {
    "separation": "the ROC-GLM counts are degenerate (every k_j is 0 or n1): no finite estimate",
    "no convergence": "Fisher scoring did not converge in 25 iterations",
    "ci undefined": "the empirical AUC is exactly 0 or 1, where the logit CI does not exist",
    "disclosure": "a site holds fewer than q negatives or positives and refuses its aggregates (protocol mode)",
    "too noisy": "the consistent noisy histograms hold fewer than two patients of a class (histogram mode)",
}

# Failures that leave no usable ROC-GLM AUC; "ci undefined" only removes the replication's CIs.
FIT_FAILURES = ("separation", "no convergence", "disclosure", "too noisy")


def failure_codes(degenerate, converged, ci_defined, refused=None, *, too_noisy=None) -> np.ndarray:
    """Failure code per replication (:data:`FAILURES`), the first cause that applies in this order:
    a site's refusal, histograms too noisy for an estimate, separated counts, no convergence, an
    undefined reference CI; ``""`` otherwise."""
    out = np.full(np.shape(degenerate), "", dtype=object)
    out[~np.asarray(ci_defined)] = "ci undefined"
    out[~np.asarray(converged)] = "no convergence"
    out[np.asarray(degenerate)] = "separation"
    if too_noisy is not None:
        out[np.asarray(too_noisy)] = "too noisy"
    if refused is not None:
        out[np.asarray(refused)] = "disclosure"
    return out


@lru_cache(maxsize=None)
def tau_of(setting: Setting) -> float:
    """The setting's noise standard deviation (cached: the root finder runs once per setting and process)."""
    return setting.tau


def replication_columns(batch, auc_emp) -> dict:
    """The columns every mode's record starts with: the replication, its patients and positives, its pooled
    empirical AUC and the population AUC of its design (``batch`` a :class:`simulations.common.dgp.Batch`)."""
    return {"rep": batch.reps, "n": batch.n, "n1": batch.n1, "auc_emp": auc_emp, "auc_pop": batch.auc_population}


def setting_frame(setting: Setting, columns: dict) -> pd.DataFrame:
    """Build the result frame of one setting from per-replication arrays, in :data:`COLUMNS` order and types."""
    return settings_frame([(setting, columns)])


def settings_frame(results) -> pd.DataFrame:
    """The frames of :func:`setting_frame` of every ``(setting, columns)`` in ``results``, one after another
    (as ``pd.concat`` of them with a new index), built as one frame."""
    parts = [_setting_columns(setting, columns) for setting, columns in results]
    # One cast per column of the whole frame, not one per setting and column.
    return pd.DataFrame({name: np.concatenate([p[name] for p in parts]).astype(dtype) for name, dtype in COLUMNS.items()})


def _setting_columns(setting: Setting, columns: dict) -> dict[str, np.ndarray]:
    n_rows = len(columns["rep"])
    data = {
        "setting": np.full(n_rows, setting.name, dtype=object),
        "sensitivity": np.full(n_rows, setting.sensitivity),
        "epsilon": np.full(n_rows, setting.epsilon),
        "delta": np.full(n_rows, setting.delta),
        "tau": np.full(n_rows, tau_of(setting)),
    }
    if "auc_pop" not in columns:
        raise ValueError("result columns missing: ['auc_pop']")
    data.update(columns)
    for name in ("area_between", "auc_corr", "var_corr", "ci_lower_corr", "ci_upper_corr"):
        data.setdefault(name, np.full(n_rows, np.nan))
    missing = set(COLUMNS) - set(data)
    if missing:
        raise ValueError(f"result columns missing: {sorted(missing)}")
    return {name: np.asarray(data[name]) for name in COLUMNS}
