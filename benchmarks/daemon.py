"""Benchmark of one site daemon's start-up and memory: a real TLS daemon, one dataset, both protocols.

Starts ``python -m site_node serve`` (mutual TLS on loopback) with one dataset of N patients (one score
column, one outcome; default N = 1 000 000) and prints the time to SERVING (wall and the daemon's CPU
seconds, user + sys, which stay meaningful on a loaded machine), then the daemon's resident memory (VmRSS)
and its peak (VmHWM) from ``/proc`` after each step: idle, dataset loaded (Describe), a paper-protocol
validation, a histogram validation and the analyst's disconnect. Run from the repository root:

    python -m benchmarks.daemon                  # 1e6 patients
    python -m benchmarks.daemon --n 200000 --startups 5
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._harness import (DELTA, EPSILON, cpu_seconds, memory_and_peak_mb, site_configs, start_daemons,
                                 stop, write_dev_sites)

__all__ = ["main"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="patients of the daemon's dataset (default 1e6)")
    parser.add_argument("--startups", type=int, default=3, help="extra daemon starts timed before the run (default 3)")
    args = parser.parse_args(argv)

    from analyst import Federation
    from site_node.cli.init import link_peers

    with tempfile.TemporaryDirectory(prefix="dsroc-daemon-bench-") as tmp:
        pki, configs = write_dev_sites(Path(tmp), 1, [args.n])
        link_peers(configs)
        startups = []
        for _ in range(args.startups):  # start-up only: SERVING, then SIGTERM
            procs, _, wall = start_daemons(configs)
            startups.append((wall[0], cpu_seconds(procs[0].pid), memory_and_peak_mb(procs[0].pid)[0]))
            stop(procs)
        procs, addresses, wall = start_daemons(configs)
        pid = procs[0].pid
        startups.append((wall[0], cpu_seconds(pid), memory_and_peak_mb(pid)[0]))
        steps = [("idle at SERVING", memory_and_peak_mb(pid))]
        try:
            dataset = f"n{args.n}"
            timings = {}
            with Federation(site_configs(addresses, pki), timeout=600.0) as fed:
                fed.describe().raise_if_none()
                steps.append(("after Describe", memory_and_peak_mb(pid)))
                for protocol in ("paper", "histogram"):
                    t = time.perf_counter()
                    fed.validate(dataset, "y", score="pred", epsilon=EPSILON, delta=DELTA, protocol=protocol)
                    timings[protocol] = time.perf_counter() - t
                    steps.append((f"after a {protocol} validation", memory_and_peak_mb(pid)))
            time.sleep(0.5)
            steps.append(("after the analyst disconnects", memory_and_peak_mb(pid)))
        finally:
            stop(procs)

    walls, cpus, idle = (np.array(column) for column in zip(*startups))
    print(f"daemon benchmark: one site, {args.n:,} patients, loopback, mutual TLS, {os.cpu_count()} CPUs, "
          f"epsilon {EPSILON:g}, delta {DELTA:g}")
    print(f"  start-up to SERVING over {len(walls)} starts: wall median {np.median(walls):.3f} s "
          f"(min {walls.min():.3f}, max {walls.max():.3f}); CPU (user+sys) median {np.median(cpus):.3f} s "
          f"(min {cpus.min():.3f}, max {cpus.max():.3f}); idle RSS median {np.median(idle):.0f} MB")
    for protocol, seconds in timings.items():
        print(f"  {protocol} validation: {seconds:.2f} s")
    width = max(len(label) for label, _ in steps)
    for label, (rss, peak) in steps:
        print(f"  {label:<{width}}  VmRSS {rss:6.0f} MB   VmHWM {peak:6.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
