"""Run the study in chunks of replications, in parallel (processes or Dask), resumable from the saved chunks."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from .comparison.study import compare_settings, run_compare_chunk
from .histogram.study import run_histogram_chunk
from .mechanisms.settings import select_mechanism_settings
from .mechanisms.study import run_mechanisms_chunk
from .paper.published import run_paper_chunk
from .protocol.pipeline import run_protocol_chunk
from .common.results import RESULTS
from .common.settings import Setting, select_settings

__all__ = ["MODES", "DEFAULT_CHUNK", "Task", "run_chunk", "run_study"]

MODES = {"paper": run_paper_chunk, "protocol": run_protocol_chunk, "mechanisms": run_mechanisms_chunk,
         "histogram": run_histogram_chunk, "compare": run_compare_chunk}
# How each mode names its settings (the mechanisms study has its own grid: n x K x epsilon; the comparison
# protocol x n x privacy).
SELECTORS = {"mechanisms": select_mechanism_settings, "compare": compare_settings,
             "histogram": partial(select_settings, mode="histogram")}
# Replications per chunk: fixed per mode (never derived from the number of workers), so the chunk
# files, and the results, are the same whatever the parallelism.
DEFAULT_CHUNK = {"paper": 100, "protocol": 100, "mechanisms": 25, "histogram": 50, "compare": 25}
CHUNKS = "chunks"


@dataclass(frozen=True)
class Task:
    """One unit of work: replications ``[start, stop)`` of every selected setting."""

    mode: str
    seed: int
    start: int
    stop: int
    settings: tuple[Setting, ...]
    n: int | None = None

    @property
    def file_name(self) -> str:
        """The chunk's file name."""
        return f"chunk-{self.start:07d}-{self.stop:07d}.parquet"


def run_chunk(task: Task) -> tuple[Task, pd.DataFrame, float]:
    """Compute one chunk (in a worker); returns the task, its results and the CPU seconds it took."""
    cpu = time.process_time()
    frame = MODES[task.mode](task.seed, range(task.start, task.stop), task.settings, n=task.n)
    return task, frame, time.process_time() - cpu


def _config(mode, reps, seed, settings, chunk, n) -> dict:
    config = {"mode": mode, "reps": reps, "seed": seed, "chunk": chunk, "settings": [s.name for s in settings]}
    if n is not None:
        config["n"] = n
    return config


def _check_config(out: Path, config: dict) -> None:
    """Write the run's configuration, or check that a resumed run matches the one on disk."""
    path = out / "config.json"
    if path.exists():
        old = json.loads(path.read_text())
        diff = [key for key in dict.fromkeys([*config, *old]) if old.get(key) != config.get(key)]
        if diff:
            raise ValueError(
                f"{out} holds a different run ({', '.join(diff)} differ: {[old.get(k) for k in diff]} on disk, "
                f"{[config.get(k) for k in diff]} asked); resume with the same options or choose another --out"
            )
    else:
        path.write_text(json.dumps(config, indent=2) + "\n")


def _write_atomic(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    try:
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    finally:  # interrupted (Ctrl-C) while writing: leave no partial file behind
        tmp.unlink(missing_ok=True)


def _executor_results(tasks, workers, scheduler):
    """Yield chunk results as they finish: in process, in a process pool, or on a Dask cluster."""
    if scheduler is not None:
        try:
            from distributed import Client, as_completed
        except ImportError as exc:  # optional extra
            raise RuntimeError("--scheduler needs Dask distributed: pip install 'dsroc[dask]'") from exc
        client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
        try:
            futures = client.map(run_chunk, tasks, pure=False)
            for future in as_completed(futures):
                yield future.result()
        finally:
            if client is not scheduler:
                client.close()
        return
    if workers <= 1:
        for task in tasks:
            yield run_chunk(task)
        return
    import multiprocessing as mp

    # fork avoids re-importing in each worker; the workers ignore SIGINT, so Ctrl-C in a terminal (sent to
    # the whole process group) reaches only this process, which then terminates the pool: no worker is
    # left behind or stuck, and the chunks already saved make the run resumable.
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    pool = ctx.Pool(processes=workers, initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN))
    try:
        yield from pool.imap_unordered(run_chunk, tasks)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def run_study(
    out,
    *,
    mode: str = "paper",
    reps: int = 10_000,
    seed: int = 1,
    settings=None,
    workers: int = 1,
    scheduler=None,
    chunk: int | None = None,
    n: int | None = None,
    progress=sys.stderr,
) -> dict:
    """Run (or resume) the simulation study and save one Parquet file per setting under ``out/results``.

    Parameters
    ----------
    out : path
        Output folder. Finished chunks are kept in ``out/chunks`` until all are done, so an
        interrupted run resumes where it stopped when called again with the same options.
    mode : {"paper", "protocol", "mechanisms", "histogram", "compare"}
    reps : int
        Replications per setting.
    seed : int
        Base seed; replication r uses a stream derived from (seed, r) only.
    settings : list of str, optional
        Setting names (see :func:`simulations.common.settings.select_settings`, or
        :func:`simulations.comparison.study.compare_settings` in compare mode); all of the mode's by default.
    workers : int
        Local worker processes (ignored with ``scheduler``).
    scheduler : str or distributed.Client, optional
        Address of a Dask scheduler (or a client) to run the chunks on.
    chunk : int, optional
        Replications per chunk (default: :data:`DEFAULT_CHUNK` of the mode).
    n : int, optional
        Patients per replication (at least 100); default: drawn uniformly from 100..2500 as in the paper.
    progress : file or None
        Where the progress bar (tqdm) goes.

    Raises
    ------
    KeyboardInterrupt
        On Ctrl-C: the worker processes are terminated at once; the chunks finished so far stay saved,
        so calling again with the same options resumes the run.

    Returns
    -------
    dict
        The timing record also written to ``out/timing.json``.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
    for name, value in (("reps", reps), ("workers", workers)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    chunk = DEFAULT_CHUNK[mode] if chunk is None else chunk
    if isinstance(chunk, bool) or int(chunk) != chunk or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    if n is not None and (isinstance(n, bool) or int(n) != n or n < 100):
        raise ValueError(f"n must be an integer >= 100, got {n!r}")
    if n is not None and mode == "compare":
        raise ValueError("n is fixed per cell in compare mode (n = 250, 1000, 10000); do not pass n")
    chosen = tuple(SELECTORS.get(mode, select_settings)(settings))
    out = Path(out)
    (out / CHUNKS).mkdir(parents=True, exist_ok=True)
    _check_config(out, _config(mode, reps, seed, chosen, chunk, n))

    wall0, cpu0 = time.perf_counter(), time.process_time()
    tasks = [Task(mode, int(seed), a, min(a + chunk, reps), chosen, n) for a in range(0, reps, chunk)]
    results_done = (out / RESULTS / "_complete.json").exists()
    if results_done and (out / "timing.json").exists():
        # Nothing left to do: keep the timing of the run that computed the results.
        return json.loads((out / "timing.json").read_text())
    todo = [] if results_done else [t for t in tasks if not (out / CHUNKS / t.file_name).exists()]
    done_reps = reps - sum(t.stop - t.start for t in todo)
    worker_cpu = 0.0
    with tqdm(total=reps, initial=done_reps, unit="rep", desc=f"[simulations] {len(chosen)} settings",
              file=progress, disable=progress is None or not todo, mininterval=2.0, dynamic_ncols=True) as bar:
        for task, frame, cpu in _executor_results(todo, int(workers), scheduler):
            _write_atomic(frame, out / CHUNKS / task.file_name)
            worker_cpu += cpu
            bar.update(task.stop - task.start)
    if not results_done:
        _compact(out, tasks, chosen)
    wall = time.perf_counter() - wall0
    computed = sum(t.stop - t.start for t in todo)
    main_cpu = time.process_time() - cpu0
    in_process = scheduler is None and int(workers) <= 1
    timing = {
        "mode": mode,
        "replications": reps,
        "settings": len(chosen),
        "replications_computed_now": computed,
        "wall_seconds": wall,
        # In process the chunks' CPU is part of this process's; otherwise add the workers' own.
        "cpu_seconds": main_cpu if in_process else main_cpu + worker_cpu,
        "replications_per_second": computed / wall if wall > 0 else None,
        "fits_per_second": computed * len(chosen) / wall if wall > 0 else None,
        "workers": "dask" if scheduler is not None else int(workers),
        "scheduler": None if scheduler is None else str(getattr(scheduler, "scheduler", scheduler)),
        "cpu_count": os.cpu_count(),
    }
    (out / "timing.json").write_text(json.dumps(timing, indent=2) + "\n")
    return timing


def _compact(out: Path, tasks, settings) -> None:
    """Merge the chunk files into one Parquet file per setting, then drop the chunks.

    Done in Arrow (compact strings, no pandas objects): the full study is 1.26 million rows.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pa.concat_tables([pq.read_table(out / CHUNKS / t.file_name) for t in tasks])
    results = out / RESULTS
    results.mkdir(exist_ok=True)
    for setting in settings:
        part = table.filter(pc.equal(table["setting"], setting.name)).sort_by("rep")
        tmp = results / f"{setting.name}.tmp"
        pq.write_table(part, tmp)
        os.replace(tmp, results / f"{setting.name}.parquet")
    (results / "_complete.json").write_text(json.dumps({"settings": [s.name for s in settings]}) + "\n")
    for t in tasks:
        (out / CHUNKS / t.file_name).unlink()
