"""The survival study's tables and figure: bias, MAE and coverage per cell and statistic, the targets checked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from .run import TARGETS, load_survival
from .study import STATISTICS

__all__ = ["LABELS", "summarise", "target_table", "missed_reasons", "write_survival_report"]

LABELS = {"auc": "AUC(t) at the median follow-up", "uno": "Uno's C (tau: 80 % follow-up quantile)",
          "harrell": "Harrell's C", "brier": "Brier(t) at the horizon", "oe": "O/E(t) at the horizon"}
COVERAGE_TARGET = 0.93
MAE_TARGET = 0.01
KEYS = ["cell", "model", "risk", "censoring", "calibration", "n", "sites", "epsilon", "statistic"]


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per cell and statistic: against the population (``*_pop``) and the pooled unbinned noise-free
    estimate (``*_pooled``), bias, MAE and interval coverage, with the Monte-Carlo SE of bias and coverage; the
    noise-free binned estimate's bias (``binning_pop``), the pooled estimates' SD and MAE (the sampling floor), the
    mean SE, the SD of the estimates, failures."""
    f = frame.copy()
    f["epsilon"] = f["epsilon"].fillna(0.0)  # no noise: epsilon 0 in the tables (infinite budget)
    rows = []
    for key, g in f.groupby(KEYS, sort=False):
        good = g[g["estimate"].notna() & g["se"].notna()]
        row = dict(zip(KEYS, key))
        row.update(reps=len(g), failures=int(len(g) - len(good)), population=float(g["population"].iloc[0]))
        for ref in ("pop", "pooled"):
            truth = good["population" if ref == "pop" else "pooled"]
            err = good["estimate"] - truth
            covered = (good["lower"] <= truth) & (truth <= good["upper"])
            row[f"bias_{ref}"] = err.mean()
            row[f"bias_{ref}_mcse"] = err.std(ddof=1) / np.sqrt(len(err)) if len(err) > 1 else np.nan
            row[f"mae_{ref}"] = err.abs().mean()
            row[f"coverage_{ref}"] = covered.mean()
            row[f"coverage_{ref}_mcse"] = np.sqrt(covered.mean() * (1 - covered.mean()) / max(len(covered), 1))
        row["binning_pop"] = (g["binned"] - g["population"]).mean()
        row["pooled_pop"] = (g["pooled"] - g["population"]).mean()
        row["sd_pooled"] = g["pooled"].std(ddof=1)  # the sampling spread alone: no binning, no noise
        row["mae_pooled_pop"] = (g["pooled"] - g["population"]).abs().mean()
        row["mean_se"] = good["se"].mean()
        row["sd_estimate"] = good["estimate"].std(ddof=1)
        row["se_over_sd"] = row["mean_se"] / row["sd_estimate"]
        rows.append(row)
    return pd.DataFrame(rows)


def target_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The targets in their cells: AUC(t) and Uno's C cover the population value in >= 93 % with |bias| <= half
    the mean SE and MAE <= 0.01; Brier(t) and O/E(t) cover in >= 93 %."""
    names = {c.name for c in TARGETS}
    rows = summary[summary["cell"].isin(names) & summary["statistic"].isin(["auc", "uno", "brier", "oe"])].copy()
    strict = rows["statistic"].isin(["auc", "uno"])
    rows["coverage_ok"] = rows["coverage_pop"] >= COVERAGE_TARGET
    rows["bias_ok"] = ~strict | (rows["bias_pop"].abs() <= 0.5 * rows["mean_se"])
    rows["mae_ok"] = ~strict | (rows["mae_pop"] <= MAE_TARGET)
    rows["met"] = rows["coverage_ok"] & rows["bias_ok"] & rows["mae_ok"]
    return rows[["cell", "statistic", "reps", "population", "bias_pop", "mean_se", "mae_pop", "mae_pooled_pop",
                 "coverage_pop", "coverage_pop_mcse", "coverage_ok", "bias_ok", "mae_ok", "met"]]


def missed_reasons(summary: pd.DataFrame, targets: pd.DataFrame) -> list[str]:
    """Why each missed target row misses, from its cell's own numbers: for an MAE above the target, the DP
    estimate's SD against the sampling SD (the pooled unbinned noise-free estimate's SD across replications), the
    noise's share ``sqrt(SD^2 - sampling SD^2)``, the sampling floor (that estimate's own MAE) and the binning's bias;
    for a bias, the binning's share of it; for a coverage, SE/SD."""
    rows = summary.set_index(["cell", "statistic"])
    out = []
    for t in targets[~targets["met"]].itertuples(index=False):
        r = rows.loc[(t.cell, t.statistic)]
        why = []
        if not t.mae_ok:
            noise = float(np.sqrt(max(r.sd_estimate**2 - r.sd_pooled**2, 0.0)))
            cause = ("the privacy noise sets it" if noise >= r.sd_pooled else
                     "sampling sets it" if r.mae_pooled_pop >= 0.5 * t.mae_pop else "noise and sampling share it")
            why.append(f"MAE {t.mae_pop:.4f} > {MAE_TARGET}: {cause} — the DP estimate's SD {r.sd_estimate:.4f} is "
                       f"{r.sd_estimate / r.sd_pooled:.1f} x the sampling SD {r.sd_pooled:.4f} (noise SD about "
                       f"{noise:.4f}); the pooled unbinned noise-free estimate's own MAE {r.mae_pooled_pop:.4f}, the "
                       f"binning's bias {r.binning_pop:+.4f}, the DP estimate's bias {t.bias_pop:+.4f}"
                       + ("; a coarser public grid (--time-bins, --score-bins: fewer noisy cells) trades binning for "
                          "noise" if noise >= r.sd_pooled else ""))
        if not t.bias_ok:
            why.append(f"|bias| {abs(t.bias_pop):.4f} > half the mean SE {0.5 * t.mean_se:.4f}: of it the noise-free "
                       f"binned estimate's bias {r.binning_pop:+.4f} (the binning)")
        if not t.coverage_ok:
            why.append(f"coverage {t.coverage_pop:.3f} +- {t.coverage_pop_mcse:.3f} < {COVERAGE_TARGET}: SE/SD "
                       f"{r.se_over_sd:.2f} (below 1: intervals too narrow), bias {t.bias_pop:+.4f}")
        out.append(f"{t.cell}, {t.statistic}: " + "; ".join(why))
    return out


def _markdown(table: pd.DataFrame, digits: int = 4) -> str:
    def cell(v):
        if isinstance(v, (bool, np.bool_)):
            return "yes" if v else "**no**"
        if isinstance(v, float):
            return f"{v:.{digits}g}" if abs(v) >= 1e-4 or v == 0 else f"{v:.1e}"
        return str(v)

    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


def _figure(summary: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = list(dict.fromkeys(summary["cell"]))[:40]  # a readable figure: the first 40 cells of the grid
    fig, axes = plt.subplots(2, len(STATISTICS), figsize=(3.0 * len(STATISTICS), 2.0 + 0.5 * len(cells)),
                             sharey=True, squeeze=False)
    y = np.arange(len(cells))
    for col, stat in enumerate(STATISTICS):
        s = summary[summary["statistic"] == stat].set_index("cell").reindex(cells)
        top, bottom = axes[0, col], axes[1, col]
        for ref, marker, colour, shift in (("pop", "o", "C0", -0.12), ("pooled", "s", "C1", 0.12)):
            top.errorbar(s[f"coverage_{ref}"], y + shift, xerr=1.96 * s[f"coverage_{ref}_mcse"], fmt=marker,
                         color=colour, ms=3.5, lw=0.8,
                         label="coverage of the population value" if ref == "pop" else
                         "coverage of the pooled unbinned noise-free estimate")
        top.axvline(0.95, color="grey", lw=0.8)
        top.axvline(COVERAGE_TARGET, color="red", lw=0.8, ls="--", label=f"target {COVERAGE_TARGET:.0%}")
        low = np.nanmin(summary[["coverage_pop", "coverage_pooled"]].to_numpy())
        top.set_xlim(min(0.85, np.floor(20 * low) / 20 - 0.05), 1.005)
        top.set_title(f"{LABELS[stat]}\ncoverage of the 95 % CI (+- 2 MC SE)", fontsize=8)
        half = 0.5 * s["mean_se"].to_numpy()
        bottom.barh(y, 2 * half, left=-half, height=0.6, color="0.88", label="+- half the mean SE")
        bottom.errorbar(s["bias_pop"], y, xerr=1.96 * s["bias_pop_mcse"], fmt="o", color="C0", ms=3.5, lw=0.8,
                        label="bias of the DP estimate (+- 2 MC SE)")
        bottom.plot(s["binning_pop"], y, "x", color="C2", ms=5, label="bias of the noise-free binned estimate")
        bottom.axvline(0.0, color="grey", lw=0.8)
        bottom.set_title("bias against the population value", fontsize=8)
        for ax in (top, bottom):
            ax.tick_params(labelsize=6)
            ax.set_yticks(y)
            ax.set_ylim(len(cells) - 0.5, -0.5)
    for ax in axes[:, 0]:
        ax.set_yticklabels([c.replace("_", " ") for c in cells], fontsize=6)
    handles = [h for ax in (axes[0, 0], axes[1, 0]) for h in ax.get_legend_handles_labels()[0]]
    labels = [lab for ax in (axes[0, 0], axes[1, 0]) for lab in ax.get_legend_handles_labels()[1]]
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.09 if len(cells) < 6 else 0.05, 1, 1))
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)


def write_survival_report(out) -> dict:
    """Write ``survival.csv`` (every cell and statistic), ``survival.md`` (the targets, then every cell) and
    ``survival.png`` into ``out``; returns the targets' verdict."""
    out = Path(out)
    summary = summarise(load_survival(out))
    summary.to_csv(out / "survival.csv", index=False)
    targets = target_table(summary)
    config = json.loads((out / "config.json").read_text())
    shown = ["cell", "statistic", "reps", "population", "bias_pop", "mae_pop", "coverage_pop", "bias_pooled",
             "mae_pooled", "coverage_pooled", "binning_pop", "mae_pooled_pop", "mean_se", "se_over_sd", "failures"]
    text = [f"# Survival study ({config['grid']} grid, {config['reps']} replications, seed {config['seed']}, "
            f"{config['time_bins']} time bins, {config['score_bins']} score bins, {config['draws']} bootstrap draws)",
            "", "Statistics: " + "; ".join(f"`{k}` {v}" for k, v in LABELS.items()) + ".", "",
            "## Targets (epsilon 1, n 10 000, 5 sites)", ""]
    reasons = missed_reasons(summary, targets) if len(targets) else []
    text += [_markdown(targets) if len(targets) else "No target cell in this grid.", ""]
    if reasons:
        text += ["### Why the missed targets miss", "", *(f"- {r}" for r in reasons), ""]
    text += ["## Every cell", "", _markdown(summary[shown]), ""]
    (out / "survival.md").write_text("\n".join(text))
    _figure(summary, out / "survival.png")
    return {"cells": int(summary["cell"].nunique()), "target_rows": int(len(targets)),
            "targets_met": int(targets["met"].sum()) if len(targets) else 0,
            "targets_missed": targets.loc[~targets["met"], ["cell", "statistic"]].values.tolist() if len(targets) else [],
            "why": reasons}
