"""The paper's protocol at the analyst: noisy scores, then the distributed ROC-GLM and exact q-protected answers."""

from __future__ import annotations

import math
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dsroc
from dsroc.roc.rocglm_fit import DEFAULT_START
from dsroc.v1 import site_pb2 as pb

from analyst.hierarchy import calibration_summary, improper_warning
from analyst.protocols.base import Protocol, ProtocolOptions, ValidationRequest, a0_test, check_a0
from analyst.protocols.paper.steps import PaperSession
from analyst.protocols.paper.wire import PaperAnswers
from analyst.recommend import paper_setting_refusal, recommendation_warning
from analyst.result import ValidationResult
from analyst.result.parts import Calibration, Estimate, RocCurve, num
from analyst.result.pr import pr_from_released_scores
from analyst.result.summary import fmt
from analyst.session import check_privacy_request, concurrently

__all__ = ["PAPER_GUARANTEE", "PaperDetail", "PaperOptions", "PaperProtocol", "rocglm_to_dict"]

PAPER_GUARANTEE = (
    "paper protocol: only the noisy score releases are (epsilon, delta)-DP (at the sites' sensitivity rule); the "
    "ROC-GLM parts, placement moments, Brier sums, calibration and confusion counts are exact answers guarded by "
    "the privacy level q and query caps: q-protected, not differentially private"
)
#: at most this many points of the released scores' empirical ROC curve are kept (evenly spaced vertices)
ROC_POINTS = 1000


@dataclass(frozen=True)
class PaperOptions(ProtocolOptions):
    """Options of the paper protocol.

    Parameters
    ----------
    grid : None, int or array_like
        ROC-GLM threshold grid (default: 28 points, as in the paper).
    n_bins, edges
        Calibration bins: ``n_bins`` equal bins on [0, 1] (default 10) or explicit ``edges``.
    threshold : float, optional
        Also compute the confusion matrix at this threshold (on the sites' lattice).
    a0 : float, optional
        Also test ``H0: AUC <= a0`` (rejected when the whole CI lies above ``a0``).
    sensitivity : float, optional
        Ask the sites for a larger Delta than their rules give (never smaller).
    ci_method : {"logit", "wald"}
        The AUC's CI on the logit scale (default) or the AUC scale (pROC's).
    outside_study : bool
        Run even where the sites' noise is larger than the simulation study vouches for
        (:func:`analyst.recommend.paper_setting_refusal`; by default such a request is refused before anything is
        released, with the settings that work): the AUC may then be biased beyond its interval, and a warning says so.
    """

    grid: Any = None
    n_bins: int = 10
    edges: Any = None
    threshold: float | None = None
    a0: float | None = None
    sensitivity: float | None = None
    ci_method: str = "logit"
    outside_study: bool = False

    def __post_init__(self):
        if self.ci_method not in ("logit", "wald"):
            raise ValueError(f"ci_method must be 'logit' or 'wald', got {self.ci_method!r}")
        check_a0(self.a0)
        dsroc.rocglm_grid(self.grid)
        dsroc.calibration_edges(self.n_bins, edges=self.edges)


def rocglm_to_dict(fit) -> dict[str, Any]:
    """JSON-ready view of a :class:`dsroc.RocGlmResult`: params, iterations, converged, trace, cov."""
    return {"params": [num(v) for v in np.asarray(fit.params)], "auc": num(fit.auc), "iterations": int(fit.iterations),
            "converged": bool(fit.converged), "deviance_trace": [num(d) for d in fit.deviance_trace],
            "cov": None if fit.cov is None else [[num(v) for v in row] for row in np.asarray(fit.cov)],
            "warnings": list(fit.warnings)}


@dataclass(frozen=True)
class PaperDetail:
    """What only the paper protocol has.

    Attributes
    ----------
    rocglm : dsroc.RocGlmResult
        The distributed ROC-GLM fit (params, iterations, converged, deviance trace, cov, warnings).
    grid : ndarray
        Its threshold grid.
    auc_corrected : dsroc.NoiseCorrectedAUC
        The noise-corrected AUC (the release noise deconvolved from the released scores) with a CI whose
        variance includes the noise and that allows for the deconvolution's bias; the reported AUC is the
        paper's, biased towards 0.5 by the noise.
    calibration_curve : dsroc.CalibrationCurve
        The aggregated released cells, per-site curves and the withheld (site, bin) cells.
    calibration_hierarchy : dsroc.CalibrationHierarchy or None
    """

    rocglm: Any
    grid: np.ndarray
    auc_corrected: Any
    calibration_curve: Any
    calibration_hierarchy: Any = None
    withheld: tuple = field(default_factory=tuple)

    def summary_lines(self, result, pct: int) -> list[str]:
        """Lines after the headline AUC: the noise-corrected AUC and the ROC-GLM fit."""
        c, fit = self.auc_corrected, self.rocglm
        lines = []
        if c is not None:
            ci = (f"{pct}% CI [{fmt(c.ci.lower)}, {fmt(c.ci.upper)}]" if c.ci.defined
                  else "CI undefined (corrected AUC outside (0, 1))")
            lines.append(f"{'AUC (noise-corrected)':<22} {fmt(c.auc)}   {ci} (SE {fmt(math.sqrt(c.variance))}; "
                         "includes sampling and the release noise; allows a bias of "
                         f"{fmt(c.bias_bound)})")
        lines.append(f"{'ROC-GLM':<22} gamma1 = {fmt(fit.params[0])}, gamma2 = {fmt(fit.params[1])}, "
                     f"{fit.iterations} iterations, {'converged' if fit.converged else 'NOT converged'}")
        return lines + [f"  warning: {w}" for w in fit.warnings]

    def brief_lines(self, result, pct: int) -> list[str]:
        """The one-screen summary's rows after the AUC: the noise-corrected AUC, and the fit's warnings."""
        from analyst.result.brief import estimate_row

        c = self.auc_corrected
        lines = [] if c is None else [estimate_row(
            "AUC (noise-corrected)", c.auc, c.ci.lower if c.ci.defined else math.nan,
            c.ci.upper if c.ci.defined else math.nan, pct, "its CI includes the release noise, the one above not")]
        return lines + [f"  warning: {w}" for w in self.rocglm.warnings]

    def detail_lines(self, result) -> list[str]:
        """The protocol's own lines at the end of the summary."""
        return [f"Paper protocol: ROC-GLM on a grid of {np.asarray(self.grid).size} thresholds; "
                f"{len(self.withheld)} (site, bin) calibration cells withheld by the sites"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        c = self.auc_corrected
        return {"rocglm": rocglm_to_dict(self.rocglm), "grid": [num(t) for t in np.asarray(self.grid)],
                "auc_corrected": None if c is None else {
                    "value": num(c.auc), "variance": num(c.variance), "lower": num(c.ci.lower), "upper": num(c.ci.upper),
                    "noise_variance": num(c.noise_variance), "auc_tau": num(c.auc_tau),
                    "correction": num(c.correction), "bias_bound": num(c.bias_bound)},
                "withheld": [{"site": s, "bin": int(b)} for s, b in self.withheld]}


def paper_calibration(curve, hierarchy) -> Calibration:
    """The released calibration cells and their hierarchy as a :class:`analyst.result.parts.Calibration`."""
    m = curve.count.size
    withheld: dict[int, list[str]] = {}
    for site, b in curve.suppressed:
        withheld.setdefault(int(b), []).append(site)
    status = tuple("withheld by every site" if curve.count[b] == 0 else
                   "withheld by some sites" if b in withheld else "released" for b in range(m))
    per_site = {}
    for name, c in curve.per_site.items():
        arrays = [np.full(m, np.nan) for _ in range(3)]
        for a, values in zip(arrays, (c.predicted, c.observed, c.count)):
            a[c.bins] = values
        per_site[name] = tuple(arrays)
    nan = np.full(m, np.nan)
    events = np.round(np.nan_to_num(curve.observed) * curve.count)
    h = hierarchy
    sampling = "sampling (the released cells are exact)"
    notes = [] if not curve.suppressed else [
        "withheld (fewer than q patients at a site, or a cell that could be differenced): "
        + "; ".join(f"bin {b + 1} by {', '.join(sites)}" for b, sites in sorted(withheld.items()))]
    return Calibration(
        lower=curve.lower, upper=curve.upper, count=np.where(curve.count > 0, curve.count, np.nan).astype(float),
        predicted=curve.predicted, observed=curve.observed,
        observed_lower=nan if h is None else h.curve_lower, observed_upper=nan if h is None else h.curve_upper,
        status=status, predicted_from="within-bin mean of the released (exact) score sums",
        interval="Wilson per bin, and Wald/log-scale for the hierarchy; " + sampling,
        oe=Estimate.of(None if h is None else h.oe, sampling), citl=Estimate.of(None if h is None else h.intercept, sampling),
        slope=Estimate.of(None if h is None else h.slope, sampling),
        recalibration_intercept=math.nan if h is None else h.recalibration.intercept, per_site=per_site,
        risk_edges=curve.edges, risk_negatives=np.where(curve.count > 0, curve.count - events, np.nan),
        risk_positives=np.where(curve.count > 0, events, np.nan), notes=tuple(notes))


def _released_roc(points) -> tuple[np.ndarray, np.ndarray]:
    """ROC points of the pooled released scores, at most ``ROC_POINTS`` evenly spaced vertices."""
    fpr, tpr = points.fp / points.n0, points.tp / points.n1
    keep = np.unique(np.linspace(0, fpr.size - 1, min(fpr.size, ROC_POINTS)).round().astype(int))
    return np.append(fpr[keep], 1.0), np.append(tpr[keep], 1.0)


class PaperProtocol(Protocol):
    """Schalk et al. (2024): the sites release noisy scores, the analyst pools and uploads them, fits the
    ROC-GLM by distributed Fisher scoring and asks for placement moments, Brier sums and calibration cells."""

    name = "paper"
    guarantee = PAPER_GUARANTEE
    privacy_unit = "one patient's score in the noisy releases (the sites' sensitivity rule); other answers: q"
    options_type = PaperOptions
    with_sensitivity = True
    session_type = PaperSession

    def check(self, request: ValidationRequest, options: PaperOptions) -> None:
        check_privacy_request(epsilon=request.epsilon, delta=request.delta, sensitivity=options.sensitivity)

    @staticmethod
    def _outside_study(s, request: ValidationRequest, o: PaperOptions, sens) -> str | None:
        """Refuse, before any release (the holds made with the sessions return when they close), a setting whose
        noise the simulation study does not vouch for (:func:`analyst.recommend.paper_setting_refusal`), with the
        settings that work; with ``outside_study`` the reason, as a warning."""
        deltas = {name: (o.sensitivity, "asked for by the analyst") if (o.sensitivity or 0.0) > r.sensitivity
                  else (r.sensitivity, f"rule '{r.rule}'") for name, r in sens.items()}
        policies = list(s.policies.values())
        why = paper_setting_refusal(request.epsilon, request.delta, deltas,
                                    max_epsilon=min(p.max_epsilon for p in policies),
                                    max_delta=min(p.max_delta for p in policies))
        if why is None:
            return None
        if not o.outside_study:
            raise ValueError(f"refused: {why}; nothing was released or charged at any site")
        return f"outside the simulation study (outside_study): {why.split('. To run it anyway')[0]}"

    def hold_request(self, request: ValidationRequest, options: PaperOptions) -> pb.PrepareRequest:
        """The noisy release, held with the sessions (one round trip fewer); :meth:`PaperSession.release` uses it."""
        return pb.PrepareRequest(scores=pb.ReleaseRequest(epsilon=request.epsilon, delta=request.delta,
                                                          sensitivity=float(options.sensitivity or 0.0)))

    def run(self, s, request: ValidationRequest, o: PaperOptions, *, executor=None, timing=None) -> ValidationResult:
        timing = {} if timing is None else timing
        level = request.level
        clock = time.perf_counter()
        sens = s.sensitivity()
        outside = self._outside_study(s, request, o, sens)
        releases = s.release(epsilon=request.epsilon, delta=request.delta, sensitivity=o.sensitivity)
        timing["release"] = time.perf_counter() - clock
        s0_noisy, s1_noisy = s.pool(releases)
        # Post-processing of the release, on the analyst's own CPU while the sites work: one step after the
        # other (each holds several arrays of the pooled size), the noise correction first (the other
        # answers wait for it); only the curves' kept points outlive the step.
        summary_done: Future = Future()

        def post_processing():
            try:
                summary_done.set_result(s.release_summary(releases, pooled=(s0_noisy, s1_noisy)))
            except BaseException as exc:  # noqa: BLE001 - raised where the summary is used
                summary_done.set_exception(exc)
            points = dsroc.pr_points_by_class(s0_noisy, s1_noisy)
            return _released_roc(points), pr_from_released_scores(s0_noisy, s1_noisy, level=level, points=points)

        curves_done: Future = executor.submit(post_processing)
        clock = time.perf_counter()
        # The answers on the survivor functions and the fit's first evaluation come back with the upload.
        answers = s.upload_survivors(releases, answers=s.answers_request(
            n_bins=o.n_bins, edges=o.edges, threshold=o.threshold, theta=DEFAULT_START, grid=o.grid,
            delta=request.delta))
        timing["upload"] = time.perf_counter() - clock

        def timed(step, fn):
            def run():
                t = time.perf_counter()
                out = fn()
                timing[step] = time.perf_counter() - t
                return out
            return run

        def answers_step():
            if answers is not None:
                got = answers
            else:  # a site from before UploadSurvivors: asked apart
                # The confusion matrix first: a site's disclosure auditor refuses a threshold that would tell
                # something with answers given before, while calibration only withholds more bins.
                confusion = None if o.threshold is None else s.confusion(o.threshold)
                got = PaperAnswers(*s.aggregates(n_bins=o.n_bins, edges=o.edges, delta=request.delta), confusion)
            corrected = s.noise_corrected_auc(releases, got.moments, summary=summary_done.result(), level=level,
                                              method=o.ci_method)
            return got, corrected

        # Independent steps at the same time: the fit's round trips beside the answers (or their round).
        fit, (got, corrected) = concurrently(timed("rocglm", lambda: s.fit_rocglm(grid=o.grid)),
                                             timed("answers", answers_step))
        moments, (brier, n), curve, confusion, budgets = got.moments, got.brier, got.calibration, got.confusion, got.budgets
        ci = dsroc.auc_ci(fit.auc, moments.variance, level=level, method=o.ci_method)
        roc_points, pr = curves_done.result()
        privacy = s.privacy(releases, sens, budgets=budgets)  # the ledgers composed this validation's release
        advice = recommendation_warning(request.epsilon, request.delta, [p.sensitivity for p in privacy.values()],
                                        tau=max(p.noise_sd for p in privacy.values()))
        hierarchy = calibration_summary(curve, level=level)
        detail = PaperDetail(fit, dsroc.rocglm_grid(o.grid), corrected, curve, hierarchy,
                             tuple((site, int(b)) for site, b in curve.suppressed))
        return ValidationResult(
            **request.common(s, self), n=n, n0=moments.n0, n1=moments.n1, counts_exact=True,
            auc=fit.auc, auc_ci=ci, auc_variance=moments.variance, auc_estimator="ROC-GLM",
            auc_ci_includes="sampling (distributed DeLong); not the release noise, see the noise-corrected AUC",
            ci_method=o.ci_method,
            roc=RocCurve(*roc_points, "empirical ROC of the released noisy scores "
                         "(blurred towards chance by the noise)", tuple(float(v) for v in fit.params),
                         RocCurve.band_for(fit.params, ci)),
            calibration=paper_calibration(curve, hierarchy),
            brier=Estimate(brier, includes="exact sums over every patient, no noise"), privacy=privacy,
            pr=pr, confusion=confusion, test=a0_test(o.a0, level, ci),
            warnings=tuple(w for w in (outside, advice, improper_warning(fit.params)) if w is not None),
            timing=timing, detail=detail)
