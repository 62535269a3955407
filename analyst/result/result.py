"""One result type for every protocol: the numbers, a readable summary, JSON, tables, HTML and one figure."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from analyst.result.parts import Calibration, ConfusionResult, Estimate, RocCurve, SitePrivacy, TestResult, num


__all__ = ["SCHEMA_ID", "SCHEMA_VERSION", "ValidationResult", "schema_path"]

#: Version of the JSON report (``to_dict``); raised when a key changes meaning or disappears. Version 2: survival
#: validations (``analysis``, ``time`` and ``horizon``; for them ``n`` splits into events by the horizon and patients
#: followed beyond it, and ``auc`` is AUC(horizon)); a version 1 report is a binary one and still valid.
SCHEMA_VERSION = 2
SCHEMA_ID = "https://dsroc.example/schema/validation-result/v1.json"


def schema_path() -> Path:
    """Path of the JSON Schema of :meth:`ValidationResult.to_dict` (shipped with the package)."""
    return Path(__file__).with_name("validation_result.schema.json")


@dataclass(frozen=True)
class ValidationResult:
    """Everything a distributed validation produced, the same for every protocol.

    Attributes
    ----------
    protocol : str
        The protocol that produced the result (``"histogram"``, ``"paper"``).
    guarantee : str
        What the protocol's privacy guarantee covers, in one sentence.
    privacy_unit : str
        What the guarantee protects (e.g. "add or remove one patient").
    dataset, outcome : str
        As the sites declare them.
    score_source : str
        The score column or the GLM the sites evaluated (``score_description`` says it in words).
    sites : tuple of str
    epsilon, delta : float
        The privacy request (``guarantee_epsilon``: what the sites' accountants compose this validation's releases
        to, at ``delta``).
    level : float
        Confidence level of every interval.
    n, n0, n1 : float
        Patients, negatives and positives; ``counts_exact`` False when estimated from noisy counts.
    auc : float
        The reported AUC; ``auc_estimator`` names it (e.g. ``"ROC-GLM"``).
    auc_ci : (float, float)
        Its confidence interval (``ci_method`` scale); ``auc_ci_includes`` says which uncertainty it covers.
    auc_variance : float
        The variance behind the CI.
    roc : RocCurve
        Empirical or binned points, the fitted curve and a band as wide as the AUC's CI.
    calibration : Calibration or None
        Curve per bin with intervals, and the hierarchy (O/E, calibration-in-the-large, slope, ICI, Emax).
    brier : Estimate or None
        Brier score (``includes`` says what its interval covers; exact answers have no interval).
    privacy : dict of str to SitePrivacy
        Per site: guarantee, noise, what was charged and what is left.
    pr : analyst.result.pr.PRSummary or None
        PR curve, AP and AUCPR with intervals.
    confusion : ConfusionResult or None
    test : TestResult or None
        Test of ``H0: AUC <= a0``.
    warnings : tuple of str
        What needs the reader's attention (settings outside the study's recommendations, improper curves,
        quantities that could not be estimated); empty when the analysis went as planned.
    notes : tuple of str
        How the estimates were made (which AUC estimator and why, how the calibration slope's interval was
        formed, what survival's grouped times imply): in ``summary(verbose=True)`` and the JSON, not warnings.
    timing : dict of str to float
        Seconds per step (``analysis_cpu``: CPU seconds of the post-processing, where the protocol measures it).
    heterogeneity : analyst.protocols.histogram.multicentre.Heterogeneity or None
        Each site's AUC and O/E from its own release and their random-effects pooling (``by_site``).
    decision_curve : dsroc.multicentre.DecisionCurve or None
        Net benefit at the released grid's edges, with treat-all (``decision_curve``).
    subgroups : analyst.protocols.histogram.subgroups.Subgroups or None
        Every stratum's AUC, O/E and Brier score and the differences between strata, from one stratified
        release per site (``strata``).
    comparison : analyst.protocols.histogram.compare.Comparison or None
        The validated model against a second one on the same patients: each AUC, the paired difference and its
        test, from one joint release per site (``compare``).
    time, horizon : str and float, or None
        A survival validation's time column and horizon (``outcome`` is then the event column, ``n1`` the events
        by the horizon, ``n0`` the patients followed beyond it, ``auc`` the AUC at the horizon, ``brier`` and
        ``calibration`` at it; ``detail`` a :class:`analyst.protocols.histogram.survival_result.SurvivalDetail`).
    detail : object
        What only this protocol has: :class:`analyst.protocols.paper.PaperDetail` (ROC-GLM fit, grid,
        noise-corrected AUC) or :class:`analyst.protocols.histogram.HistogramDetail` (grid, releases,
        binned AUC).
    """

    protocol: str
    guarantee: str
    privacy_unit: str
    dataset: str
    outcome: str
    score_source: str
    sites: tuple[str, ...]
    epsilon: float
    delta: float
    level: float
    n: float
    n0: float
    n1: float
    counts_exact: bool
    auc: float
    auc_ci: tuple[float, float]
    auc_variance: float
    auc_estimator: str
    auc_ci_includes: str
    ci_method: str
    roc: RocCurve
    calibration: Calibration | None
    brier: Estimate | None
    privacy: Mapping[str, SitePrivacy]
    pr: Any = None
    confusion: ConfusionResult | None = None
    test: TestResult | None = None
    warnings: tuple[str, ...] = ()
    timing: Mapping[str, float] = field(default_factory=dict)
    detail: Any = None
    heterogeneity: Any = None
    decision_curve: Any = None
    subgroups: Any = None
    comparison: Any = None
    time: str | None = None
    horizon: float | None = None
    notes: tuple[str, ...] = ()

    __test__ = False

    @property
    def guarantee_epsilon(self) -> float:
        """This validation's epsilon at ``delta`` per patient: every release each site made (or replayed) for it, all
        stages, strata and a second model included, composed by that site's ledger's accountant
        (:attr:`SitePrivacy.epsilon`), and the largest over the sites (a patient's data is at one site, and each
        site's releases are of its own patients only)."""
        return max((float(p.epsilon) for p in self.privacy.values()), default=float("nan"))

    @property
    def analysis(self) -> str:
        """``"survival"`` (a time column and a horizon) or ``"binary"``."""
        return "binary" if self.time is None else "survival"

    @property
    def score_description(self) -> str:
        """The score source in words (a GLM as its link and size, a column by its name)."""
        from analyst.result.summary import describe_source

        return describe_source(self.score_source)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dictionary, valid against :func:`schema_path` (version ``SCHEMA_VERSION``)."""
        return {
            "schema": SCHEMA_ID, "schema_version": SCHEMA_VERSION, "analysis": self.analysis, "time": self.time,
            "horizon": num(self.horizon),
            "protocol": self.protocol, "guarantee": self.guarantee, "privacy_unit": self.privacy_unit,
            "dataset": self.dataset, "outcome": self.outcome, "score_source": self.score_source,
            "score_description": self.score_description, "sites": list(self.sites),
            "epsilon": num(self.epsilon), "delta": num(self.delta), "level": num(self.level),
            "guarantee_epsilon": num(self.guarantee_epsilon),
            "n": {"total": num(self.n), "negatives": num(self.n0), "positives": num(self.n1),
                  "exact": bool(self.counts_exact)},
            "auc": {"value": num(self.auc), "lower": num(self.auc_ci[0]), "upper": num(self.auc_ci[1]),
                    "variance": num(self.auc_variance), "estimator": self.auc_estimator,
                    "ci_method": self.ci_method, "includes": self.auc_ci_includes},
            "roc": self.roc.to_dict(),
            "calibration": None if self.calibration is None else self.calibration.to_dict(),
            "brier": None if self.brier is None else self.brier.to_dict(),
            "pr": None if self.pr is None else self.pr.to_dict(),
            "confusion": None if self.confusion is None else self.confusion.to_dict(),
            "test": None if self.test is None else self.test.to_dict(),
            "privacy": {s: p.to_dict() for s, p in self.privacy.items()},
            "warnings": list(self.warnings), "notes": list(self.notes),
            "timing": {k: num(v) for k, v in self.timing.items()},
            "heterogeneity": None if self.heterogeneity is None else self.heterogeneity.to_dict(),
            "decision_curve": None if self.decision_curve is None else _decision_curve_dict(self.decision_curve),
            "subgroups": None if self.subgroups is None else self.subgroups.to_dict(),
            "comparison": None if self.comparison is None else self.comparison.to_dict(),
            "detail": {"protocol": self.protocol, **({} if self.detail is None else self.detail.to_dict())},
        }

    def to_json(self, path: str | Path | None = None, *, extra: Mapping[str, Any] | None = None) -> str:
        """Serialise :meth:`to_dict` (plus optional ``extra`` top-level keys) and write it to ``path``.

        Returns the JSON text.
        """
        payload = self.to_dict()
        if extra:
            payload.update(extra)
        text = json.dumps(payload, indent=2, allow_nan=False)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text

    def to_frame(self, kind: str = "roc", *, points: int = 101):
        """A pandas DataFrame: ``"roc"`` (the curve whose AUC is quoted and its band at ``points``
        false-positive fractions), ``"roc_points"`` (the empirical or binned points), ``"calibration"``
        (per bin, with intervals and status), ``"sites"`` (privacy and budget per site), ``"decision_curve"``,
        ``"subgroups"``, ``"comparison"``, and for a survival validation ``"auc_time"`` and ``"kaplan_meier"``; see
        :func:`analyst.result.frames.result_frame`."""
        from analyst.result.frames import result_frame

        return result_frame(self, kind, points=points)

    def plot_forest(self, *, figure=None):
        """Forest plot of the per-site AUCs, the pooled AUC and the prediction interval (needs ``by_site``)."""
        from analyst.display.multicentre import forest_figure

        return forest_figure(self, figure=figure)

    def plot_decision_curve(self, *, figure=None):
        """The decision curve: net benefit of the model, treat all and treat none (needs ``decision_curve``)."""
        from analyst.display.multicentre import decision_curve_figure

        return decision_curve_figure(self, figure=figure)

    def plot_subgroups(self, *, figure=None):
        """AUC and O/E per stratum with their intervals (needs ``strata``)."""
        from analyst.display.multicentre import subgroups_figure

        return subgroups_figure(self, figure=figure)

    def plot_comparison(self, *, figure=None):
        """Each model's AUC and the paired difference with their intervals (needs ``compare``)."""
        from analyst.display.multicentre import comparison_figure

        return comparison_figure(self, figure=figure)

    def survival_display(self):
        """The survival plots (AUC(t) with its band, calibration at the horizon, observed Kaplan-Meier against the
        mean predicted risk): an :class:`analyst.display.survival.SurvivalDisplay` (needs ``time=``)."""
        from analyst.display.survival import SurvivalDisplay

        return SurvivalDisplay(self)

    def _repr_html_(self) -> str:
        from analyst.result.frames import result_html

        return result_html(self)

    def __repr__(self) -> str:
        from analyst.result.frames import result_repr

        return result_repr(self)

    def summary(self, *, verbose: bool = False) -> str:
        """The text summary: one screen (at most 25 lines for a validation without extras) by default; with
        ``verbose`` every estimate, the calibration per bin, the protocol's detail and the notes."""
        from analyst.result.brief import summary_text

        return summary_text(self, verbose=verbose)

    def __str__(self) -> str:
        return self.summary()

    def plot(self, *, figure=None):
        """One figure: ROC curve, calibration curve with the risk histogram, and a statistics box.

        Parameters
        ----------
        figure : matplotlib Figure, optional
            Where to draw (cleared first); a new figure when omitted.

        Returns
        -------
        matplotlib.figure.Figure
            Saved whole by ``fig.savefig(path)``.
        """
        from analyst.display import validation_figure

        return validation_figure(self, figure=figure)


def _decision_curve_dict(dc) -> dict[str, Any]:
    """JSON-ready dictionary of a :class:`dsroc.multicentre.DecisionCurve`."""
    keys = ("thresholds", "net_benefit", "lower", "upper", "treat_all", "treat_all_lower", "treat_all_upper")
    table = () if dc.tp is None else ("tp", "fp", "fn", "tn")  # the confusion table at each threshold
    return ({k: [num(x) for x in getattr(dc, k)] for k in keys + table}
            | {"treat_none": 0.0, "prevalence": num(dc.prevalence)})
