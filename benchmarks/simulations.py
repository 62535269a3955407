"""Benchmark of the simulation study: replications per second in both modes (one process, all 126 settings),
and paper mode's batched replication against the minimal numpy one of ``benchmarks/_harness/study.py``.

Run from the repository root:
``python benchmarks/simulations.py [--paper-reps N] [--protocol-reps N] [--minimal-reps N]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._harness import study_worker  # noqa: E402
from simulations.paper.published import run_paper_chunk  # noqa: E402
from simulations.protocol.pipeline import run_protocol_chunk  # noqa: E402
from simulations.common.settings import all_settings  # noqa: E402


def bench(name, fn, reps):
    """Time ``fn`` on ``reps`` replications of all settings; print and return replications per second."""
    settings = all_settings()
    fn(1, range(1), settings)  # warm-up: imports, tau root finding
    t0, c0 = time.perf_counter(), time.process_time()
    fn(1, range(reps), settings)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rate = reps / wall
    print(f"{name:9s} {reps:5d} reps x {len(settings)} settings: {wall:6.2f} s wall, {cpu:6.2f} s CPU, "
          f"{rate:8.1f} reps/s, {1e3 * wall / (reps * len(settings)):.3f} ms per replication-setting "
          f"({1e3 * cpu / (reps * len(settings)):.3f} ms CPU)")
    return rate


def main(argv=None):
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--paper-reps", type=int, default=200, help="paper-mode replications (0: none)")
    parser.add_argument("--protocol-reps", type=int, default=100, help="protocol-mode replications (0: none)")
    parser.add_argument("--minimal-reps", type=int, default=100,
                        help="replications of the batched-against-minimal comparison (0: none)")
    args = parser.parse_args(argv)
    runs = (("paper", run_paper_chunk, args.paper_reps), ("protocol", run_protocol_chunk, args.protocol_reps))
    rates = {mode: bench(mode, fn, reps) for mode, fn, reps in runs if reps > 0}
    for mode, rate in rates.items():
        full = 10_000 / rate
        print(f"{mode} mode, full study (10000 reps) extrapolated: {full:.0f} s on one core, ~{full / 2:.0f} s on two")
    if args.minimal_reps:
        st = study_worker(args.minimal_reps, 3)
        print(f"paper mode per replication ({st['settings']} settings, median of 3 interleaved rounds of "
              f"{st['reps']}): batched {st['batched_ms']:.1f} ms, minimal numpy {st['minimal_ms']:.1f} ms, "
              f"ratio {st['batched_ms'] / st['minimal_ms']:.2f}x (target <= 1.2x; largest difference "
              f"{st['max_difference']:.1e})")


if __name__ == "__main__":
    main()
