"""The stress study's target cells through real site daemons: each replication a dataset at five TLS daemons.

The in-process study (:mod:`simulations.stress.study`) simulates what the sites release and calls the analyst's estimator
on it. Here the same patients (``generate_data``, the same seed and site split: patient ``i`` at site ``i mod 5``)
are served by five ``python -m site_node serve`` subprocesses with a default site policy, mutual TLS and signing
keys (:mod:`analyst.demo.local_sites`), and the analyst asks them through :class:`analyst.Federation` exactly as a user
does (``fed.validate(...)``, default options). The sites draw their own noise, so the two runs share the data
but not the noise: their summaries agree within Monte Carlo error when the study simulates the deployed protocols
faithfully.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..stress.cells import StressCell
from ..stress.study import RESULT_COLUMNS, generate_data, histogram_rows
from ..stress.designs import Design, population_truth
from ..stress.report import summarise

__all__ = ["TARGET_CELLS", "DAEMON_PROTOCOLS", "daemon_rows", "run_daemon_check", "daemon_table"]

SITES = 5
#: the stress study's AUC targets (5 sites, epsilon 1, delta 1e-5) and the MAE bound of each
TARGET_CELLS = (
    (StressCell(Design("binormal", 0.02, 0.76), 10_000, SITES, 1.0), 0.02),
    (StressCell(Design("binormal", 0.3, 0.76), 1_000, SITES, 1.0), 0.013),
    (StressCell(Design("binormal", 0.3, 0.76), 10_000, SITES, 1.0), 0.0018),
    (StressCell(Design("skewed", 0.3, 0.76), 10_000, SITES, 1.0), 0.0025),
)
DAEMON_PROTOCOLS = ("histogram", "secagg")
STARTUP_SECONDS = 300.0  # a site reports SERVING once its datasets are ready (one helper reads them all)


def _dataset_frames(data, n: int) -> list[list[pd.DataFrame]]:
    """Per replication, each site's patients (``i mod SITES``, as the in-process study splits them)."""
    b = data.batch
    out = []
    for i in range(b.size):
        p, y = b.scores[i * n:(i + 1) * n], b.labels[i * n:(i + 1) * n]
        site = np.arange(n) % SITES
        out.append([pd.DataFrame({"pred": p[site == k], "y": y[site == k].astype(int)}) for k in range(SITES)])
    return out


def daemon_rows(fed, data, cell: StressCell, names: list[str], protocol: str) -> pd.DataFrame:
    """One AUC row per replication (the in-process study's columns) from ``fed.validate`` on each dataset."""
    b, pop = data.batch, population_truth(cell.design)
    rows = []
    for i, dataset in enumerate(names):
        res = fed.validate(dataset, "y", score="pred", epsilon=cell.epsilon, delta=cell.delta, protocol=protocol)
        validation = getattr(res.detail, "validation", None)
        rows.append({"rep": int(b.reps[i]), "n1": int(b.n1[i]), "estimate": res.auc, "lower": res.auc_ci[0],
                     "upper": res.auc_ci[1], "se": float(np.sqrt(res.auc_variance)),
                     "tau": float(getattr(res.detail, "sigma", np.nan)), "pooled": data.pooled["auc"][i],
                     "estimator": getattr(validation, "estimator", ""), "failure": ""})
    d = cell.design
    frame = pd.DataFrame(rows).assign(
        cell=cell.name, protocol=f"{protocol} (daemons)", shape=d.shape, prevalence=d.prevalence, design_auc=d.auc,
        n=cell.n, sites=cell.sites, epsilon=cell.epsilon, delta=cell.delta, estimand="auc", population=pop.auc)
    return frame[RESULT_COLUMNS]


def run_daemon_check(out, *, reps: int = 50, seed: int = 1, cells=TARGET_CELLS, protocols=DAEMON_PROTOCOLS,
                     stream=sys.stderr) -> pd.DataFrame:
    """Run every cell's replications through five real daemons and in process; write ``daemons.csv`` (one AUC row
    per replication and protocol, ``"<protocol> (daemons)"`` and the study's ``"<protocol>"``) and ``daemons.md``
    (:func:`daemon_table`) into ``out``; return the rows."""
    from analyst import Federation
    from analyst.demo import running_daemons
    from analyst.demo.local_sites import write_local_federation

    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda text: print(text, file=stream, flush=True)) if stream else (lambda text: None)
    shutil.rmtree(out / "federation", ignore_errors=True)  # new keys, tokens and ledgers: a rerun starts afresh
    frames = []
    for c, (cell, _) in enumerate(cells):  # one federation per cell: a site readies its datasets before serving
        data = generate_data(cell.design, cell.n, range(reps), seed, slope=False)
        names = [f"c{c}r{r}" for r in range(reps)]
        local = write_local_federation(out / "federation" / f"c{c}", dict(zip(names, _dataset_frames(data, cell.n))),
                                       protocols=protocols)
        started = time.perf_counter()
        with (running_daemons(local.configs, pki=local.pki, token=local.token, timeout=STARTUP_SECONDS),
              Federation.from_file(local.federation) as fed):
            say(f"{cell.name}: five daemons serving {reps} datasets after {time.perf_counter() - started:.0f} s")
            for protocol in protocols:
                started = time.perf_counter()
                frames.append(daemon_rows(fed, data, cell, names, protocol))
                say(f"{cell.name} {protocol}: {reps} validations through the daemons in "
                    f"{time.perf_counter() - started:.0f} s")
        for protocol in protocols:
            study = histogram_rows(data, cell, seed, protocol)
            frames.append(study[study["estimand"] == "auc"])
    rows = pd.concat(frames, ignore_index=True)
    rows.to_csv(out / "daemons.csv", index=False)
    table = daemon_table(rows, dict((cell.name, bound) for cell, bound in cells))
    (out / "daemons.md").write_text(_markdown(table, reps, seed), encoding="utf-8")
    (out / "config.json").write_text(json.dumps({"reps": reps, "seed": seed, "protocols": list(protocols),
                                                 "cells": [c.name for c, _ in cells]}, indent=1), encoding="utf-8")
    return rows


def daemon_table(rows: pd.DataFrame, bounds: dict) -> pd.DataFrame:
    """Per cell and protocol: the daemons' and the in-process study's AUC MAE, bias and coverage (pooled and
    population) with the MAE's Monte Carlo SE, and the stress study's MAE bound."""
    s = summarise(rows)
    s["source"] = np.where(s["protocol"].str.endswith("(daemons)"), "daemons", "study")
    s["protocol"] = s["protocol"].str.replace(" (daemons)", "", regex=False)
    wide = s.pivot_table(index=["cell", "protocol"], columns="source", sort=False,
                         values=["mae", "mae_se", "bias", "coverage_pooled", "coverage_population", "mean_se"])
    wide.columns = [f"{metric}_{source}" for metric, source in wide.columns]
    wide = wide.reset_index()
    wide["mae_bound"] = wide["cell"].map(bounds)
    return wide


def _markdown(table: pd.DataFrame, reps: int, seed: int) -> str:
    lines = [f"# The target cells through real site daemons ({reps} replications per cell, seed {seed})", "",
             "| cell | protocol | MAE daemons | MAE study | bound | bias daemons | bias study | coverage daemons "
             "(pooled / population) | coverage study |", "|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(f"| {r.cell} | {r.protocol} | {r.mae_daemons:.4f} ± {r.mae_se_daemons:.4f} | "
                     f"{r.mae_study:.4f} ± {r.mae_se_study:.4f} | {r.mae_bound:g} | {r.bias_daemons:+.4f} | "
                     f"{r.bias_study:+.4f} | {r.coverage_pooled_daemons:.3f} / {r.coverage_population_daemons:.3f} | "
                     f"{r.coverage_pooled_study:.3f} / {r.coverage_population_study:.3f} |")
    return "\n".join(lines) + "\n"
