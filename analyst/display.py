"""Plots of a validation result: the ROC-GLM curve with its pointwise band, and calibration with intervals."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

__all__ = ["CalibrationDisplay", "RocCurveDisplay", "plot_title", "pyplot"]


def pyplot():
    """Import matplotlib's pyplot, on the Agg backend when there is no display."""
    import matplotlib

    if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_title(kind: str, *, n: int | None, n1: int | None, epsilon: float | None, delta: float | None,
               protocol: str = "paper") -> str:
    """``kind`` with n, the events, epsilon, delta and the protocol, on two lines."""
    if n is None:
        return kind
    events = "" if n1 is None else f" ({n1} with outcome 1)"
    privacy = "" if epsilon is None else f", $\\varepsilon$ = {epsilon:g}, $\\delta$ = {delta:g}"
    return f"{kind}\nn = {n}{events}{privacy}, {protocol} protocol"


def _ax(ax, figsize=(6, 6.8)):
    if ax is None:
        _, ax = pyplot().subplots(figsize=figsize)
    return ax


def _legend_below(ax, ncol: int = 1) -> None:
    """The legend under the axes, where it cannot cover a curve."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize="small", frameon=False, ncol=ncol)


@dataclass
class RocCurveDisplay:
    """The fitted ROC-GLM curve ``Phi(gamma1 + gamma2 Phi^-1(t))`` with a pointwise confidence band.

    There is no empirical curve: no site releases its score distribution. The band is pointwise,
    ``Phi(eta(t) +- z se(eta(t)))`` from the ROC-GLM's covariance (:func:`dsroc.rocglm_band`); the AUC's
    interval (distributed DeLong) is reported in the legend. Where the curve lies below the diagonal
    (an improper binormal curve) the plot marks it.

    Parameters
    ----------
    gamma1, gamma2 : float
        ROC-GLM parameters.
    auc : float
        The ROC-GLM AUC.
    auc_ci : (float, float)
        Confidence interval of the AUC.
    cov : array_like, optional
        2 x 2 covariance of ``(gamma1, gamma2)``; without it no band is drawn.
    level : float
        Confidence level of ``auc_ci`` and of the band.
    name : str
        Legend label of the curve.
    ci_method : {"logit", "wald"}
        How the AUC interval was computed (named in the legend).
    n, n1 : int, optional
        Patients and patients with outcome 1 (in the title).
    epsilon, delta : float, optional
        The privacy request (in the title).
    protocol : str
        The protocol's name (in the title).
    """

    gamma1: float
    gamma2: float
    auc: float
    auc_ci: tuple[float, float]
    cov: np.ndarray | None = None
    level: float = 0.95
    name: str = "distributed ROC-GLM"
    ci_method: str = "logit"
    n: int | None = None
    n1: int | None = None
    epsilon: float | None = None
    delta: float | None = None
    protocol: str = "paper"

    @classmethod
    def from_result(cls, result, *, name: str = "distributed ROC-GLM") -> "RocCurveDisplay":
        """Build the display from a :class:`analyst.ValidationResult`."""
        g1, g2 = (float(v) for v in result.rocglm.params)
        return cls(g1, g2, result.auc, tuple(result.auc_ci), result.rocglm.cov, result.level, name, result.ci_method,
                   result.n, result.n1, result.epsilon, result.delta, getattr(result, "protocol", "paper"))

    def curve(self, t: np.ndarray) -> np.ndarray:
        """True-positive fraction of the fitted curve at false-positive fractions ``t``."""
        from dsroc import rocglm_curve

        return rocglm_curve((self.gamma1, self.gamma2), t)

    def band(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper pointwise band at ``t`` (:func:`dsroc.rocglm_band`)."""
        from dsroc import rocglm_band

        if self.cov is None:
            raise ValueError("no covariance of the ROC-GLM parameters: no band")
        return rocglm_band((self.gamma1, self.gamma2), self.cov, t, level=self.level)

    def improper(self) -> tuple[float, float] | None:
        """The false-positive fractions where the curve lies below the diagonal (None if nowhere, or for
        less than 0.01 of the range: see :func:`analyst.hierarchy.improper_region`)."""
        from analyst.hierarchy import improper_region

        return improper_region((self.gamma1, self.gamma2))

    def plot(self, ax=None, *, reference: Sequence | None = None, references: Sequence[Sequence] = ()) -> "RocCurveDisplay":
        """Draw the curve, its band, the diagonal, comparison curves and any below-chance part.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw; a new figure when omitted.
        reference : (fpr, tpr, label), optional
            One extra curve for comparison (e.g. the pooled ROC-GLM in the demo).
        references : sequence of (fpr, tpr, label) or (fpr, tpr, label, style dict)
            More comparison curves.

        Returns
        -------
        self, with ``ax_`` and ``figure_`` set.
        """
        ax = _ax(ax)
        t = np.concatenate([[0.0], np.geomspace(1e-4, 0.5, 200), 1 - np.geomspace(0.5, 1e-4, 200)[1:], [1.0]])
        pct = round(100 * self.level)
        method = {"logit": "logit-scale", "wald": "Wald"}.get(self.ci_method, self.ci_method)
        if self.cov is not None:
            lo, hi = self.band(t)
            ax.fill_between(t, lo, hi, color="tab:blue", alpha=0.2, lw=0,
                            label=f"pointwise {pct}% band of the fitted curve (ROC-GLM covariance: the positives'\n"
                                  "sampling only, so narrower than the AUC's CI)")
        ax.plot(t, self.curve(t), color="tab:blue", lw=2,
                label=f"{self.name}: AUC {self.auc:.3f}, {pct}% CI [{self.auc_ci[0]:.3f}, {self.auc_ci[1]:.3f}] "
                      f"({method} DeLong)")
        styles = [dict(color="black", lw=1.2, ls="-."), dict(color="dimgrey", lw=0.8, alpha=0.8)]
        for k, ref in enumerate(([reference] if reference is not None else []) + list(references)):
            fpr, tpr, label = ref[:3]
            style = ref[3] if len(ref) > 3 else styles[min(k, len(styles) - 1)]
            ax.plot(fpr, tpr, label=label, **style)
        ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="chance")
        bad = self.improper()
        if bad is not None:
            a, b = bad
            ax.axvspan(a, b, ymax=0.04, color="tab:red", alpha=0.6,
                       label=f"curve below chance for FPR in [{a:.2f}, {b:.2f}] (improper binormal fit)")
            sel = (t >= a) & (t <= b)
            ax.plot(t[sel], self.curve(t[sel]), color="tab:red", lw=2.5)
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="false-positive fraction (1 - specificity)",
               ylabel="true-positive fraction (sensitivity)", aspect="equal",
               title=plot_title("ROC curve", n=self.n, n1=self.n1, epsilon=self.epsilon, delta=self.delta,
                                protocol=self.protocol))
        _legend_below(ax)
        self.ax_, self.figure_ = ax, ax.figure
        return self


@dataclass
class CalibrationDisplay:
    """Calibration curve with intervals, per-site curves, withheld bins and a risk histogram below.

    Parameters
    ----------
    edges : ndarray
        Bin edges.
    predicted, observed : ndarray
        Aggregated mean score and mean outcome per bin (NaN where no site released the bin).
    count : ndarray
        Patients per aggregated bin.
    per_site : dict of str to (predicted, observed)
        Each site's curve, one value per bin, NaN where the site withheld the bin.
    lower, upper : ndarray, optional
        Interval of the observed proportion per bin (Wilson), NaN where not released.
    withheld : dict of int to list of str
        Bin index to the sites that withheld it (below q).
    summary : str
        Mean and weak calibration in one line (O/E, calibration intercept, slope), drawn on the plot.
    """

    edges: np.ndarray
    predicted: np.ndarray
    observed: np.ndarray
    count: np.ndarray
    per_site: Mapping[str, tuple[np.ndarray, np.ndarray]]
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    withheld: Mapping[int, list] = field(default_factory=dict)
    summary: str = ""
    title: str = "Calibration"
    level: float = 0.95

    @classmethod
    def from_result(cls, result) -> "CalibrationDisplay":
        """Build the display from a :class:`analyst.ValidationResult`."""
        cal = result.calibration
        per_site = {}
        for name, c in cal.per_site.items():
            pred, obs = np.full(cal.count.size, np.nan), np.full(cal.count.size, np.nan)
            pred[c.bins], obs[c.bins] = c.predicted, c.observed
            per_site[name] = (pred, obs)
        withheld: dict[int, list] = {}
        for site, b in cal.suppressed:
            withheld.setdefault(int(b), []).append(site)
        h = getattr(result, "calibration_hierarchy", None)
        lower = upper = None
        summary = ""
        if h is not None:
            lower, upper = h.curve_lower, h.curve_upper
            summary = (f"O/E {h.oe.value:.2f} [{h.oe.lower:.2f}, {h.oe.upper:.2f}]\n"
                       f"calibration intercept {h.intercept.value:.2f} [{h.intercept.lower:.2f}, "
                       f"{h.intercept.upper:.2f}]\ncalibration slope {h.slope.value:.2f} "
                       f"[{h.slope.lower:.2f}, {h.slope.upper:.2f}]")
        title = plot_title("Calibration", n=result.n, n1=result.n1, epsilon=result.epsilon, delta=result.delta,
                           protocol=getattr(result, "protocol", "paper"))
        return cls(cal.edges, cal.predicted, cal.observed, cal.count, per_site, lower, upper, withheld, summary,
                   title, result.level)

    def plot(self, ax=None) -> "CalibrationDisplay":
        """Draw per-site curves (thin), the aggregated curve with intervals, the diagonal, withheld bins
        (marked on the axis and in the histogram) and the risk histogram in a panel below.

        Returns
        -------
        self, with ``ax_`` (the curve), ``hist_ax_`` (the histogram) and ``figure_`` set.
        """
        from mpl_toolkits.axes_grid1 import make_axes_locatable

        ax = _ax(ax, figsize=(6, 8))
        hist = make_axes_locatable(ax).append_axes("bottom", size="28%", pad=0.35, sharex=ax)
        ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
        # NaN (withheld) bins break the lines: no segment pretends to join bins across a withheld one
        for name, (pred, obs) in self.per_site.items():
            ax.plot(pred, obs, lw=0.8, alpha=0.5, marker=".", label=name)
        ok = np.isfinite(self.predicted) & np.isfinite(self.observed)
        pct = round(100 * self.level)
        if self.lower is not None:
            err = np.vstack([self.observed[ok] - self.lower[ok], self.upper[ok] - self.observed[ok]])
            ax.errorbar(self.predicted[ok], self.observed[ok], yerr=err, fmt="o", color="black", ms=4, capsize=3,
                        lw=1.2, zorder=3, label=f"all sites, {pct}% Wilson interval per bin")
        else:
            ax.scatter(self.predicted[ok], self.observed[ok], color="black", s=16, zorder=3, label="all sites")
        ax.plot(self.predicted, self.observed, color="black", lw=1.5)
        mids = (self.edges[:-1] + self.edges[1:]) / 2
        gone = np.flatnonzero(self.count == 0)
        if gone.size:
            ax.plot(mids[gone], np.full(gone.size, 0.0), ls="none", marker="x", color="tab:red", ms=8, mew=2,
                    clip_on=False, zorder=4, label="bin withheld by every site (privacy rules, e.g. fewer than q patients)")
        partly = sorted(b for b in self.withheld if self.count[b] > 0)
        if partly:
            ax.plot(mids[partly], np.full(len(partly), 0.0), ls="none", marker="|", color="tab:orange", ms=10,
                    mew=2, clip_on=False, zorder=4, label="bin withheld by some sites")
        if self.summary:
            ax.text(0.03, 0.97, self.summary, transform=ax.transAxes, va="top", ha="left", fontsize="small",
                    bbox=dict(boxstyle="round", facecolor="white", alpha=0.85, edgecolor="lightgrey"))
        ax.set(xlim=(0, 1), ylim=(0, 1), ylabel="observed fraction with outcome 1", title=self.title)
        ax.tick_params(labelbottom=False)
        width = np.diff(self.edges)
        hist.bar(self.edges[:-1], self.count, width=width, align="edge", color="tab:grey", edgecolor="white")
        if gone.size:
            hist.bar(self.edges[:-1][gone], np.full(gone.size, max(1, self.count.max()) * 0.15), width=width[gone],
                     align="edge", fill=False, hatch="///", edgecolor="tab:red", lw=0)
        hist.set(xlim=(0, 1), xlabel="predicted probability (released cells carry no noise; small cells are withheld)",
                 ylabel="patients")
        hist.legend(*ax.get_legend_handles_labels(), loc="upper center", bbox_to_anchor=(0.5, -0.5),
                    fontsize="small", frameon=False, ncol=2)
        self.ax_, self.hist_ax_, self.figure_ = ax, hist, ax.figure
        return self
