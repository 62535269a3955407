"""Benchmark of the mechanisms study: the vectorised chunk against a per-replication loop of the public dsroc calls.

Both sides compute every mechanism of :data:`simulations.mechanisms.study.MECHANISMS` (AUC and, where the
mechanism has one, AP) for the same settings; the loop calls the one-data-set functions
(``dp_auc``, ``dp_average_precision``, ``fedauc_rr``, ``fedauc_laplace``, per-site Gaussian releases
with ``placement_values`` and ``fit_rocglm``, per-site histograms with ``histogram_rocglm``) one
replication at a time. Run from the repository root:
``python benchmarks/mechanisms.py [--settings n=1000_K=5] [--reps 25] [--loop-reps 5]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dsroc import (  # noqa: E402
    RocGlmParts,
    add_gaussian_noise,
    analytic_gaussian_sigma,
    average_precision,
    bin_scores,
    consistent_counts,
    fit_rocglm,
    histogram_edges,
    model_sensitivity,
    placement_values,
)
from dsroc.histogram.grid import recommended_n_bins  # noqa: E402
from dsroc.histogram.auc import histogram_rocglm  # noqa: E402
from dsroc.mechanisms import (  # noqa: E402
    combine_site_releases,
    dp_auc,
    dp_average_precision,
    dp_class_count,
    fedauc_laplace,
    fedauc_rr,
)
from dsroc.privacy.noise import discrete_gaussian_noise, discrete_gaussian_sigma  # noqa: E402
from simulations.mechanisms.settings import DELTA, generate_data, predict, select_mechanism_settings  # noqa: E402
from simulations.mechanisms.study import COUNT_SHARE, run_mechanisms_chunk  # noqa: E402


def loop_replication(s, y, x, sites, k, eps, rng):
    """Every mechanism on one replication, with the one-data-set functions."""
    n = s.size
    for rule in ("model", "range"):
        released0, released1 = [], []
        for site in range(k):
            mine = sites == site
            delta = model_sensitivity(predict, x[mine][:, None]).value if rule == "model" else 1.0
            tau = analytic_gaussian_sigma(eps, DELTA, delta)
            released0.append(add_gaussian_noise(s[mine & (y == 0)], tau, rng))
            released1.append(add_gaussian_noise(s[mine & (y == 1)], tau, rng))
        s0, s1 = np.concatenate(released0), np.concatenate(released1)
        try:
            fit_rocglm(RocGlmParts.from_placements(placement_values(s0, s[y == 1])))
        except ValueError:  # separated counts: the batched fit reports NaN there
            pass
        average_precision(np.r_[s0, s1], np.r_[np.zeros(s0.size), np.ones(s1.size)].astype(int))
    sigma = discrete_gaussian_sigma(eps, DELTA)
    m = recommended_n_bins(sigma)
    edges = histogram_edges(m)
    h0, h1 = np.zeros(m), np.zeros(m)
    for site in range(k):
        mine = sites == site
        c0, c1 = bin_scores(s[mine], y[mine], edges)
        h0 += c0 + discrete_gaussian_noise(sigma, m, rng)
        h1 += c1 + discrete_gaussian_noise(sigma, m, rng)
    histogram_rocglm(consistent_counts(h0), consistent_counts(h1), tail_count=5 * sigma * np.sqrt(k))
    for fn, stat in ((dp_auc, "auc"), (dp_average_precision, "ap")):
        values, n1s, ns = [], [], []
        for site in range(k):
            mine = sites == site
            values.append(fn(s[mine], y[mine], epsilon=(1 - COUNT_SHARE) * eps, delta=DELTA, rng=rng).value)
            n1s.append(dp_class_count(int(y[mine].sum()), int(mine.sum()), epsilon=COUNT_SHARE * eps, rng=rng)[0])
            ns.append(int(mine.sum()))
        combine_site_releases(values, n1s, ns, statistic=stat)
        for delta in (DELTA, 0.0):
            fn(s, y, epsilon=eps, delta=delta, rng=rng)
    fedauc_rr(s, y, epsilon=eps, rng=rng)
    for method in ("local", "adaptive"):
        fedauc_laplace(s, y, sites=sites, epsilon=eps, rng=rng, method=method)
    return n


def main(argv=None):
    """Entry point: prints both timings and their ratio (measured in the same run)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--settings", nargs="+", default=["n=1000_K=5"])
    parser.add_argument("--reps", type=int, default=25, help="replications of the vectorised chunk")
    parser.add_argument("--loop-reps", type=int, default=5, help="replications of the per-replication loop")
    args = parser.parse_args(argv)
    settings = select_mechanism_settings(args.settings)
    run_mechanisms_chunk(1, range(1), settings)  # warm-up: imports, calibrations
    t0 = time.perf_counter()
    run_mechanisms_chunk(1, range(args.reps), settings)
    vectorised = (time.perf_counter() - t0) / (args.reps * len(settings))
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    for setting in settings:
        data = generate_data(1, range(args.loop_reps), setting.n)
        sites = data.sites(setting.k)
        for b in range(data.b):
            loop_replication(data.scores[b], data.labels[b], data.x[b], sites[b], setting.k, setting.epsilon, rng)
    loop = (time.perf_counter() - t0) / (args.loop_reps * len(settings))
    print(f"settings {', '.join(args.settings)} ({len(settings)}): vectorised {1e3 * vectorised:.1f} ms, "
          f"per-replication loop {1e3 * loop:.1f} ms per replication-setting; ratio {loop / vectorised:.1f}x")
    return loop / vectorised


if __name__ == "__main__":
    main()
