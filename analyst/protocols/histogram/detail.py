"""What only the histogram protocol's result holds: the summed release, each site's releases and the grid."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from dsroc.histogram.stages import MODE_Z, second_mode

from analyst.protocols.histogram.release import HistogramSite
from analyst.result.parts import num
from analyst.result.summary import fmt, plural

__all__ = ["HistogramDetail", "two_modes_lines"]


@dataclass(frozen=True)
class HistogramDetail:
    """What only the histogram protocol has.

    Attributes
    ----------
    validation : dsroc.histogram.validation.HistogramValidation
        Every estimate from the summed histograms (consistent counts, binned AUC, ROC-GLM through the edges).
    releases : dict of str to HistogramSite
        Each site's release.
    sigma : float
        Noise SD of each summed cell, ``sqrt(sum of the sites' noise variances)``.
    n_bins : int
    spacing : str
    grid_releases : dict of str to HistogramSite
        With ``spacing="quantile"``: each site's first-stage release, whose quantiles placed the grid (charged
        too; both stages compose to the request's epsilon per site).
    grid_edges : ndarray or None
        With ``spacing="quantile"``: the first release's grid.
    left_out : dict of str to str
        With ``skip_refusing_sites``: each site left out and its refusal.
    """

    validation: Any
    releases: Mapping[str, HistogramSite]
    sigma: float
    n_bins: int
    spacing: str
    grid_releases: Mapping[str, HistogramSite] = field(default_factory=dict)
    grid_edges: np.ndarray | None = None
    left_out: Mapping[str, str] = field(default_factory=dict)

    def summary_lines(self, result, pct: int) -> list[str]:
        """Lines after the headline AUC: why it is the one reported, then the binned and resolved AUCs beside it."""
        v = self.validation
        why = next((n[len("AUC: "):] for n in v.notes if n.startswith("AUC: ")), None)
        lines = [] if why is None else [f"{'AUC estimator':<22} {why}"]
        if v.estimator != "empirical":
            lines.append(f"{'AUC (binned)':<22} {fmt(v.auc_empirical)}   (ties within a bin count one half)")
        if math.isfinite(v.auc_resolved) and v.estimator != "resolved":
            lines.append(f"{'AUC (resolved)':<22} {fmt(v.auc_resolved)}   (within-bin pairs ordered by the score sums)")
        return lines

    @property
    def mechanism(self) -> str:
        """The sites' noise in words: discrete Laplace (pure epsilon-DP), or discrete Gaussian from older sites."""
        kinds = {r.mechanism for r in (*self.releases.values(), *self.grid_releases.values())}
        if kinds == {"discrete_laplace"}:
            return "discrete Laplace, pure epsilon-DP per site"
        return " and ".join(sorted(k.replace("_", " ") for k in kinds)) + " noise"

    def detail_lines(self, result) -> list[str]:
        """The protocol's own lines at the end of the summary."""
        if self.grid_releases:
            first = next(iter(self.grid_releases.values()))
            fine = [np.sum([getattr(r, c) for r in self.grid_releases.values()], axis=0)
                    for c in ("negatives", "positives")]
            return [f"Histogram protocol ({self.mechanism}): {self.n_bins} bins at the class-balanced quantiles of a "
                    f"first release (each site: epsilon {first.epsilon:.3g}, {first.negatives.size} fine bins; "
                    f"charged), then the per-class release (epsilon {next(iter(self.releases.values())).epsilon:.3g}); "
                    f"summed noise SD {self.sigma:.3g} per cell; both stages compose to the requested epsilon per site",
                    *two_modes_lines(*fine, math.sqrt(sum(r.noise_sd**2 for r in self.grid_releases.values())),
                                     self.grid_edges)]
        return [f"Histogram protocol ({self.mechanism}): {self.n_bins} {self.spacing} bins on the score range; summed "
                f"noise SD {self.sigma:.3g} per cell; {plural(len(self.releases), 'site')} released once each"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        v = self.validation
        return {"n_bins": int(self.n_bins), "spacing": self.spacing, "sigma": num(self.sigma),
                "mechanism": self.mechanism,
                "edges": [num(e) for e in v.edges], "counts0": [num(c) for c in v.counts0],
                "counts1": [num(c) for c in v.counts1], "auc_empirical": num(v.auc_empirical),
                "auc_empirical_variance": num(v.auc_empirical_variance), "auc_resolved": num(v.auc_resolved),
                "auc_resolved_variance": num(v.auc_resolved_variance), "auc_widening": num(v.auc_widening),
                "auc_monotone": num(v.auc_monotone), "auc_shape": num(v.auc_shape),
                "estimator": v.estimator, "unavailable": dict(v.unavailable),
                "releases": {name: r.to_dict() for name, r in self.releases.items()},
                "grid_releases": {name: r.to_dict() for name, r in self.grid_releases.items()},
                "left_out": dict(self.left_out)}


def two_modes_lines(counts0, counts1, sigma: float, edges) -> list[str]:
    """A line saying that a class's first-release counts on ``edges`` (summed, noise SD ``sigma`` per cell) show two
    modes, for which the default bin rule takes one count more (:func:`dsroc.histogram.stages.second_mode`); none
    otherwise."""
    if not second_mode(counts0, counts1, sigma, edges):
        return []
    return [f"A class's first release shows two modes (a valley deeper than {MODE_Z:g} noise SDs): the default bin "
            "count is one step more than the class sizes call for, as the positives' share can change fast inside "
            "each mode"]
