"""Subgroups in the report: every stratum's AUC, O/E and Brier score from one stratified release, and the differences.

Post-processing of the sites' stratified releases (:mod:`analyst.protocols.histogram.partitions`) by
:func:`dsroc.multicentre.subgroup_analysis`; intervals include sampling and the privacy noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from dsroc.multicentre import subgroup_analysis

from analyst.result.parts import PlainRecord, num
from analyst.result.summary import interval_text

__all__ = ["Stratum", "StratumContrast", "Subgroups", "stratum_labels", "subgroups_from_release"]


@dataclass(frozen=True)
class Stratum(PlainRecord):
    """One stratum's estimates (intervals: sampling and the privacy noise)."""

    label: str
    lower: float
    upper: float
    n: float
    n1: float
    auc: float
    auc_lower: float
    auc_upper: float
    auc_variance: float
    oe: float
    oe_lower: float
    oe_upper: float
    brier: float
    brier_lower: float
    brier_upper: float


@dataclass(frozen=True)
class StratumContrast(PlainRecord):
    """A statistic of one stratum minus that of the first (reference) stratum, with its interval and test."""

    statistic: str
    stratum: str
    reference: str
    difference: float
    lower: float
    upper: float
    se: float
    p_value: float


@dataclass(frozen=True)
class Subgroups:
    """Per-stratum estimates of a stratified release and the differences from the first stratum."""

    column: str
    cuts: tuple[float, ...]
    estimator: str
    n_bins: int
    noise_sd: float
    strata: tuple[Stratum, ...]
    differences: tuple[StratumContrast, ...]
    releases: Mapping[str, Any]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {"column": self.column, "cuts": [num(c) for c in self.cuts], "estimator": self.estimator,
                "n_bins": int(self.n_bins), "noise_sd": num(self.noise_sd),
                "strata": [s.to_dict() for s in self.strata], "differences": [d.to_dict() for d in self.differences],
                "releases": {name: r.to_dict() for name, r in self.releases.items()}, "notes": list(self.notes)}

    def summary_lines(self, pct: int) -> list[str]:
        """The lines of the text summary."""
        lines = ["", f"Subgroups by {self.column} (one stratified release per site, {self.n_bins} bins x "
                     f"{len(self.strata)} strata; {pct}% CIs include sampling and the privacy noise)"]
        for s in self.strata:
            lines.append(f"  {s.label:<22} n ~ {s.n:>7.0f}   AUC {interval_text(s.auc, s.auc_lower, s.auc_upper)}   "
                         f"O/E {interval_text(s.oe, s.oe_lower, s.oe_upper)}   "
                         f"Brier {interval_text(s.brier, s.brier_lower, s.brier_upper)}")
        for d in self.differences:
            lines.append(f"  {d.statistic} {d.stratum} minus {d.reference}: {d.difference:+.3f} "
                         f"[{d.lower:+.3f}, {d.upper:+.3f}], p = {d.p_value:.3g}")
        return lines + [f"  note: {n}" for n in self.notes]


def stratum_labels(column: str, cuts) -> list[tuple[str, float, float]]:
    """``(label, lower, upper)`` of each stratum of ``column`` at ``cuts`` (stratum k: ``cuts[k-1] <= x < cuts[k]``)."""
    bounds = [-math.inf, *[float(c) for c in cuts], math.inf]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if lo == -math.inf:
            label = f"{column} < {hi:g}"
        elif hi == math.inf:
            label = f"{column} >= {lo:g}"
        else:
            label = f"{lo:g} <= {column} < {hi:g}"
        out.append((label, lo, hi))
    return out


def _nan3(e) -> tuple[float, float, float]:
    return (e.value, e.lower, e.upper) if e is not None else (math.nan,) * 3


def subgroups_from_release(release, column: str, *, estimator: str, level: float) -> Subgroups:
    """The :class:`Subgroups` of the sites' stratified releases (:class:`analyst.protocols.histogram.partitions.PartitionedRelease`)."""
    h0, h1, sigma = release.summed()
    sums = release.summed_sums()
    extra = {} if sums is None else {"sums0": sums[0], "sums1": sums[1], "sums_sigma": sums[2]}
    analysis = subgroup_analysis(h0, h1, release.edges, sigma=sigma, estimator=estimator, level=level, **extra)
    labels = stratum_labels(column, release.strata_cuts)
    strata, notes = [], []
    for (label, lo, hi), v in zip(labels, analysis.validations):
        ci = v.auc_ci if v.auc_ci_defined else (math.nan, math.nan)
        brier = v.brier_scalar if v.brier_scalar is not None else v.brier
        strata.append(Stratum(label, lo, hi, float(v.n0 + v.n1), float(v.n1), float(v.auc), float(ci[0]), float(ci[1]),
                              float(v.auc_variance), *_nan3(v.oe), *_nan3(brier)))
        notes += [f"{label}: {what} not estimable ({why})" for what, why in v.unavailable.items()
                  if what in ("auc", "oe", "brier")]
    differences = tuple(StratumContrast(d.statistic, labels[d.stratum][0], labels[d.reference][0], d.difference,
                                        d.ci[0], d.ci[1], d.se, d.p_value) for d in analysis.differences)
    return Subgroups(column, tuple(release.strata_cuts), estimator, int(release.edges.size - 1), sigma, tuple(strata),
                     differences, dict(release.sites), tuple(notes))
