"""Benchmark of the simulation study: replications per second in both modes (one process, all 126 settings).

Run from the repository root: ``python benchmarks/simulations.py [--paper-reps N] [--protocol-reps N]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulations.paper import run_paper_chunk  # noqa: E402
from simulations.protocol import run_protocol_chunk  # noqa: E402
from simulations.settings import all_settings  # noqa: E402


def bench(name, fn, reps):
    """Time ``fn`` on ``reps`` replications of all settings; print and return replications per second."""
    settings = all_settings()
    fn(1, range(1), settings)  # warm-up: imports, tau root finding
    t0, c0 = time.perf_counter(), time.process_time()
    fn(1, range(reps), settings)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rate = reps / wall
    print(f"{name:9s} {reps:5d} reps x {len(settings)} settings: {wall:6.2f} s wall, {cpu:6.2f} s CPU, "
          f"{rate:8.1f} reps/s, {1e3 * wall / (reps * len(settings)):.3f} ms per replication-setting")
    return rate


def main(argv=None):
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--paper-reps", type=int, default=200)
    parser.add_argument("--protocol-reps", type=int, default=100)
    args = parser.parse_args(argv)
    rates = {
        "paper": bench("paper", run_paper_chunk, args.paper_reps),
        "protocol": bench("protocol", run_protocol_chunk, args.protocol_reps),
    }
    for mode, rate in rates.items():
        full = 10_000 / rate
        print(f"{mode} mode, full study (10000 reps) extrapolated: {full:.0f} s on one core, ~{full / 2:.0f} s on two")


if __name__ == "__main__":
    main()
