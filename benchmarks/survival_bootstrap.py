"""The analyst's survival post-processing in-process: ``survival_validation`` of the benchmark's releases, timed.

The cohort of :mod:`benchmarks.survival` split over K sites, each site's exact histogram plus discrete Laplace noise
of scale 0.25 per cell, on its grids (22 time edges and +inf, 10 score bins). Prints the median seconds of the
validation with the per-site estimates (what ``Federation.validate`` runs), without them, and its bootstrap alone
(the validation at ``--draws`` replicates less the same at 2). Run from the repository root:

    python -m benchmarks.survival_bootstrap            # K = 5 sites, n = 100 000 patients, 100 draws
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from benchmarks.survival import GRID, HORIZON, cohort

SCALE = 0.25


def releases(n: int, k_sites: int, seed: int = 0):
    """Each site's noisy histogram and its noise SD per cell, and their sum."""
    from dsroc.privacy.laplace import discrete_laplace_noise, discrete_laplace_sd
    from dsroc.survival import SurvivalHistogram
    from dsroc.survival.pooling import SiteRelease

    data, rng = cohort(n), np.random.default_rng(seed)
    edges, scores = np.array([0.0, *GRID, np.inf]), np.linspace(0.0, 1.0, 11)
    sites = {}
    for k in range(k_sites):
        exact = SurvivalHistogram.from_patients(data["time"][k::k_sites], data["event"][k::k_sites],
                                                data["pred"][k::k_sites], time_edges=edges, score_edges=scores)
        noisy = exact.counts + discrete_laplace_noise(SCALE, exact.shape, rng)
        sites[f"site{k}"] = SiteRelease(SurvivalHistogram(noisy, edges, scores), discrete_laplace_sd(SCALE))
    total = sites["site0"].histogram
    for s in list(sites.values())[1:]:
        total = total + s.histogram
    return total, sites


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=5, help="number of sites (default 5)")
    parser.add_argument("--n", type=int, default=100_000, help="patients in total (default 1e5)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each (median)")
    parser.add_argument("--draws", type=int, default=100, help="bootstrap replicates")
    args = parser.parse_args(argv)

    from dsroc.survival.validation import survival_validation

    hist, sites = releases(args.n, args.sites)
    sd = float(np.sqrt(sum(s.count_sd**2 for s in sites.values())))

    def seconds(**kw):
        runs = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            survival_validation(hist, HORIZON, count_sd=sd, **kw)
            runs.append(time.perf_counter() - t)
        return statistics.median(runs)

    seconds(sites=sites, draws=2)  # warm-up: imports
    by_site, pooled = seconds(sites=sites, draws=args.draws), seconds(draws=args.draws)
    floor = seconds(draws=2)
    print(f"survival_validation, {args.n} patients over {args.sites} sites, {args.draws} draws (median of "
          f"{args.repeat}): with the sites {by_site:.3f} s, pooled only {pooled:.3f} s, its bootstrap alone "
          f"{pooled - floor:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
