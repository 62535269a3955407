"""The calibration check: how often the default histogram protocol's CITL, slope and O/E intervals cover the pooled fits.

Each setting is a stress design (:mod:`simulations.stress.designs`) with ``n`` patients split over sites of
the given shares (contiguous blocks: patients are i.i.d.); the release is the stress study's default two-stage one
(:func:`simulations.stress.study.quantile_release`, each site's draw by :func:`dsroc.histogram.release.draw_release`),
the validation the analyst's (:func:`simulations.stress.study.release_validation`) and the reported intervals those
of the analyst's result (:func:`analyst.protocols.histogram.protocol.histogram_calibration`). The pooled truth of
a replication is the patient-level fit on all its patients (statsmodels): calibration-in-the-large, the intercept of
``logit P(y = 1) = a + logit p`` (offset, slope 1), the slope of ``y`` on ``logit p`` and O/E.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats

from analyst.protocols.histogram.multicentre import result_decision_curve
from analyst.protocols.histogram.protocol import histogram_calibration

from .cells import StressCell
from .designs import Design, sample_design
from .study import LEVEL, generate_data, quantile_release, release_validation

__all__ = ["CalibrationSetting", "SETTINGS", "ESTIMANDS", "site_of", "pooled_citl", "calibration_rows", "coverage_summary"]


class CalibrationSetting(NamedTuple):
    """``n`` patients of ``design`` over sites of relative sizes ``shares``, each release at ``epsilon``; ``thresholds``:
    decision thresholds on the grid (``HistogramOptions(thresholds=...)``), whose net benefit is checked too."""

    name: str
    design: Design
    n: int
    shares: tuple
    epsilon: float
    thresholds: tuple = ()


# Where the CITL depends most on the bins' noisy mean scores: low prevalence (few events per bin, wide top bins)
# over unequal or many sites and at a small epsilon; and small data (285 patients, as a small clinical data set).
_LOW = Design("binormal", 0.1, 0.76)
SETTINGS = {s.name: s for s in (
    CalibrationSetting("5 unequal sites", _LOW, 3_000, (0.4, 0.25, 0.15, 0.12, 0.08), 1.0),
    CalibrationSetting("8 sites", _LOW, 3_000, (1,) * 8, 1.0),
    CalibrationSetting("20 sites", _LOW, 3_000, (1,) * 20, 1.0),
    CalibrationSetting("epsilon 0.3", _LOW, 3_000, (1,) * 5, 0.3),
    CalibrationSetting("285 patients, 3 sites", Design("binormal", 0.3, 0.76), 285, (1,) * 3, 1.0),
    CalibrationSetting("3 x 150 at prevalence 0.1", _LOW, 450, (1,) * 3, 1.0),
    # Issue 35, item 3: net benefit and calibration at a clinician's thresholds, all from one release.
    CalibrationSetting("thresholds 0.1/0.2/0.3", Design("binormal", 0.2, 0.76), 3_000, (1,) * 5, 1.0, (0.1, 0.2, 0.3)),
)}


ESTIMANDS = ("citl", "slope", "oe")
_UNAVAILABLE = {"slope": "recalibration"}  # the validation's key where it differs from the estimand's


def site_of(n: int, shares) -> np.ndarray:
    """Each of ``n`` patients' site: contiguous blocks of sizes proportional to ``shares`` (largest remainders)."""
    w = np.asarray(shares, dtype=np.float64) / float(np.sum(shares))
    sizes = np.floor(w * n).astype(np.int64)
    sizes[np.argsort(-(w * n - sizes), kind="stable")[: n - sizes.sum()]] += 1
    return np.repeat(np.arange(w.size), sizes)


def pooled_citl(y, lp) -> float:
    """The patient-level calibration-in-the-large: intercept of the binomial GLM of ``y`` with offset ``lp``."""
    if y.min() == y.max():
        return float("nan")
    fit = sm.GLM(y, np.ones((y.size, 1)), family=sm.families.Binomial(), offset=lp).fit(tol=1e-12)
    return float(fit.params[0])


def calibration_rows(setting: CalibrationSetting, reps, seed: int, *, noise_draws: int = 100) -> pd.DataFrame:
    """One row per replication and estimand (:data:`ESTIMANDS`: CITL, slope, O/E) of ``setting``: the analyst's
    estimate, interval and SE (NaN with the reason in ``failure`` where the result has none) and the pooled value;
    with the setting's ``thresholds`` also the net benefit at each (estimand ``"net benefit at 0.1"``: the analyst's
    decision curve, :func:`analyst.protocols.histogram.multicentre.result_decision_curve`, against the brute force on the
    replication's patients)."""
    cell = StressCell(setting.design, setting.n, len(setting.shares), setting.epsilon)
    data = generate_data(setting.design, setting.n, reps, seed, slope=True)
    release = quantile_release(data, cell, seed, site=site_of(setting.n, setting.shares),
                               thresholds=setting.thresholds)
    rows = []
    for i, rep in enumerate(data.batch.reps.tolist()):
        sl = slice(i * setting.n, (i + 1) * setting.n)
        v = release_validation(release, i, seed=rep, noise_draws=noise_draws)
        cal = histogram_calibration(v, LEVEL, with_sums=True)
        pooled = {"citl": pooled_citl(data.batch.labels[sl], data.logits[sl]), "slope": data.pooled["slope"][i],
                  "oe": data.pooled["oe"][i]}
        estimates = {}
        for name in ESTIMANDS:
            e = None if cal is None else getattr(cal, name)
            why = "" if e is not None else v.unavailable.get(_UNAVAILABLE.get(name, name), "no estimate")
            estimates[name] = ((np.nan,) * 4 if e is None else (e.value, e.lower, e.upper, np.sqrt(max(e.variance, 0.0))),
                               why)
        population = {}
        if setting.thresholds:
            estimates.update(_net_benefit(v, release.total_sd, setting.thresholds))
            population = population_net_benefit(setting.design, setting.thresholds)
            p, y = data.batch.scores[sl], data.batch.labels[sl] == 1
            pooled.update({f"net benefit at {t:g}": float(np.mean(y & (p >= t)) - np.mean(~y & (p >= t)) * t / (1 - t))
                           for t in setting.thresholds})
        for name, (values, why) in estimates.items():
            rows.append({"setting": setting.name, "rep": rep, "estimand": name, "estimate": values[0],
                         "lower": values[1], "upper": values[2], "se": values[3], "pooled": pooled[name],
                         "population": population.get(name, np.nan), "failure": why})
    return pd.DataFrame(rows)


@lru_cache(maxsize=None)
def population_net_benefit(design: Design, thresholds: tuple, n: int = 4_000_000) -> dict:
    """The design's net benefit at each threshold (estimand name -> value), from ``n`` patients of one fixed stream:
    the value the net benefit's interval (sampling and noise) is about; its Monte Carlo SD is below 2e-4."""
    p, y, _ = sample_design(design, n, np.random.default_rng(20261204))
    y = y == 1
    return {f"net benefit at {t:g}": float(np.mean(y & (p >= t)) - np.mean(~y & (p >= t)) * t / (1 - t))
            for t in thresholds}


def _net_benefit(v, sigma: float, thresholds) -> dict:
    """The analyst's net benefit at each threshold (the result's decision curve) of validation ``v``, whose summed
    counts have noise SD ``sigma``: estimand name -> ((estimate, lower, upper, SE), failure)."""
    dc = result_decision_curve(v.counts0, v.counts1, v.edges, sigma=sigma, level=LEVEL, thresholds=thresholds)
    z = float(stats.norm.ppf(0.5 + LEVEL / 2))
    return {f"net benefit at {t:g}": ((nb, lo, hi, (hi - lo) / (2 * z)), "")
            for t, nb, lo, hi in zip(dc.thresholds, dc.net_benefit, dc.lower, dc.upper)}


def coverage_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per setting and estimand: replications, the share with an estimate, coverage of the pooled value, bias (mean
    error), the errors' SD over the mean stated SE, the mean interval width and, where the rows have a population
    value (the net benefit), the coverage of that."""
    out = []
    for (setting, estimand), g in rows.groupby(["setting", "estimand"], sort=False):
        ok = g[np.isfinite(g["estimate"]) & np.isfinite(g["pooled"])]
        err = ok["estimate"] - ok["pooled"]
        out.append({"setting": setting, "estimand": estimand, "replications": len(g), "available": len(ok) / len(g),
                    "coverage": float(((ok["lower"] <= ok["pooled"]) & (ok["pooled"] <= ok["upper"])).mean()),
                    "bias": float(err.mean()), "mean_se": float(ok["se"].mean()),
                    "spread_over_se": float(err.std(ddof=1) / ok["se"].mean()),
                    "width": float((ok["upper"] - ok["lower"]).mean()),
                    "population_coverage": (float(((ok["lower"] <= ok["population"]) & (ok["population"] <= ok["upper"]))
                                                  .mean()) if "population" in ok and ok["population"].notna().all()
                                            else np.nan)})
    return pd.DataFrame(out)
