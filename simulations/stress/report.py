"""The stress study's tables and figure: per-cell accuracy and coverage with Monte-Carlo SEs, FedCurve beside ours."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from .cells import CENTRE
from .study import ESTIMANDS
from .run import load_stress

__all__ = ["FEDCURVE", "TARGET_COVERAGE", "TARGETS", "summarise", "headline", "targets_table", "fedcurve_table", "target_misses",
           "write_stress_report"]

# FedCurve's published AUC MAE (secure aggregation assumed, 5 sites, epsilon = 1): design, n -> MAE.
# Its skewed design is FedCurve's, not this generator's (same name, other family).
FEDCURVE = {("binormal", 1_000): 0.0107, ("binormal", 10_000): 0.0014, ("skewed", 10_000): 0.0015}
TARGET_COVERAGE = 0.93
KEYS = ["cell", "protocol", "estimand"]
DESIGN = ["shape", "prevalence", "design_auc", "n", "sites", "epsilon", "delta", "tau"]


def _mean_se(x) -> tuple[float, float]:
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return np.nan, np.nan
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else np.nan


def _share_se(hits) -> tuple[float, float]:
    hits = np.asarray(hits, dtype=bool)
    if hits.size == 0:
        return np.nan, np.nan
    c = hits.mean()
    return float(c), float(np.sqrt(c * (1 - c) / hits.size))


def _metrics(part: pd.DataFrame) -> dict:
    """Accuracy and coverage of one (cell, protocol, estimand) over its replications, each with its MC SE."""
    answered = part[np.isfinite(part["estimate"])]
    ok = answered[np.isfinite(answered["pooled"])]
    err = (ok["estimate"] - ok["pooled"]).to_numpy()
    row = {"replications": len(part), "failures": int(len(part) - len(answered)), "mean_events": part["n1"].mean()}
    row["bias"], row["bias_se"] = _mean_se(err)
    row["mae"], row["mae_se"] = _mean_se(np.abs(err))
    mse, mse_se = _mean_se(err**2)
    row["rmse"] = float(np.sqrt(mse)) if np.isfinite(mse) else np.nan
    row["rmse_se"] = mse_se / (2 * row["rmse"]) if row["rmse"] > 0 else np.nan
    ci = answered[np.isfinite(answered["lower"]) & np.isfinite(answered["upper"])]
    pooled = ci[np.isfinite(ci["pooled"])]
    row["coverage_pooled"], row["coverage_pooled_se"] = _share_se(
        (pooled["lower"] <= pooled["pooled"]) & (pooled["pooled"] <= pooled["upper"]))
    row["coverage_population"], row["coverage_population_se"] = _share_se(
        (ci["lower"] <= ci["population"]) & (ci["population"] <= ci["upper"]))
    row["ci_width"], row["ci_width_se"] = _mean_se(ci["upper"] - ci["lower"])
    row["median_ci_width"] = float((ci["upper"] - ci["lower"]).median()) if len(ci) else np.nan
    row["mean_se"], row["mean_se_se"] = _mean_se(answered["se"][np.isfinite(answered["se"])])
    row["population"] = float(part["population"].iat[0])
    row["mean_pooled"] = float(part["pooled"].mean())
    row["mean_estimate"] = float(answered["estimate"].mean()) if len(answered) else np.nan
    used = answered["estimator"].replace("", "?").value_counts() if "estimator" in answered else pd.Series(dtype=int)
    row["reported"] = ", ".join(f"{name} {count}" for name, count in used.items())  # how often each AUC estimator
    return row


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, protocol, estimand): the design, then :func:`_metrics`."""
    rows = []
    for key, part in results.groupby(KEYS, sort=False):
        first = part.iloc[0]
        rows.append({**dict(zip(KEYS, key)), **{k: first[k] for k in DESIGN}, **_metrics(part)})
    out = pd.DataFrame(rows)
    return out.sort_values(["protocol", "estimand", "shape", "prevalence", "design_auc", "n", "sites", "epsilon", "tau"],
                           ignore_index=True)


def _pick(summary, protocol="histogram", estimand="auc", **factors) -> pd.DataFrame:
    f = dict(CENTRE)
    f.update(factors)
    sel = (summary["protocol"] == protocol) & (summary["estimand"] == estimand)
    for k, col in (("shape", "shape"), ("prevalence", "prevalence"), ("auc", "design_auc"), ("n", "n"),
                   ("sites", "sites"), ("epsilon", "epsilon")):
        if not (protocol == "paper" and k == "epsilon"):
            sel &= np.isclose(summary[col], f[k]) if k != "shape" else summary[col] == f[k]
    return summary[sel]


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """The cells the targets name: low prevalence, the tuned binormal design, the skewed design, calibration."""
    wanted = [("prevalence 0.02, n 10 000", {"prevalence": 0.02}, "auc"),
              ("binormal, n 1 000", {"n": 1_000}, "auc"),
              ("binormal, n 10 000 (centre)", {}, "auc"),
              ("skewed logistic, n 10 000", {"shape": "skewed"}, "auc"),
              ("calibrated binormal, n 10 000: slope", {}, "slope"),
              ("calibrated binormal, n 10 000: Brier", {}, "brier"),
              ("calibrated binormal, n 10 000: O/E", {}, "oe"),
              ("prevalence 0.02, n 10 000: slope", {"prevalence": 0.02}, "slope"),
              ("AUC 0.99, n 10 000", {"auc": 0.99}, "auc")]
    rows = []
    for label, factors, estimand in wanted:
        for protocol in ("histogram", "histogram_equal", "flat20"):
            hit = _pick(summary, protocol, estimand, **factors)
            if len(hit):
                rows.append({**hit.iloc[0].to_dict(), "case": label})
    return pd.DataFrame(rows)


# The stress study's targets at 5 sites, epsilon 1: (label, factors, estimand, metric, bound, "max" or "min").
TARGETS = (
    ("prevalence 0.02, n 10 000: AUC MAE", {"prevalence": 0.02}, "auc", "mae", 0.02, "max"),
    ("binormal, n 1 000: AUC MAE", {"n": 1_000}, "auc", "mae", 0.013, "max"),
    ("binormal, n 10 000: AUC MAE", {}, "auc", "mae", 0.0018, "max"),
    ("skewed, n 10 000: AUC MAE", {"shape": "skewed"}, "auc", "mae", 0.0025, "max"),
    ("calibrated binormal, n 10 000: slope CI covers 1", {}, "slope", "coverage_population", 0.93, "min"),
    ("calibrated binormal, n 10 000: Brier CI covers the unbinned", {}, "brier", "coverage_pooled", 0.93, "min"),
    ("calibrated binormal, n 10 000: O/E CI covers the unbinned", {}, "oe", "coverage_pooled", 0.93, "min"),
    ("prevalence 0.02, n 10 000: AUC CI covers the pooled", {"prevalence": 0.02}, "auc", "coverage_pooled", 0.93, "min"),
)


def targets_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The stress study's targets beside the histogram protocol's values, and the one-release equal grid's
    (``histogram_equal``, the default before the quantile grid); cells absent from the run are left out."""
    rows = []
    for label, factors, estimand, metric, bound, kind in TARGETS:
        hit = _pick(summary, "histogram", estimand, **factors)
        if len(hit):
            value = float(hit[metric].iat[0])
            equal = _pick(summary, "histogram_equal", estimand, **factors)
            rows.append({"target": label, "equal_grid": float(equal[metric].iat[0]) if len(equal) else np.nan,
                         "value": value, "mc_se": float(hit[f"{metric}_se"].iat[0]), "bound": bound,
                         "met": value <= bound if kind == "max" else value >= bound})
    return pd.DataFrame(rows, columns=["target", "equal_grid", "value", "mc_se", "bound", "met"])


def fedcurve_table(summary: pd.DataFrame) -> pd.DataFrame:
    """FedCurve's published MAE beside this study's histogram, equal-grid, flat-20 and secagg rows (5 sites, epsilon 1)."""
    rows = []
    for (shape, n), fed in FEDCURVE.items():
        row = {"shape": shape, "n": n, "fedcurve_mae": fed}
        for protocol in ("histogram", "histogram_equal", "flat20", "secagg"):
            hit = _pick(summary, protocol, "auc", shape=shape, n=n)
            row[f"{protocol}_mae"] = hit["mae"].iat[0] if len(hit) else np.nan
            row[f"{protocol}_mae_se"] = hit["mae_se"].iat[0] if len(hit) else np.nan
        row["histogram_over_fedcurve"] = row["histogram_mae"] / fed
        rows.append(row)
    return pd.DataFrame(rows)


def _target_cells(summary: pd.DataFrame, protocol: str) -> pd.DataFrame:
    """AUC cells the coverage and bias target applies to: n >= 1 000 and >= 50 events on average."""
    return summary[(summary["protocol"] == protocol) & (summary["estimand"] == "auc") & (summary["n"] >= 1_000)
                   & (summary["mean_events"] >= 50)]


def target_misses(summary: pd.DataFrame, protocol: str = "histogram") -> pd.DataFrame:
    """AUC cells with n >= 1 000 and >= 50 events that miss the coverage and bias target: CI coverage of the pooled or the
    population AUC below 0.93, or |bias| (against the pooled AUC) above half the mean reported SE; ``misses``
    names which, worst pooled coverage first."""
    s = _target_cells(summary, protocol).copy()
    why = pd.DataFrame({"pooled coverage": s["coverage_pooled"] < TARGET_COVERAGE,
                        "population coverage": s["coverage_population"] < TARGET_COVERAGE,
                        "bias": s["bias"].abs() > 0.5 * s["mean_se"]}, index=s.index)
    s["misses"] = why.apply(lambda r: ", ".join(k for k, v in r.items() if v), axis=1)
    return s[why.any(axis=1)].sort_values("coverage_pooled", ignore_index=True)


def _md(frame: pd.DataFrame, columns, digits=4) -> str:
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    body = []
    for _, r in frame.iterrows():
        cells = []
        for c in columns:
            v = r[c]
            cells.append(f"{v:.{digits}g}" if isinstance(v, (float, np.floating)) else str(v))
        body.append("| " + " | ".join(cells) + " |")
    return head + "\n".join(body) + "\n"


def write_stress_report(out) -> dict:
    """Write ``stress.csv`` (every cell), ``stress.md`` (headline, FedCurve, paper protocol, coverage failures)
    and ``stress.png`` into ``out``; returns a short summary."""
    from .figure import stress_figure

    out = Path(out)
    summary = summarise(load_stress(out))
    summary.to_csv(out / "stress.csv", index=False)
    head, fed = headline(summary), fedcurve_table(summary)
    paper = summary[summary["protocol"] == "paper"].sort_values(["shape", "tau", "n"])
    bad = target_misses(summary)
    cols = ["case", "protocol", "mean_estimate", "mean_pooled", "population", "bias", "mae", "mae_se", "rmse",
            "coverage_pooled", "coverage_population", "median_ci_width", "mean_se", "failures", "replications",
            "reported"]
    targets = targets_table(summary)
    misses = {p: len(target_misses(summary, p)) for p in ("histogram", "histogram_equal", "secagg")}
    text = ["# Stress study", "", f"Run: {json.loads((out / 'config.json').read_text())}", "",
            "## The stress study's targets (histogram protocol; equal_grid: the one-release equal grid before it)", "",
            _md(targets, list(targets.columns)),
            "## Headline cells (5 sites, epsilon 1, delta 1e-5 unless stated)", "", _md(head, cols),
            "## FedCurve beside ours (AUC MAE against the pooled empirical AUC)", "",
            _md(fed, list(fed.columns)), "## Paper protocol, noise-corrected AUC", "",
            _md(paper, ["shape", "n", "tau", "epsilon", "delta", "bias", "mae", "coverage_pooled",
                        "coverage_pooled_se", "coverage_population", "ci_width", "replications"]),
            f"## Histogram AUC cells with n >= 1 000 and >= 50 events that miss coverage {TARGET_COVERAGE} "
            "(pooled or population) or |bias| <= mean SE / 2", "",
            f"{len(bad)} of {len(_target_cells(summary, 'histogram'))} cells (equal grid: "
            f"{misses['histogram_equal']}, secagg: {misses['secagg']})", "",
            _md(bad, ["cell", "misses", "bias", "mae", "mean_se", "coverage_pooled", "coverage_population", "reported"])]
    (out / "stress.md").write_text("\n".join(text))
    stress_figure(summary, fed, out / "stress.png")
    return {"cells": int(summary["cell"].nunique()), "target_misses": misses,
            "files": [str(out / f) for f in ("stress.csv", "stress.md", "stress.png")]}
