"""The stress study's figure: AUC accuracy and coverage along each factor, calibration coverage, the paper protocol."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .cells import CENTRE
from .designs import SHAPES

__all__ = ["stress_figure", "draw_stress_figure"]

COLOURS = dict(zip(SHAPES, ("tab:blue", "tab:orange", "tab:green", "tab:red")))
FACTORS = (("prevalence", "prevalence", "log"), ("n", "n", "log"), ("design_auc", "population AUC", "linear"))
TAU_COLOURS = ("tab:purple", "tab:olive", "tab:brown", "tab:pink", "tab:cyan", "tab:gray")


def _ticks(ax, values, scale):
    """Ticks at the factor's levels, labelled plainly."""
    from matplotlib.ticker import NullLocator

    ax.set_xscale(scale)
    ax.set_xticks(values)
    ax.set_xticklabels([f"{v:,.0f}" if v >= 1000 else f"{v:g}" for v in values])
    ax.xaxis.set_minor_locator(NullLocator())


def _sweep(summary, factor, shape, protocol, estimand="auc") -> pd.DataFrame:
    """Cells along one factor with the others at the centre."""
    s = summary[(summary["protocol"] == protocol) & (summary["estimand"] == estimand) & (summary["shape"] == shape)]
    centre = {"prevalence": CENTRE["prevalence"], "design_auc": CENTRE["auc"], "n": CENTRE["n"],
              "sites": CENTRE["sites"], "epsilon": CENTRE["epsilon"]}
    for col, value in centre.items():
        if col != factor:
            s = s[np.isclose(s[col], value)]
    return s.sort_values(factor)


def _paper_panel(ax, paper: pd.DataFrame) -> None:
    """Coverage of the pooled AUC by the paper protocol's noise-corrected CI along n, per shape and setting."""
    taus = sorted(paper["tau"].unique())
    for (shape, tau), s in paper.groupby(["shape", "tau"]):
        s = s.sort_values("n")
        ax.errorbar(s["n"], s["coverage_pooled"], yerr=2 * s["coverage_pooled_se"], fmt="-o" if shape == "binormal"
                    else "--s", ms=4, color=TAU_COLOURS[taus.index(tau) % len(TAU_COLOURS)], label=f"{shape}, tau {tau:.3f}")
    ax.axhline(0.95, color="grey", lw=0.8)
    ax.set(ylim=(-0.03, 1.03), xlabel="n", ylabel="95% CI coverage of the pooled AUC",
           title="Paper protocol, noise-corrected AUC")
    _ticks(ax, sorted(paper["n"].unique()), "log")
    ax.legend(fontsize=7)


def stress_figure(summary: pd.DataFrame, fedcurve: pd.DataFrame, path, *, dpi: int = 110) -> None:
    """Write the 3 x 3 panel figure of :func:`draw_stress_figure` to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = draw_stress_figure(summary, fedcurve)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def draw_stress_figure(summary: pd.DataFrame, fedcurve: pd.DataFrame):
    """The 3 x 3 panel figure (a matplotlib Figure) of the run's default-grid protocol: the histogram protocol, or
    the secagg protocol in a run without it (``--protocols secagg``), beside the run's baselines."""
    import matplotlib.pyplot as plt

    present = set(summary["protocol"])
    main = "histogram" if "histogram" in present or "secagg" not in present else "secagg"
    fig, axes = plt.subplots(3, 3, figsize=(15, 13))
    for j, (factor, label, scale) in enumerate(FACTORS):
        for shape in SHAPES:
            for protocol, style in ((main, "-o"), ("histogram_equal", "--s"), ("flat20", ":x")):
                s = _sweep(summary, factor, shape, protocol)
                if s.empty:
                    continue
                kw = dict(color=COLOURS[shape], ms=4, label=f"{shape}, {protocol}",
                          alpha=1.0 if protocol == main else 0.55)
                axes[0, j].errorbar(s[factor], s["mae"], yerr=2 * s["mae_se"], fmt=style, **kw)
                axes[1, j].errorbar(s[factor], s["coverage_pooled"], yerr=2 * s["coverage_pooled_se"], fmt=style, **kw)
        if factor == "n":
            for k, (_, r) in enumerate(fedcurve.iterrows()):
                first = r["shape"] not in set(fedcurve["shape"].iloc[:k])  # one legend entry per shape
                axes[0, j].plot(r["n"], r["fedcurve_mae"], "*", ms=15, color=COLOURS[r["shape"]], mec="black", zorder=10,
                                label=f"FedCurve (published), {r['shape']}" if first else "_nolegend_")
        axes[0, j].set(yscale="log", xlabel=label, ylabel="AUC MAE vs pooled empirical AUC",
                       title=f"AUC MAE along {label}")
        axes[1, j].set(ylim=(-0.03, 1.03), xlabel=label, ylabel="95% CI coverage of the pooled AUC",
                       title=f"AUC CI coverage along {label}")
        levels = sorted(summary.loc[summary["protocol"] != "paper", factor].unique())
        for i in range(2):
            _ticks(axes[i, j], levels, scale)
        axes[1, j].axhline(0.95, color="grey", lw=0.8)
        axes[1, j].axhline(0.93, color="grey", lw=0.8, ls="--")
    axes[0, 1].legend(fontsize=6, loc="lower left")  # the curves fall from upper left to lower right
    for shape in SHAPES:
        s = _sweep(summary, "prevalence", shape, main, "slope")
        axes[2, 0].errorbar(s["prevalence"], s["coverage_population"], yerr=2 * s["coverage_population_se"], fmt="-o",
                            color=COLOURS[shape], ms=4, label=shape)
    axes[2, 0].set(ylim=(-0.03, 1.03), xlabel="prevalence", ylabel="coverage of the population slope",
                   title=f"Calibration slope CI ({main}, n 10 000)")
    _ticks(axes[2, 0], sorted(summary.loc[summary["protocol"] != "paper", "prevalence"].unique()), "log")
    axes[2, 0].legend(fontsize=7)
    for estimand, marker in (("brier", "-o"), ("oe", "-s"), ("slope", "-^"), ("auc", "-d")):
        s = _sweep(summary, "design_auc", "binormal", main, estimand)
        axes[2, 1].errorbar(s["design_auc"], s["coverage_pooled"], yerr=2 * s["coverage_pooled_se"], fmt=marker, ms=4,
                            label=estimand)
    axes[2, 1].set(ylim=(-0.03, 1.03), xlabel="population AUC", ylabel="95% CI coverage of the pooled value",
                   title="Calibrated binormal, n 10 000: every estimand")
    axes[2, 1].legend(fontsize=7)
    paper = summary[(summary["protocol"] == "paper") & (summary["estimand"] == "auc")]
    if len(paper):
        _paper_panel(axes[2, 2], paper)
    else:  # a run without the paper protocol: the default protocol's coverage of the population AUC instead
        for shape in SHAPES:
            s = _sweep(summary, "n", shape, main)
            axes[2, 2].errorbar(s["n"], s["coverage_population"], yerr=2 * s["coverage_population_se"], fmt="-o",
                                color=COLOURS[shape], ms=4, label=shape)
        axes[2, 2].axhline(0.95, color="grey", lw=0.8)
        axes[2, 2].axhline(0.93, color="grey", lw=0.8, ls="--")
        axes[2, 2].set(ylim=(-0.03, 1.03), xlabel="n", ylabel="95% CI coverage of the population AUC",
                       title=f"{main.capitalize()} protocol: coverage of the population AUC")
        _ticks(axes[2, 2], sorted(summary.loc[summary["protocol"] != "paper", "n"].unique()), "log")
        axes[2, 2].legend(fontsize=7)
    # Name only the baselines the run holds (a --protocols histogram run draws the default grid alone).
    baselines = [text for protocol, text in (("histogram_equal", "dashed: its one-release equal grid"),
                                             ("flat20", "dotted: a flat 20-bin baseline")) if protocol in present]
    fig.suptitle(f"Stress study: {main} protocol (solid: the default quantile grid"
                 + "".join(f"; {b}" for b in baselines) + ")\n"
                 "centre: binormal, prevalence 0.3, AUC 0.76, n 10 000, 5 sites, "
                 "epsilon 1, delta 1e-5; along a factor the others stay at the centre\n"
                 + ("paper protocol at recommended settings (tau: its noise SD); " if len(paper) else "")
                 + "bars: 2 MC SEs", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig
