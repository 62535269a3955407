"""The parts of a validation result that every protocol fills the same way: AUC, ROC, calibration, sites."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

__all__ = [
    "Calibration",
    "ConfusionResult",
    "Estimate",
    "PlainRecord",
    "RocCurve",
    "SitePrivacy",
    "TestResult",
    "num",
    "plain_record",
]


def num(x: Any) -> Any:
    """Turn numpy scalars and non-finite floats into JSON-safe Python values (NaN -> None)."""
    if x is None:
        return None
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    return x if math.isfinite(x) else None


def plain_record(record, skip=()) -> dict[str, Any]:
    """A record of names and numbers as JSON-ready values (NaN and inf as null), without the fields ``skip``."""
    return {k: (v if isinstance(v, str) else num(v)) for k, v in record.__dict__.items() if k not in skip}


class PlainRecord:
    """Base of a dataclass of names and numbers whose JSON form is :func:`plain_record` of it."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return plain_record(self)


def _nums(values) -> list:
    return [num(v) for v in np.asarray(values, dtype=np.float64).ravel()]


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval, its variance, and what the interval includes."""

    value: float
    lower: float = math.nan
    upper: float = math.nan
    variance: float = math.nan
    includes: str = ""

    @classmethod
    def of(cls, e, includes: str = "") -> "Estimate | None":
        """From any object with ``value``, ``lower``, ``upper`` and ``variance`` (None stays None)."""
        if e is None:
            return None
        return cls(float(e.value), float(e.lower), float(e.upper), float(e.variance), includes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {"value": num(self.value), "lower": num(self.lower), "upper": num(self.upper),
                "variance": num(self.variance), "includes": self.includes}


@dataclass(frozen=True)
class RocCurve:
    """The ROC curve of a result: the empirical or binned points, and the fitted binormal curve with a band.

    Attributes
    ----------
    fpr, tpr : ndarray
        Points of the empirical (paper: the released noisy scores) or binned (histogram: the bin edges)
        curve, from (0, 0) to (1, 1) (stored in that order, whatever order they are given in).
    points_label : str
        What the points are.
    params : (float, float) or None
        ``(gamma1, gamma2)`` of the fitted curve ``Phi(gamma1 + gamma2 Phi^-1(t))``; None when the reported
        AUC is not a fitted curve's (then the points' polyline is the curve whose AUC is quoted).
    band : (float, float) or None
        ``gamma1`` of the band's lower and upper curves: the fitted shape (``gamma2``) moved until its AUC
        equals the AUC's confidence limits, so the band is exactly as wide as the AUC's CI and includes
        what that CI includes.
    """

    fpr: np.ndarray
    tpr: np.ndarray
    points_label: str
    params: tuple[float, float] | None = None
    band: tuple[float, float] | None = None

    def __post_init__(self):
        fpr, tpr = np.asarray(self.fpr, dtype=np.float64), np.asarray(self.tpr, dtype=np.float64)
        if fpr.size and fpr[0] > fpr[-1]:
            fpr, tpr = fpr[::-1], tpr[::-1]
        object.__setattr__(self, "fpr", fpr)
        object.__setattr__(self, "tpr", tpr)

    @staticmethod
    def band_for(params, auc_ci) -> tuple[float, float] | None:
        """The band's ``gamma1`` values: ``Phi^-1(A) sqrt(1 + gamma2^2)`` at the CI's ends ``A``."""
        from scipy.special import ndtri

        if params is None or not all(np.isfinite(auc_ci)) or not 0 < auc_ci[0] <= auc_ci[1] < 1:
            return None
        scale = math.sqrt(1.0 + float(params[1]) ** 2)
        return float(ndtri(auc_ci[0]) * scale), float(ndtri(auc_ci[1]) * scale)

    def curve(self, t) -> np.ndarray:
        """True-positive fraction of the fitted curve at false-positive fractions ``t`` (needs ``params``)."""
        from dsroc import rocglm_curve

        return rocglm_curve(self.params, t)

    def improper(self) -> tuple[float, float] | None:
        """The false-positive fractions where the fitted curve lies below the diagonal (None if nowhere,
        or for less than 0.01 of the range; see :func:`analyst.hierarchy.improper_region`)."""
        from analyst.hierarchy import improper_region

        return None if self.params is None else improper_region(self.params)

    def band_curves(self, t) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper curve of the band at ``t`` (needs ``band``)."""
        from dsroc import rocglm_curve

        g2 = self.params[1]
        return rocglm_curve((self.band[0], g2), t), rocglm_curve((self.band[1], g2), t)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {"points": {"fpr": _nums(self.fpr), "tpr": _nums(self.tpr), "label": self.points_label},
                "fitted": None if self.params is None else {"gamma1": num(self.params[0]), "gamma2": num(self.params[1])},
                "band": None if self.band is None else {"gamma1_lower": num(self.band[0]),
                                                        "gamma1_upper": num(self.band[1])}}


@dataclass(frozen=True)
class Calibration:
    """The calibration curve per bin and the calibration hierarchy (Van Calster et al. 2016).

    Attributes
    ----------
    lower, upper : ndarray
        Bin edges (histogram protocol: merged groups of the grid's bins).
    count : ndarray
        Patients per bin (NaN where unknown: a bin no site released).
    predicted : ndarray
        Mean prediction per bin; ``predicted_from`` says how it was obtained.
    observed, observed_lower, observed_upper : ndarray
        Fraction with outcome 1 and its interval (``interval`` says which and what it includes).
    status : tuple of str
        Per bin: ``"released"``, ``"withheld by every site"``, ``"withheld by some sites"``,
        ``"merged"`` (several grid bins) or ``"too few patients"``.
    oe, citl, slope : Estimate or None
        Observed/expected events, calibration-in-the-large (intercept with slope 1; 0 ideal) and
        calibration slope (1 ideal); None where not estimable (``notes`` says why).
    recalibration_intercept : float
        The intercept fitted together with the slope.
    ici, emax : float
        Binned ICI and Emax: the patient-weighted mean and the largest ``|observed - predicted|`` over the
        released bins (include sampling error, so biased upwards in small bins).
    per_site : dict of str to (predicted, observed, count)
        Each site's curve on the same bins (NaN where withheld); empty when sites release no own curve.
    risk_edges, risk_negatives, risk_positives : ndarray
        The risk histogram split by outcome: patients with outcome 0 and 1 per bin of ``risk_edges``
        (NaN where withheld; estimated from noisy counts in the histogram protocol).
    notes : tuple of str
    """

    lower: np.ndarray
    upper: np.ndarray
    count: np.ndarray
    predicted: np.ndarray
    observed: np.ndarray
    observed_lower: np.ndarray
    observed_upper: np.ndarray
    status: tuple[str, ...]
    predicted_from: str
    interval: str
    oe: Estimate | None = None
    citl: Estimate | None = None
    slope: Estimate | None = None
    recalibration_intercept: float = math.nan
    per_site: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    risk_edges: np.ndarray = field(default_factory=lambda: np.zeros(0))
    risk_negatives: np.ndarray = field(default_factory=lambda: np.zeros(0))
    risk_positives: np.ndarray = field(default_factory=lambda: np.zeros(0))
    notes: tuple[str, ...] = ()

    @property
    def edges(self) -> np.ndarray:
        """All bin edges (``lower`` then the last ``upper``)."""
        return np.append(self.lower, self.upper[-1:])

    @property
    def ici(self) -> float:
        """Patient-weighted mean ``|observed - predicted|`` over the released bins."""
        ok = np.isfinite(self.observed) & np.isfinite(self.predicted) & (np.nan_to_num(self.count) > 0)
        if not ok.any():
            return math.nan
        return float(np.average(np.abs(self.observed[ok] - self.predicted[ok]), weights=self.count[ok]))

    @property
    def emax(self) -> float:
        """Largest ``|observed - predicted|`` over the released bins."""
        gap = np.abs(self.observed - self.predicted)
        return float(np.nanmax(gap)) if np.isfinite(gap).any() else math.nan

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        cols = (self.lower, self.upper, self.count, self.predicted, self.observed, self.observed_lower,
                self.observed_upper)
        bins = [{"lower": num(lo), "upper": num(up), "n": num(n), "predicted": num(p), "observed": num(o),
                 "observed_lower": num(ol), "observed_upper": num(ou), "status": s}
                for (lo, up, n, p, o, ol, ou), s in zip(zip(*cols), self.status)]
        per_site = {name: [{"bin": b, "predicted": num(p[b]), "observed": num(o[b]), "n": num(n[b])}
                           for b in range(p.size) if np.isfinite(p[b])]
                    for name, (p, o, n) in self.per_site.items()}
        est = lambda e: None if e is None else e.to_dict()  # noqa: E731
        return {"bins": bins, "predicted_from": self.predicted_from, "interval": self.interval,
                "oe": est(self.oe), "citl": est(self.citl), "slope": est(self.slope),
                "recalibration_intercept": num(self.recalibration_intercept), "ici": num(self.ici),
                "emax": num(self.emax), "per_site": per_site,
                "risk_histogram": {"edges": _nums(self.risk_edges), "negatives": _nums(self.risk_negatives),
                                   "positives": _nums(self.risk_positives)},
                "notes": list(self.notes)}


@dataclass(frozen=True)
class SitePrivacy(PlainRecord):
    """What one site released for this validation, what it charged and what it has left.

    Attributes
    ----------
    epsilon, delta : float
        The guarantee of this site's answers in this validation: every release it made (or replayed) for it --
        all stages, strata, a second model -- composed by the site's ledger's accountant, as epsilon at the
        request's delta (``accounting`` says by which bound); a site that cannot compose them (an older site):
        the guarantee of its last release.
    noise_sd : float
        Standard deviation of the noise on each released value (a score in the paper protocol, a
        count in the histogram protocol).
    sensitivity : float
        The sensitivity the noise is calibrated to (chosen by the site's policy, never by the analyst).
    sensitivity_rule : str
        Where it comes from (``value``, ``range`` or ``model`` in the paper protocol; ``count`` in the
        histogram protocol: one patient changes one count by 1).
    formal_bound : bool
        False for ``model``: a data-derived estimate, not a formal bound.
    n : float
        Patients behind the site's answers (an estimate from noisy counts in the histogram protocol).
    releases : int
        The releases composed into ``epsilon`` (0: the site did not compose them).
    accounting : str
        The bound ``epsilon`` rests on (``"gaussian-dp (exact)"``, ``"pure epsilon-dp (basic composition)"`` or
        ``"privacy loss distribution (pessimistic)"``).
    epsilon_spent_at_delta : float
        All releases so far at this population (this validation's and earlier ones), as epsilon at the request's
        delta, by the same bound as ``epsilon_spent`` (NaN when the site does not say).
    mu_charged : float
        Gaussian-DP cost of this validation (0 for a repeated release; NaN when the site does not say).
    repeated : bool
        The identical release was made before (nothing charged now).
    epsilon_spent : float
        All releases so far, as epsilon at ``budget_delta``.
    budget_epsilon, budget_delta, mu_spent, mu_remaining : float
        The site's total budget and what is spent and left of it as Gaussian-DP mu (the mu fields NaN unless the
        history holds Gaussian releases only: histogram releases are not accounted as Gaussian DP).
    note : str
        The site's explanation of its sensitivity.
    """

    epsilon: float
    delta: float
    noise_sd: float
    sensitivity: float
    sensitivity_rule: str
    formal_bound: bool
    n: float
    mu_charged: float = math.nan
    repeated: bool = False
    epsilon_spent: float = math.nan
    budget_epsilon: float = math.nan
    budget_delta: float = math.nan
    mu_spent: float = math.nan
    mu_remaining: float = math.nan
    note: str = ""
    releases: int = 0
    accounting: str = ""
    epsilon_spent_at_delta: float = math.nan


@dataclass(frozen=True)
class ConfusionResult:
    """Confusion matrix summed over the sites at a threshold (``s >= threshold`` is positive)."""

    threshold: float
    tp: float
    fp: float
    fn: float
    tn: float
    sensitivity: float
    specificity: float
    ppv: float
    npv: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {k: num(getattr(self, k)) for k in
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
        return {"a0": num(self.a0), "level": num(self.level), "reject": bool(self.reject),
                "hypothesis": f"AUC <= {self.a0:g}"}
