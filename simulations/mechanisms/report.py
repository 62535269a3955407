"""Tables and the frontier figure of a finished mechanisms run, with the seed papers' reproduced numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from .study import MECHANISMS
from ..common.results import load_results

__all__ = ["HEADLINE", "frontier_table", "headline_rows", "frontier_figure", "write_mechanisms_report"]

HEADLINE = {"n": 1000, "k": 5}  # the rows quoted in the docs: n = 1000, K = 5, every epsilon


def _errors(frame: pd.DataFrame, est: str, truth: str) -> pd.Series:
    err = frame[est] - frame[truth]
    ok = err.notna()
    e = err[ok]
    return pd.Series({
        f"{est}_bias": e.mean() if ok.any() else np.nan,
        f"{est}_mae": e.abs().mean() if ok.any() else np.nan,
        f"{est}_rmse": np.sqrt((e**2).mean()) if ok.any() else np.nan,
        f"{est}_se_mae": e.abs().std(ddof=1) / np.sqrt(ok.sum()) if ok.sum() > 1 else np.nan,
        f"{est}_missing": 1.0 - ok.mean(),
    })


def frontier_table(results: pd.DataFrame) -> pd.DataFrame:
    """Bias, MAE, RMSE of AUC and AP against the pooled values per (mechanism, n, K, epsilon), with unit and delta."""
    keys = ["mechanism", "unit", "delta", "n", "k", "epsilon"]
    grouped = results.groupby(keys, sort=False)
    auc = grouped.apply(lambda g: _errors(g, "auc", "auc_true"), include_groups=False)
    ap = grouped.apply(lambda g: _errors(g, "ap", "ap_true"), include_groups=False)
    table = auc.join(ap).reset_index()
    table.insert(6, "reps", grouped.size().to_numpy())
    order = {m: i for i, m in enumerate(MECHANISMS)}
    return table.sort_values(["n", "k", "epsilon", "mechanism"], key=lambda c: c.map(order) if c.name == "mechanism" else c,
                             ignore_index=True)


def headline_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The n = 1000, K = 5 rows (every mechanism and epsilon): AUC MAE/RMSE and AP MAE."""
    sel = table[(table["n"] == HEADLINE["n"]) & (table["k"] == HEADLINE["k"])]
    return sel[["mechanism", "unit", "delta", "epsilon", "auc_bias", "auc_mae", "auc_rmse", "ap_mae"]]


def frontier_figure(table: pd.DataFrame, path: Path) -> None:
    """AUC RMSE against epsilon per mechanism; one panel per (K, n)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes, sites = sorted(table["n"].unique()), sorted(table["k"].unique())
    fig, axes = plt.subplots(len(sites), len(sizes), figsize=(4.2 * len(sizes), 3.4 * len(sites)), sharex=True,
                             sharey=True, squeeze=False)
    styles = {"rows": "-", "scores": "--", "labels": ":"}
    colours = dict(zip(MECHANISMS, plt.get_cmap("tab10").colors))
    for i, k in enumerate(sites):
        for j, n in enumerate(sizes):
            ax = axes[i, j]
            cell = table[(table["n"] == n) & (table["k"] == k)]
            for mech, rows in cell.groupby("mechanism", sort=False):
                rows = rows.sort_values("epsilon")
                ax.plot(rows["epsilon"], rows["auc_rmse"].clip(lower=1e-5), styles[rows["unit"].iloc[0]], marker="o",
                        ms=3, color=colours[mech], label=f"{mech} ({rows['unit'].iloc[0]})")
            ax.set_xscale("log"), ax.set_yscale("log")
            ax.set_title(f"n = {n}, K = {k}", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            if i == len(sites) - 1:
                ax.set_xlabel("epsilon")
            if j == 0:
                ax.set_ylabel("AUC RMSE vs pooled AUC")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, title="mechanism (privacy unit)")
    fig.suptitle("Private AUC mechanisms: error against epsilon (solid: rows, dashed: scores, dotted: labels; "
                 "delta = 1e-5 where approximate)", fontsize=10)
    fig.tight_layout(rect=(0, 0.12, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _markdown(frame: pd.DataFrame, digits: int = 4) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = [f"{v:.{digits}g}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_mechanisms_report(out) -> dict:
    """Write ``mechanisms.csv``, ``headline.md``, ``frontier.png`` and ``checks.md`` (from ``checks.json``)."""
    out = Path(out)
    table = frontier_table(load_results(out))
    table.to_csv(out / "mechanisms.csv", index=False)
    head = headline_rows(table)
    (out / "headline.md").write_text(_markdown(head))
    frontier_figure(table, out / "frontier.png")
    summary = {"rows": int(len(table)), "files": ["mechanisms.csv", "headline.md", "frontier.png"]}
    checks_path = out / "checks.json"
    if checks_path.exists():
        checks = json.loads(checks_path.read_text())
        parts = []
        for name, rows in checks.items():
            parts.append(f"### {name}\n\n" + _markdown(pd.DataFrame(rows)))
        (out / "checks.md").write_text("\n".join(parts))
        summary["files"].append("checks.md")
        summary["checks_within_3se"] = {
            name: all(r.get("within_3se", True) for r in rows) for name, rows in checks.items() if name.startswith("sun")
        }
    return summary
