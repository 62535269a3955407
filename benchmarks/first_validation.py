"""Benchmark: the default protocol's first validation after "datasets ready" against a warm one; a daemon's memory.

K TLS site daemons on loopback (``python -m site_node serve``, each with n/K patients) are started and waited for
until each logged that its datasets are ready; a further daemon serves only to warm the analyst's own code (its
first validation is not the sites' cold start). The analyst then runs ``Federation.validate`` with the default
protocol (histogram) on the K sites: the first validation, then ``--repeat`` more, each at a new epsilon (a new
release). Printed per tree: wall seconds and CPU seconds per daemon (user + sys, from /proc: they move less with
a loaded machine than wall time) of the first and of the warm ones (median), and their ratio; then one daemon with
``--memory-n`` patients: its resident memory when ready and after a histogram validation (VmRSS).

Every measurement runs in a worker process with the tree under test first on PYTHONPATH (its daemons too), so
``--baseline DIR`` (another checkout, e.g. ``git archive main | tar -x -C /tmp/base``) measures that tree the same
way, interleaved with this one, and the summary gives the before / after ratios. Run from the repository root:

    python -m benchmarks.first_validation                      # K = 5, n = 1e5, memory at 1e6
    python -m benchmarks.first_validation --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # run as a worker script: benchmarks/simulations.py must not hide the tree's simulations

import numpy as np

from benchmarks._harness import (DELTA, EPSILON, ROOT, TOKEN, cpu_seconds, memory_mb, site_configs, start_daemons,
                                 stop, worker_answer, write_dev_sites)

__all__ = ["main"]


def validations_worker(tree: str, k_sites: int, n: int, repeat: int, data_dir: str) -> dict:
    """K daemons of ``tree`` and one more that warms the analyst: the first and the warm validations' costs."""
    from analyst import Federation
    from site_node.cli.init import link_peers

    with tempfile.TemporaryDirectory(prefix=f"dsroc-first-{k_sites}-") as tmp:
        # Site k holds patients k, k + K + 1, ...: the last site is the analyst's warmer.
        pki, configs = write_dev_sites(Path(tmp), k_sites + 1, [n + n // k_sites], token=TOKEN,
                                       data_dir=Path(data_dir))
        link_peers(configs)
        procs, addresses, _ = start_daemons(configs, tree=Path(tree), wait_ready=True)
        dataset = f"n{n + n // k_sites}"
        try:
            sites = site_configs(addresses, pki)
            with Federation(sites[-1:], timeout=600.0) as warmer:
                warmer.validate(dataset, "y", score="pred", epsilon=EPSILON, delta=DELTA)
            daemons = procs[:-1]
            walls, cpus = [], []
            with Federation(sites[:-1], timeout=600.0) as fed:
                import grpc

                for conn in fed.connections:
                    grpc.channel_ready_future(conn.channel).result(timeout=60)
                for j in range(repeat + 1):  # the first is the first validation after "datasets ready"
                    before = [cpu_seconds(p.pid) for p in daemons]
                    t = time.perf_counter()
                    fed.validate(dataset, "y", score="pred", epsilon=EPSILON - 1e-3 * j, delta=DELTA)
                    walls.append(time.perf_counter() - t)
                    cpus.append(float(np.mean([cpu_seconds(p.pid) - b for p, b in zip(daemons, before)])))
        finally:
            stop(procs)
    return {"sites": k_sites, "n": n, "first_s": walls[0], "warm_s": float(np.median(walls[1:])),
            "first_cpu_s": cpus[0], "warm_cpu_s": float(np.median(cpus[1:]))}


def memory_worker(tree: str, n: int, data_dir: str) -> dict:
    """One daemon of ``tree`` with ``n`` patients: VmRSS when ready and after a histogram validation."""
    from analyst import Federation
    from site_node.cli.init import link_peers

    with tempfile.TemporaryDirectory(prefix="dsroc-first-memory-") as tmp:
        pki, configs = write_dev_sites(Path(tmp), 1, [n], token=TOKEN, data_dir=Path(data_dir))
        link_peers(configs)
        procs, addresses, _ = start_daemons(configs, tree=Path(tree), wait_ready=True)
        try:
            ready = memory_mb(procs[0].pid)
            with Federation(site_configs(addresses, pki), timeout=600.0) as fed:
                fed.validate(f"n{n}", "y", score="pred", epsilon=EPSILON, delta=DELTA)
            time.sleep(0.5)  # the session closes after the validation returns
            after = memory_mb(procs[0].pid)
        finally:
            stop(procs)
    return {"rows": n, "ready_mb": ready, "after_mb": after}


def _run_worker(job: dict) -> dict:
    tree = os.environ["PYTHONPATH"].split(os.pathsep)[0]
    if job["kind"] == "validations":
        return validations_worker(tree, job["sites"], job["n"], job["repeat"], job["data_dir"])
    return memory_worker(tree, job["n"], job["data_dir"])


def _report(label: str, v: dict, m: dict | None) -> None:
    print(f"{label}: K = {v['sites']}, n = {v['n']:,} (default protocol)")
    print(f"  first validation after ready {v['first_s']:7.3f} s wall, {v['first_cpu_s']:6.3f} CPU-s per daemon")
    print(f"  warm validation (median)     {v['warm_s']:7.3f} s wall, {v['warm_cpu_s']:6.3f} CPU-s per daemon")
    print(f"  first / warm: {v['first_s'] / v['warm_s']:.2f}x wall (target <= 1.5x), "
          f"{v['first_cpu_s'] / v['warm_cpu_s']:.2f}x daemon CPU")
    if m is not None:
        print(f"  daemon at {m['rows']:,} rows: {m['ready_mb']:.0f} MB when ready, {m['after_mb']:.0f} MB after a "
              "histogram validation (target <= 200 MB)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=5, help="site daemons K (default 5)")
    parser.add_argument("--n", type=int, default=100_000, help="patients over the K sites (default 1e5)")
    parser.add_argument("--repeat", type=int, default=3, help="warm validations after the first (default 3)")
    parser.add_argument("--memory-n", type=int, default=1_000_000, help="patients of the memory daemon (0: skip)")
    parser.add_argument("--baseline", type=Path, help="another checkout, measured the same way, interleaved")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_run_worker(json.loads(args.worker))))
        return 0
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    results = {label: {} for label, _ in trees}
    with tempfile.TemporaryDirectory(prefix="dsroc-first-data-") as data_dir:
        jobs = [{"kind": "validations", "sites": args.sites, "n": args.n, "repeat": args.repeat, "data_dir": data_dir}]
        if args.memory_n:
            jobs.append({"kind": "memory", "n": args.memory_n, "data_dir": data_dir})
        for i, job in enumerate(jobs):  # A, B, then B, A: neither tree always runs on the warmer machine
            for label, tree in (trees if i % 2 == 0 else trees[::-1]):
                print(f"  {job['kind']} on {label} ...", file=sys.stderr, flush=True)
                results[label][job["kind"]] = worker_answer(__file__, tree, job, ROOT)
    print(f"first-validation benchmark: {os.cpu_count()} CPUs, epsilon {EPSILON:g}, delta {DELTA:g}")
    for label, _ in trees:
        _report(label, results[label]["validations"], results[label].get("memory"))
    if args.baseline:
        after, before = results["this tree"], results["baseline"]
        va, vb = after["validations"], before["validations"]
        print("before -> after (baseline / this tree):")
        for key, name in (("first_cpu_s", "first validation, CPU-s per daemon"),
                          ("warm_cpu_s", "warm validation, CPU-s per daemon"), ("first_s", "first validation, wall s")):
            print(f"  {name}: {vb[key]:.3f} -> {va[key]:.3f} ({vb[key] / va[key]:.1f}x less)")
        print(f"  first / warm, wall: {vb['first_s'] / vb['warm_s']:.2f}x -> {va['first_s'] / va['warm_s']:.2f}x")
        if "memory" in after:
            print(f"  daemon RSS after a histogram validation: {before['memory']['after_mb']:.0f} MB -> "
                  f"{after['memory']['after_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
