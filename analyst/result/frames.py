"""Notebook views of a validation result: pandas tables (ROC, calibration, sites) and an HTML summary."""

from __future__ import annotations

import html
import math

import numpy as np

__all__ = ["FRAME_KINDS", "result_frame", "result_html", "result_repr"]

FRAME_KINDS = ("roc", "roc_points", "calibration", "sites", "decision_curve", "subgroups", "comparison", "auc_time",
               "kaplan_meier")


def _roc_frame(result, points: int):
    import pandas as pd

    roc = result.roc
    t = np.linspace(0.0, 1.0, points)
    if roc.params is None:  # the quoted AUC is the points' polyline
        return pd.DataFrame({"fpr": t, "tpr": np.interp(t, roc.fpr, roc.tpr)})
    frame = pd.DataFrame({"fpr": t, "tpr": roc.curve(t)})
    if roc.band is not None:
        frame["tpr_lower"], frame["tpr_upper"] = roc.band_curves(t)
    return frame


def _calibration_frame(result):
    import pandas as pd

    c = result.calibration
    if c is None:
        return pd.DataFrame(columns=["bin_lower", "bin_upper", "n", "mean_predicted", "observed", "observed_lower",
                                     "observed_upper", "status"])
    return pd.DataFrame({"bin_lower": c.lower, "bin_upper": c.upper, "n": c.count, "mean_predicted": c.predicted,
                         "observed": c.observed, "observed_lower": c.observed_lower,
                         "observed_upper": c.observed_upper, "status": list(c.status)})


def _sites_frame(result):
    import pandas as pd

    frame = pd.DataFrame([p.to_dict() for p in result.privacy.values()],
                         index=pd.Index(list(result.privacy), name="site"))
    if result.heterogeneity is not None:  # each site's own estimates beside its privacy
        own = pd.DataFrame([s.to_dict() for s in result.heterogeneity.sites]).set_index("site")
        frame = frame.join(own.drop(columns=[c for c in own.columns if c in frame.columns]))
    return frame


def _decision_curve_frame(result):
    import pandas as pd

    dc = result.decision_curve
    if dc is None:
        return pd.DataFrame(columns=["threshold", "net_benefit", "lower", "upper", "treat_all", "treat_none"])
    table = {} if dc.tp is None else {"tp": dc.tp, "fp": dc.fp, "fn": dc.fn, "tn": dc.tn,
                                      "sensitivity": dc.sensitivity, "specificity": dc.specificity}
    return pd.DataFrame({"threshold": dc.thresholds, "net_benefit": dc.net_benefit, "lower": dc.lower,
                         "upper": dc.upper, "treat_all": dc.treat_all, "treat_none": 0.0, **table})


def _subgroups_frame(result):
    import pandas as pd

    g = result.subgroups
    columns = ["stratum", "lower", "upper", "n", "n1", "auc", "auc_lower", "auc_upper", "auc_variance", "oe",
               "oe_lower", "oe_upper", "brier", "brier_lower", "brier_upper"]
    if g is None:
        return pd.DataFrame(columns=columns)
    return pd.DataFrame([{"stratum": s.label, **{k: v for k, v in s.__dict__.items() if k != "label"}}
                         for s in g.strata], columns=columns)


def _comparison_frame(result):
    import pandas as pd

    c = result.comparison
    columns = ["what", "estimate", "lower", "upper", "p_value"]
    if c is None:
        return pd.DataFrame(columns=columns)
    return pd.DataFrame([(f"AUC A ({c.model_a})", c.auc_a, c.auc_a_lower, c.auc_a_upper, float("nan")),
                         (f"AUC B ({c.model_b})", c.auc_b, c.auc_b_lower, c.auc_b_upper, float("nan")),
                         ("A minus B", c.difference, c.lower, c.upper, c.p_value)], columns=columns)


def _survival_frame(result, kind: str):
    import pandas as pd

    detail = result.detail
    if getattr(detail, "analysis", None) != "survival":
        raise ValueError(f"kind {kind!r} needs a survival validation (validate with time=COLUMN, horizon=T)")
    v = detail.validation
    if kind == "auc_time":
        c = v.auc_curve
        return pd.DataFrame({"time": c.times, "auc": c.values, "se": c.se, "lower": c.lower, "upper": c.upper})
    frame = pd.DataFrame({"time": v.survival.times, "survival": v.survival.values, "se": v.survival.se,
                          "lower": v.survival.lower, "upper": v.survival.upper, "censoring": v.censoring.values})
    for g in v.groups:
        frame[f"survival_risk_{g.lower_score:g}_{g.upper_score:g}"] = g.survival
    return frame


def result_frame(result, kind: str = "roc", *, points: int = 101):
    """A pandas DataFrame of ``result``: ``"roc"`` (the curve whose AUC is quoted and its band at ``points``
    false-positive fractions), ``"roc_points"`` (the empirical or binned points), ``"calibration"`` (per
    bin: edges, n, mean prediction, observed fraction with its interval, status), ``"sites"`` (per site:
    guarantee, noise, sensitivity, patients, budget, and with ``by_site`` its own AUC and O/E),
    ``"decision_curve"`` (net benefit per threshold, empty without ``decision_curve``), ``"subgroups"`` (per
    stratum, empty without ``strata``) or ``"comparison"`` (each model's AUC and the difference, empty without
    ``compare``); for a survival validation also ``"auc_time"`` (AUC(t) with its pointwise interval) and
    ``"kaplan_meier"`` (the pooled Kaplan-Meier with its interval, the censoring survival and each risk group's
    curve)."""
    import pandas as pd

    if kind not in FRAME_KINDS:
        raise ValueError(f"kind must be one of {FRAME_KINDS}, got {kind!r}")
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise ValueError(f"points must be an integer >= 2, got {points!r}")
    if kind == "roc":
        return _roc_frame(result, points)
    if kind == "roc_points":
        return pd.DataFrame({"fpr": result.roc.fpr, "tpr": result.roc.tpr})
    if kind == "decision_curve":
        return _decision_curve_frame(result)
    if kind == "subgroups":
        return _subgroups_frame(result)
    if kind == "comparison":
        return _comparison_frame(result)
    if kind in ("auc_time", "kaplan_meier"):
        return _survival_frame(result, kind)
    return _calibration_frame(result) if kind == "calibration" else _sites_frame(result)


def _f(x, digits: int = 3) -> str:
    return "-" if x is None or not math.isfinite(float(x)) else f"{float(x):.{digits}f}"


def result_repr(result) -> str:
    """One line: what was validated and the headline numbers (the full text is ``str(result)``)."""
    return (f"<ValidationResult protocol={result.protocol!r} dataset={result.dataset!r} outcome={result.outcome!r} "
            f"sites={len(result.sites)} n={result.n:.0f} AUC={_f(result.auc, 4)} [{_f(result.auc_ci[0], 4)}, "
            f"{_f(result.auc_ci[1], 4)}] epsilon={result.epsilon:g} delta={result.delta:g}>")


def _ci(e) -> str:
    if e is None:
        return "not estimable"
    return f"{_f(e.value)} [{_f(e.lower)}, {_f(e.upper)}]" if math.isfinite(e.lower) else _f(e.value, 4)


def result_html(result) -> str:
    """An HTML summary for Jupyter: headline numbers with what each interval includes, warnings, and
    folded tables of the calibration bins and the sites."""
    pct = round(100 * result.level)
    rows = [(f"AUC ({html.escape(result.auc_estimator)})",
             f"{_f(result.auc, 4)} &nbsp; {pct}% CI [{_f(result.auc_ci[0], 4)}, {_f(result.auc_ci[1], 4)}] "
             f"({html.escape(result.ci_method)}; includes {html.escape(result.auc_ci_includes)})")]
    if result.brier is not None:
        rows.append(("Brier score", f"{_ci(result.brier)} ({html.escape(result.brier.includes)})"))
    if getattr(result.detail, "analysis", None) == "survival":
        v = result.detail.validation
        rows += [("Harrell's C", _ci(v.harrell_c)), (f"Uno's C (tau {v.tau:g})", _ci(v.uno_c)),
                 ("integrated Brier score", _ci(v.integrated_brier)), ("scaled Brier score", _ci(v.scaled_brier)),
                 (f"observed risk by {v.horizon:g} (1 - KM)", _ci(v.observed))]
    c = result.calibration
    if c is not None:
        rows += [("O/E", _ci(c.oe)), ("calibration-in-the-large", _ci(c.citl)), ("calibration slope", _ci(c.slope)),
                 ("ICI, Emax (binned)", f"{_f(c.ici)}, {_f(c.emax)}")]
    if result.pr is not None:
        rows.append(("average precision", f"{_f(result.pr.ap)} [{_f(result.pr.ap_ci[0])}, {_f(result.pr.ap_ci[1])}]"))
    n = f"n = {result.n:.0f} ({result.n1:.0f} with outcome 1{'' if result.counts_exact else ', estimated'})"
    sites = f"{len(result.sites)} site{'' if len(result.sites) == 1 else 's'}"
    head = (f"<p><b>Distributed validation</b> of {html.escape(result.score_description)} on dataset "
            f"'{html.escape(result.dataset)}', outcome '{html.escape(result.outcome)}': {sites}, {n}, "
            f"&epsilon; = {result.epsilon:g}, &delta; = {result.delta:g}, {html.escape(result.protocol)} protocol "
            f"(privacy unit: {html.escape(result.privacy_unit)})</p>")
    table = "<table>" + "".join(f"<tr><th style='text-align:left'>{k}</th><td style='text-align:left'>{v}</td></tr>"
                                for k, v in rows) + "</table>"
    warn = "".join(f"<li>{html.escape(w)}</li>" for w in result.warnings)
    warn = f"<p><b>Warnings</b></p><ul>{warn}</ul>" if warn else ""
    cal = result_frame(result, "calibration").to_html(index=False, float_format=lambda v: f"{v:.4f}", na_rep="-")
    per_site = result_frame(result, "sites").to_html(float_format=lambda v: f"{v:.4g}", na_rep="-")
    folded = ""
    for kind, title in (("subgroups", f"Subgroups by {html.escape(getattr(result.subgroups, 'column', ''))}"),
                        ("comparison", "Two models compared on the same patients")):
        if getattr(result, kind) is not None:
            frame = result_frame(result, kind).to_html(index=False, float_format=lambda v: f"{v:.4f}", na_rep="-")
            folded += f"<details open><summary>{title} ({pct}% CIs include the privacy noise)</summary>{frame}</details>"
    return (head + table + warn + folded + "<details><summary>Calibration per bin</summary>" + cal + "</details>"
            + "<details><summary>Privacy per site</summary>" + per_site + "</details>")
