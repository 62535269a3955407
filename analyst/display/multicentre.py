"""Figures of a multicentre validation's extra parts: per-site forest plot, decision curve, subgroups, two models."""

from __future__ import annotations

import math

import numpy as np

from analyst.display.plots import pyplot

__all__ = ["comparison_figure", "decision_curve_figure", "forest_figure", "subgroups_figure"]


def forest_figure(result, *, figure=None):
    """Forest plot of the per-site AUCs with the pooled estimate and the prediction interval (as ``metamisc``)."""
    h = result.heterogeneity
    if h is None:
        raise ValueError("this result has no per-site estimates: validate with by_site=True (CLI --by-site)")
    plt = pyplot()
    fig = figure or plt.figure(figsize=(7.0, 1.6 + 0.4 * (len(h.sites) + 2)))
    fig.clear()
    ax = fig.add_subplot(1, 1, 1)
    rows = len(h.sites)
    for i, s in enumerate(h.sites):
        y = rows - i + 1
        if math.isfinite(s.auc):
            ax.errorbar(s.auc, y, xerr=[[s.auc - s.auc_lower], [s.auc_upper - s.auc]], fmt="s", color="black",
                        markersize=4 + 6 * s.n / max(x.n for x in h.sites), capsize=3)
    labels = [s.site for s in h.sites]
    if h.auc is not None:
        p = h.auc
        ax.fill([p.lower, p.estimate, p.upper, p.estimate], [0.5, 0.8, 0.5, 0.2], color="tab:blue", label=f"pooled ({p.method})")
        ax.plot([p.prediction_lower, p.prediction_upper], [0.5, 0.5], color="tab:red", lw=2,
                label=f"{round(100 * result.level)}% prediction interval")
        ax.axvline(p.estimate, color="tab:blue", lw=0.8, ls=":")
        labels.append("pooled")
    ax.set_yticks(list(range(rows + 1, 1, -1)) + ([0.5] if h.auc is not None else []))
    ax.set_yticklabels(labels)
    ax.set_xlabel(f"AUC with {round(100 * result.level)}% CI (sampling and each site's privacy noise)")
    ax.set_ylim(-0.2, rows + 1.8)
    title = "AUC per site"
    if h.auc is not None:
        title += f": tau^2 = {h.auc.tau2:.3g} (logit scale), I^2 = {100 * h.auc.i2:.0f}%"
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8, frameon=False)  # clear of the rows
    fig.tight_layout()
    return fig


def decision_curve_figure(result, *, figure=None):
    """Net benefit of the model against treating all and none, with intervals, as ``dcurves`` draws it."""
    dc = result.decision_curve
    if dc is None:
        raise ValueError("this result has no decision curve (the scores are not risks in [0, 1])")
    plt = pyplot()
    fig = figure or plt.figure(figsize=(7.0, 4.5))
    fig.clear()
    ax = fig.add_subplot(1, 1, 1)
    t = dc.thresholds
    ax.plot(t, dc.net_benefit, "o-", color="tab:blue", label="model")
    ax.fill_between(t, dc.lower, dc.upper, color="tab:blue", alpha=0.2,
                    label=f"{round(100 * result.level)}% CI (sampling and privacy noise)")
    fine = np.linspace(0.0, min(0.99, t.max() * 1.05), 200)
    ax.plot(fine, dc.prevalence - (1 - dc.prevalence) * fine / (1 - fine), color="0.4", label="treat all")
    ax.axhline(0.0, color="black", lw=1, label="treat none")
    ax.set_ylim(min(-0.05, float(np.nanmin(dc.lower)) - 0.01), max(dc.prevalence, float(np.nanmax(dc.upper))) + 0.02)
    ax.set_xlim(0, fine[-1])
    ax.set_xlabel("threshold probability (at the released grid's edges)")
    ax.set_ylabel("net benefit")
    ax.set_title("Decision curve")
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def subgroups_figure(result, *, figure=None):
    """AUC and O/E per stratum with their intervals (sampling and noise), as a forest plot."""
    g = result.subgroups
    if g is None:
        raise ValueError("this result has no subgroups: validate with strata=COLUMN (CLI --strata COLUMN)")
    plt = pyplot()
    fig = figure or plt.figure(figsize=(9.0, 1.8 + 0.45 * len(g.strata)))
    fig.clear()
    rows = np.arange(len(g.strata))[::-1]
    for i, (stat, lo, hi, ref) in enumerate((("auc", "auc_lower", "auc_upper", result.auc),
                                            ("oe", "oe_lower", "oe_upper", 1.0))):
        ax = fig.add_subplot(1, 2, i + 1)
        for y, s in zip(rows, g.strata):
            v = getattr(s, stat)
            if math.isfinite(v):
                ax.errorbar(v, y, xerr=[[v - getattr(s, lo)], [getattr(s, hi) - v]], fmt="s", color="black",
                            capsize=3)
        ax.axvline(ref, color="tab:blue" if i == 0 else "0.5", lw=0.8, ls=":",
                   label="all patients" if i == 0 else "O/E = 1")
        ax.set_yticks(rows)
        ax.set_yticklabels([s.label for s in g.strata] if i == 0 else [])
        ax.set_ylim(-0.7, len(g.strata) - 0.3)
        ax.set_xlabel(("AUC" if i == 0 else "O/E") + f" with {round(100 * result.level)}% CI")
        ax.legend(fontsize=8, frameon=False, loc="lower right")
    auc_diffs = [d for d in g.differences if d.statistic == "AUC"]
    title = f"Subgroups by {g.column} (CIs include sampling and privacy noise)"
    if len(auc_diffs) == 1:
        d = auc_diffs[0]
        title += f"\nAUC difference {d.difference:+.3f} [{d.lower:+.3f}, {d.upper:+.3f}], p = {d.p_value:.2g}"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def comparison_figure(result, *, figure=None):
    """Each model's AUC and the paired difference with their intervals (sampling and noise)."""
    c = result.comparison
    if c is None:
        raise ValueError("this result has no model comparison: validate with compare=SCORE2 (CLI --compare SCORE2)")
    plt = pyplot()
    fig = figure or plt.figure(figsize=(9.0, 3.2))
    fig.clear()
    pct = round(100 * result.level)
    ax = fig.add_subplot(1, 2, 1)
    for y, (label, v, lo, hi) in enumerate(((f"B: {c.model_b}", c.auc_b, c.auc_b_lower, c.auc_b_upper),
                                            (f"A: {c.model_a}", c.auc_a, c.auc_a_lower, c.auc_a_upper))):
        ax.errorbar(v, y, xerr=[[v - lo], [hi - v]], fmt="s", color="black", capsize=3)
    ax.set_yticks([0, 1])
    ax.set_yticklabels([f"B: {c.model_b}", f"A: {c.model_a}"])
    ax.set_ylim(-0.6, 1.6)
    ax.set_xlabel(f"binned AUC with {pct}% CI")
    ax = fig.add_subplot(1, 2, 2)
    ax.errorbar(c.difference, 0, xerr=[[c.difference - c.lower], [c.upper - c.difference]], fmt="o",
                color="tab:blue", capsize=4)
    ax.axvline(0.0, color="0.4", lw=1, ls=":", label="no difference")
    ax.set_yticks([])
    ax.set_ylim(-1, 1)
    ax.set_xlabel(f"AUC A minus B with {pct}% CI (DeLong paired + noise)")
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(f"p = {c.p_value:.2g}", fontsize=10)
    fig.suptitle("Two models on the same patients (one joint release per site)", fontsize=10)
    fig.tight_layout()
    return fig
