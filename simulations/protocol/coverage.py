"""Coverage of the pooled AUC by the paper's CI and by the noise-corrected CI, per setting (and per n)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..common.records import FIT_FAILURES
from ..common.results import load_results
from ..common.settings import NOISE_FREE

__all__ = ["HIGH_AUC", "coverage_table", "coverage_by_n", "write_coverage"]

HIGH_AUC = 0.9  # the noise-free rows are also reported for pooled AUCs above this (the ROC-GLM's own bias)
_COLUMNS = ["setting", "sensitivity", "epsilon", "delta", "tau", "n", "failure", "auc_emp", "auc_pop",
            "ci_lower_dist", "ci_upper_dist", "ci_lower_corr", "ci_upper_corr"]
_ESTIMATORS = {"paper": ("ci_lower_dist", "ci_upper_dist"), "corrected": ("ci_lower_corr", "ci_upper_corr")}


def _covers(frame: pd.DataFrame, lower: str, upper: str, truth: str) -> pd.Series:
    return (frame[lower] <= frame[truth]) & (frame[truth] <= frame[upper])


def _row(name: str, subset: str, part: pd.DataFrame, setting: pd.DataFrame) -> dict:
    usable = part[~part["failure"].isin(FIT_FAILURES)]
    row = {"setting": name, "subset": subset, "sensitivity": setting["sensitivity"].iat[0],
           "epsilon": setting["epsilon"].iat[0], "delta": setting["delta"].iat[0], "tau": setting["tau"].iat[0],
           "n_min": int(setting["n"].min()), "n_max": int(setting["n"].max()), "replications": len(part)}
    for est, (lo, hi) in _ESTIMATORS.items():
        defined = usable[usable[lo].notna()]
        row[f"{est}_intervals"] = len(defined)
        for truth, label in (("auc_emp", "pooled"), ("auc_pop", "population")):
            row[f"{est}_coverage_{label}"] = _covers(defined, lo, hi, truth).mean() if len(defined) else np.nan
        row[f"{est}_mean_width"] = (defined[hi] - defined[lo]).mean() if len(defined) else np.nan
    return row


def coverage_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per setting: coverage of the pooled empirical AUC (and of the population AUC) by both intervals.

    ``paper`` is the mode's distributed CI (protocol mode: centred at the ROC-GLM AUC; paper mode: at
    the empirical AUC with the noisy variance); ``corrected`` the noise-corrected CI
    (:func:`dsroc.noise_corrected_auc`, protocol mode only). Replications without a usable fit or
    without an interval are left out (``*_intervals`` counts the rest). The noise-free setting gets a
    second row for pooled AUCs above :data:`HIGH_AUC`.
    """
    rows = []
    for name, part in results.groupby("setting", sort=False):
        rows.append(_row(name, "all", part, part))
        if name == NOISE_FREE:
            rows.append(_row(name, f"auc_emp > {HIGH_AUC:g}", part[part["auc_emp"] > HIGH_AUC], part))
    return pd.DataFrame(rows)


def coverage_by_n(runs) -> pd.DataFrame:
    """The coverage tables of several runs (e.g. one per fixed ``--n``), stacked, with each run's mode."""
    frames = []
    for run in runs:
        mode = json.loads((Path(run) / "config.json").read_text())["mode"]
        frames.append(coverage_table(load_results(run, columns=_COLUMNS)).assign(mode=mode, run=str(run)))
    if not frames:
        raise ValueError("give at least one finished run")
    return pd.concat(frames, ignore_index=True)


def _fmt(v: float) -> str:
    return "" if not np.isfinite(v) else f"{v:.3f}"


def _markdown(table: pd.DataFrame) -> str:
    lines = ["| setting | subset | n | reps | paper: pooled | corrected: pooled | paper: population | corrected: population |",
             "|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        n = f"{r.n_min}" if r.n_min == r.n_max else f"{r.n_min}-{r.n_max}"
        lines.append(f"| {r.setting} | {r.subset} | {n} | {r.replications} | {_fmt(r.paper_coverage_pooled)} | "
                     f"{_fmt(r.corrected_coverage_pooled)} | {_fmt(r.paper_coverage_population)} | "
                     f"{_fmt(r.corrected_coverage_population)} |")
    return "\n".join(lines) + "\n"


def write_coverage(out, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Write ``coverage.csv`` and ``coverage.md`` into ``out`` (from the run in ``out`` unless a table is given)."""
    out = Path(out)
    if table is None:
        table = coverage_table(load_results(out, columns=_COLUMNS))
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "coverage.csv", index=False)
    note = ("Coverage of the 95 % CIs: `paper` = the mode's distributed CI, `corrected` = the noise-corrected "
            "CI (protocol mode); pooled = the empirical AUC of the pooled true scores, population = the AUC "
            "of the data-generating population.\n\n")
    (out / "coverage.md").write_text("# Coverage\n\n" + note + _markdown(table))
    return table
