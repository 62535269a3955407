"""A process's memory and CPU time, read from /proc (Linux), freed heap given back, and workers run on a tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["memory_mb", "peak_mb", "memory_and_peak_mb", "reset_peak", "trim_heap", "cpu_seconds", "worker_answer"]


def memory_mb(pid: int) -> float:
    """Resident set size (VmRSS) of a process in MB."""
    return _status(pid, "VmRSS")


def peak_mb(pid: int) -> float:
    """Peak resident set size (VmHWM) of a process in MB, since start or the last :func:`reset_peak`."""
    return _status(pid, "VmHWM")


def reset_peak(pid: int) -> None:
    """Reset a process's VmHWM to its current RSS (Linux: 5 to /proc/PID/clear_refs)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def trim_heap() -> None:
    """Give this process's freed heap back to the system (glibc), so that its RSS is what it holds."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except AttributeError:  # not glibc
        pass


def _status(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def memory_and_peak_mb(pid: int) -> tuple[float, float]:
    """Resident set size now and its peak (VmRSS, VmHWM) of a process, in MB."""
    return memory_mb(pid), peak_mb(pid)


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """CPU time (user + sys) a process has used so far, in seconds; with ``children``, also its children's that it
    waited for (a daemon's table-reader helper)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15 if children else 13]) / os.sysconf("SC_CLK_TCK")


def worker_answer(script: Path, tree: Path, job: dict, harness: Path):
    """Run ``script --worker JOB`` in a process on ``tree`` and return its JSON answer (printed on its output).

    The tree's code comes first on the worker's path and ``harness`` (the checkout of these benchmarks) after it:
    the worker measures the tree's code with this checkout's harness.
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(harness)]))
    out = subprocess.run([sys.executable, str(Path(script).resolve()), "--worker", json.dumps(job)],
                         env=env, stdout=subprocess.PIPE, text=True, cwd=tree)
    if out.returncode != 0:
        raise RuntimeError(f"the worker for {job} on {tree} failed (exit {out.returncode})")
    return json.loads(out.stdout)
