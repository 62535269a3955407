"""Survival against binary validation: wall time of ``validate`` over K TLS site daemons holding n patients in total.

The same patients and scores: a binary validation (histogram protocol, quantile grid) of the outcome ``y`` and a
survival validation (``time=``, ``horizon=``) of the event indicator with its follow-up time, each repeated at a new
epsilon (so new releases, not replays). Prints the release (network and sites) and analysis (the analyst's
post-processing) seconds of each. Run from the repository root:

    python -m benchmarks.survival                    # K = 5 sites, n = 100 000 patients
    python -m benchmarks.survival --n 1000000 --repeat 2 --draws 40
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._harness import TOKEN, site_configs, start_daemons, stop
from site_node.testing import write_site_config

GRID = [90.0 * k for k in range(1, 23)]
HORIZON = 720.0


def cohort(n: int) -> dict[str, np.ndarray]:
    """The benchmark's ``n`` patients: risk ``pred`` of an event by the horizon, binary ``y``, ``time``, ``event``."""
    rng = np.random.default_rng(n)
    x = rng.normal(size=n)
    t = 900.0 * rng.weibull(1.3, n) * np.exp(-0.8 * x / 1.3)
    c = rng.uniform(200.0, 2600.0, n)
    pred = 1.0 - np.exp(-((HORIZON / 900.0) ** 1.3) * np.exp(0.8 * x))
    return {"pred": pred, "y": (t <= HORIZON).astype(int), "time": np.round(np.minimum(t, c), 1),
            "event": (t <= c).astype(int)}


def write_configs(root: Path, n: int, k_sites: int, pki, token_hash: str) -> list[Path]:
    """Each site's Parquet file (risk ``pred``, binary ``y``, ``time`` and ``event``) and config."""
    import pandas as pd

    frame = pd.DataFrame(cohort(n))
    policy = {"protocols": ["histogram"], "max_epsilon": 10.0, "max_delta": 0.05, "budget_epsilon": 1000.0,
              "budget_delta": 0.5, "survival_time_edges": GRID}
    dataset = {"outcomes": ["y", "event"], "scores": ["pred"], "score_range": [0.0, 1.0], "time_columns": ["time"]}
    return [write_site_config(root / f"site{k}", frames={"bench": frame.iloc[k::k_sites]}, dataset=dataset,
                              data_format="parquet", policy=policy, tls=pki,
                              analysts={"bench": {"token_sha256": token_hash, "datasets": ["*"]}})
            for k in range(k_sites)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=5, help="number of sites (default 5)")
    parser.add_argument("--n", type=int, default=100_000, help="patients in total (default 1e5)")
    parser.add_argument("--repeat", type=int, default=3, help="validations of each kind (new epsilon each)")
    parser.add_argument("--draws", type=int, default=100, help="bootstrap replicates of the survival intervals")
    args = parser.parse_args(argv)

    from analyst import Federation
    from site_node.interceptors.auth import hash_token
    from site_node.security.pki import generate_dev_pki

    with tempfile.TemporaryDirectory(prefix="dsroc-survival-bench-") as tmp:
        pki = generate_dev_pki(Path(tmp) / "pki")
        configs = write_configs(Path(tmp), args.n, args.sites, pki, hash_token(TOKEN))
        procs, addresses, _ = start_daemons(configs, wait_ready=True)
        times = {"binary": [], "survival": []}
        try:
            with Federation(site_configs(addresses, pki)) as fed:
                fed.validate("bench", "y", score="pred", epsilon=9.9, delta=0.01)  # warm-up: connections, imports
                for i in range(args.repeat):
                    eps = 5.0 + 0.1 * i
                    for kind, extra, outcome in (("binary", {}, "y"),
                                                 ("survival", {"time": "time", "horizon": HORIZON, "draws": args.draws}, "event")):
                        t = time.perf_counter()
                        res = fed.validate("bench", outcome, score="pred", epsilon=eps, delta=0.01, **extra)
                        wall = time.perf_counter() - t
                        times[kind].append(wall)
                        print(f"{kind:<8} epsilon {eps:.1f}: {wall:.2f} s (release {res.timing.get('release', 0):.2f} s, "
                              f"analysis {res.timing.get('analysis', 0):.2f} s); AUC {res.auc:.4f}", flush=True)
        finally:
            stop(procs)
    b, s = statistics.median(times["binary"]), statistics.median(times["survival"])
    print(f"median wall time over {args.repeat}: binary {b:.2f} s, survival {s:.2f} s, ratio {s / b:.2f} "
          f"({args.n} patients over {args.sites} TLS sites)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
