"""Two models compared on the same patients in the report: each AUC and the paired difference from one joint release.

Post-processing of the sites' joint 2-D releases (:mod:`analyst.protocols.histogram.partitions`; on every second edge
of the validation's grid, :func:`dsroc.multicentre.joint_grid`): the paired DeLong
difference of the binned scores with the noise by the delta method
(:func:`dsroc.multicentre.paired_auc_difference`), each model's AUC interval from its margin (whose
cells sum the other model's bins, so their noise variance too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from scipy.stats import norm

from dsroc.histogram.validation import histogram_validation
from dsroc.multicentre import paired_auc_difference

from analyst.result.parts import plain_record


__all__ = ["Comparison", "comparison_from_release"]


@dataclass(frozen=True)
class Comparison:
    """Model A (the validated one) against model B on the same patients: binned empirical AUCs and their difference.

    ``difference = auc_a - auc_b``; every interval includes sampling and the privacy noise; ``p_value`` is the
    two-sided test of no difference (DeLong's paired test with the noise added to its variance).
    """

    model_a: str
    model_b: str
    auc_a: float
    auc_a_lower: float
    auc_a_upper: float
    auc_b: float
    auc_b_lower: float
    auc_b_upper: float
    difference: float
    lower: float
    upper: float
    se: float
    se_sampling: float
    se_noise: float
    z: float
    p_value: float
    n_bins: int
    noise_sd: float
    releases: Mapping[str, Any]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {**plain_record(self, skip=("releases", "notes", "n_bins")), "n_bins": int(self.n_bins),
                "notes": list(self.notes),
                "releases": {name: r.to_dict() for name, r in self.releases.items()}}

    def summary_lines(self, pct: int) -> list[str]:
        """The lines of the text summary."""
        return ["", f"Two models compared on the same patients (one joint release per site, {self.n_bins} x "
                    f"{self.n_bins} cells per class; binned AUCs; {pct}% CIs include sampling and the privacy noise)",
                f"  A {self.model_a:<26} AUC {self.auc_a:.3f} [{self.auc_a_lower:.3f}, {self.auc_a_upper:.3f}]",
                f"  B {self.model_b:<26} AUC {self.auc_b:.3f} [{self.auc_b_lower:.3f}, {self.auc_b_upper:.3f}]",
                f"  A minus B                    {self.difference:+.3f} [{self.lower:+.3f}, {self.upper:+.3f}]   "
                f"z = {self.z:.2f}, p = {self.p_value:.3g} (DeLong paired; SE {self.se:.4f}: sampling "
                f"{self.se_sampling:.4f}, noise {self.se_noise:.4f})"] + [f"  note: {n}" for n in self.notes]


def _name(source: str) -> str:
    """A score source's short name: a column's name, a GLM in words."""
    from analyst.result.summary import describe_source

    return source[len("column:"):] if source.startswith("column:") else describe_source(source)


def comparison_from_release(release, model_a: str, model_b: str, *, level: float) -> Comparison:
    """The :class:`Comparison` of the sites' joint releases (:class:`analyst.protocols.histogram.partitions.PartitionedRelease`);
    ``model_a``, ``model_b``: the two sessions' score sources."""
    h0, h1, sigma = release.summed()
    paired = paired_auc_difference(h0, h1, noise_variance=sigma**2, level=level)
    z = norm.ppf(0.5 + level / 2)
    bounds = []
    for axis, edges, auc in ((1, release.edges, paired.auc_a), (0, release.compare_edges, paired.auc_b)):
        # a margin's cell sums the other model's bins: their noise adds up
        v = histogram_validation(h0.sum(axis), h1.sum(axis), edges, sigma=sigma * math.sqrt(h0.shape[axis]),
                                 estimator="empirical", level=level)
        half = z * math.sqrt(max(v.auc_empirical_variance, 0.0))
        bounds += [auc, max(auc - half, 0.0), min(auc + half, 1.0)]
    notes = ("each model's AUC is the binned empirical AUC of the joint release, on every second edge of the "
             "validation's grid (ties within a bin count one half), so it may differ from the validation's own AUC of "
             "model A",)
    return Comparison(_name(model_a), _name(model_b), *bounds, paired.difference, paired.ci[0], paired.ci[1], paired.se,
                      paired.se_sampling, paired.se_noise, paired.z, paired.p_value, int(release.edges.size - 1),
                      sigma, dict(release.sites), notes)
