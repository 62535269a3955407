"""The survival study's target cell through real site daemons: each replication a cohort at five TLS daemons.

The in-process study (:func:`simulations.survival.study.run_block`) draws the sites' releases with the function the
site calls and post-processes them with :mod:`dsroc.survival`. Here the same cohorts
(:func:`simulations.survival.study.cohort`: the same seed, the same unequal site split) are written as each site's
files (time, event, predicted risk), served by five ``python -m site_node serve`` subprocesses over mutual TLS whose
policy lists the study's public time grid, and validated as a user does: ``fed.validate(..., time="time",
horizon=1)`` with the study's time edges, its Uno truncation ``tau`` and the risk sums. The sites draw their own noise,
so the two runs share the patients but not the noise.

Two things differ from the study by construction. A site accepts only score edges of the grids its policy allows:
the study's quantile edges are moved to the nearest edge of a 10 000-bin equal grid (at most 5e-5 away). The
validation is asked for AUC(t) at the study's time, the median follow-up (``auc_times``).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import tomli_w

from ..survival.designs import HORIZON, Design
from ..survival.report import summarise
from ..survival.run import plan_tasks
from ..survival.study import DRAWS, STATISTICS, Cell, Grids, cohort, grids, run_block

__all__ = ["SURVIVAL_CELLS", "FINEST_SCORE_GRID", "site_score_edges", "serve_cohorts", "survival_daemon_rows",
           "run_survival_daemon_check", "survival_daemon_table"]

#: the survival study's target cells (epsilon 1, n 10 000, 5 sites, 50 % and 30 % censoring, Weibull)
SURVIVAL_CELLS = (Cell(Design("weibull", 0.3, 0.5), 10_000, 5, 1.0), Cell(Design("weibull", 0.3, 0.3), 10_000, 5, 1.0))
#: the finest equal score grid the sites' policy allows: the study's score edges are moved onto it
FINEST_SCORE_GRID = 10_000
STARTUP_SECONDS = 300.0
SOURCES = ("daemons", "study")
TIME, EVENT, RISK = "time", "event", "risk"


def site_score_edges(g: Grids) -> np.ndarray:
    """The study's interior score edges, each moved to the nearest edge of the :data:`FINEST_SCORE_GRID`-bin equal
    grid (an edge the sites' policy allows)."""
    from dsroc.histogram.grid import allowed_edges

    allowed = allowed_edges((FINEST_SCORE_GRID,), "equal", lo=0.0, hi=1.0)
    interior = g.score_edges[1:-1]
    moved = allowed[np.abs(allowed[None, :] - interior[:, None]).argmin(axis=1)]
    if np.any(np.diff(moved) <= 0):
        raise ValueError("score edges: two of the study's edges fall on one edge of the sites' finest grid")
    return moved


def serve_cohorts(root, cohorts: dict, cell: Cell, g: Grids, *, max_epsilon: float = 10.0,
                  budget_epsilon: float = 20.0):
    """Write five sites' files under ``root``: each cohort ``cohorts[name] = (time, event, risk, site)`` as one
    dataset (its own population: its own budget of ``budget_epsilon``), declared with its time column, and a policy
    listing the study's interior time edges ``g`` and the finest score grid. Returns the
    :class:`analyst.demo.local_sites.LocalFederation`."""
    from analyst.demo.local_sites import write_local_federation

    frames = {name: [pd.DataFrame({TIME: t[s == k], EVENT: e[s == k], RISK: r[s == k]}) for k in range(cell.sites)]
              for name, (t, e, r, s) in cohorts.items()}
    local = write_local_federation(root, frames, outcome=EVENT, score=RISK, protocols=("histogram",),
                                   budget_epsilon=budget_epsilon)
    interior = g.time_edges[1:-1]
    for _, path, _ in local.configs:  # the survival keys the binary writer does not know
        config = tomllib.loads(path.read_text(encoding="utf-8"))
        policy = config["policy"]
        policy.update(max_epsilon=float(max_epsilon), survival_time_edges=[float(v) for v in interior],
                      survival_max_time_bins=interior.size + 1,
                      histogram_bins=sorted({5, 8, 10, 12, 20, 50, 100, 200, FINEST_SCORE_GRID}),
                      histogram_max_cells=(interior.size + 1) * (g.score_edges.size - 1))
        for dataset in config["datasets"].values():
            dataset["time_columns"] = [TIME]
        path.write_text(tomli_w.dumps(config), encoding="utf-8")
    return local


def _auc_at(curve, t: float):
    at = np.flatnonzero(np.isclose(curve.times, t, rtol=1e-12, atol=0))
    if at.size == 0:
        raise ValueError(f"the validation's AUC(t) curve ({curve.times.tolist()}) misses the study's time {t:g}")
    i = at[0]
    return curve.values[i], curve.se[i], curve.lower[i], curve.upper[i]


def survival_daemon_rows(fed, cell: Cell, g: Grids, names: dict, *, epsilon: float | None = None,
                         risk_sums: bool = True, draws: int = DRAWS) -> pd.DataFrame:
    """One row per replication and statistic (the study's columns: ``estimate, se, lower, upper``) from
    ``fed.validate(..., time=, horizon=)`` on each dataset ``names[rep]``; ``epsilon`` defaults to the cell's."""
    rows = []
    for rep, dataset in names.items():
        res = fed.validate(dataset, EVENT, score=RISK, time=TIME, horizon=HORIZON,
                           epsilon=cell.epsilon if epsilon is None else epsilon, delta=1e-5,
                           time_edges=tuple(g.time_edges[1:-1]), edges=tuple(site_score_edges(g)), tau=g.tau,
                           risk_sums=risk_sums, by_site=False, draws=draws, seed=rep, auc_times=(g.auc_time,))
        v = res.detail.validation
        values = {"auc": _auc_at(v.auc_curve, g.auc_time)}
        values.update({name: (i.value, i.se, i.lower, i.upper) for name, i in
                       (("uno", v.uno_c), ("harrell", v.harrell_c), ("brier", v.brier), ("oe", v.oe))})
        for name in STATISTICS:
            estimate, se, lower, upper = (float(x) for x in values[name])
            rows.append({"cell": cell.name, "rep": rep, "statistic": name, "estimate": estimate, "se": se,
                         "lower": lower, "upper": upper})
    return pd.DataFrame(rows)


def run_survival_daemon_check(out, *, reps: int = 30, seed: int = 1, cells=SURVIVAL_CELLS, draws: int = DRAWS,
                              stream=sys.stderr) -> pd.DataFrame:
    """Run each cell's replications through five real daemons and in process (:func:`run_block` on the study's
    blocks, the same cohorts); write ``survival_daemons.csv`` (the study's rows, ``source`` ``"daemons"`` or
    ``"study"``) and ``survival_daemons.md`` (:func:`survival_daemon_table`) into ``out``; return the rows."""
    from analyst import Federation
    from analyst.demo import running_daemons

    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 2:
        raise ValueError(f"reps must be an integer >= 2 (a coverage needs replications), got {reps!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda text: print(text, file=stream, flush=True)) if stream else (lambda text: None)
    shutil.rmtree(out / "survival-federation", ignore_errors=True)  # new keys, tokens and ledgers
    frames = []
    for c, cell in enumerate(cells):
        g = grids(cell.design)
        # the study's own blocks of replications (they seed its noise): its rows are those of `survival --targets`
        study = pd.concat([run_block(cell, t.reps, seed, draws=draws) for t in plan_tasks([cell], reps)],
                          ignore_index=True).sort_values(["rep"], kind="stable", ignore_index=True)
        names = {rep: f"s{c}r{rep}" for rep in range(reps)}
        local = serve_cohorts(out / "survival-federation" / f"c{c}",
                              {names[rep]: cohort(cell, rep, seed) for rep in range(reps)}, cell, g)
        started = time.perf_counter()
        with (running_daemons(local.configs, pki=local.pki, token=local.token, timeout=STARTUP_SECONDS),
              Federation.from_file(local.federation) as fed):
            say(f"{cell.name}: five daemons serving {reps} cohorts after {time.perf_counter() - started:.0f} s")
            started = time.perf_counter()
            daemons = survival_daemon_rows(fed, cell, g, names, draws=draws)
            say(f"{cell.name}: {reps} survival validations through the daemons in "
                f"{time.perf_counter() - started:.0f} s")
        truth = study.drop(columns=["estimate", "se", "lower", "upper", "failure"])
        frames.append(truth.merge(daemons, on=["cell", "rep", "statistic"], validate="one_to_one")
                      .assign(failure="", source="daemons"))
        frames.append(study.assign(source="study"))
    rows = pd.concat(frames, ignore_index=True)
    rows.to_csv(out / "survival_daemons.csv", index=False)
    (out / "survival_daemons.md").write_text(_markdown(survival_daemon_table(rows), reps, seed), encoding="utf-8")
    (out / "survival_config.json").write_text(json.dumps({"reps": reps, "seed": seed, "draws": draws,
                                                          "cells": [c.name for c in cells]}, indent=1),
                                              encoding="utf-8")
    return rows


def survival_daemon_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per cell and statistic, the daemons' and the in-process study's bias, MAE and coverage against the
    population value (:func:`simulations.survival.report.summarise`), side by side."""
    parts = []
    for source in SOURCES:
        s = summarise(rows[rows["source"] == source].drop(columns="source"))
        keep = ["bias_pop", "bias_pop_mcse", "mae_pop", "coverage_pop", "coverage_pop_mcse", "mean_se", "failures"]
        parts.append(s.set_index(["cell", "statistic"])[keep].add_suffix(f"_{source}"))
    pop = summarise(rows[rows["source"] == "study"].drop(columns="source")).set_index(["cell", "statistic"])
    return pd.concat([pop[["reps", "population", "mae_pooled_pop"]], *parts], axis=1).reset_index()


def _markdown(table: pd.DataFrame, reps: int, seed: int) -> str:
    lines = [f"# The survival target cell through real site daemons ({reps} replications, seed {seed})", "",
             "Against the population value; the study's rows are the in-process study on the same cohorts.", "",
             "| cell | statistic | population | bias daemons | bias study | MAE daemons | MAE study | coverage daemons "
             "| coverage study | mean SE daemons | mean SE study |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(f"| {r.cell} | {r.statistic} | {r.population:.4f} | {r.bias_pop_daemons:+.4f} ± "
                     f"{r.bias_pop_mcse_daemons:.4f} | {r.bias_pop_study:+.4f} ± {r.bias_pop_mcse_study:.4f} | "
                     f"{r.mae_pop_daemons:.4f} | {r.mae_pop_study:.4f} | {r.coverage_pop_daemons:.3f} ± "
                     f"{r.coverage_pop_mcse_daemons:.3f} | {r.coverage_pop_study:.3f} ± "
                     f"{r.coverage_pop_mcse_study:.3f} | {r.mean_se_daemons:.4f} | {r.mean_se_study:.4f} |")
    return "\n".join(lines) + "\n"
