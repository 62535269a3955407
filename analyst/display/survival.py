"""Plots of a survival validation: AUC(t) with its band, calibration at the horizon, Kaplan-Meier against prediction.

They draw what the result holds (:class:`analyst.protocols.histogram.survival_result.SurvivalDetail`), never compute
an estimate; matplotlib is imported only when drawing.
"""

from __future__ import annotations

import textwrap

import numpy as np

from analyst.display.plots import plot_title, publish_titles, pyplot

__all__ = ["SurvivalDisplay"]


class SurvivalDisplay:
    """The figures a survival biostatistician publishes, from a survival :class:`analyst.ValidationResult`.

    Each ``plot_*`` method draws on the given axes (a new figure when omitted) and returns the axes; :meth:`figure`
    draws all of them in one figure. Every band and interval includes sampling and the privacy noise.
    """

    def __init__(self, result):
        detail = getattr(result, "detail", None)
        if getattr(detail, "analysis", None) != "survival":
            raise ValueError("this result is not a survival validation: validate with time=COLUMN, horizon=T")
        self.result, self.validation = result, detail.validation
        self.pct = round(100 * result.level)

    def _axes(self, ax, size=(7.0, 5.0)):
        if ax is not None:
            return ax
        return pyplot().figure(figsize=size, layout="constrained").add_subplot(1, 1, 1)

    def plot_auc(self, ax=None):
        """AUC(t) at the grid's time points with its pointwise band, the horizon, Harrell's and Uno's C."""
        v, ax = self.validation, self._axes(None if ax is None else ax)
        c = v.auc_curve
        ax.fill_between(c.times, c.lower, c.upper, step=None, color="tab:blue", alpha=0.2, lw=0,
                        label=f"{self.pct}% pointwise band (sampling and privacy noise)")
        ax.plot(c.times, c.values, "o-", color="tab:blue", ms=3, lw=1.5, label="cumulative/dynamic AUC(t), IPCW")
        ax.errorbar([v.horizon], [v.auc.value], yerr=[[v.auc.value - v.auc.lower], [v.auc.upper - v.auc.value]],
                    fmt="D", color="black", capsize=4, ms=6, zorder=4,
                    label=f"AUC({v.horizon:g}) {v.auc.value:.3f} [{v.auc.lower:.3f}, {v.auc.upper:.3f}]")
        ax.axhline(v.harrell_c.value, color="tab:green", ls="--", lw=1, label=f"Harrell's C {v.harrell_c.value:.3f}")
        ax.axhline(v.uno_c.value, color="tab:purple", ls="-.", lw=1,
                   label=f"Uno's C (tau {v.tau:g}) {v.uno_c.value:.3f}")
        ax.axhline(0.5, color="grey", ls=":", lw=1)
        ax.set(xlabel=f"time ({self.result.time})", ylabel="AUC(t)", ylim=(0.4, 1.0), xlim=(0, c.times.max() * 1.02))
        ax.set_title(plot_title("Time-dependent AUC", self.result), fontsize="medium")
        ax.legend(fontsize="small", loc="lower right")
        return ax

    def plot_calibration(self, ax=None, hist_ax=None):
        """Observed (1 - Kaplan-Meier) against mean predicted risk at the horizon per risk group, both with their
        intervals, and the risk histogram by status at the horizon (events up, followed beyond it down, censored
        before it in grey). Returns ``(ax, hist_ax)``."""
        v = self.validation
        if ax is None:
            fig = pyplot().figure(figsize=(7.0, 8.6), layout="constrained")
            ax, hist_ax = fig.subplots(2, 1, height_ratios=[3, 1], sharex=True)
        g = v.groups
        pred = np.array([x.expected.value for x in g])
        obs = np.array([x.observed.value for x in g])
        yerr = np.array([[o - x.observed.lower, x.observed.upper - o] for o, x in zip(obs, g)]).T
        xerr = np.array([[p - x.expected.lower, x.expected.upper - p] for p, x in zip(pred, g)]).T
        ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=1, label="perfect calibration")
        ax.errorbar(pred, obs, yerr=np.nan_to_num(yerr), xerr=np.nan_to_num(xerr), fmt="o-", color="black", ms=5,
                    capsize=3, lw=1.2, zorder=3,
                    label=textwrap.fill(f"risk groups: observed 1 - KM({v.horizon:g}) against mean predicted risk; "
                                        f"{self.pct}% intervals of both (sampling and privacy noise)", 60))
        top = float(np.nanmax(np.r_[obs, pred, [x.observed.upper for x in g]])) * 1.1
        lim = min(1.0, max(0.2, top))
        text = (f"O/E({v.horizon:g}) {v.oe.value:.2f} [{v.oe.lower:.2f}, {v.oe.upper:.2f}]\n"
                f"intercept {v.calibration_intercept.value:.2f} [{v.calibration_intercept.lower:.2f}, "
                f"{v.calibration_intercept.upper:.2f}]\n"
                f"slope {v.calibration_slope.value:.2f} [{v.calibration_slope.lower:.2f}, "
                f"{v.calibration_slope.upper:.2f}]\n"
                f"Brier({v.horizon:g}) {v.brier.value:.3f}, scaled {v.scaled_brier.value:.2f}")
        ax.text(0.03, 0.97, text, transform=ax.transAxes, va="top", ha="left", fontsize="small", family="monospace",
                bbox=dict(boxstyle="round", facecolor="white", alpha=0.9, edgecolor="lightgrey"))
        ax.set(xlim=(0, lim), ylim=(0, lim), ylabel=f"observed risk by {v.horizon:g} (1 - Kaplan-Meier)")
        ax.set_title(plot_title(f"Calibration at {v.horizon:g}", self.result), fontsize="medium")
        ax.legend(fontsize="small", loc="lower right")
        if hist_ax is not None:
            e = v.score_edges
            w = np.diff(e)
            hist_ax.bar(e[:-1], v.risk_events, width=w, align="edge", color="tab:red", alpha=0.6, edgecolor="white",
                        label=f"events by {v.horizon:g} (up)")
            hist_ax.bar(e[:-1], -v.risk_event_free, width=w, align="edge", color="tab:blue", alpha=0.6,
                        edgecolor="white", label=f"followed beyond {v.horizon:g} (down)")
            hist_ax.bar(e[:-1], v.risk_censored, width=w, bottom=np.maximum(v.risk_events, 0), align="edge",
                        color="grey", alpha=0.5, edgecolor="white", label=f"censored before {v.horizon:g} (up)")
            hist_ax.axhline(0, color="black", lw=0.6)
            hist_ax.set(xlim=(0, lim), xlabel=f"predicted risk by {v.horizon:g}", ylabel="patients (noisy)")
            hist_ax.legend(fontsize="x-small", loc="upper right")
            from matplotlib.ticker import FuncFormatter

            hist_ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{abs(y):g}"))
        return ax, hist_ax

    def plot_survival(self, ax=None):
        """The pooled Kaplan-Meier curve with its band, each risk group's Kaplan-Meier curve, and at the horizon
        each group's mean predicted event-free probability ``1 - mean risk`` with its interval."""
        v, ax = self.validation, self._axes(ax, (7.0, 5.2))
        t = np.r_[0.0, v.survival.times]
        ax.fill_between(t, np.r_[1.0, v.survival.lower], np.r_[1.0, v.survival.upper], step="post", color="black",
                        alpha=0.12, lw=0, label=f"{self.pct}% band of the pooled Kaplan-Meier")
        ax.step(t, np.r_[1.0, v.survival.values], where="post", color="black", lw=2, label="all patients: Kaplan-Meier")
        colours = pyplot().get_cmap("viridis")(np.linspace(0.0, 0.9, len(v.groups)))
        for g, colour in zip(v.groups, colours):
            label = f"risk [{g.lower_score:.2f}, {g.upper_score:.2f}): KM"
            ax.step(t, np.r_[1.0, g.survival], where="post", color=colour, lw=1, alpha=0.9, label=label)
            s = 1.0 - g.expected.value
            ax.errorbar([v.horizon], [s], yerr=[[g.expected.upper - g.expected.value],
                                                [g.expected.value - g.expected.lower]],
                        fmt="s", color=colour, ms=6, capsize=3, mec="black", zorder=4)
        ax.errorbar([], [], fmt="s", color="white", mec="black", label=f"mean predicted survival at {v.horizon:g}")
        ax.axvline(v.horizon, color="grey", ls=":", lw=1)
        ax.set(xlabel=f"time ({self.result.time})", ylabel="event-free survival", ylim=(0, 1.02),
               xlim=(0, v.survival.times[-2] if v.survival.times.size > 1 else v.survival.times[-1]))
        ax.set_title(plot_title("Observed Kaplan-Meier and predicted survival", self.result), fontsize="medium")
        ax.legend(fontsize="x-small", loc="lower left", ncol=2)
        return ax

    def figure(self, *, figure=None):
        """All three plots in one figure (AUC(t), Kaplan-Meier, calibration with the risk histogram)."""
        plt = pyplot()
        fig = plt.figure(figsize=(17, 9.6), layout="constrained") if figure is None else figure
        fig.clear()
        grid = fig.add_gridspec(2, 3, height_ratios=[3, 1])
        self.plot_auc(fig.add_subplot(grid[:, 0]))
        self.plot_survival(fig.add_subplot(grid[:, 1]))
        cal = fig.add_subplot(grid[0, 2])
        self.plot_calibration(cal, fig.add_subplot(grid[1, 2], sharex=cal))
        return publish_titles(fig, self.result)
