"""The protocol comparison's table and figure: AUC MAE and CI coverage of every protocol against epsilon."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..common.results import load_results
from .study import COMPARE_PRIVACY, PROTOCOLS, compare_table

__all__ = ["write_compare_report"]


def _compare_figure(table: pd.DataFrame, path: Path) -> None:
    """AUC MAE (top) and CI coverage (bottom) against epsilon, one column per n, one line per protocol.

    Lines: delta = 1e-5; the open markers: epsilon = 5 at delta = 0.01.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = sorted(table["n"].unique())
    colours = dict(zip(PROTOCOLS, ["#08519c", "#6baed6", "#cb181d", "#9e9ac8"]))
    low_delta = min(d for _, d in COMPARE_PRIVACY)
    fig, axes = plt.subplots(2, len(ns), figsize=(4.2 * len(ns), 7), squeeze=False, sharex=True)
    for j, n in enumerate(ns):
        for protocol in PROTOCOLS:
            part = table[(table["protocol"] == protocol) & (table["n"] == n)]
            if part.empty:
                continue
            line, other = part[part["delta"] == low_delta], part[part["delta"] != low_delta]
            for i, value in enumerate(("mae", "coverage")):
                ax = axes[i, j]
                ax.plot(line["epsilon"], line[value], "o-", color=colours[protocol], label=f"{protocol} (δ={low_delta:g})")
                ax.plot(other["epsilon"], other[value], "s", mfc="none", color=colours[protocol],
                        label=f"{protocol} (δ={other['delta'].iat[0]:g})" if len(other) else None)
        top, bottom = axes[0, j], axes[1, j]
        top.set_yscale("log")
        top.set_title(f"n = {n:,}, 5 sites, binormal, prevalence 0.3")
        targets = {1000: [(1.0, 0.015), (5.0, 0.004)], 10000: [(1.0, 0.003)]}.get(n, [])
        for eps, value in targets:
            top.plot([eps], [value], marker="*", markersize=12, color="#238b45", linestyle="none",
                     label="target" if eps == targets[0][0] else None)
        top.set_ylabel("AUC MAE vs pooled empirical AUC")
        bottom.axhline(0.95, color="grey", linewidth=0.8)
        bottom.axhline(0.93, color="#238b45", linewidth=0.8, linestyle="--")
        bottom.set_ylim(0.0, 1.02)
        bottom.set_ylabel("95% CI coverage of the pooled AUC")
        bottom.set_xlabel("ε (per validation)")
        bottom.set_xscale("log")
        top.grid(True, which="both", alpha=0.3)
        bottom.grid(True, alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="lower left")
    fig.suptitle("Each protocol at its stated guarantee: histogram = (ε, δ)-DP for the whole validation; "
                 "paper-range = (ε, δ)-DP for the scores only", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_compare_report(out) -> dict:
    """Write ``compare.csv``, ``compare.md`` and ``compare.png`` of a finished compare run; return the table's
    headline rows (MAE and coverage at epsilon = 1 and 5)."""
    out = Path(out)
    table = compare_table(load_results(out))
    table.to_csv(out / "compare.csv", index=False)
    cols = ["protocol", "n", "epsilon", "delta", "replications", "failures", "bias", "mae", "rmse", "coverage",
            "mean_ci_width"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in table[cols].itertuples(index=False):
        cells = [f"{v:.4f}" if isinstance(v, float) and c not in ("epsilon", "delta") else f"{v:g}" if isinstance(v, float) else str(v)
                 for c, v in zip(cols, row)]
        lines.append("| " + " | ".join(cells) + " |")
    guarantees = "\n".join(f"- `{p}`: {g}" for p, g in table.drop_duplicates("protocol")[["protocol", "guarantee"]].itertuples(index=False))
    (out / "compare.md").write_text("# Protocol comparison: AUC error against the pooled empirical AUC\n\n"
                                    + guarantees + "\n\n" + "\n".join(lines) + "\n")
    _compare_figure(table, out / "compare.png")
    head = table[table["epsilon"].isin([1.0, 5.0])]
    return {"mode": "compare", "replications": int(table["replications"].max()),
            "headline": [f"{r.protocol} n={r.n} eps={r.epsilon:g} delta={r.delta:g}: MAE {r.mae:.4f}, coverage {r.coverage:.3f}"
                         for r in head.itertuples()]}
