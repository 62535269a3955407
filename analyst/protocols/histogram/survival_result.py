"""The report of a survival validation: the sites' releases and the summed estimates as a ValidationResult."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from dsroc.survival.release import SurvivalRelease
from dsroc.survival.validation import INCLUDES, SurvivalValidation

from analyst.protocols.base import site_privacy_from_budget
from analyst.protocols.histogram.multicentre import Heterogeneity, Pooled, SiteEstimates
from analyst.result import ValidationResult
from analyst.result.parts import Calibration, Estimate, RocCurve, num
from analyst.result.summary import fmt, plural

__all__ = ["SURVIVAL_GUARANTEE", "SurvivalDetail", "SurvivalSite", "survival_result", "survival_report"]

SURVIVAL_GUARANTEE = (
    "survival release (histogram protocol): each site's whole answer is epsilon-DP under add/remove-one-patient "
    "adjacency (discrete Laplace noise on the counts of a (time bin x status x score bin) histogram, and on its cells' "
    "risk sums when asked for, pure epsilon-DP per site, charged once to the site's ledger; delta is checked by the "
    "policies but not used); every number below is post-processing of those releases"
)


@dataclass(frozen=True)
class SurvivalSite:
    """One site's survival release (one group) on its full grids, its noise (``sums_sd`` in score-bin widths) and
    what it charged."""

    release: SurvivalRelease
    time_edges: np.ndarray
    score_edges: np.ndarray
    sigma: float
    noise_sd: float
    sums_sd: float
    epsilon: float
    delta: float
    release_id: str
    repeated: bool
    epsilon_spent: float
    mechanism: str

    @property
    def histogram(self):
        """The site's release as a :class:`dsroc.survival.SurvivalHistogram`."""
        return self.release.histogram(self.time_edges, self.score_edges)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (the counts as released, (K, 2, J) nested lists)."""
        r = self.release
        sums = {} if r.offsets is None else {"offsets": r.offsets[0].tolist(), "squares": r.squares[0].tolist()}
        return {"counts": r.counts[0].tolist(), **sums, "sigma": num(self.sigma), "noise_sd": num(self.noise_sd),
                "sums_sd": num(self.sums_sd), "epsilon": num(self.epsilon), "delta": num(self.delta),
                "release_id": self.release_id, "repeated": self.repeated, "epsilon_spent": num(self.epsilon_spent),
                "mechanism": self.mechanism}


def _interval(i) -> dict[str, Any]:
    return {"value": num(i.value), "se": num(i.se), "lower": num(i.lower), "upper": num(i.upper), "draws": int(i.draws)}


def _curve(c) -> dict[str, Any]:
    return {k: [num(x) for x in getattr(c, k)] for k in ("times", "values", "se", "lower", "upper")}


def _estimate(i) -> Estimate | None:
    if not math.isfinite(i.value):
        return None
    return Estimate(i.value, i.lower, i.upper, i.se**2, INCLUDES)


UNO = "Uno's C"


@dataclass(frozen=True)
class SurvivalDetail:
    """What only a survival validation has: every estimate of :class:`dsroc.survival.SurvivalValidation`, the time
    column, the grids and each site's release (none under secure aggregation: ``noise`` then says what was summed).
    ``analysis`` is ``"survival"``."""

    validation: SurvivalValidation
    time: str
    releases: Mapping[str, SurvivalSite]
    time_edges: np.ndarray
    score_edges: np.ndarray
    risk_sums: bool
    analysis: str = "survival"
    noise: str = ""

    @property
    def mechanism(self) -> str:
        """The sites' noise in words."""
        if self.noise:
            return self.noise
        kinds = {r.mechanism for r in self.releases.values()}
        return ("discrete Laplace, pure epsilon-DP per site" if kinds == {"discrete_laplace"}
                else " and ".join(sorted(k.replace("_", " ") for k in kinds)) + " noise")

    def summary_lines(self, result, pct: int) -> list[str]:
        """Lines after the headline AUC(t): the other discrimination and accuracy measures at the horizon."""
        v = self.validation

        def line(label, i, note=""):
            return (f"{label:<22} {fmt(i.value)}   {pct}% CI [{fmt(i.lower)}, {fmt(i.upper)}]" + (f"   ({note})" if note
                                                                                                  else ""))
        return [line("Harrell's C", v.harrell_c, "pairs in different time bins, cross-site pairs included"),
                line(f"Uno's C (tau {v.tau:g})", v.uno_c, "weights 1/G(T-)^2") if math.isfinite(v.tau) else
                f"{UNO:<22} not reported (the released censoring survival is below the sites' minimum: see the notes)",
                line(f"Integrated Brier", v.integrated_brier, f"grid points up to {v.horizon:g}"),
                line(f"Scaled Brier({v.horizon:g})", v.scaled_brier, "1 - Brier / Brier of the Kaplan-Meier null model"),
                line(f"Observed risk({v.horizon:g})", v.observed, "1 - Kaplan-Meier"),
                line(f"Mean predicted risk", v.expected)]

    def detail_lines(self, result) -> list[str]:
        """The release in words at the end of the summary."""
        v = self.validation
        k, j = self.time_edges.size - 1, self.score_edges.size - 1
        return [f"Survival release ({self.mechanism}): {k} time bins (edges {', '.join(f'{e:g}' for e in self.time_edges[1:-1])}) "
                f"x 2 statuses x {j} score bins{' with the cells’ risk sums' if self.risk_sums else ''}; summed noise SD "
                f"{v.count_sd:.3g} per count; {self._released}; time column "
                f"'{self.time}', event column '{result.outcome}'",
                f"Patients (noisy): {v.patients:.0f}; events by {v.horizon:g}: {v.events:.0f}; followed beyond it: "
                f"{v.event_free:.0f}; censored before it: {v.censored:.0f} (kept: they count in the Kaplan-Meier and "
                "IPCW weights)",
                f"Calibration intercept and slope: {v.calibration_method}"]

    @property
    def _released(self) -> str:
        if self.releases:
            return f"{plural(len(self.releases), 'site')} released once each"
        return "one sum over the sites (the analyst sees no site's release)"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        v = self.validation
        groups = [{"score_bins": list(g.score_bins), "lower": num(g.lower_score), "upper": num(g.upper_score),
                   "n": num(g.patients), "observed": _interval(g.observed), "expected": _interval(g.expected),
                   "ratio": _interval(g.ratio), "survival": [num(x) for x in g.survival]} for g in v.groups]
        sites = [{"site": s.site, "n": num(s.patients), **{k: _interval(getattr(s, k)) for k in
                                                            ("auc", "harrell_c", "uno_c", "brier", "oe")}}
                 for s in v.sites]
        pooled = {k: {f: (getattr(p, f) if isinstance(getattr(p, f), str) else num(getattr(p, f)))
                      for f in p.__dataclass_fields__} for k, p in v.pooled.items()}
        return {"analysis": self.analysis, "time": self.time, "horizon": num(v.horizon), "tau": num(v.tau),
                "includes": v.includes, "mechanism": self.mechanism, "risk_sums": self.risk_sums,
                "time_edges": [num(e) for e in self.time_edges], "score_edges": [num(e) for e in self.score_edges],
                "count_sd": num(v.count_sd), "sums_sd": num(v.sums_sd),
                "counts": {"patients": num(v.patients), "events": num(v.events), "event_free": num(v.event_free),
                           "censored": num(v.censored)},
                "kaplan_meier": _curve(v.survival), "censoring": _curve(v.censoring),
                "auc": _interval(v.auc), "auc_curve": _curve(v.auc_curve),
                **{k: _interval(getattr(v, k)) for k in ("harrell_c", "uno_c", "brier", "integrated_brier",
                                                         "scaled_brier", "oe", "observed", "expected",
                                                         "calibration_intercept", "calibration_slope")},
                "calibration_method": v.calibration_method, "groups": groups,
                "risk_histogram": {"edges": [num(e) for e in v.score_edges], "events": [num(x) for x in v.risk_events],
                                   "event_free": [num(x) for x in v.risk_event_free],
                                   "censored": [num(x) for x in v.risk_censored]},
                "sites": sites, "pooled": pooled, "notes": list(v.notes),
                "releases": {name: r.to_dict() for name, r in self.releases.items()}}


def _heterogeneity(v: SurvivalValidation) -> Heterogeneity | None:
    if len(v.sites) < 2:
        return None
    rows = tuple(SiteEstimates(s.site, s.patients, s.auc.value, s.auc.lower, s.auc.upper, s.auc.se**2, s.oe.value,
                               s.oe.lower, s.oe.upper, s.oe.se**2) for s in v.sites)

    def pooled(key, label):
        p = v.pooled.get(key)
        return None if p is None else Pooled(label, p.scale, p.estimate, p.lower, p.upper, p.prediction_lower,
                                             p.prediction_upper, p.tau2, p.i2, p.q, p.sites, "REML, Hartung-Knapp")
    notes = [f"AUC({v.horizon:g}) and O/E({v.horizon:g}) per site; intervals from each site's own bootstrap"]
    notes += [f"pooled {p.statistic}: {p.estimate:.3f} [{p.lower:.3f}, {p.upper:.3f}], tau^2 {p.tau2:.3g}"
              for k, p in v.pooled.items() if k in ("harrell_c", "uno_c")]
    return Heterogeneity(rows, pooled("auc", f"AUC({v.horizon:g})"), pooled("oe", f"O/E({v.horizon:g})"), tuple(notes))


def _calibration(v: SurvivalValidation, risk_sums: bool) -> Calibration:
    g = v.groups
    arr = lambda f: np.array([f(x) for x in g], dtype=np.float64)  # noqa: E731
    return Calibration(
        lower=arr(lambda x: x.lower_score), upper=arr(lambda x: x.upper_score), count=arr(lambda x: x.patients),
        predicted=arr(lambda x: x.expected.value), observed=arr(lambda x: x.observed.value),
        observed_lower=arr(lambda x: x.observed.lower), observed_upper=arr(lambda x: x.observed.upper),
        status=tuple("merged" if x.score_bins[1] - x.score_bins[0] > 1 else "released" for x in g),
        predicted_from=("mean predicted risk by the horizon from the released noisy risk sums" if risk_sums else
                        "bin midpoints weighted by the bins' counts (the release has no risk sums)"),
        interval=f"normal, bootstrap SE; {INCLUDES}", oe=_estimate(v.oe), citl=_estimate(v.calibration_intercept),
        slope=_estimate(v.calibration_slope), recalibration_intercept=math.nan, risk_edges=v.score_edges,
        risk_negatives=v.risk_event_free, risk_positives=v.risk_events,
        notes=(f"observed: 1 - Kaplan-Meier at {v.horizon:g} of each risk group (censored patients kept); risk groups: "
               "score bins merged until each holds at least 20 patients and ten times its count's noise SD",
               f"O/E: observed over mean predicted risk at {v.horizon:g}; calibration-in-the-large and slope: "
               f"{v.calibration_method}",
               "risk histogram: events by the horizon (outcome 1) and patients followed beyond it (outcome 0); those "
               "censored before it are in neither bar"))


def survival_result(common: Mapping[str, Any], v: SurvivalValidation, sites: Mapping[str, SurvivalSite], budgets, *,
                    time_column: str, timing, risk_sums: bool, on_edge: bool) -> ValidationResult:
    """The :class:`analyst.ValidationResult` of a survival validation (pure post-processing of the releases)."""
    first = next(iter(sites.values()))
    privacy = {name: site_privacy_from_budget(
        budgets[name], epsilon=s.epsilon, delta=s.delta, noise_sd=s.noise_sd, sensitivity=1.0, sensitivity_rule="count",
        formal_bound=True, n=float(s.release.counts.sum()), repeated=s.repeated) for name, s in sites.items()}
    detail = SurvivalDetail(v, time_column, dict(sites), first.time_edges, first.score_edges, risk_sums)
    return survival_report(common, v, privacy, detail, timing=timing, on_edge=on_edge)


def survival_report(common: Mapping[str, Any], v: SurvivalValidation, privacy, detail: SurvivalDetail, *, timing,
                    on_edge: bool, warnings=()) -> ValidationResult:
    """The :class:`analyst.ValidationResult` of the summed estimates ``v``, with each site's ``privacy`` (whatever
    protocol released the sum) and the release's ``detail``; ``warnings`` are the protocol's own."""
    fpr, tpr = v.roc
    warnings = list(v.notes) + list(warnings)
    if not on_edge:
        warnings.append(f"the horizon {v.horizon:g} is not a time edge of the release: the patients of its time bin "
                        "count as followed beyond it (their binned time is the bin's right edge)")
    warnings += [f"{name} could not be estimated from the release" for name in ("AUC", "Brier score")
                 if not math.isfinite(getattr(v, name.split()[0].lower()).value)]
    h = v.horizon
    return ValidationResult(
        **common, n=v.patients, n0=v.event_free, n1=v.events, counts_exact=False, auc=v.auc.value,
        auc_ci=(v.auc.lower, v.auc.upper), auc_variance=v.auc.se**2,
        auc_estimator=f"cumulative/dynamic AUC({h:g}), IPCW", auc_ci_includes=INCLUDES, ci_method="normal",
        roc=RocCurve(fpr, tpr, f"IPCW ROC points at {h:g} at the score edges (cases: events by {h:g} weighted "
                               "1/G(T-); controls: patients followed beyond it)"),
        calibration=_calibration(v, detail.risk_sums), brier=_estimate(v.brier), privacy=privacy, pr=None,
        warnings=tuple(warnings), timing={} if timing is None else timing, heterogeneity=_heterogeneity(v),
        detail=detail, time=detail.time, horizon=h)
