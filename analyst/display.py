"""Plots of a validation result: the binormal ROC curve with its CI band, and the calibration curve."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = ["CalibrationDisplay", "RocCurveDisplay", "pyplot"]


def pyplot():
    """Import matplotlib's pyplot, on the Agg backend when there is no display."""
    import matplotlib

    if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ax(ax):
    if ax is None:
        _, ax = pyplot().subplots(figsize=(5.5, 5))
    return ax


@dataclass
class RocCurveDisplay:
    """The fitted ROC-GLM curve ``Phi(gamma1 + gamma2 Phi^-1(t))`` with a band for the AUC CI.

    There is no empirical curve: no site releases its score distribution. The band is spanned by
    the two binormal curves with the fitted slope ``gamma2`` whose AUCs equal the CI limits, so it
    is consistent with the reported interval.

    Parameters
    ----------
    gamma1, gamma2 : float
        ROC-GLM parameters.
    auc : float
        The ROC-GLM AUC.
    auc_ci : (float, float)
        Confidence interval of the AUC.
    level : float
        Confidence level of ``auc_ci``.
    name : str
        Legend label of the curve.
    ci_method : {"logit", "wald"}
        How the interval was computed (named in the legend).
    """

    gamma1: float
    gamma2: float
    auc: float
    auc_ci: tuple[float, float]
    level: float = 0.95
    name: str = "distributed ROC-GLM"
    ci_method: str = "logit"

    @classmethod
    def from_result(cls, result, *, name: str = "distributed ROC-GLM") -> "RocCurveDisplay":
        """Build the display from a :class:`analyst.ValidationResult`."""
        g1, g2 = (float(v) for v in result.rocglm.params)
        return cls(g1, g2, result.auc, tuple(result.auc_ci), result.level, name, result.ci_method)

    def curve(self, t: np.ndarray) -> np.ndarray:
        """True-positive fraction of the fitted curve at false-positive fractions ``t``."""
        from dsroc import rocglm_curve

        return rocglm_curve((self.gamma1, self.gamma2), t)

    def band(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper band: the curves with slope ``gamma2`` and AUC at the CI limits."""
        from dsroc import rocglm_curve, rocglm_intercept_for_auc

        lo, hi = (rocglm_curve((rocglm_intercept_for_auc(a, self.gamma2), self.gamma2), t) for a in self.auc_ci)
        return lo, hi

    def plot(self, ax=None, *, reference: Sequence | None = None) -> "RocCurveDisplay":
        """Draw the curve, the band and the diagonal.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw; a new figure when omitted.
        reference : (fpr, tpr, label), optional
            An extra curve to draw for comparison (e.g. the pooled empirical ROC in the demo).

        Returns
        -------
        self, with ``ax_`` and ``figure_`` set.
        """
        ax = _ax(ax)
        t = np.concatenate([[0.0], np.linspace(1e-4, 1 - 1e-4, 400), [1.0]])
        lo, hi = self.band(t)
        pct = round(100 * self.level)
        method = {"logit": "logit-scale", "wald": "Wald"}.get(self.ci_method, self.ci_method)
        ax.fill_between(t, lo, hi, color="tab:blue", alpha=0.2,
                        label=f"{pct}% CI of the AUC [{self.auc_ci[0]:.3f}, {self.auc_ci[1]:.3f}]\n"
                              f"({method} DeLong CI; binormal curves, slope $\\gamma_2$)")
        ax.plot(t, self.curve(t), color="tab:blue", lw=2, label=f"{self.name}, binormal (AUC {self.auc:.3f})")
        if reference is not None:
            fpr, tpr, label = reference
            # straight lines between the ROC points: a step where one class changes, a diagonal across ties
            ax.plot(fpr, tpr, color="black", lw=1, alpha=0.8, label=label)
        ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="chance")
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="false-positive fraction (1 - specificity)",
               ylabel="true-positive fraction (sensitivity)", title="ROC curve", aspect="equal")
        ax.legend(loc="lower right", fontsize="small")
        self.ax_, self.figure_ = ax, ax.figure
        return self


@dataclass
class CalibrationDisplay:
    """Calibration curve: mean observed outcome against mean score per bin, aggregated and per site.

    Parameters
    ----------
    predicted, observed : ndarray
        Aggregated mean score and mean outcome per bin (NaN where no site released the bin).
    count : ndarray
        Patients per aggregated bin.
    per_site : dict of str to (predicted, observed)
        Each site's curve, one value per bin, NaN where the site withheld the bin.
    """

    predicted: np.ndarray
    observed: np.ndarray
    count: np.ndarray
    per_site: Mapping[str, tuple[np.ndarray, np.ndarray]]

    @classmethod
    def from_result(cls, result) -> "CalibrationDisplay":
        """Build the display from a :class:`analyst.ValidationResult`."""
        cal = result.calibration
        per_site = {}
        for name, c in cal.per_site.items():
            pred, obs = np.full(cal.count.size, np.nan), np.full(cal.count.size, np.nan)
            pred[c.bins], obs[c.bins] = c.predicted, c.observed
            per_site[name] = (pred, obs)
        return cls(cal.predicted, cal.observed, cal.count, per_site)

    def plot(self, ax=None) -> "CalibrationDisplay":
        """Draw per-site curves (thin), the aggregated curve (thick, marker size ~ n) and the diagonal.

        Returns
        -------
        self, with ``ax_`` and ``figure_`` set.
        """
        ax = _ax(ax)
        ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
        # NaN (withheld) bins break the lines: no segment pretends to join bins across a withheld one
        for name, (pred, obs) in self.per_site.items():
            ax.plot(pred, obs, lw=0.8, alpha=0.6, marker=".", label=name)
        ok = np.isfinite(self.predicted) & np.isfinite(self.observed)
        ax.plot(self.predicted, self.observed, color="black", lw=2, label="all sites (marker area ~ n)")
        sizes = 15 + 200 * self.count[ok] / max(1, self.count[ok].max(initial=1))
        ax.scatter(self.predicted[ok], self.observed[ok], s=sizes, color="black", zorder=3)
        # a small margin so that points at 0 or 1 (small sites' bins) are not cut in half
        ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel="mean predicted probability per bin",
               ylabel="observed fraction with outcome 1", title="Calibration", aspect="equal")
        ax.legend(loc="upper left", fontsize="small")
        self.ax_, self.figure_ = ax, ax.figure
        return self
