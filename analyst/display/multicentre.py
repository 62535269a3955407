"""Figures of a multicentre validation's extra parts: per-site forest plot, decision curve, subgroups, two models."""

from __future__ import annotations

import math

import numpy as np

from analyst.display.plots import pyplot

__all__ = ["comparison_figure", "decision_curve_figure", "forest_figure", "subgroups_figure"]


def forest_figure(result, *, figure=None):
    """Forest plot of the per-site AUCs as metafor's ``forest`` and metamisc draw it: a row per site with its n, the
    AUC with its interval (square sized by its weight) and the columns ``AUC [95% CI]`` and ``weight``; the pooled
    AUC as a diamond, the prediction interval for a new site drawn on its own row (when there are three sites or
    more), and tau^2 and I^2 of the same random-effects fit beneath."""
    h = result.heterogeneity
    if h is None:
        raise ValueError("this result has no per-site estimates: validate with by_site=True (CLI --by-site)")
    plt = pyplot()
    pct = round(100 * result.level)
    p = h.auc
    has_pi = p is not None and math.isfinite(p.prediction_lower) and math.isfinite(p.prediction_upper)
    rows = len(h.sites) + (2 if p is not None else 0) + (1 if has_pi else 0)
    fig = figure or plt.figure(figsize=(10.0, 1.6 + 0.34 * rows))
    fig.clear()
    bottom = (0.9 if p is not None else 0.6) / fig.get_size_inches()[1]
    ax = fig.add_axes((0.27, bottom, 0.36, 0.84 - bottom))
    weights = h.auc_weights()
    top = len(h.sites)
    finite = [w for w in weights if math.isfinite(w)]
    cols = dict(site=-0.72, n=-0.05, estimate=1.05, weight=1.78)
    from matplotlib.transforms import blended_transform_factory

    where = blended_transform_factory(ax.transAxes, ax.transData)

    def text(column, y, value, **kw):
        ha = "left" if column == "site" else "right" if column in ("n", "weight") else "left"
        font = {"family": "monospace"} if column in ("estimate", "weight") else {}
        ax.text(cols[column], y, value, transform=where, ha=ha, va="center", fontsize=9, clip_on=False, **font, **kw)
    for column, label in (("site", "Site"), ("n", "n"), ("estimate", f"AUC [{pct}% CI]"), ("weight", "Weight")):
        text(column, top + 0.9, label, fontweight="bold")
    for i, (s, w) in enumerate(zip(h.sites, weights)):
        y = top - i
        text("site", y, s.site)
        text("n", y, f"{s.n:.0f}")
        if math.isfinite(s.auc):
            size = 4 + 8 * math.sqrt(w / max(finite)) if math.isfinite(w) and finite else 4
            ax.errorbar(s.auc, y, xerr=[[s.auc - s.auc_lower], [s.auc_upper - s.auc]], fmt="s", color="black",
                        markersize=size, capsize=2, lw=1)
            text("estimate", y, f"{s.auc:.3f} [{s.auc_lower:.3f}, {s.auc_upper:.3f}]")
        else:
            text("estimate", y, "not estimable")
        text("weight", y, f"{100 * w:.1f}%" if math.isfinite(w) else "-")
    ticks, labels = [], []
    if p is not None:
        y = 0
        ax.fill([p.lower, p.estimate, p.upper, p.estimate], [y, y + 0.3, y, y - 0.3], color="tab:blue")
        ax.axvline(p.estimate, color="tab:blue", lw=0.8, ls=":")
        text("site", y, "Pooled (random effects)", fontweight="bold")
        text("n", y, f"{sum(s.n for s in h.sites):.0f}")
        text("estimate", y, f"{p.estimate:.3f} [{p.lower:.3f}, {p.upper:.3f}]", fontweight="bold")
        text("weight", y, "100%" if finite else "-")
        if has_pi:
            y = -1
            ax.errorbar(p.estimate, y, xerr=[[p.estimate - p.prediction_lower], [p.prediction_upper - p.estimate]],
                        fmt="none", ecolor="tab:red", elinewidth=2, capsize=4)
            text("site", y, f"{pct}% prediction interval (new site)")
            text("estimate", y, f"{'':5} [{p.prediction_lower:.3f}, {p.prediction_upper:.3f}]")
        fig.text(0.02, 0.1 / fig.get_size_inches()[1], f"Random effects on the logit scale ({p.method}): "
                 f"$\\tau^2$ = {p.tau2:.3g}, $I^2$ = {100 * p.i2:.0f}% (both from this $\\tau^2$), {p.sites} sites.\n"
                 "Squares sized by weight; intervals include sampling and each site's privacy noise."
                 + ("" if has_pi else " No prediction interval: it needs at least 3 sites."), fontsize=8, va="bottom")
    ax.set_yticks([])
    ax.set_ylim(-1.6 if has_pi else -0.8, top + 1.4)
    lows = [s.auc_lower for s in h.sites if math.isfinite(s.auc_lower)] + ([p.prediction_lower] if has_pi else [])
    highs = [s.auc_upper for s in h.sites if math.isfinite(s.auc_upper)] + ([p.prediction_upper] if has_pi else [])
    lo, hi = max(0.0, min(lows, default=0.5) - 0.03), min(1.0, max(highs, default=1.0) + 0.03)
    ax.set_xlim(lo, hi)
    if lo < 0.5 < hi:
        ax.axvline(0.5, color="0.6", lw=0.8)  # chance
    ax.set_xlabel(f"AUC with {pct}% CI")
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title("AUC per site", fontsize=10, loc="left")
    return fig


def decision_curve_figure(result, *, figure=None):
    """Net benefit of the model against treating all and none, with intervals, as ``dcurves`` draws it: at the
    thresholds the result holds (the released grid's edges, or the thresholds asked for), the x-axis over them, the
    y-axis from a little below zero to the larger of the prevalence and the model's best net benefit (treat all
    plunges towards minus infinity as the threshold nears 1; it is cut at the axis, not allowed to stretch it)."""
    dc = result.decision_curve
    if dc is None:
        raise ValueError("this result has no decision curve (the scores are not risks in [0, 1])")
    plt = pyplot()
    fig = figure or plt.figure(figsize=(7.0, 4.6))
    fig.clear()
    ax = fig.add_subplot(1, 1, 1)
    t = np.asarray(dc.thresholds, dtype=float)
    pct = round(100 * result.level)
    ax.fill_between(t, dc.lower, dc.upper, color="tab:blue", alpha=0.2,
                    label=f"{pct}% CI (sampling and privacy noise)")
    ax.plot(t, dc.net_benefit, "o-", color="tab:blue", ms=4, label="model")
    right = min(1.0, float(t.max()) + 0.05) if t.size else 1.0
    fine = np.linspace(0.0, min(right, 0.999), 400)
    ax.plot(fine, dc.prevalence - (1 - dc.prevalence) * fine / (1 - fine), color="0.4", label="treat all")
    ax.axhline(0.0, color="black", lw=1, label="treat none")
    top = max(float(dc.prevalence), float(np.nanmax(dc.upper, initial=0.0)))
    ax.set_ylim(-max(0.05, 0.25 * top), 1.05 * top + 0.01)
    ax.set_xlim(0.0, right)
    from matplotlib.ticker import PercentFormatter

    ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_xlabel("threshold probability")
    ax.set_ylabel("net benefit")
    ax.set_title("Decision curve", fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="upper right")
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
