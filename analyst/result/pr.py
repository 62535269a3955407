"""Precision-recall for a validation: the PR curve, AP and AUCPR with intervals, and the unachievable region.

Everything here is post-processing of what the sites released: in the paper protocol the pooled noisy
scores S~0 and S~1 with their class counts, in the histogram protocol the summed (consistent) noisy
class-wise histograms. The intervals are the binomial/logit intervals of Boyd (2014) with n = n1; they
cover sampling only, not the privacy noise, and the notes say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dsroc
from dsroc.pr.estimators import aucpr_interpolated, aucpr_lower_trapezoid

__all__ = ["CURVE_POINTS", "PRSummary", "pr_from_released_scores", "pr_from_counts", "PrecisionRecallPlot"]

#: At most this many points of a PR curve are kept for display and the report (10^7 released scores have
#: 10^7 points: 160 MB and a JSON of tens of millions of numbers otherwise).
CURVE_POINTS = 1000


def _num(x) -> Any:
    x = float(x)
    return x if math.isfinite(x) else None


def _logit_interval(theta: float, n1: float, level: float) -> tuple[float, float]:
    """Boyd's logit interval ``expit(logit(theta) +- z / sqrt(n1 theta (1 - theta)))`` (NaN at 0 or 1)."""
    from scipy.special import expit, logit
    from scipy.stats import norm

    if not (0.0 < theta < 1.0 and n1 > 0):
        return math.nan, math.nan
    half = float(norm.ppf(0.5 + level / 2.0)) / math.sqrt(n1 * theta * (1.0 - theta))
    return float(expit(logit(theta) - half)), float(expit(logit(theta) + half))


@dataclass
class PRSummary:
    """PR curve and its summaries, computed from released data.

    Attributes
    ----------
    recall, precision : ndarray
        The PR points (thresholds descending; the first point, recall 0, has no precision): at most
        :data:`CURVE_POINTS` of them, evenly spaced by rank with the first and the last (the summaries
        below are computed from every point).
    n0, n1 : float
        Class counts behind the points (released or estimated).
    prevalence : float
        ``n1 / (n0 + n1)``: the precision of a random ranking (the horizontal line of the plot).
    ap, ap_ci : float, (float, float)
        Average precision with its logit interval (n = n1).
    aucpr_lower_trapezoid, aucpr_interpolated : float
        Boyd's lower trapezoid and the Davis-Goadrich interpolated (median) AUCPR.
    aucpr_min, ap_min, aucnpr : float
        Area under the minimum PR curve at this prevalence, the minimum AP for these counts, and the
        AP normalised to the achievable range, ``(AP - AUCPR_MIN) / (1 - AUCPR_MIN)``.
    source : str
        What the points were computed from.
    notes : list of str
    """

    recall: np.ndarray
    precision: np.ndarray
    n0: float
    n1: float
    prevalence: float
    ap: float
    ap_ci: tuple
    aucpr_lower_trapezoid: float
    aucpr_interpolated: float
    aucpr_min: float
    ap_min: float
    aucnpr: float
    level: float
    source: str
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view (NaN as None)."""
        return {
            "source": self.source, "n0": _num(self.n0), "n1": _num(self.n1), "prevalence": _num(self.prevalence),
            "ap": _num(self.ap), "ap_ci": [_num(v) for v in self.ap_ci], "level": _num(self.level),
            "aucpr_lower_trapezoid": _num(self.aucpr_lower_trapezoid),
            "aucpr_interpolated": _num(self.aucpr_interpolated), "aucpr_min": _num(self.aucpr_min),
            "ap_min": _num(self.ap_min), "aucnpr": _num(self.aucnpr),
            "recall": [_num(v) for v in self.recall], "precision": [_num(v) for v in self.precision],
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        pct = round(100 * self.level)
        return (f"PR ({self.source}): AP {self.ap:.4f} [{pct}% CI {self.ap_ci[0]:.4f}, {self.ap_ci[1]:.4f}], "
                f"AUCPR (lower trapezoid) {self.aucpr_lower_trapezoid:.4f}, interpolated {self.aucpr_interpolated:.4f}; "
                f"prevalence {self.prevalence:.3f}, unachievable area {self.aucpr_min:.4f}, AUCNPR {self.aucnpr:.4f}")


def _summary(points: dsroc.PRPoints, *, level: float, source: str, notes: list) -> PRSummary:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    pi = points.prevalence
    ap = dsroc.average_precision(points=points)
    lower = aucpr_lower_trapezoid(points)
    try:
        interp = aucpr_interpolated(points)
    except (ValueError, FloatingPointError):
        interp = math.nan
    area_min = float(dsroc.aucpr_min(pi))
    n1, n0 = points.n1, points.n0
    minimum = dsroc.ap_min(n1, n0)
    keep = np.unique(np.linspace(0, points.tp.size - 1, min(points.tp.size, CURVE_POINTS)).round().astype(np.intp))
    kept = dsroc.PRPoints(points.tp[keep], points.fp[keep], points.thresholds[keep], points.n1, points.n0)
    return PRSummary(kept.recall, kept.precision, n0, n1, pi, ap, _logit_interval(ap, n1, level), lower, interp,
                     area_min, minimum, float(dsroc.aucnpr(ap, pi)), level, source, notes)


def pr_from_released_scores(s0_noisy, s1_noisy, *, level: float = 0.95, points=None) -> PRSummary:
    """PR summary of the pooled released scores (paper protocol): the points of ``(S~0, S~1)`` with their labels.

    The noise mixes the classes, so the curve and AP are biased towards the unachievable region; the
    class counts are exact (the paper protocol discloses them). ``points``: their
    :func:`dsroc.pr_points_by_class`, when already computed.
    """
    notes = ["computed from the released noisy scores: the noise pulls the PR curve towards the prevalence line, "
             "and the interval covers sampling only, not the privacy noise"]
    points = dsroc.pr_points_by_class(s0_noisy, s1_noisy) if points is None else points
    return _summary(points, level=level,
                    source="paper protocol: released noisy scores", notes=notes)


def pr_from_counts(counts0, counts1, edges, *, level: float = 0.95) -> PRSummary:
    """PR summary from consistent summed histograms (histogram protocol); the counts are estimates."""
    points = dsroc.pr_points_from_counts(counts0, counts1, edges)
    notes = ["computed from the noisy histograms at the bin edges (estimated counts); the interval covers "
             "sampling only, not the privacy noise"]
    return _summary(points, level=level, source="histogram protocol: bin edges", notes=notes)


@dataclass
class PrecisionRecallPlot:
    """The PR curve with the unachievable region shaded and the prevalence line (Boyd 2014, ch. 3).

    Below the minimum PR curve ``p = pi r / (1 - pi + pi r)`` no ranking can go; the horizontal line
    ``p = pi`` is the precision of a random ranking.
    """

    summary: PRSummary
    name: str = "validation"

    @classmethod
    def from_result(cls, result, *, name: str = "validation") -> "PrecisionRecallPlot":
        """From a validation result holding a ``pr`` summary."""
        pr = getattr(result, "pr", None)
        if pr is None:
            raise ValueError("the result holds no PR summary (pr is None)")
        return cls(pr, name)

    def plot(self, ax=None) -> "PrecisionRecallPlot":
        """Draw on ``ax`` (a new figure when omitted); matplotlib is imported only here."""
        from analyst.display import pyplot

        if ax is None:
            _, ax = pyplot().subplots(figsize=(5.5, 5))
        pr = self.summary
        r_min, p_min = dsroc.pr_min_curve(pr.prevalence)
        ax.fill_between(r_min, 0.0, p_min, color="0.8", label=f"unachievable (area {pr.aucpr_min:.3f})")
        ax.plot(r_min, p_min, color="0.5", lw=1)
        ax.axhline(pr.prevalence, color="0.3", ls="--", lw=1, label=f"prevalence {pr.prevalence:.3f}")
        keep = np.isfinite(pr.precision) & (pr.recall > 0)
        ax.plot(pr.recall[keep], pr.precision[keep], color="C0", lw=1.5, drawstyle="default",
                label=f"{self.name}: AP {pr.ap:.3f} [{pr.ap_ci[0]:.3f}, {pr.ap_ci[1]:.3f}]")
        ax.set_xlim(0, 1), ax.set_ylim(0, 1.02)
        ax.set_xlabel("recall (true positive rate)"), ax.set_ylabel("precision (positive predictive value)")
        ax.set_title(f"Precision-recall ({pr.source})\nAUCNPR {pr.aucnpr:.3f}", fontsize=9)
        ax.legend(loc="upper right", fontsize=8)
        self.ax_ = ax
        return self
