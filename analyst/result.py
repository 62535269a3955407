"""Result objects of a distributed validation: numbers, a readable summary and a JSON report."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

__all__ = [
    "CalibrationResult",
    "ConfusionResult",
    "RocGlmFit",
    "SiteCalibration",
    "SitePrivacy",
    "TestResult",
    "ValidationResult",
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


@dataclass(frozen=True)
class RocGlmFit:
    """The fitted binormal ROC-GLM ``ROC(t) = Phi(gamma1 + gamma2 * Phi^-1(t))``.

    Attributes
    ----------
    gamma1, gamma2 : float
        Intercept and slope of the probit regression.
    iterations : int
        Fisher-scoring iterations used.
    converged : bool
        Whether the deviance criterion was met within the iteration cap.
    deviance_trace : tuple of float
        Deviance after each iteration.
    cov : ndarray of shape (2, 2) or None
        Inverse expected information of the probit fit (model-based; the indicator rows of one
        positive are not independent, so it understates the uncertainty).
    warnings : tuple of str
        Non-fatal problems reported by the fit.
    """

    gamma1: float
    gamma2: float
    iterations: int
    converged: bool
    deviance_trace: tuple[float, ...]
    cov: np.ndarray | None = None
    warnings: tuple[str, ...] = ()

    @property
    def params(self) -> tuple[float, float]:
        """``(gamma1, gamma2)``."""
        return (self.gamma1, self.gamma2)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {
            "params": [_num(self.gamma1), _num(self.gamma2)],
            "iterations": int(self.iterations),
            "converged": bool(self.converged),
            "deviance_trace": [_num(d) for d in self.deviance_trace],
            "cov": None if self.cov is None else [[_num(v) for v in row] for row in np.asarray(self.cov)],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class SiteCalibration:
    """One site's released calibration cells; suppressed bins hold NaN and count 0."""

    observed: np.ndarray
    predicted: np.ndarray
    count: np.ndarray


@dataclass(frozen=True)
class CalibrationResult:
    """Calibration curve aggregated over the sites that released each bin.

    Attributes
    ----------
    lower, upper : ndarray
        Bin edges; bins are ``[lower, upper)``, the last one closed.
    observed, predicted : ndarray
        Mean outcome and mean score per bin over the released cells (NaN if no site released it).
    count : ndarray of int
        Patients per bin over the released cells.
    per_site : dict of str to SiteCalibration
        Each site's curve.
    suppressed : tuple of (str, int)
        The (site, bin index) cells a site withheld because they held fewer than ``q`` patients.
    """

    lower: np.ndarray
    upper: np.ndarray
    observed: np.ndarray
    predicted: np.ndarray
    count: np.ndarray
    per_site: Mapping[str, SiteCalibration]
    suppressed: tuple[tuple[str, int], ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary: ``bins``, ``per_site`` and ``suppressed``."""
        bins = [
            {"lower": _num(lo), "upper": _num(up), "observed": _num(ob), "predicted": _num(pr), "count": _num(c)}
            for lo, up, ob, pr, c in zip(self.lower, self.upper, self.observed, self.predicted, self.count)
        ]
        per_site = {
            name: [
                {"bin": j, "observed": _num(ob), "predicted": _num(pr), "count": _num(c)}
                for j, (ob, pr, c) in enumerate(zip(sc.observed, sc.predicted, sc.count))
                if (name, j) not in self.suppressed
            ]
            for name, sc in self.per_site.items()
        }
        return {
            "bins": bins,
            "per_site": per_site,
            "suppressed": [{"site": s, "bin": int(b)} for s, b in self.suppressed],
        }


@dataclass(frozen=True)
class SitePrivacy:
    """What one site spent on this validation and what it has left.

    Attributes
    ----------
    sensitivity : float
        The l2-sensitivity Delta the site used (chosen by the site's policy).
    sensitivity_rule : str
        The policy rule that produced it (``configured``, ``range`` or ``model``).
    tau : float
        Standard deviation of the Gaussian noise the site added.
    epsilon, delta : float
        The (epsilon, delta) each release was calibrated to.
    remaining_epsilon : float
        The site's remaining budget expressed as epsilon at its policy delta (after this analysis).
    remaining_mu : float
        The remaining budget in Gaussian-DP mu.
    note : str
        The site's explanation of the sensitivity (e.g. that ``model`` is a data-derived estimate).
    """

    sensitivity: float
    sensitivity_rule: str
    tau: float
    epsilon: float
    delta: float
    remaining_epsilon: float
    remaining_mu: float
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {
            "sensitivity": _num(self.sensitivity),
            "sensitivity_rule": self.sensitivity_rule,
            "tau": _num(self.tau),
            "epsilon": _num(self.epsilon),
            "delta": _num(self.delta),
            "remaining_epsilon": _num(self.remaining_epsilon),
            "remaining_mu": _num(self.remaining_mu),
            "note": self.note,
        }


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
    rocglm : RocGlmFit
        The fitted ROC-GLM.
    brier : float
        Brier score over all patients (exact, no noise).
    calibration : CalibrationResult
        Aggregated and per-site calibration curves.
    privacy : dict of str to SitePrivacy
        Per site: Delta, tau, epsilon, delta and remaining budget.
    confusion : ConfusionResult or None
        Confusion matrix at the requested threshold.
    test : TestResult or None
        Test of ``H0: AUC <= a0``.
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
    rocglm: RocGlmFit
    brier: float
    calibration: CalibrationResult
    privacy: Mapping[str, SitePrivacy]
    grid: np.ndarray
    epsilon: float
    delta: float
    confusion: ConfusionResult | None = None
    test: TestResult | None = None
    timing: Mapping[str, float] = field(default_factory=dict)

    __test__ = False

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dictionary (keys named as the attributes)."""
        return {
            "auc": _num(self.auc),
            "auc_ci": [_num(self.auc_ci[0]), _num(self.auc_ci[1])],
            "auc_variance": _num(self.auc_variance),
            "level": _num(self.level),
            "ci_method": self.ci_method,
            "rocglm": self.rocglm.to_dict(),
            "brier": _num(self.brier),
            "calibration": self.calibration.to_dict(),
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
        return roc, cal

    def __str__(self) -> str:
        pct = round(100 * self.level)
        lines = [
            f"Distributed validation of '{self.score_source}' on dataset '{self.dataset}', outcome '{self.outcome}'",
            f"  sites: {', '.join(self.sites)}   n = {self.n} (negatives {self.n0}, positives {self.n1})",
            f"  privacy request: epsilon = {self.epsilon:g}, delta = {self.delta:g}",
            "",
            f"AUC (ROC-GLM)        {_fmt(self.auc)}   {pct}% CI [{_fmt(self.auc_ci[0])}, {_fmt(self.auc_ci[1])}]"
            f" ({self.ci_method}, distributed DeLong variance {self.auc_variance:.3g})",
            f"ROC-GLM              gamma1 = {_fmt(self.rocglm.gamma1)}, gamma2 = {_fmt(self.rocglm.gamma2)}, "
            f"{self.rocglm.iterations} Fisher-scoring iterations, "
            f"{'converged' if self.rocglm.converged else 'NOT converged'}",
        ]
        for w in self.rocglm.warnings:
            lines.append(f"  warning: {w}")
        if self.test is not None:
            verdict = "rejected" if self.test.reject else "not rejected"
            lines.append(f"Test H0: AUC <= {self.test.a0:g}   {verdict} (whole {pct}% CI above a0: {self.test.reject})")
        lines.append(f"Brier score          {_fmt(self.brier)}")
        if self.confusion is not None:
            c = self.confusion
            lines += [
                f"At threshold {c.threshold:g}:  TP {c.tp}  FP {c.fp}  FN {c.fn}  TN {c.tn}",
                f"  sensitivity {_fmt(c.sensitivity)}  specificity {_fmt(c.specificity)}  "
                f"PPV {_fmt(c.ppv)}  NPV {_fmt(c.npv)}",
            ]
        cal = self.calibration
        lines += ["", "Calibration (cells with fewer than q patients are withheld by the sites)",
                  "  bin            n   mean score   observed"]
        for lo, up, ob, pr, c in zip(cal.lower, cal.upper, cal.observed, cal.predicted, cal.count):
            lines.append(f"  [{lo:.2f}, {up:.2f}]  {int(c):5d}   {_fmt(pr):>10}   {_fmt(ob):>8}")
        if cal.suppressed:
            cells = ", ".join(f"{s}:{b}" for s, b in cal.suppressed)
            lines.append(f"  suppressed (site:bin): {cells}")
        lines += ["", "Privacy per site",
                  "  site            Delta (rule)              tau   epsilon   delta   remaining epsilon"]
        for name, p in self.privacy.items():
            lines.append(
                f"  {name:<14} {p.sensitivity:<8.4g} ({p.sensitivity_rule:<10}) {p.tau:>8.4g}   {p.epsilon:<7g}"
                f"   {p.delta:<6g}  {_fmt(p.remaining_epsilon, 3)}"
            )
        return "\n".join(lines)
