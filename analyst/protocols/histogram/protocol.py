"""The histogram protocol at the analyst: one DP histogram release per site, everything else post-processing."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from dsroc.histogram.estimates import DEFAULT_ESTIMATOR
from dsroc.histogram.stages import first_stage_bins, laplace_count_sd, laplace_two_stage_plan
from dsroc.histogram.validation import histogram_validation

from analyst.protocols.base import (Protocol, ProtocolOptions, ValidationRequest, a0_test, check_a0,
                                    site_privacy_from_budget)
from analyst.protocols.histogram.detail import HistogramDetail
from analyst.protocols.histogram.planning import check_informative, planning_options, width_plan
from analyst.protocols.histogram.multicentre import PartitionedAnalyses, result_decision_curve, site_heterogeneity
from analyst.protocols.histogram.release import (HistogramSite, allowed_n_bins, check_grid_options,
                                                 check_threshold_policies, collect_histograms, quantile_bin_cap,
                                                 quantile_grid)
from analyst.result import ValidationResult
from analyst.result.parts import Calibration, Estimate, RocCurve
from analyst.result.pr import pr_from_counts

__all__ = ["HISTOGRAM_GUARANTEE", "HistogramDetail", "HistogramOptions", "HistogramProtocol", "histogram_result",
           "method_note", "summed_result"]

HISTOGRAM_GUARANTEE = (
    "histogram protocol: each site's releases for this validation (both stages of a quantile grid, a stratified or "
    "joint release) are together differentially private under add/remove-one-patient adjacency at the epsilon of the "
    "privacy line, what the site's ledger composes them to (discrete Laplace noise on per-class counts and score "
    "sums, each release pure epsilon-DP; the request's delta is checked by the sites' policies and only states that "
    "composition); every number below is post-processing of those releases"
)
SCALARS = ("sum_sq", "sum_p", "sum_y")
_NOISE = "sampling and the privacy noise"
_ESTIMATOR_NAMES = {"rocglm": "ROC-GLM", "shape": "shape", "monotone": "monotone (PCHIP)", "resolved": "resolved",
                    "empirical": "binned empirical", "none": "none"}


@dataclass(frozen=True)
class HistogramOptions(ProtocolOptions):
    """Options of the histogram protocol.

    Parameters
    ----------
    n_bins : int, optional
        Bins of the grid; default: with ``spacing="quantile"`` chosen from the first release's estimated class
        sizes and the second release's noise (:func:`dsroc.histogram.stages.second_stage_bins`, 5 to 12, one more
        step where a class's first release has two modes, within the sites' policies); otherwise the simulation
        study's count for the noise of one release (:func:`analyst.protocols.histogram.release.default_n_bins`),
        or the nearest count every site allows.
    spacing : {"quantile", "equal", "logit"}, default "quantile"
        Grid: ``"quantile"`` spends a fifth of each site's epsilon (with ``score_sums`` and no ``scalars``; in general
        :data:`dsroc.histogram.stages.LAPLACE_STAGE1_SHARE` over it and the second release's parts' shares) on a
        first release of both classes' scores on a fine grid and puts the bins at the quantiles of its class-balanced mixture for the second
        (both charged, composing to the request's epsilon;
        :func:`dsroc.histogram.stages.laplace_two_stage_plan`); ``"equal"`` or ``"logit"``: one release on a fixed grid
        over the score range.
    scalars : sequence of {"sum_sq", "sum_p", "sum_y"}
        Also release these noisy sums, for an unbinned Brier score and O/E (charged with the histograms).
    score_sums : bool, default True
        Also release each bin's noisy sum of scores per class, within the same epsilon (the counts' noise
        grows by 5 %): calibration, O/E, Brier and the slope then use within-bin mean scores instead of bin
        midpoints, and within-bin pairs of the AUC are resolved.
    estimator : {"rocglm", "shape", "monotone", "resolved", "empirical"}
        The reported AUC: ``"rocglm"`` (default) the ROC-GLM through the bin edges where it agrees with the
        nonparametric AUC, else the shape AUC (quantile grid: the classes inside each bin from the first release's
        shape of all scores; else the monotone (PCHIP) curve through the ROC points) where it agrees with the
        resolved AUC, else the resolved AUC (within-bin pairs ordered by the score sums; the binned one without
        sums); ``"shape"`` (quantile grid, with the sums), ``"monotone"`` (with the sums), ``"resolved"`` or
        ``"empirical"`` always that one. The result's first AUC note says
        which and why (:mod:`dsroc.histogram.estimates`).
    a0 : float, optional
        Also test ``H0: AUC <= a0``.
    by_site : bool, default False
        Also estimate each site's AUC and O/E from its own release (intervals with that site's noise) and
        pool them by a random-effects meta-analysis: tau^2, I^2 and a prediction interval for a new site
        (``result.heterogeneity``, a forest plot). No further release: each site's release is DP on its own.
    decision_curve : bool, default False
        Also give the net benefit at the grid's edges against treating all and none (``result.decision_curve``).
    strata : str, optional
        Also every statistic per stratum of this column and the differences between strata
        (``result.subgroups``): one more release per site at the validation's epsilon and delta, on its grid, split
        by the strata every site's policy lists for the column (``policy.strata``).
    compare : str or GLM, optional
        Also compare with a second model on the same patients (a score column, or a GLM as for ``model``): one more
        release per site at the validation's epsilon and delta, a joint 2-D histogram of both models' scores on the
        validation's grid, every second edge of it (:func:`dsroc.multicentre.joint_grid`: a quarter of the cells, so of
        the noise); each model's AUC, the paired difference and its test (``result.comparison``).
    skip_refusing_sites : bool, default False
        Go on without a site that refuses the first release because a class holds fewer than its privacy level's
        q patients (PERMISSION_DENIED; nothing is held or charged there, decided before any site is charged): every
        estimate is then of the other sites' patients, ``result.sites`` lists those, a warning names each site left
        out and why (``detail.left_out``). Off by default: leaving a hospital out changes the population validated.
    thresholds : sequence of float, optional
        Risks put on the quantile grid as edges exactly, beside its quantile edges (the grid up to the policies' largest
        bin count): net benefit, confusion table, calibration and the decision curve at them from one release. Each must
        be an edge of a grid every site allows (default policy: multiples of 0.005), else refused before any hold.
    max_auc_width, planned : float and (patients, events[, auc]), optional
        Refuse, before anything is held or charged, a request whose AUC interval at the requested epsilon would be
        wider than ``max_auc_width`` for the planned size (simulated validations through the default protocol, AUC
        0.75 unless given; :func:`analyst.width_plan.histogram_width_plan`), naming the epsilon that would do.
    """

    n_bins: int | None = None
    spacing: str = "quantile"
    scalars: tuple = ()
    score_sums: bool = True
    estimator: str = DEFAULT_ESTIMATOR
    a0: float | None = None
    by_site: bool = False
    decision_curve: bool = False
    strata: str | None = None
    compare: Any = None
    skip_refusing_sites: bool = False
    thresholds: tuple = ()
    max_auc_width: float | None = None
    planned: tuple | None = None

    def __post_init__(self):
        check_grid_options(self.n_bins, self.spacing, self.estimator)
        for name, value in planning_options(self.thresholds, self.spacing, self.max_auc_width, self.planned).items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "scalars", tuple(self.scalars))
        if not set(self.scalars) <= set(SCALARS):
            raise ValueError(f"scalars must be among {SCALARS}, got {self.scalars!r}")
        check_a0(self.a0)
        if self.strata is not None and (not isinstance(self.strata, str) or not self.strata):
            raise ValueError(f"strata must be a column name, got {self.strata!r}")
        if self.compare is not None and isinstance(self.compare, str) and not self.compare:
            raise ValueError("compare must be a score column name or a GLM, got ''")


def _slope(recal, level: float) -> Estimate | None:
    if recal is None or not recal.converged:
        return None
    lo, hi = recal.ci(level=level)["slope"]
    return Estimate(recal.slope, lo, hi, float(recal.cov[1, 1]), recal.includes)


def histogram_calibration(v, level: float, with_sums: bool = False) -> Calibration | None:
    """The merged-bin calibration curve and hierarchy of a histogram validation."""
    c = v.calibration
    if c is None:
        return None
    e = v.edges
    groups = np.asarray(c.groups)
    status = tuple("too few patients" if noisy else "merged" if b > a else "released"
                   for (a, b), noisy in zip(groups, c.too_noisy))
    return Calibration(
        lower=e[groups[:, 0]], upper=e[groups[:, 1] + 1], count=np.asarray(c.count, dtype=float),
        predicted=c.predicted, observed=c.observed, observed_lower=c.lower, observed_upper=c.upper, status=status,
        predicted_from=("within-bin mean score from the released noisy score sums" if with_sums else
                        "bin midpoints weighted by the bins' counts (the release has no score sums: the model's "
                        "mean prediction within a bin may differ)"),
        interval="Wald per merged bin and for the hierarchy; " + _NOISE,
        oe=Estimate.of(v.oe, _NOISE), slope=_slope(v.recalibration, level),
        citl=Estimate.of(v.citl, _NOISE + (" (of the counts and of the score sums in the mean predictions)"
                                           if with_sums else " (of the counts)")),
        recalibration_intercept=v.recalibration.intercept if v.recalibration is not None else math.nan,
        risk_edges=e, risk_negatives=np.asarray(v.counts0, dtype=float), risk_positives=np.asarray(v.counts1, dtype=float),
        notes=("bins are merged upwards until each holds enough patients that the noise is at most 10% of its count",))


class HistogramProtocol(Protocol):
    """Each site answers with epsilon-DP releases (discrete Laplace) of per-class noisy histograms of its scores;
    the analyst sums them and computes every estimate from the sum (:func:`dsroc.histogram_validation`)."""

    name = "histogram"
    guarantee = HISTOGRAM_GUARANTEE
    privacy_unit = "add or remove one patient"
    options_type = HistogramOptions

    def run(self, s, request: ValidationRequest, o: HistogramOptions, *, executor=None, timing=None) -> ValidationResult:
        with PartitionedAnalyses(s, request, o) as partitions:  # the second model's sessions open before any release
            return self._run(s, request, o, partitions, timing)

    def _run(self, s, request: ValidationRequest, o: HistogramOptions, partitions, timing) -> ValidationResult:
        timing = {} if timing is None else timing
        clock = time.perf_counter()
        s.leave_out_small = o.skip_refusing_sites
        if o.max_auc_width is not None:  # before any hold: an uninformative answer is refused uncharged
            check_informative(width_plan(s, request, o))
        n_bins, allowed, grid_releases = o.n_bins, [p.histogram_bins for p in s.policies.values()], {}
        grid_edges = None
        if o.spacing == "quantile":
            stages = laplace_two_stage_plan(request.epsilon, request.delta, score_sums=o.score_sums,
                                            scalars=len(o.scalars))
            if n_bins is None:  # chosen from the first release, within what the policies allow
                most = quantile_bin_cap(partitions, allowed)
            else:
                partitions.check(n_bins)
                most = n_bins
            grid_most = quantile_bin_cap(partitions, allowed, top=max(map(max, allowed))) if o.thresholds else most
            check_threshold_policies(s, o.thresholds, grid_most)
            second, held = dict(epsilon=stages.epsilon2, delta=stages.delta2, n_bins=n_bins, scalars=o.scalars,
                                score_sums=o.score_sums), {}
            try:  # the first stage holds the second's budget too: no site charges one and refuses the other
                # its hold is planned on a grid every site allows (the fine one): its noise does not depend on the grid
                following = {**second, "n_bins": first_stage_bins(allowed), "edges": o.thresholds}
                interior, grid_releases, grid_edges = quantile_grid(s, stages, n_bins, allowed, most=most,
                                                                    following=following, held=held,
                                                                    thresholds=o.thresholds, grid_most=grid_most)
                edges, releases = collect_histograms(s, spacing="", interior=interior, follow_ups=held, **second)
            except BaseException:
                s.cancel(held)  # the second stage's holds not taken over
                raise
        else:
            if n_bins is None:
                n_bins = allowed_n_bins(allowed, epsilon=request.epsilon, delta=request.delta,
                                        noise_sd=laplace_count_sd(request.epsilon, score_sums=o.score_sums,
                                                                  scalars=len(o.scalars)))
            partitions.check(n_bins)
            edges, releases = collect_histograms(s, epsilon=request.epsilon, delta=request.delta, n_bins=n_bins,
                                                 spacing=o.spacing, scalars=o.scalars, score_sums=o.score_sums)
        extra = partitions.collect(edges)  # strata, compare: one more release each on the same grid
        budgets = s.budget(delta=request.delta)
        timing["release"] = time.perf_counter() - clock
        clock, cpu = time.perf_counter(), time.thread_time()
        result = histogram_result(request.common(s, self), edges, releases, budgets, o, timing=timing,
                                  grid_releases=grid_releases, grid_edges=grid_edges, extra=extra, left_out=s.left_out)
        timing["analysis"], timing["analysis_cpu"] = time.perf_counter() - clock, time.thread_time() - cpu  # wall, CPU
        return result


def _charged(unavailable) -> tuple[str, ...]:
    if not unavailable:
        return ()
    return (f"the releases were charged to the sites' ledgers although {', '.join(unavailable)} could not be "
            "estimated from them",)


def histogram_result(common: Mapping[str, Any], edges, releases: Mapping[str, HistogramSite], budgets,
                     options: HistogramOptions, *, timing=None, grid_releases=None, grid_edges=None,
                     extra=None, left_out=None) -> ValidationResult:
    """The :class:`analyst.ValidationResult` of the sites' histogram releases (pure post-processing).

    ``common``: the request's fields (:meth:`ValidationRequest.common`); ``budgets``: each site's
    ``BudgetStatus`` after its release; ``grid_releases`` and ``grid_edges``: the quantile grid's first-stage
    releases and fine grid, whose summed counts of all scores shape the resolved AUC within each bin; ``extra``:
    further result fields (subgroups, comparison).

    Each site reports its noise SD; the summed cells' noise SD is their root sum of squares. The intervals and the
    parametric bootstraps of :func:`dsroc.histogram_validation` treat the summed noise as normal of that SD: a sum of
    independent discrete Laplace variables over the sites (and the merged bins) has the right variance and is close
    to normal (its excess kurtosis is about 3 / (number of summed cells), e.g. 0.6 over 5 sites).
    """
    o, level = options, common["level"]
    h0 = np.sum([r.negatives for r in releases.values()], axis=0)
    h1 = np.sum([r.positives for r in releases.values()], axis=0)
    sigma = math.sqrt(sum(r.noise_sd**2 for r in releases.values()))
    sums = {name: sum(r.scalars[name] for r in releases.values()) for name in o.scalars}
    with_sums = all(r.negative_sums is not None for r in releases.values())
    per_bin = {} if not with_sums else {
        "sums0": np.sum([r.negative_sums for r in releases.values()], axis=0),
        "sums1": np.sum([r.positive_sums for r in releases.values()], axis=0),
        "sums_sigma": math.sqrt(sum(r.sums_sd**2 for r in releases.values()))}
    if grid_releases and grid_edges is not None and with_sums:  # the first stage: both classes of every site, summed
        per_bin.update(grid_edges=grid_edges,
                       grid_counts=np.sum([r.negatives + r.positives for r in grid_releases.values()], axis=0),
                       grid_sigma=math.sqrt(2.0 * sum(r.noise_sd**2 for r in grid_releases.values())))
    v = histogram_validation(h0, h1, edges, sigma=sigma, estimator=o.estimator, level=level,
                             sum_sq=sums.get("sum_sq"), sum_p=sums.get("sum_p"), sum_y=sums.get("sum_y"),
                             scalar_sigma=math.sqrt(sum(r.scalar_sd**2 for r in releases.values())) if o.scalars else None,
                             **per_bin)
    privacy = {name: site_privacy_from_budget(
        budgets[name], epsilon=r.epsilon, delta=r.delta, noise_sd=r.noise_sd, sensitivity=1.0,
        sensitivity_rule="count", formal_bound=True, n=float(r.negatives.sum() + r.positives.sum()),
        repeated=r.repeated) for name, r in releases.items()}
    left_out = dict(left_out or {})
    return summed_result(
        common, v, privacy, a0=o.a0, with_sums=with_sums, timing=timing,
        warnings=[f"site {name} left out (skip_refusing_sites; nothing held or charged there): {why}; every estimate "
                  f"is of the patients of {', '.join(releases)} only" for name, why in left_out.items()],
        detail=HistogramDetail(v, releases, sigma, int(edges.size - 1), o.spacing, dict(grid_releases or {}),
                               grid_edges, left_out),
        heterogeneity=(site_heterogeneity(releases, edges, level=level, estimator=o.estimator)
                       if o.by_site and len(releases) >= 2 else None),
        decision_curve=(result_decision_curve(v.counts0, v.counts1, edges, sigma=sigma, level=level,
                                              thresholds=o.thresholds or None)
                        if o.decision_curve or o.thresholds else None), **(extra or {}))


def summed_result(common: Mapping[str, Any], v, privacy, *, a0, with_sums: bool, timing, detail,
                  warnings=(), notes=(), **extra) -> ValidationResult:
    """The :class:`analyst.ValidationResult` of a validation from summed noisy histograms ``v``
    (:class:`dsroc.histogram.validation.HistogramValidation`): the histogram and secagg protocols' report.
    ``extra``: further result fields (the histogram protocol's per-site heterogeneity, decision curve); ``warnings``
    and ``notes``: the protocol's own, before those of ``v`` (:func:`method_note` sorts them)."""
    level = common["level"]
    fitted = tuple(float(g) for g in v.rocglm_params) if v.estimator == "rocglm" else None
    brier = (Estimate.of(v.brier_scalar, _NOISE + "; unbinned (scalar release)") if v.brier_scalar is not None
             else Estimate.of(v.brier, _NOISE + ("; binned, at the within-bin mean scores" if with_sums
                                                  else "; binned: each patient at the bin midpoint")))
    return ValidationResult(
        **common, n=v.n0 + v.n1, n0=v.n0, n1=v.n1, counts_exact=False,
        auc=v.auc, auc_ci=tuple(v.auc_ci), auc_variance=v.auc_variance,
        auc_estimator=_ESTIMATOR_NAMES.get(v.estimator, v.estimator), ci_method="logit",
        auc_ci_includes=_NOISE + (f", widened by +-{v.auc_widening:.4f} for what the binning or the model can hide"
                                  if v.auc_widening > 0 else ""),
        roc=RocCurve(v.fpr, v.tpr, "binned ROC points at the grid's edges (consistent noisy counts)", fitted,
                     RocCurve.band_for(fitted, v.auc_ci)),
        calibration=histogram_calibration(v, level, with_sums), brier=brier, privacy=privacy,
        pr=pr_from_counts(v.counts0, v.counts1, v.edges, level=level),
        test=a0_test(a0, level, v.auc_ci),
        warnings=tuple(warnings) + tuple(n for n in v.notes if not method_note(n)) + _charged(v.unavailable),
        notes=tuple(notes) + tuple(n for n in v.notes if method_note(n)),
        timing={} if timing is None else timing, detail=detail, **extra)


def method_note(note: str) -> bool:
    """Whether a note of :func:`dsroc.histogram_validation` says how an estimate was made (which AUC estimator and
    why; how the calibration slope's interval was formed) rather than something that needs the reader's attention
    (an estimate missing, patients left out of a fit, an undefined interval): the result's notes, not warnings."""
    return note.startswith("AUC: ") or (note.startswith("calibration intercept and slope: ")
                                        and "leaves out" not in note)
