"""What a multicentre validation reports beside the pooled numbers: each site's estimates, their heterogeneity, the decision curve, subgroups and a second model.

All of it is post-processing of the releases the sites already made: each site's histogram release is
(epsilon, delta)-DP on its own, so its own AUC and O/E (with intervals including that site's noise) cost
nothing more; they are pooled by a random-effects meta-analysis on the logit-AUC and log-O/E scales as
``metamisc::valmeta`` does (:func:`dsroc.multicentre.random_effects`), and the decision curve is read at
the summed histogram's edges (:func:`dsroc.multicentre.decision_curve`). Subgroups and the comparison of
two models need one more release each, of a finer partition (:class:`PartitionedAnalyses`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from dsroc.histogram.validation import histogram_validation
from dsroc.multicentre import PooledEstimate, decision_curve, pool_estimates, pooled_weights

from analyst.result.parts import PlainRecord, num
from analyst.result.summary import interval_text

__all__ = ["SiteEstimates", "Pooled", "Heterogeneity", "poolable_auc", "site_heterogeneity", "result_decision_curve",
           "PartitionedAnalyses"]


@dataclass(frozen=True)
class SiteEstimates(PlainRecord):
    """One site's own AUC and O/E from its own release, intervals including that site's noise."""

    site: str
    n: float
    auc: float
    auc_lower: float
    auc_upper: float
    auc_variance: float
    oe: float
    oe_lower: float
    oe_upper: float
    oe_variance: float


@dataclass(frozen=True)
class Pooled(PlainRecord, PooledEstimate):
    """A random-effects pooled statistic on its natural scale (back-transformed), with heterogeneity."""


@dataclass(frozen=True)
class Heterogeneity:
    """Per-site estimates and their random-effects pooling (None where fewer than two sites have one)."""

    sites: tuple[SiteEstimates, ...]
    auc: Pooled | None
    oe: Pooled | None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {"sites": [s.to_dict() for s in self.sites], "auc": None if self.auc is None else self.auc.to_dict(),
                "oe": None if self.oe is None else self.oe.to_dict(), "notes": list(self.notes),
                "auc_weights": [num(w) for w in self.auc_weights()]}

    def auc_weights(self) -> list[float]:
        """Each site's share of the pooled AUC (``1 / (v_i + tau^2)`` on the logit scale, summing to one over the
        pooled sites; NaN for a site left out of the pooling or when no AUC is pooled)."""
        used = [s for s in self.sites if poolable_auc(s)]
        if self.auc is None or len(used) < 2:
            return [math.nan] * len(self.sites)
        shares = dict(zip((s.site for s in used), pooled_weights(
            [s.auc for s in used], [s.auc_variance for s in used], scale="logit", tau2=self.auc.tau2)))
        return [float(shares.get(s.site, math.nan)) for s in self.sites]

    def summary_lines(self, pct: int) -> list[str]:
        """The lines of the text summary."""
        lines = ["", "Per site (each from its own release; intervals include that site's noise)"]
        for s in self.sites:
            lines.append(f"  {s.site:<18} AUC {interval_text(s.auc, s.auc_lower, s.auc_upper)}   "
                         f"O/E {interval_text(s.oe, s.oe_lower, s.oe_upper)}")
        for p in (self.auc, self.oe):
            if p is not None:
                lines.append(f"  {p.statistic + ' pooled':<18} {interval_text(p.estimate, p.lower, p.upper)} "
                             f"({p.method})   {pct}% prediction interval for a new site [{p.prediction_lower:.3f}, "
                             f"{p.prediction_upper:.3f}]   tau^2 {p.tau2:.3g} ({p.scale} scale), I^2 {100 * p.i2:.0f}%")
        return lines + [f"  note: {n}" for n in self.notes]


def poolable_auc(s: SiteEstimates) -> bool:
    """Whether a site's AUC enters the pooling on the logit scale: finite, inside (0, 1), with a positive variance."""
    return math.isfinite(s.auc) and 0 < s.auc < 1 and math.isfinite(s.auc_variance) and s.auc_variance > 0


def _pool(statistic: str, scale: str, estimates, variances, level: float) -> Pooled:
    return Pooled(**vars(pool_estimates(statistic, estimates, variances, scale=scale, level=level)))


def site_heterogeneity(releases: Mapping[str, Any], edges, *, level: float, estimator: str) -> Heterogeneity:
    """Each site's AUC and O/E from its own histogram release, pooled across sites by random effects.

    ``releases``: :class:`analyst.protocols.histogram.release.HistogramSite` per site name.
    """
    sites, notes = [], []
    for name, r in releases.items():
        sums = {} if r.negative_sums is None else {"sums0": r.negative_sums, "sums1": r.positive_sums,
                                                   "sums_sigma": r.sums_sd}
        v = histogram_validation(r.negatives, r.positives, edges, sigma=r.noise_sd, estimator=estimator, level=level,
                                 **sums)
        oe = v.oe
        sites.append(SiteEstimates(
            name, float(v.n0 + v.n1), v.auc, *(v.auc_ci if v.auc_ci_defined else (math.nan, math.nan)), v.auc_variance,
            *((oe.value, oe.lower, oe.upper, oe.variance) if oe is not None else (math.nan,) * 4)))
        notes += [f"site {name}: {what} not estimable from its own release ({why})" for what, why in v.unavailable.items()
                  if what in ("auc", "oe")]
    auc_ok = [s for s in sites if poolable_auc(s)]
    oe_ok = [s for s in sites if math.isfinite(s.oe) and s.oe > 0 and s.oe_variance > 0]
    auc = (_pool("AUC", "logit", [s.auc for s in auc_ok], [s.auc_variance for s in auc_ok], level)
           if len(auc_ok) >= 2 else None)
    oe = _pool("O/E", "log", [s.oe for s in oe_ok], [s.oe_variance for s in oe_ok], level) if len(oe_ok) >= 2 else None
    if len(auc_ok) < 3:
        notes.append("a prediction interval for a new site needs at least 3 sites with an AUC")
    return Heterogeneity(tuple(sites), auc, oe, tuple(notes))


def result_decision_curve(counts0, counts1, edges, *, sigma: float, level: float, thresholds=None):
    """The decision curve at the grid's interior edges in (0, 1) (``thresholds``: at those edges only), or None when
    the scores are not risks."""
    e = np.asarray(edges, dtype=np.float64)
    if e[0] < 0 or e[-1] > 1 or e.size < 3:
        return None
    return decision_curve(counts0, counts1, e, noise_variance=sigma**2, level=level, thresholds=thresholds)


class PartitionedAnalyses:
    """The validation's subgroups (``strata``) and model comparison (``compare``): one more release each per site.

    Made before any release (a context manager: it closes the second model's sessions): the second model's
    sessions open at once, refused as the first model's would be, and :meth:`check` refuses a partition some
    site's policy does not allow; only then does the validation release. :meth:`collect` makes the partitioned
    releases on the validation's grid (the joint one on every second edge of it).
    """

    def __init__(self, session, request, options):
        from analyst.protocols.histogram.partitions import compare_session

        self.session, self.request, self.options = session, request, options
        self.other = compare_session(session, options.compare) if options.compare is not None else None

    def check(self, n_bins: int) -> None:
        """Refuse (before anything is released) strata or cells some site's policy does not allow."""
        from analyst.protocols.histogram.partitions import check_partition_policies

        o = self.options
        if o.strata is not None:
            check_partition_policies(self.session, strata=o.strata, n_bins=n_bins, compare=False)
        if o.compare is not None:
            check_partition_policies(self.session, strata=None, n_bins=n_bins, compare=True)

    def collect(self, edges) -> dict[str, Any]:
        """The partitioned releases on the grid ``edges`` and the result fields they give."""
        from analyst.protocols.histogram.compare import comparison_from_release
        from analyst.protocols.histogram.partitions import collect_partitioned
        from analyst.protocols.histogram.subgroups import subgroups_from_release

        s, r, o, out = self.session, self.request, self.options, {}
        if o.strata is not None:
            release = collect_partitioned(s, "stratified release", epsilon=r.epsilon, delta=r.delta, edges=edges,
                                          strata=o.strata, score_sums=o.score_sums)
            out["subgroups"] = subgroups_from_release(release, o.strata, estimator=o.estimator, level=r.level)
        if self.other is not None:
            from dsroc.multicentre import joint_grid

            # every second edge of the validation's grid: a quarter of the cells, so of the noise
            release = collect_partitioned(s, "joint release", epsilon=r.epsilon, delta=r.delta, edges=joint_grid(edges),
                                          compare=self.other)
            out["comparison"] = comparison_from_release(release, s.score_source, self.other.score_source,
                                                        level=r.level)
        return out

    def __enter__(self) -> "PartitionedAnalyses":
        return self

    def __exit__(self, *exc) -> None:
        if self.other is not None:
            self.other.close()
