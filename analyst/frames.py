"""Notebook views of a validation result: pandas tables (ROC points, calibration, sites) and an HTML summary."""

from __future__ import annotations

import html
import math

import numpy as np

__all__ = ["FRAME_KINDS", "result_frame", "result_html", "result_repr"]

FRAME_KINDS = ("roc", "calibration", "sites")


def _roc_frame(result, points: int):
    import pandas as pd

    import dsroc

    t = np.linspace(0.0, 1.0, points)
    frame = pd.DataFrame({"fpr": t, "tpr": dsroc.rocglm_curve(result.rocglm.params, t)})
    if result.rocglm.cov is not None:
        frame["tpr_lower"], frame["tpr_upper"] = dsroc.rocglm_band(result.rocglm.params, result.rocglm.cov, t,
                                                                   level=result.level)
    return frame


def _calibration_frame(result):
    import pandas as pd

    cal, h = result.calibration, result.calibration_hierarchy
    withheld: dict[int, list[str]] = {}
    for site, b in cal.suppressed:
        withheld.setdefault(int(b), []).append(site)
    frame = pd.DataFrame({"bin_lower": cal.lower, "bin_upper": cal.upper,
                          "n": np.where(cal.count > 0, cal.count, np.nan),  # a withheld bin's count is unknown
                          "mean_predicted": cal.predicted, "observed": cal.observed})
    if h is not None:
        frame["observed_lower"], frame["observed_upper"] = h.curve_lower, h.curve_upper
    frame["withheld_by"] = [", ".join(withheld.get(b, [])) for b in range(cal.count.size)]
    return frame


def _sites_frame(result):
    import pandas as pd

    frame = pd.DataFrame([p.to_dict() for p in result.privacy.values()], index=pd.Index(list(result.privacy),
                                                                                          name="site"))
    cal = result.calibration
    frame["calibration_patients"] = [int(np.sum(cal.per_site[s].count)) if s in cal.per_site else 0
                                     for s in frame.index]
    frame["calibration_cells_withheld"] = [sum(1 for site, _ in cal.suppressed if site == s) for s in frame.index]
    return frame


def result_frame(result, kind: str = "roc", *, points: int = 101):
    """A pandas DataFrame of ``result``: ``"roc"`` (fitted curve and band at ``points`` false-positive
    fractions), ``"calibration"`` (per bin, with intervals and the sites that withheld it) or ``"sites"``
    (per site: privacy parameters, budget, calibration cells)."""
    if kind not in FRAME_KINDS:
        raise ValueError(f"kind must be one of {FRAME_KINDS}, got {kind!r}")
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise ValueError(f"points must be an integer >= 2, got {points!r}")
    if kind == "roc":
        return _roc_frame(result, points)
    return _calibration_frame(result) if kind == "calibration" else _sites_frame(result)


def _f(x, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def result_repr(result) -> str:
    """One line: what was validated and the headline numbers (the full text is ``str(result)``)."""
    return (f"<ValidationResult dataset={result.dataset!r} outcome={result.outcome!r} sites={len(result.sites)} "
            f"n={result.n} AUC={_f(result.auc, 4)} [{_f(result.auc_ci[0], 4)}, {_f(result.auc_ci[1], 4)}] "
            f"Brier={_f(result.brier, 4)} epsilon={result.epsilon:g} delta={result.delta:g}>")


def result_html(result) -> str:
    """An HTML summary for Jupyter: headline numbers, warnings, the calibration and per-site tables."""
    pct = round(100 * result.level)
    rows = [("AUC (ROC-GLM)", f"{_f(result.auc, 4)} &nbsp; {pct}% CI [{_f(result.auc_ci[0], 4)}, "
                              f"{_f(result.auc_ci[1], 4)}] ({html.escape(result.ci_method)})"),
            ("ROC-GLM", f"&gamma;<sub>1</sub> = {_f(result.rocglm.params[0], 4)}, &gamma;<sub>2</sub> = "
                        f"{_f(result.rocglm.params[1], 4)}, {'converged' if result.rocglm.converged else 'NOT converged'}"),
            ("Brier score", _f(result.brier, 4))]
    h = result.calibration_hierarchy
    if h is not None:
        ci = lambda e: f"{_f(e.value)} [{_f(e.lower)}, {_f(e.upper)}]"  # noqa: E731
        rows += [("O/E", ci(h.oe)), ("calibration intercept", ci(h.intercept)), ("calibration slope", ci(h.slope))]
    head = (f"<p><b>Distributed validation</b> of {html.escape(result.score_source)} on dataset "
            f"'{html.escape(result.dataset)}', outcome '{html.escape(result.outcome)}': {len(result.sites)} sites, "
            f"n = {result.n} ({result.n1} with outcome 1), &epsilon; = {result.epsilon:g}, &delta; = {result.delta:g}, "
            f"{html.escape(result.protocol)} protocol</p>")
    table = "<table>" + "".join(f"<tr><th style='text-align:left'>{k}</th><td style='text-align:left'>{v}</td></tr>"
                                for k, v in rows) + "</table>"
    warn = "".join(f"<li>{html.escape(w)}</li>" for w in list(result.warnings) + list(result.rocglm.warnings))
    warn = f"<p><b>Warnings</b></p><ul>{warn}</ul>" if warn else ""
    cal = result_frame(result, "calibration").to_html(index=False, float_format=lambda v: f"{v:.4f}", na_rep="-")
    sites = result_frame(result, "sites").to_html(float_format=lambda v: f"{v:.4g}", na_rep="-")
    return (head + table + warn + "<details><summary>Calibration per bin</summary>" + cal + "</details>"
            + "<details><summary>Privacy per site</summary>" + sites + "</details>")
