"""Plots of a validation result, the same for every protocol; they draw what the result holds, never compute it."""

from __future__ import annotations

import math
import os
import textwrap
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from analyst.wording import plain

__all__ = ["CalibrationPlot", "RocPlot", "figure_title", "plot_title", "publish_titles", "pyplot", "statistics_text",
           "validation_figure"]

#: false-positive fractions at which the fitted curve and its band are drawn (dense in both tails)
_T = np.concatenate([[0.0], np.geomspace(1e-4, 0.5, 200), 1 - np.geomspace(0.5, 1e-4, 200)[1:], [1.0]])


def pyplot():
    """Import matplotlib's pyplot, on the Agg backend when there is no display."""
    import matplotlib

    if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_title(kind: str, result) -> str:
    """``kind`` with n, the events, epsilon, delta and the protocol, on two lines."""
    approx = "" if result.counts_exact else "~"
    ones = "with outcome 1" if getattr(result, "time", None) is None else f"events by {result.horizon:g}"
    return (f"{kind}\nn = {approx}{result.n:.0f} ({approx}{result.n1:.0f} {ones}), "
            f"$\\varepsilon$ = {result.epsilon:g}, $\\delta$ = {result.delta:g}, {result.protocol} protocol")


def _fmt(x, digits: int = 3) -> str:
    return "-" if x is None or not math.isfinite(float(x)) else f"{float(x):.{digits}f}"


def _est(e, digits: int = 2) -> str:
    if e is None:
        return "not estimable"
    if not math.isfinite(e.lower):
        return _fmt(e.value, digits + 1)
    return f"{_fmt(e.value, digits)} [{_fmt(e.lower, digits)}, {_fmt(e.upper, digits)}]"


def statistics_text(result) -> str:
    """The statistics box: AUC, Brier, O/E, calibration-in-the-large, slope, binned ICI and Emax."""
    pct = round(100 * result.level)
    lines = [f"{pct}% intervals", f"AUC ({result.auc_estimator}) {_fmt(result.auc)} "
                                  f"[{_fmt(result.auc_ci[0])}, {_fmt(result.auc_ci[1])}]"]
    if result.brier is not None:
        lines.append(f"Brier {_est(result.brier, 3)}")
    c = result.calibration
    if c is not None:
        lines += [f"O/E {_est(c.oe)}", f"CITL {_est(c.citl)}", f"slope {_est(c.slope)}",
                  f"ICI {_fmt(c.ici)}, Emax {_fmt(c.emax)} (binned)"]
    return "\n".join(lines)


def _new_axes(figsize):
    _, ax = pyplot().subplots(figsize=figsize, layout="constrained")
    return ax


def _fit_height(fig, legend, base: float) -> None:
    """Make a figure of its own tall enough for the plot (``base`` inches) and its legend's lines below it."""
    lines = sum(t.get_text().count("\n") + 1 for t in legend.get_texts())
    fig.set_size_inches(fig.get_size_inches()[0], base + 0.26 * lines)


def _legend_below(ax, ncol: int = 1) -> None:
    """The legend under the axes, where it cannot cover a curve."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize="small", frameon=False, ncol=ncol)


@dataclass
class RocPlot:
    """The ROC curve of a result: the curve whose AUC is quoted, a band exactly as wide as the AUC's CI,
    and the empirical or binned points.

    The band is the fitted binormal shape moved until its AUC equals the CI's limits
    (:attr:`analyst.result.parts.RocCurve.band`), so it includes what the AUC's CI includes (the privacy noise
    in the histogram protocol). Where the fitted curve lies below the diagonal, the plot marks it.
    """

    result: object

    @classmethod
    def from_result(cls, result) -> "RocPlot":
        """The plot of an :class:`analyst.ValidationResult`."""
        return cls(result)

    def plot(self, ax=None, *, references: Sequence[Sequence] = ()) -> "RocPlot":
        """Draw on ``ax`` (a new figure when omitted).

        Parameters
        ----------
        references : sequence of (fpr, tpr, label) or (fpr, tpr, label, style dict)
            Comparison curves (e.g. the pooled ROC curves in the demo).

        Returns
        -------
        self, with ``ax_`` and ``figure_`` set.
        """
        r = self.result
        roc, pct = r.roc, round(100 * r.level)
        own = ax is None
        ax = _new_axes((7.2, 8.8)) if own else ax
        quoted = (f"AUC ({r.auc_estimator}) {_fmt(r.auc)}, {pct}% CI [{_fmt(r.auc_ci[0])}, {_fmt(r.auc_ci[1])}]")
        if roc.band is not None:
            lo, hi = roc.band_curves(_T)
            ax.fill_between(_T, lo, hi, color="tab:blue", alpha=0.18, lw=0,
                            label=textwrap.fill(f"{pct}% band: the fitted shape at the AUC's CI limits "
                                                f"(includes {r.auc_ci_includes})", 70))
        binned = roc.fpr.size <= 200
        ax.plot(roc.fpr, roc.tpr, color="black" if binned else "dimgrey", lw=0.8 if binned else 1.0,
                ls="--" if binned else "-", marker="o" if binned else None, ms=4,
                label=textwrap.fill(roc.points_label + ("" if roc.params is not None else f": {quoted}"), 70))
        if roc.params is not None:
            ax.plot(_T, roc.curve(_T), color="tab:blue", lw=2, label=textwrap.fill(f"fitted binormal curve: {quoted}", 70))
        styles = [dict(color="tab:green", lw=1.2, ls="-."), dict(color="tab:purple", lw=0.8, alpha=0.8)]
        for k, ref in enumerate(references):
            style = ref[3] if len(ref) > 3 else styles[min(k, len(styles) - 1)]
            ax.plot(ref[0], ref[1], label=ref[2], **style)
        ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=1, label="chance")
        bad = roc.improper()
        if bad is not None:
            ax.axvspan(bad[0], bad[1], ymax=0.04, color="tab:red", alpha=0.6,
                       label=f"curve below chance for FPR in [{bad[0]:.2f}, {bad[1]:.2f}] (improper binormal fit)")
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="false-positive fraction (1 - specificity)",
               ylabel="true-positive fraction (sensitivity)", aspect="equal")
        ax.set_title(plot_title("ROC curve", r), fontsize="medium")
        _legend_below(ax)
        if own:
            _fit_height(ax.figure, ax.get_legend(), 7.8)
        self.ax_, self.figure_ = ax, ax.figure
        return self


@dataclass
class CalibrationPlot:
    """Calibration curve with its intervals, per-site curves, marked withheld and merged bins, a statistics
    box (O/E, calibration-in-the-large, slope, Brier, AUC, ICI, Emax) and the risk histogram by outcome."""

    result: object

    @classmethod
    def from_result(cls, result) -> "CalibrationPlot":
        """The plot of an :class:`analyst.ValidationResult` (which must hold a calibration curve)."""
        if result.calibration is None:
            raise ValueError("the result holds no calibration curve (see its warnings)")
        return cls(result)

    def plot(self, ax=None, hist_ax=None) -> "CalibrationPlot":
        """Draw the curve on ``ax`` and the risk histogram on ``hist_ax`` (a new figure with both when omitted).

        Returns
        -------
        self, with ``ax_``, ``hist_ax_`` and ``figure_`` set.
        """
        r, c = self.result, self.result.calibration
        own = ax is None
        if own:
            fig = pyplot().figure(figsize=(7.4, 10.6), layout="constrained")
            ax, hist_ax = fig.subplots(2, 1, height_ratios=[3, 1], sharex=True)
        pct = round(100 * r.level)
        ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=1, label="perfect calibration")
        for name, (pred, obs, _) in c.per_site.items():  # NaN (withheld) bins break each site's line
            ax.plot(pred, obs, lw=0.7, alpha=0.45, marker=".", ms=4,
                    label=name if name.lower().startswith("site") else f"site {name}")
        ok = np.isfinite(c.predicted) & np.isfinite(c.observed)
        err = np.vstack([c.observed[ok] - c.observed_lower[ok], c.observed_upper[ok] - c.observed[ok]])
        ax.errorbar(c.predicted[ok], c.observed[ok], yerr=np.where(np.isfinite(err), err, 0), fmt="o-", color="black",
                    ms=4, capsize=3, lw=1.2, zorder=3,
                    label=textwrap.fill(f"all sites: observed {'risk' if r.time is not None else 'fraction'} at the "
                                        f"mean score ({c.predicted_from}); "
                                        f"{pct}% interval: {c.interval}", 80))
        merged = [k for k, s in enumerate(c.status) if s in ("merged", "too few patients")]
        if merged:
            ax.hlines(c.observed[merged], c.lower[merged], c.upper[merged], color="tab:orange", lw=2.5, alpha=0.7,
                      label="score range of a merged bin (several grid bins pooled so the noise stays small)")
        self._withheld(ax, c)
        ax.text(0.03, 0.97, statistics_text(r), transform=ax.transAxes, va="top", ha="left", fontsize="small",
                family="monospace", bbox=dict(boxstyle="round", facecolor="white", alpha=0.9, edgecolor="lightgrey"))
        surv = getattr(r, "time", None) is not None
        ax.set(xlim=(0, 1), ylim=(0, 1), ylabel=f"observed risk by {r.horizon:g} (1 - Kaplan-Meier)" if surv
               else "observed fraction with outcome 1")
        ax.set_title(plot_title("Calibration", r), fontsize="medium")
        ax.tick_params(labelbottom=False)
        self._risk_histogram(hist_ax, c, None if getattr(r, "time", None) is None else r.horizon)
        legend = hist_ax.legend(*_merged_handles(ax, hist_ax), loc="upper center", bbox_to_anchor=(0.5, -0.45),
                                fontsize="small", frameon=False, ncol=1)
        if own:
            _fit_height(ax.figure, legend, 9.2)
        self.ax_, self.hist_ax_, self.figure_ = ax, hist_ax, ax.figure
        return self

    @staticmethod
    def _withheld(ax, c) -> None:
        mids = (c.lower + c.upper) / 2
        every = [k for k, s in enumerate(c.status) if s == "withheld by every site"]
        some = [k for k, s in enumerate(c.status) if s == "withheld by some sites"]
        if every:
            ax.plot(mids[every], np.zeros(len(every)), ls="none", marker="x", color="tab:red", ms=8, mew=2,
                    clip_on=False, zorder=4, label="bin withheld by every site (fewer than q patients)")
        if some:
            ax.plot(mids[some], np.zeros(len(some)), ls="none", marker="|", color="tab:orange", ms=10, mew=2,
                    clip_on=False, zorder=4, label="bin withheld by some sites (their patients are left out)")

    @staticmethod
    def _risk_histogram(ax, c, horizon=None) -> None:
        """Patients per bin by outcome: outcome 1 upwards, outcome 0 downwards; withheld bins hatched. A survival
        result (``horizon``): events by the horizon up, patients followed beyond it down."""
        e = c.risk_edges
        width, pos, neg = np.diff(e), np.nan_to_num(c.risk_positives), np.nan_to_num(c.risk_negatives)
        ones, zeros = (("patients with outcome 1", "patients with outcome 0") if horizon is None else
                       (f"events by {horizon:g}", f"followed beyond {horizon:g}"))
        ax.bar(e[:-1], pos, width=width, align="edge", color="tab:red", alpha=0.6, edgecolor="white",
               label=f"{ones} (up)")
        ax.bar(e[:-1], -neg, width=width, align="edge", color="tab:blue", alpha=0.6, edgecolor="white",
               label=f"{zeros} (down)")
        gone = ~np.isfinite(c.risk_positives)
        if gone.any():
            top = max(1.0, float(pos.max(initial=0)))
            ax.bar(e[:-1][gone], np.full(gone.sum(), 0.3 * top), width=width[gone], align="edge", fill=False,
                   hatch="///", edgecolor="tab:red", lw=0, label="withheld bin (count not released)")
        ax.axhline(0, color="black", lw=0.6)
        ax.set(xlim=(0, 1), xlabel="predicted probability" if horizon is None else f"predicted risk by {horizon:g}",
               ylabel="patients")
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{abs(v):g}"))


def _merged_handles(*axes):
    handles, labels = [], []
    for ax in axes:
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    return handles, labels


def validation_figure(result, *, figure=None, references: Sequence[Sequence] = ()):
    """One figure of a result: the ROC curve (left), the calibration curve with its statistics box and the
    risk histogram (right), a one-line title (model, data, n, epsilon, protocol) and the protocol's guarantee, without
    its asides, as the caption beneath (the whole guarantee is in the summary and the JSON). Save it whole with
    ``fig.savefig(path)``; the constrained layout keeps titles, legends and panels apart."""
    plt = pyplot()
    fig = plt.figure(figsize=(13, 8.2), layout="constrained") if figure is None else figure
    fig.clear()
    if figure is not None:
        fig.set_layout_engine("constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[3, 1])
    RocPlot(result).plot(fig.add_subplot(grid[:, 0]), references=references)
    if result.calibration is not None:
        cal = fig.add_subplot(grid[0, 1])
        CalibrationPlot(result).plot(cal, fig.add_subplot(grid[1, 1], sharex=cal))
    return publish_titles(fig, result)


def publish_titles(fig, result):
    """Title a figure of several panels for publication: n, epsilon and the protocol once, in a one-line title
    (:func:`figure_title`); each panel's title only its kind (the first line of :func:`plot_title`); the protocol's
    guarantee, without its asides, as the caption beneath. Returns ``fig``."""
    for ax in fig.axes:
        ax.set_title(ax.get_title().split("\n")[0], fontsize="medium")
    fig.suptitle(figure_title(result), fontsize=11)
    fig.supxlabel(textwrap.fill(f"Privacy: {plain(result.guarantee)}.", 170), fontsize=8, color="0.3")
    return fig


def figure_title(result) -> str:
    """One line: the model, the dataset, n, the events, epsilon, delta and the protocol."""
    approx = "" if result.counts_exact else "~"
    ones = "with outcome 1" if getattr(result, "time", None) is None else f"events by {result.horizon:g}"
    return (f"{result.score_description} on '{result.dataset}': n = {approx}{result.n:.0f} ({approx}{result.n1:.0f} "
            f"{ones}), $\\varepsilon$ = {result.epsilon:g}, $\\delta$ = {result.delta:g} per site, "
            f"{result.protocol} protocol")
