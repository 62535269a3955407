"""Result objects of a distributed validation: numbers, a readable summary and a JSON report."""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from analyst.histogram import PAPER_GUARANTEE
from analyst.hierarchy import hierarchy_lines, hierarchy_to_dict

__all__ = [
    "ConfusionResult",
    "SitePrivacy",
    "TestResult",
    "ValidationResult",
    "bin_labels",
    "calibration_to_dict",
    "rocglm_to_dict",
]


def _num(x: Any) -> Any:
    """Turn numpy scalars and non-finite floats into JSON-safe Python values (NaN -> None)."""
    if x is None:
        return None
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    return x if math.isfinite(x) else None


def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}f}"


_CI_NAMES = {"logit": "logit-scale", "wald": "Wald (AUC-scale)"}


def _spent_at(mu: float, delta: float) -> str:
    """Epsilon of all releases so far (Gaussian-DP mu) at ``delta``, for the summary ("-" when unknown)."""
    import dsroc

    if not math.isfinite(mu):
        return "-"
    return "0" if mu <= 0 else f"{dsroc.gdp_epsilon(mu, delta):.2f}"


def bin_labels(lower, upper, *, digits: int = 2) -> list[str]:
    """Calibration bin labels ``[a, b)``, the last one closed ``[a, b]`` (a score of 1 belongs to it)."""
    lower, upper = list(lower), list(upper)
    # enough digits to tell explicit edges such as 0.05 or 0.125 apart
    while digits < 6 and any(round(v, digits) != round(v, 12) for v in lower + upper):
        digits += 1
    return [f"[{lo:.{digits}f}, {up:.{digits}f}{']' if k == len(lower) - 1 else ')'}"
            for k, (lo, up) in enumerate(zip(lower, upper))]


def rocglm_to_dict(fit) -> dict[str, Any]:
    """JSON-ready view of a :class:`dsroc.RocGlmResult`: params, iterations, converged, trace, cov."""
    return {
        "params": [_num(v) for v in np.asarray(fit.params)],
        "auc": _num(fit.auc),
        "iterations": int(fit.iterations),
        "converged": bool(fit.converged),
        "deviance_trace": [_num(d) for d in fit.deviance_trace],
        "cov": None if fit.cov is None else [[_num(v) for v in row] for row in np.asarray(fit.cov)],
        "warnings": list(fit.warnings),
    }


def calibration_to_dict(curve) -> dict[str, Any]:
    """JSON-ready view of a :class:`dsroc.CalibrationCurve`: ``bins``, ``per_site``, ``suppressed``.

    Suppressed cells appear only in ``suppressed`` (site and bin index), never with numbers.
    """
    bins = [
        {"lower": _num(lo), "upper": _num(up), "observed": _num(ob), "predicted": _num(pr), "count": _num(c)}
        for lo, up, ob, pr, c in zip(curve.lower, curve.upper, curve.observed, curve.predicted, curve.count)
    ]
    per_site = {
        name: [
            {"bin": int(b), "observed": _num(ob), "predicted": _num(pr), "count": _num(c)}
            for b, ob, pr, c in zip(sc.bins, sc.observed, sc.predicted, sc.count)
        ]
        for name, sc in curve.per_site.items()
    }
    return {
        "bins": bins,
        "per_site": per_site,
        "suppressed": [{"site": s, "bin": int(b)} for s, b in curve.suppressed],
    }


def _short(text: str, width: int = 60) -> str:
    """A score-source description for the summary's first line (a GLM as its link and size)."""
    if text.startswith("glm:"):
        try:
            spec = json.loads(text[4:])
            n = len(spec["coefficients"])
            return f"GLM ({spec['link']} link, {n} coefficient{'' if n == 1 else 's'})"
        except (ValueError, KeyError, TypeError):
            pass
    if text.startswith("column:"):
        return f"score column '{text[7:]}'"
    return "'" + (text if len(text) <= width else text[: width - 3] + "...") + "'"


@dataclass(frozen=True)
class SitePrivacy:
    """What one site spent on this validation and what it has left.

    Attributes
    ----------
    sensitivity : float
        The l2-sensitivity Delta the site used (chosen by the site's policy, never by the analyst).
    sensitivity_rule : str
        The policy rule that produced it (``value``, ``range`` or ``model``).
    formal_bound : bool
        False for ``model``: a data-derived estimate, not a formal bound.
    tau : float
        Standard deviation of the Gaussian noise the site added.
    epsilon, delta : float
        The (epsilon, delta) the release was calibrated to.
    mu_charged : float
        Gaussian-DP cost charged to the site's ledger by this analysis (0 if the release was repeated).
    budget_epsilon, budget_delta : float
        The site's total budget for the dataset.
    epsilon_spent : float
        All releases so far, composed as Gaussian DP and expressed as epsilon at ``budget_delta``.
    mu_remaining : float
        Remaining budget in Gaussian-DP mu.
    note : str
        The site's explanation of the sensitivity.
    mu_spent : float
        All releases so far as a Gaussian-DP mu (NaN when unknown).
    """

    sensitivity: float
    sensitivity_rule: str
    formal_bound: bool
    tau: float
    epsilon: float
    delta: float
    mu_charged: float
    budget_epsilon: float
    budget_delta: float
    epsilon_spent: float
    mu_remaining: float
    note: str = ""
    mu_spent: float = float("nan")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {k: (v if isinstance(v, str) else _num(v)) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class ConfusionResult:
    """Confusion matrix summed over the sites at a threshold (``s >= threshold`` is positive)."""

    threshold: float
    tp: int
    fp: int
    fn: int
    tn: int
    sensitivity: float
    specificity: float
    ppv: float
    npv: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {k: _num(getattr(self, k)) for k in
                ("threshold", "tp", "fp", "fn", "tn", "sensitivity", "specificity", "ppv", "npv")}


@dataclass(frozen=True)
class TestResult:
    """Test of ``H0: AUC <= a0``; rejected when the whole CI lies above ``a0``."""

    a0: float
    level: float
    reject: bool

    __test__ = False  # not a pytest test class

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {"a0": _num(self.a0), "level": _num(self.level), "reject": bool(self.reject),
                "hypothesis": f"AUC <= {self.a0:g}"}


@dataclass(frozen=True)
class ValidationResult:
    """Everything a distributed validation produced.

    Attributes
    ----------
    auc : float
        The distributed ROC-GLM AUC, ``Phi(gamma1 / sqrt(1 + gamma2^2))``.
    auc_ci : tuple of float
        Confidence interval centred at ``auc`` with the distributed DeLong variance.
    auc_variance : float
        The DeLong variance used for the CI.
    rocglm : dsroc.RocGlmResult
        The fitted ROC-GLM (params, iterations, converged, deviance trace, cov, warnings).
    brier : float
        Brier score over all patients (exact, no noise).
    calibration : dsroc.CalibrationCurve
        Aggregated curve (``lower``, ``upper``, ``observed``, ``predicted``, ``count``), per-site
        curves over the released bins, and the suppressed (site, bin) cells.
    privacy : dict of str to SitePrivacy
        Per site: Delta, tau, epsilon, delta and remaining budget.
    confusion : ConfusionResult or None
        Confusion matrix at the requested threshold.
    test : TestResult or None
        Test of ``H0: AUC <= a0``.
    warnings : tuple of str
        Advice about the analysis, e.g. that (epsilon, delta) is not among the settings the simulation
        study recommends for the sites' Delta, or that the fitted ROC curve lies below the diagonal
        somewhere (improper). Fitting warnings are in ``rocglm.warnings``.
    calibration_hierarchy : dsroc.CalibrationHierarchy or None
        Mean (O/E, calibration-in-the-large), weak (calibration intercept and slope) and moderate
        (curve with Wilson intervals) calibration from the released cells.
    protocol : str
        The protocol that produced the result (``"paper"``: noisy scores and the distributed ROC-GLM).
    pr : analyst.pr.PRSummary or None
        PR curve, AP and AUCPR with intervals and the unachievable region, computed from the release
        (draw it with :class:`analyst.pr.PrecisionRecallDisplay`).
    auc_corrected : dsroc.NoiseCorrectedAUC or None
        The noise-corrected AUC (the release noise extrapolated to zero) with a CI whose variance
        includes the noise (:func:`dsroc.noise_corrected_auc`); ``auc`` and ``auc_ci`` are the paper's
        estimate, biased towards 0.5 by the noise.
    """

    dataset: str
    outcome: str
    score_source: str
    sites: tuple[str, ...]
    n: int
    n0: int
    n1: int
    auc: float
    auc_ci: tuple[float, float]
    auc_variance: float
    level: float
    ci_method: str
    rocglm: Any
    brier: float
    calibration: Any
    privacy: Mapping[str, SitePrivacy]
    grid: np.ndarray
    epsilon: float
    delta: float
    confusion: ConfusionResult | None = None
    test: TestResult | None = None
    timing: Mapping[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    auc_corrected: Any = None
    pr: Any = None
    calibration_hierarchy: Any = None
    protocol: str = "paper"

    __test__ = False

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dictionary (keys named as the attributes)."""
        return {
            "protocol": "paper",
            "privacy_unit": "the noisy scores: one patient's score (the sites' sensitivity rule); other answers: q",
            "covered": PAPER_GUARANTEE,
            "auc": _num(self.auc),
            "auc_ci": [_num(self.auc_ci[0]), _num(self.auc_ci[1])],
            "auc_variance": _num(self.auc_variance),
            "level": _num(self.level),
            "ci_method": self.ci_method,
            "rocglm": rocglm_to_dict(self.rocglm),
            "brier": _num(self.brier),
            "calibration": calibration_to_dict(self.calibration),
            "privacy": {s: p.to_dict() for s, p in self.privacy.items()},
            "confusion": None if self.confusion is None else self.confusion.to_dict(),
            "test": None if self.test is None else self.test.to_dict(),
            "dataset": self.dataset,
            "outcome": self.outcome,
            "score_source": self.score_source,
            "sites": list(self.sites),
            "n": int(self.n),
            "n0": int(self.n0),
            "n1": int(self.n1),
            "epsilon": _num(self.epsilon),
            "delta": _num(self.delta),
            "grid": [_num(t) for t in np.asarray(self.grid)],
            "timing": {k: _num(v) for k, v in self.timing.items()},
            "warnings": list(self.warnings),
            "calibration_hierarchy": hierarchy_to_dict(self.calibration_hierarchy),
            "protocol": self.protocol,
            "pr": None if self.pr is None else self.pr.to_dict(),
            "auc_corrected": None if self.auc_corrected is None else {
                "auc": _num(self.auc_corrected.auc), "variance": _num(self.auc_corrected.variance),
                "ci": [_num(self.auc_corrected.ci.lower), _num(self.auc_corrected.ci.upper)],
                "noise_variance": _num(self.auc_corrected.noise_variance),
                "auc_tau": _num(self.auc_corrected.auc_tau), "auc_released": _num(self.auc_corrected.auc_released)},
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
        """A pandas DataFrame: ``"roc"`` (fitted curve and pointwise band), ``"calibration"`` (per bin, with
        intervals and withholding sites) or ``"sites"`` (privacy and budget per site); see
        :func:`analyst.frames.result_frame`."""
        from analyst.frames import result_frame

        return result_frame(self, kind, points=points)

    def _repr_html_(self) -> str:
        from analyst.frames import result_html

        return result_html(self)

    def __repr__(self) -> str:
        from analyst.frames import result_repr

        return result_repr(self)

    def plot(self, *, axes=None):
        """Draw the ROC curve with its CI band and the calibration curve side by side.

        Parameters
        ----------
        axes : sequence of two matplotlib Axes, optional
            Where to draw; a new figure with two panels is made when omitted.

        Returns
        -------
        (RocCurveDisplay, CalibrationDisplay)
        """
        from analyst.display import CalibrationDisplay, RocCurveDisplay, pyplot

        if axes is None:
            fig, axes = pyplot().subplots(1, 2, figsize=(11, 5))
        roc = RocCurveDisplay.from_result(self).plot(ax=axes[0])
        cal = CalibrationDisplay.from_result(self).plot(ax=axes[1])
        axes[0].figure.suptitle(f"paper protocol: ({self.epsilon:g}, {self.delta:g})-DP noisy scores, other answers "
                                "q-protected (not DP)", fontsize=10)
        return roc, cal

    def _corrected_lines(self, pct: int) -> list[str]:
        c = self.auc_corrected
        if c is None:
            return []
        ci = (f"{pct}% CI [{_fmt(c.ci.lower)}, {_fmt(c.ci.upper)}]" if c.ci.defined
              else "CI undefined (corrected AUC outside (0, 1))")
        return [f"AUC (noise-corrected) {_fmt(c.auc)}   {ci} (SE {_fmt(math.sqrt(c.variance))}, incl. the noise)"]

    def __str__(self) -> str:
        pct = round(100 * self.level)
        lines = [
            f"Distributed validation of {_short(self.score_source)} on dataset '{self.dataset}', "
            f"outcome '{self.outcome}'",
            f"  sites: {', '.join(self.sites)}   n = {self.n} (negatives {self.n0}, positives {self.n1})",
            f"  protocol: paper   privacy request: epsilon = {self.epsilon:g}, delta = {self.delta:g} "
            "for the noisy scores only",
            "  covered: " + textwrap.fill(PAPER_GUARANTEE, width=100, subsequent_indent="    "),
            "",
            f"AUC (ROC-GLM)        {_fmt(self.auc)}   {pct}% CI [{_fmt(self.auc_ci[0])}, {_fmt(self.auc_ci[1])}]"
            f" ({_CI_NAMES.get(self.ci_method, self.ci_method)} CI, distributed DeLong SE "
            f"{_fmt(math.sqrt(self.auc_variance) if self.auc_variance >= 0 else None)})",
            *self._corrected_lines(pct),
            f"ROC-GLM              gamma1 = {_fmt(self.rocglm.params[0])}, gamma2 = {_fmt(self.rocglm.params[1])}, "
            f"{self.rocglm.iterations} Fisher-scoring iterations, "
            f"{'converged' if self.rocglm.converged else 'NOT converged'}",
        ]
        for w in self.rocglm.warnings:
            lines.append(f"  warning: {w}")
        if self.test is not None:
            where = "lies" if self.test.reject else "does not lie"
            lines.append(f"Test H0: AUC <= {self.test.a0:g}   {'rejected' if self.test.reject else 'not rejected'}: "
                         f"the {pct}% CI {where} wholly above {self.test.a0:g} (one-sided level "
                         f"{(1 - self.test.level) / 2:g})")
        lines.append(f"Brier score          {_fmt(self.brier)}")
        lines += hierarchy_lines(self.calibration_hierarchy, pct)
        if self.confusion is not None:
            c = self.confusion
            lines += [
                f"At threshold {c.threshold:g} (score >= {c.threshold:g} predicts 1):  "
                f"TP {c.tp}  FP {c.fp}  FN {c.fn}  TN {c.tn}",
                f"  sensitivity {_fmt(c.sensitivity)}  specificity {_fmt(c.specificity)}  "
                f"PPV {_fmt(c.ppv)}  NPV {_fmt(c.npv)}",
            ]
        if self.pr is not None:
            lines += ["", textwrap.fill(str(self.pr), width=104, initial_indent="", subsequent_indent="  ")]
        cal = self.calibration
        lines += ["", "Calibration (cells with fewer than q patients, or that could be differenced, are withheld by the sites)",
                  "  bin            n   mean score   observed"]
        labels = bin_labels(cal.lower, cal.upper)
        width = max(len(b) for b in labels)
        h = self.calibration_hierarchy
        lines[-1] = f"  {'bin':<{width}}  {'n':>5}   mean score   observed" + (
            f"   {pct}% interval (Wilson)" if h is not None else "")
        for k, (label, ob, pr, c) in enumerate(zip(labels, cal.observed, cal.predicted, cal.count)):
            # a bin no site released has an unknown count (possibly 0), not a count of 0
            n, note = (f"{int(c):5d}", "") if c > 0 else (f"{'-':>5}", "   (withheld by every site)")
            interval = (f"   [{_fmt(h.curve_lower[k], 3)}, {_fmt(h.curve_upper[k], 3)}]"
                        if h is not None and c > 0 else "")
            lines.append(f"  {label:<{width}}  {n}   {_fmt(pr):>10}   {_fmt(ob):>8}{interval}{note}")
        if cal.suppressed:
            cells = ", ".join(f"{s}:{b}" for s, b in cal.suppressed)
            lines.append(f"  suppressed (site:bin): {cells}")
        w = max([4] + [len(n) for n in self.privacy])
        lines += ["", "Privacy per site (the site chose Delta and tau; budget composed as Gaussian DP)",
                  f"  {'site':<{w}}  {'Delta':<7} {'rule':<7} {'tau':<9} {'epsilon':<8} {'delta':<8} "
                  f"epsilon spent so far at delta {self.delta:g}; at the budget's delta, of the budget"]
        for name, p in self.privacy.items():
            at_request = _spent_at(p.mu_spent, self.delta)
            lines.append(
                f"  {name:<{w}}  {p.sensitivity:<7.4g} {p.sensitivity_rule:<7} {p.tau:<9.4g} {p.epsilon:<8g} "
                f"{p.delta:<8g} {at_request}; {p.epsilon_spent:.2f} of {p.budget_epsilon:g} at delta {p.budget_delta:g}"
            )
        if any(not p.formal_bound for p in self.privacy.values()):
            lines.append("  note: a 'model' sensitivity is estimated from the site's data, not a formal bound")
        if self.warnings:
            lines += ["", "Warnings"] + [textwrap.fill(w, width=104, initial_indent="  - ", subsequent_indent="    ",
                                                      break_on_hyphens=False) for w in self.warnings]
        return "\n".join(lines)
