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

from benchmarks.scale import DELTA, EPSILON, start_daemons, stop, write_sites

__all__ = ["memory_mb", "cpu_seconds", "main"]


def memory_mb(pid: int) -> tuple[float, float]:
    """Resident set size now and its peak (VmRSS, VmHWM) of a process, in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def cpu_seconds(pid: int) -> float:
    """CPU time (user + sys) a process has used so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="patients of the daemon's dataset (default 1e6)")
    parser.add_argument("--startups", type=int, default=3, help="extra daemon starts timed before the run (default 3)")
    args = parser.parse_args(argv)

    from analyst import Federation, SiteConfig
    from site_node.auth import hash_token
    from site_node.pki import generate_dev_pki
    from site_node.init import link_peers

    token = "bench-token"
    with tempfile.TemporaryDirectory(prefix="dsroc-daemon-bench-") as tmp:
        root = Path(tmp)
        pki = generate_dev_pki(root / "pki")
        configs = write_sites(root, 1, [args.n], pki, hash_token(token))
        link_peers(configs)
        startups = []
        for _ in range(args.startups):  # start-up only: SERVING, then SIGTERM
            procs, _, wall = start_daemons(configs)
            startups.append((wall[0], cpu_seconds(procs[0].pid), memory_mb(procs[0].pid)[0]))
            stop(procs)
        procs, addresses, wall = start_daemons(configs)
        pid = procs[0].pid
        startups.append((wall[0], cpu_seconds(pid), memory_mb(pid)[0]))
        steps = [("idle at SERVING", memory_mb(pid))]
        try:
            site = SiteConfig(name="site0", address=addresses[0], token=token, ca_file=pki.ca_cert,
                              client_cert=pki.client_cert, client_key=pki.client_key)
            dataset = f"n{args.n}"
            timings = {}
            with Federation([site], timeout=600.0) as fed:
                fed.describe().raise_if_none()
                steps.append(("after Describe", memory_mb(pid)))
                for protocol in ("paper", "histogram"):
                    t = time.perf_counter()
                    fed.validate(dataset, "y", score="pred", epsilon=EPSILON, delta=DELTA, protocol=protocol)
                    timings[protocol] = time.perf_counter() - t
                    steps.append((f"after a {protocol} validation", memory_mb(pid)))
            time.sleep(0.5)
            steps.append(("after the analyst disconnects", memory_mb(pid)))
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
