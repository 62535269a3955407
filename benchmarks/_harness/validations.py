"""CPU seconds of validations over running daemons: the analyst's process and every daemon's, per validation."""

from __future__ import annotations

import math
import statistics
import time

from .process import cpu_seconds
from .sites import DELTA, EPSILON

__all__ = ["validation_cost", "default_protocol_row", "secagg_row", "ready_cpu"]


def validation_cost(fed, procs, dataset: str, *, epsilon: float, protocol: str, **options) -> dict:
    """One ``fed.validate`` of ``dataset``: wall seconds, the analyst's CPU seconds (its whole process), the daemons'
    CPU seconds together and the post-processing's CPU seconds (the result's ``timing["analysis_cpu"]``, NaN where
    the tree does not measure it)."""
    before = [cpu_seconds(p.pid) for p in procs]
    t, cpu = time.perf_counter(), time.process_time()
    result = fed.validate(dataset, "y", score="pred", epsilon=epsilon, delta=DELTA, protocol=protocol, **options)
    wall, mine = time.perf_counter() - t, time.process_time() - cpu
    daemons = sum(cpu_seconds(p.pid) - b for p, b in zip(procs, before))
    return {"wall_s": wall, "analyst_cpu_s": mine, "daemons_cpu_s": daemons, "cpu_s": mine + daemons,
            "analysis_cpu_s": float(result.timing.get("analysis_cpu", math.nan))}


def default_protocol_row(fed, procs, n: int, repeat: int, *, offset: int) -> dict:
    """The default protocol (histogram) at ``n``: ``repeat + 1`` validations, a new epsilon each (``offset`` keeps
    them apart from other rows'); the first is the first after the daemons were ready when this row is a worker's
    first. Medians of the warm ones, and the first's."""
    runs = [validation_cost(fed, procs, f"n{n}", epsilon=EPSILON - 1e-3 * (offset + j), protocol="histogram")
            for j in range(repeat + 1)]
    warm = runs[1:]
    row = {f"default_{k}": statistics.median(r[k] for r in warm) for k in warm[0]}
    row.update({f"default_first_{k}": runs[0][k] for k in ("wall_s", "cpu_s", "analyst_cpu_s", "daemons_cpu_s")})
    return row


def secagg_row(fed, procs, n: int, repeat: int, *, offset: int) -> dict:
    """Secagg beside the histogram protocol at ``n``, interleaved (one of each in turn, histogram first on even
    turns), a new epsilon each validation: medians of the CPU seconds (analyst and daemons) of each. The first
    secagg validation (the daemons' first accounting of distributed noise) is not counted."""
    validation_cost(fed, procs, f"n{n}", epsilon=EPSILON - 1e-3 * offset - 5e-4, protocol="secagg")
    costs = {"histogram": [], "secagg": []}
    for j in range(repeat):
        order = ("histogram", "secagg") if j % 2 == 0 else ("secagg", "histogram")
        for protocol in order:
            eps = EPSILON - 1e-3 * (offset + j + 1) - (2.5e-4 if protocol == "secagg" else 0.0)
            costs[protocol].append(validation_cost(fed, procs, f"n{n}", epsilon=eps, protocol=protocol))
    out = {}
    for protocol, runs in costs.items():
        for k in ("cpu_s", "analyst_cpu_s", "daemons_cpu_s", "wall_s"):
            out[f"{protocol}_{k}"] = statistics.median(r[k] for r in runs)
    out["secagg_ratio"] = out["secagg_cpu_s"] / out["histogram_cpu_s"]
    return out


def ready_cpu(procs) -> list[float]:
    """Each daemon's CPU seconds so far, its table-reader helper's included (read once every daemon is ready)."""
    return [cpu_seconds(p.pid, children=True) for p in procs]
