"""Running the stress study: its grids, units of work (one design and n, a block of replications), workers, resume."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from importlib import resources
from itertools import groupby
from pathlib import Path

import numpy as np
import pandas as pd

from ..common.results import load_parts
from ..common.settings import Setting
from .cells import PAPER_NS, PaperCell, StressCell, default_cells, full_cells, paper_cells
from .study import HISTOGRAM_PROTOCOLS, PROTOCOLS, generate_data, histogram_rows
from .designs import SHAPES, Design

__all__ = ["GRIDS", "TARGET_CELLS", "PAPER_SCALE", "MAX_ELEMENTS", "Task", "recommended_paper_settings", "grid_cells", "plan_tasks",
           "run_task", "run_stress", "load_stress"]

GRIDS = ("default", "full", "targets", "smoke")
# Replications of a paper-protocol cell at n are reps * PAPER_SCALE[n] (at least 10): n = 10^6 costs seconds each.
PAPER_SCALE = {1_000: 1.0, 10_000: 1.0, 100_000: 0.25, 1_000_000: 0.1}
MAX_ELEMENTS = 2_000_000  # patients per unit of work (memory)
MAX_REPS = 50  # replications per unit of work (load balance)
# The target cells: every shape at the centre, the centre at n = 1 000, prevalence 0.02, AUC 0.99.
TARGET_CELLS = frozenset(
    [StressCell(Design(s, 0.3, 0.76), 10_000, 5, 1.0) for s in SHAPES]
    + [StressCell(Design("binormal", 0.3, 0.76), 1_000, 5, 1.0), StressCell(Design("binormal", 0.02, 0.76), 10_000, 5, 1.0),
       StressCell(Design("binormal", 0.3, 0.99), 10_000, 5, 1.0), StressCell(Design("skewed", 0.3, 0.76), 1_000, 5, 1.0)])


def recommended_paper_settings(full: bool = False) -> list[Setting]:
    """The paper protocol's recommended settings (``dsroc recommend``'s table at its default tolerance), by noise
    SD: all of them with ``full``, else the smallest, the median and the largest tau."""
    from analyst.recommend import DEFAULT_TOLERANCE

    table = pd.read_csv(resources.files("analyst").joinpath("data", "recommended_protocol.csv"))
    table = table[np.isclose(table["tolerance"], DEFAULT_TOLERANCE)]
    picked = sorted(set(zip(table["tau"], table["sensitivity"], table["epsilon"], table["delta"])))
    if not full and len(picked) > 3:
        picked = [picked[0], picked[len(picked) // 2], picked[-1]]
    return [Setting(s, e, d) for _, s, e, d in picked]


def grid_cells(grid: str) -> tuple[list[StressCell], list[PaperCell]]:
    """The histogram and paper cells of a grid: ``default`` (57 + 24), ``full`` (2 304 + 360), ``targets`` (the
    8 histogram cells the study sets targets in, no paper cells) or ``smoke`` (4 + 2)."""
    if grid == "default":
        return default_cells(), paper_cells(recommended_paper_settings())
    if grid == "full":
        return full_cells(), paper_cells(recommended_paper_settings(full=True))
    if grid == "targets":
        return [c for c in default_cells() if c in TARGET_CELLS], []
    if grid == "smoke":
        cells = [StressCell(Design("binormal", 0.3, 0.76), 1_000, 5, 1.0), StressCell(Design("binormal", 0.02, 0.76), 1_000, 2, 5.0),
                 StressCell(Design("skewed", 0.3, 0.9), 250, 5, 1.0), StressCell(Design("uniform", 0.5, 0.99), 250, 50, 0.5)]
        return cells, paper_cells(recommended_paper_settings()[:1], ns=(1_000,))
    raise ValueError(f"grid must be one of {GRIDS}, got {grid!r}")


@dataclass(frozen=True)
class Task:
    """A unit of work: replications ``reps`` of one design and n, run through ``cells`` (all of that design and n)."""

    design: Design
    n: int
    reps: tuple
    cells: tuple
    paper: bool

    @property
    def key(self) -> str:
        kind = "paper" if self.paper else "histogram"
        return f"{kind}_{self.design.name}_n={self.n}_reps={self.reps[0]}-{self.reps[-1]}"


def plan_tasks(cells, papers, reps: int) -> list[Task]:
    """Units of work, the largest first (so the workers finish together)."""
    tasks = []
    for paper, group in ((False, cells), (True, papers)):
        key = lambda c: (c.design.name, c.n)  # noqa: E731
        for _, members in groupby(sorted(group, key=key), key=key):
            members = tuple(members)
            n = members[0].n
            total = max(10, int(round(reps * PAPER_SCALE.get(n, 1.0)))) if paper else reps
            block = max(1, min(MAX_REPS, MAX_ELEMENTS // n))
            for start in range(0, total, block):
                tasks.append(Task(members[0].design, n, tuple(range(start, min(total, start + block))), members, paper))
    return sorted(tasks, key=lambda t: -_cost(t))


def _cost(task: Task) -> float:
    """Rough CPU seconds of a unit of work (measured on main after stressfast16: ~1.0 us per patient and setting in
    the paper protocol; ~0.09 s per replication and cell for the four histogram protocols' validations plus ~0.8 us
    per patient and cell to draw the data, its truth and the releases)."""
    size = task.n * len(task.reps) * len(task.cells)
    return size * 1.0e-6 if task.paper else 0.09 * len(task.reps) * len(task.cells) + size * 8e-7


def run_task(task: Task, seed: int, score_sums: bool = True,
             protocols=HISTOGRAM_PROTOCOLS) -> tuple[pd.DataFrame, float]:
    """Generate the task's replications once and run every cell's histogram ``protocols`` on them (a paper task:
    the paper protocol); also the CPU seconds used."""
    from .study import paper_rows

    cpu = time.process_time()
    data = generate_data(task.design, task.n, task.reps, seed, slope=not task.paper)
    if task.paper:
        frames = [paper_rows(data, cell, seed) for cell in task.cells]
    else:
        frames = [histogram_rows(data, cell, seed, protocol, score_sums=score_sums) for cell in task.cells
                  for protocol in protocols]
    return pd.concat(frames, ignore_index=True), time.process_time() - cpu


def _config(grid: str, reps: int, seed: int, score_sums: bool, protocols, cells, papers) -> dict:
    return {"mode": "stress", "grid": grid, "reps": reps, "seed": seed, "score_sums": score_sums,
            "protocols": list(protocols),
            "cells": [c.name for c in cells],
            "paper": [c.name for c in papers]}


def run_stress(out, *, grid: str = "default", reps: int = 200, seed: int = 1, workers: int = 1,
               score_sums: bool = True, protocols=PROTOCOLS, progress=sys.stderr) -> dict:
    """Run (or resume) the stress study into ``out``: one compressed CSV per unit of work under ``out/parts``.

    ``score_sums=False`` runs the default protocols without the per-bin score sums; ``protocols``: only these of
    :data:`simulations.stress.study.PROTOCOLS` (the paper cells only with ``"paper"``). Returns the timing: seconds of wall clock and of CPU (summed over the workers; CPU / 2 is the wall time
    on two otherwise idle cores), units of work run and already present.
    """
    if reps < 2:
        raise ValueError(f"reps must be at least 2, got {reps}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    unknown = set(protocols) - set(PROTOCOLS)
    if unknown or not protocols:
        raise ValueError(f"protocols must be a non-empty selection of {PROTOCOLS}, got {list(protocols)}")
    protocols = [p for p in PROTOCOLS if p in protocols]
    cells, papers = grid_cells(grid)
    papers = papers if "paper" in protocols else []
    histogram = tuple(p for p in protocols if p != "paper")
    cells = cells if histogram else []
    out = Path(out)
    parts = out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    config, path = _config(grid, reps, seed, score_sums, protocols, cells, papers), out / "config.json"
    if path.exists() and json.loads(path.read_text()) != config:
        raise ValueError(f"{out} holds another run (grid, reps, seed or cells differ); use a new --out")
    path.write_text(json.dumps(config, indent=1) + "\n")
    tasks = plan_tasks(cells, papers, reps)
    todo = [t for t in tasks if not (parts / f"{t.key}.csv.gz").exists()]
    started, cpu = time.perf_counter(), []

    def save(task, result, done):
        frame, seconds = result
        cpu.append(seconds)
        tmp = parts / f"{task.key}.tmp.csv.gz"
        frame.to_csv(tmp, index=False)
        tmp.replace(parts / f"{task.key}.csv.gz")
        if progress is not None:
            print(f"[{done}/{len(todo)}] {task.key}: {len(task.cells)} cell(s), {time.perf_counter() - started:.0f} s",
                  file=progress, flush=True)

    failed = []
    if workers == 1:
        for i, task in enumerate(todo, 1):
            try:
                save(task, run_task(task, seed, score_sums, histogram), i)
            except Exception as exc:  # noqa: BLE001 -- the other units still run and are saved
                failed.append((task.key, exc))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(run_task, task, seed, score_sums, histogram): task for task in todo}
            for i, future in enumerate(as_completed(futures), 1):
                try:
                    save(futures[future], future.result(), i)
                except Exception as exc:  # noqa: BLE001
                    failed.append((futures[future].key, exc))
    if failed:
        key, exc = failed[0]
        raise RuntimeError(f"{len(failed)} unit(s) of work failed, e.g. {key}: {exc}; the others are saved in {parts}")
    return {"seconds": round(time.perf_counter() - started, 1), "cpu_seconds": round(sum(cpu), 1), "units_run": len(todo),
            "units_present": len(tasks) - len(todo), "workers": workers}


def load_stress(out) -> pd.DataFrame:
    """All per-replication rows of a finished (or partial) run."""
    frame = load_parts(out, "stress")
    frame["estimator"] = frame["estimator"].fillna("") if "estimator" in frame else ""  # parts from before the column
    return frame
