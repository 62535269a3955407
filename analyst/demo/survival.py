"""The survival part of the demo: the Cox model validated on every test patient through the sites, beside the pooled
unbinned references and beside what the binary analysis that drops the patients censored early says."""

from __future__ import annotations

import math

from analyst.demo.gbsg2 import HORIZON_DAYS
from analyst.demo.gbsg2_survival import EVENT, RISK, TIME, SurvivalDemoData
from analyst.demo.reference import binary_dropping_censored, pooled_survival
from analyst.demo.sites import SURVIVAL_DATASET
from analyst.result import ValidationResult

__all__ = ["survival_comparison", "survival_references", "validate_survival"]


def validate_survival(fed, *, epsilon: float, delta: float, progress=None) -> ValidationResult:
    """The survival validation of the demo's Cox model at two years through the federation's sites."""
    return fed.validate(SURVIVAL_DATASET, EVENT, score=RISK, epsilon=epsilon, delta=delta, time=TIME,
                        horizon=float(HORIZON_DAYS), progress=progress)


def survival_references(data: SurvivalDemoData) -> tuple[dict, dict]:
    """The pooled references on all test patients and the binary analysis without the censored ones."""
    t, e, r = (data.test[c].to_numpy() for c in (TIME, EVENT, RISK))
    return pooled_survival(t, e, r, float(HORIZON_DAYS)), binary_dropping_censored(t, e, r, float(HORIZON_DAYS))


def _ci(i) -> str:
    return f"{i.value:.3f} [{i.lower:.3f}, {i.upper:.3f}]" if math.isfinite(i.lower) else f"{i.value:.3f}"


def survival_comparison(res: ValidationResult, pooled: dict, binary: dict) -> str:
    """The distributed survival estimates beside the pooled references and the binary analysis, as a table."""
    v, h = res.detail.validation, HORIZON_DAYS
    rows = [
        ("Harrell's C", _ci(v.harrell_c), f"{pooled['harrell_c']:.3f} (lifelines concordance_index)", "-"),
        (f"AUC({h})", _ci(v.auc), f"{pooled['auc']:.3f} (unbinned IPCW, numpy)",
         f"{binary['auc']:.3f} (empirical AUC)"),
        (f"Brier({h})", _ci(v.brier), f"{pooled['brier']:.3f} (unbinned IPCW, numpy)",
         f"{binary['brier']:.3f} (plain Brier)"),
        (f"risk by {h}", _ci(v.observed), f"{pooled['observed_risk']:.3f} (1 - lifelines Kaplan-Meier)",
         f"{binary['observed_risk']:.3f} (share of events)"),
        ("mean predicted", _ci(v.expected), f"{pooled['expected_risk']:.3f}", f"{binary['expected_risk']:.3f}"),
        (f"O/E({h})", _ci(v.oe), f"{pooled['oe']:.3f}", f"{binary['oe']:.3f}"),
    ]
    covered = [name for name, i, ref in (("Harrell's C", v.harrell_c, pooled["harrell_c"]),
                                         (f"AUC({h})", v.auc, pooled["auc"]), (f"Brier({h})", v.brier, pooled["brier"]))
               if i.lower <= ref <= i.upper]
    lines = [f"Survival validation of the Cox model's {h}-day risk on every test patient (n = {pooled['n']}: "
             f"{pooled['events']} events by {h} days, {pooled['censored_before']} censored before it, kept)",
             f"  {'':<15} {'distributed (sites, DP)':<26} {'pooled reference (all test data)':<45} "
             f"binary analysis (drops {binary['dropped']} censored, n = {binary['n']})"]
    lines += [f"  {a:<15} {b:<26} {c:<45} {d}" for a, b, c, d in rows]
    lines += [f"  The distributed intervals ({round(100 * res.level)}%, sampling and privacy noise) hold the pooled "
              f"{', '.join(covered) if covered else 'values of none of C, AUC and Brier'}.",
              f"  Uno's C (tau {v.tau:g}) {_ci(v.uno_c)}; integrated Brier {_ci(v.integrated_brier)}; scaled Brier "
              f"{_ci(v.scaled_brier)}; calibration intercept {_ci(v.calibration_intercept)}, slope "
              f"{_ci(v.calibration_slope)}.",
              f"  Dropping the {binary['dropped']} patients censored before {h} days keeps those with early events: "
              f"the binary analysis sees a risk of {binary['observed_risk']:.3f} where the Kaplan-Meier says "
              f"{pooled['observed_risk']:.3f}, and misjudges the calibration (O/E {binary['oe']:.2f} against "
              f"{pooled['oe']:.2f})."]
    return "\n".join(lines)
