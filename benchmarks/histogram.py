"""Histogram-protocol benchmark: ``validate`` over K TLS site daemons holding n patients in total.

Only the sites' noisy histograms cross the network (a few hundred integers per site), so the wall time
is the sites' binning of their scores plus one round trip; the benchmark also times the binning of all
n scores in one process (the sites' work without the network and without parallelism) and prints the
ratio. Run from the repository root:

    python -m benchmarks.histogram                       # K = 5 sites, n = 10 000 000 patients
    python -m benchmarks.histogram --sites 5 --n 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._harness import DELTA, EPSILON, memory_mb, site_configs, site_data, start_daemons, stop, write_dev_sites


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=5, help="number of sites (default 5)")
    parser.add_argument("--n", type=int, default=10_000_000, help="patients in total (default 1e7)")
    parser.add_argument("--bins", type=int, default=20, help="histogram bins (default 20)")
    parser.add_argument("--repeat", type=int, default=3, help="validations (new epsilon each, so new releases)")
    args = parser.parse_args(argv)

    from analyst import Federation
    from dsroc.histogram.grid import bin_scores, histogram_edges

    with tempfile.TemporaryDirectory(prefix="dsroc-histogram-bench-") as tmp:
        t = time.perf_counter()
        pki, configs = write_dev_sites(Path(tmp), args.sites, [args.n])
        print(f"wrote the dev PKI and {args.sites} sites, {args.n} patients in total, in {time.perf_counter() - t:.1f} s",
              flush=True)
        procs, addresses, startup = start_daemons(configs)
        try:
            walls = []
            with Federation(site_configs(addresses, pki), timeout=600.0) as fed:
                for i in range(args.repeat + 1):  # the first run reads the data at each site (warm-up)
                    t = time.perf_counter()
                    res = fed.validate(f"n{args.n}", "y", score="pred", epsilon=EPSILON + 1e-3 * i, delta=DELTA,
                                       n_bins=args.bins, protocol="histogram")
                    walls.append(time.perf_counter() - t)
                    print(f"  validate #{i}: {walls[-1]:.3f} s  (AUC {res.auc:.4f}, release step "
                          f"{res.timing['release']:.3f} s)", flush=True)
            rss = max(memory_mb(p.pid) for p in procs)
        finally:
            stop(procs)
        pred, y, _ = site_data(args.n, args.sites)
        t = time.perf_counter()
        bin_scores(pred, y, histogram_edges(args.bins))
        binning = time.perf_counter() - t
    best = min(walls[1:]) if len(walls) > 1 else walls[0]
    print(f"K = {args.sites}, n = {args.n}: validate {best:.3f} s (best of {args.repeat} after a warm-up of "
          f"{walls[0]:.2f} s); binning all n in one process {binning:.3f} s; ratio {best / binning:.2f}; "
          f"daemons' largest RSS {rss:.0f} MB; start-up median {np.median(startup):.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
