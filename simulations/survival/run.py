"""Running the survival study: its grids of cells, units of work (a cell and a block of replications), workers, resume."""

from __future__ import annotations

import itertools
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from ..common.results import load_parts
from .designs import Design
from .study import DRAWS, SCORE_BINS, TIME_BINS, Cell, run_block

__all__ = ["GRIDS", "CENTRE", "TARGETS", "grid_cells", "Task", "plan_tasks", "run_survival", "load_survival"]

GRIDS = ("smoke", "targets", "default", "full")
CENTRE = Cell(Design("weibull", 0.3, 0.5), 10_000, 5, 1.0)
MAX_PATIENTS = 500_000  # patients per unit of work (memory)
MAX_REPS = 50  # replications per unit of work


def _target_cells() -> list[Cell]:
    """The cells the targets are set in: epsilon 1, n 10 000, 5 sites, censoring 30, 50 and 70 %."""
    designs = [Design(m, 0.3, c) for m in ("weibull", "piecewise") for c in (0.3, 0.5, 0.7)]
    designs += [Design("weibull", 0.3, c, "miscalibrated") for c in (0.3, 0.5, 0.7)]
    return [Cell(d, 10_000, 5, 1.0) for d in designs]


TARGETS = tuple(_target_cells())


def _default_cells() -> list[Cell]:
    """The targets, then one factor at a time around the centre: risk, n, sites, epsilon (and no noise)."""
    c, d = CENTRE, CENTRE.design
    cells = list(TARGETS)
    cells += [Cell(Design(m, r, 0.5), c.n, c.sites, c.epsilon) for m in ("weibull", "piecewise") for r in (0.05, 0.1, 0.5)]
    cells += [Cell(Design(d.model, d.risk, s), n, c.sites, c.epsilon) for s in (0.2, 0.5, 0.7) for n in (1_000, 100_000)]
    cells += [Cell(d, c.n, k, c.epsilon) for k in (2, 20)]
    cells += [Cell(d, c.n, c.sites, e) for e in (0.5, 2.0, 5.0, None)]
    return list(dict.fromkeys(cells))


def grid_cells(grid: str) -> list[Cell]:
    """The cells of a grid: ``smoke`` (2, seconds), ``targets`` (9), ``default`` (27) or ``full`` (the factorial:
    2 models x 2 calibrations x 3 censorings x 4 risks x 3 n x 3 site counts x 4 epsilons = 1 728)."""
    if grid == "smoke":
        return [Cell(Design("weibull", 0.3, 0.5), 1_000, 3, 1.0),
                Cell(Design("piecewise", 0.1, 0.7, "miscalibrated"), 1_000, 2, 5.0)]
    if grid == "targets":
        return list(TARGETS)
    if grid == "default":
        return _default_cells()
    if grid == "full":
        return [Cell(Design(m, r, c, k), n, s, e) for m, k, c, r, n, s, e in itertools.product(
            ("weibull", "piecewise"), ("calibrated", "miscalibrated"), (0.2, 0.5, 0.7), (0.05, 0.1, 0.3, 0.5),
            (1_000, 10_000, 100_000), (2, 5, 20), (0.5, 1.0, 2.0, 5.0))]
    raise ValueError(f"grid must be one of {GRIDS}, got {grid!r}")


@dataclass(frozen=True)
class Task:
    """A unit of work: replications ``reps`` of one cell."""

    cell: Cell
    reps: tuple

    @property
    def key(self) -> str:
        return f"{self.cell.name}_reps={self.reps[0]}-{self.reps[-1]}"


def plan_tasks(cells, reps: int) -> list[Task]:
    """Fixed blocks of replications per cell (they seed the noise, so they never depend on the workers), the
    largest first so that the workers finish together."""
    tasks = []
    for cell in cells:
        block = max(1, min(MAX_REPS, MAX_PATIENTS // cell.n))
        tasks += [Task(cell, tuple(range(a, min(reps, a + block)))) for a in range(0, reps, block)]
    return sorted(tasks, key=lambda t: -t.cell.n * len(t.reps))


def _run(task: Task, seed: int, draws: int, time_bins: int, score_bins: int) -> tuple[pd.DataFrame, float]:
    cpu = time.process_time()
    frame = run_block(task.cell, task.reps, seed, draws=draws, time_bins=time_bins, score_bins=score_bins)
    return frame, time.process_time() - cpu


def run_survival(out, *, grid: str = "default", reps: int = 200, seed: int = 1, workers: int = 1, draws: int = DRAWS,
                 time_bins: int = TIME_BINS, score_bins: int = SCORE_BINS, progress=sys.stderr) -> dict:
    """Run (or resume) the survival study into ``out``: one compressed CSV per unit of work under ``out/parts``.

    Returns the timing: wall-clock and CPU seconds (summed over the workers), units of work run and already present.
    """
    for name, value, least in (("reps", reps, 2), ("workers", workers, 1), ("draws", draws, 2),
                               ("time_bins", time_bins, 2), ("score_bins", score_bins, 2)):
        if isinstance(value, bool) or int(value) != value or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    cells = grid_cells(grid)
    out = Path(out)
    parts = out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    config = {"mode": "survival", "grid": grid, "reps": reps, "seed": seed, "draws": draws, "time_bins": time_bins,
              "score_bins": score_bins, "cells": [c.name for c in cells]}
    path = out / "config.json"
    if path.exists() and json.loads(path.read_text()) != config:
        raise ValueError(f"{out} holds another run (grid, reps, seed, draws, bins or cells differ); use a new --out")
    path.write_text(json.dumps(config, indent=1) + "\n")
    tasks = plan_tasks(cells, reps)
    todo = [t for t in tasks if not (parts / f"{t.key}.csv.gz").exists()]
    started, cpu = time.perf_counter(), []
    args = (seed, draws, time_bins, score_bins)
    with tqdm(total=sum(len(t.reps) for t in todo), unit="rep", desc=f"[survival] {len(cells)} cells", file=progress,
              disable=progress is None or not todo, mininterval=2.0, dynamic_ncols=True) as bar:
        def save(task, result):
            frame, seconds = result
            cpu.append(seconds)
            tmp = parts / f"{task.key}.tmp.csv.gz"
            frame.to_csv(tmp, index=False)
            tmp.replace(parts / f"{task.key}.csv.gz")
            bar.update(len(task.reps))

        if workers == 1:
            for task in todo:
                save(task, _run(task, *args))
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = {pool.submit(_run, task, *args): task for task in todo}
                for future in as_completed(futures):
                    save(futures[future], future.result())
    return {"seconds": round(time.perf_counter() - started, 1), "cpu_seconds": round(sum(cpu), 1),
            "units_run": len(todo), "units_present": len(tasks) - len(todo), "workers": workers}


def load_survival(out) -> pd.DataFrame:
    """All per-replication rows of a finished (or partial) run."""
    return load_parts(out, "survival")
