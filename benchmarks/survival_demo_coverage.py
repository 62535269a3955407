"""How often the GBSG2 survival demo's intervals hold the pooled values: Harrell's C and AUC(730) over fresh releases.

Five TLS site daemons hold the demo's test split (the Cox model's two-year risk, every patient) as ``--runs``
copies, each in its own file declared its own population (a site refuses byte-identical files with separate budgets
unless told so): each copy has its own ledger, so each validation draws fresh noise (the same request on one
population replays its release, for free). Only a measurement may do this: in use, copies share one budget. The
pooled values are the demo's references on all test patients in one place (lifelines' concordance index; the
unbinned IPCW AUC of ``analyst.demo.reference``). Run from the repository root:

    python -m benchmarks.survival_demo_coverage                 # 10 runs at epsilon 5
    python -m benchmarks.survival_demo_coverage --runs 20 --epsilon 1
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks._harness import TOKEN, site_configs, start_daemons, stop
from site_node.testing import write_site_config


def write_configs(root: Path, data, runs: int, pki, token_hash: str) -> list[Path]:
    """One config per site holding its part of the test split as ``runs`` datasets ``r0 .. r{runs-1}``, a file each."""
    from analyst.demo.gbsg2 import FEATURES
    from analyst.demo.gbsg2_survival import EVENT, RISK, SURVIVAL_GRID, TIME

    policy = {"protocols": ["histogram"], "max_epsilon": 10.0, "max_delta": 0.05, "budget_epsilon": 50.0,
              "budget_delta": 0.05, "survival_time_edges": list(SURVIVAL_GRID),
              "survival_max_time_bins": len(SURVIVAL_GRID) + 1}
    dataset = {"outcomes": [EVENT], "scores": [RISK], "score_range": [0.0, 1.0], "time_columns": [TIME]}
    configs = []
    for k, frame in enumerate(data.sites):
        copies = {f"r{i}": frame[[*FEATURES, TIME, EVENT, RISK]] for i in range(runs)}
        populations = {f"r{i}": {"path": f"data/r{i}.csv", **dataset, "population": f"copy{i}"} for i in range(runs)}
        configs.append(write_site_config(root / f"site{k}", frames=copies, datasets=populations, policy=policy,
                                         tls=pki, analysts={"bench": {"token_sha256": token_hash, "datasets": ["*"]}}))
    return configs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="validations, each on fresh noise (default 10)")
    parser.add_argument("--epsilon", type=float, default=5.0, help="epsilon of each site's release (default 5)")
    args = parser.parse_args(argv)

    from analyst import Federation
    from analyst.demo.gbsg2_survival import EVENT, RISK, TIME, prepare_gbsg2_survival
    from analyst.demo.survival import survival_references
    from site_node.interceptors.auth import hash_token
    from site_node.security.pki import generate_dev_pki

    data = prepare_gbsg2_survival()
    pooled, _ = survival_references(data)
    print(f"pooled (all {pooled['n']} test patients): Harrell's C {pooled['harrell_c']:.4f}, AUC(730) "
          f"{pooled['auc']:.4f}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="dsroc-survival-coverage-") as tmp:
        pki = generate_dev_pki(Path(tmp) / "pki")
        configs = write_configs(Path(tmp), data, args.runs, pki, hash_token(TOKEN))
        procs, addresses, _ = start_daemons(configs)
        try:
            with Federation(site_configs(addresses, pki)) as fed:
                for i in range(args.runs):
                    t = time.perf_counter()
                    res = fed.validate(f"r{i}", EVENT, score=RISK, epsilon=args.epsilon, delta=0.01, time=TIME,
                                       horizon=730.0, seed=i)
                    v = res.detail.validation
                    if any(p.repeated for p in res.privacy.values()):
                        raise RuntimeError(f"run {i}: a site replayed an earlier release (the same population)")
                    c_in = v.harrell_c.lower <= pooled["harrell_c"] <= v.harrell_c.upper
                    a_in = v.auc.lower <= pooled["auc"] <= v.auc.upper
                    rows.append((c_in, a_in))
                    print(f"run {i}: C {v.harrell_c.value:.4f} [{v.harrell_c.lower:.4f}, {v.harrell_c.upper:.4f}] "
                          f"{'holds' if c_in else 'misses'}; AUC(730) {v.auc.value:.4f} [{v.auc.lower:.4f}, "
                          f"{v.auc.upper:.4f}] {'holds' if a_in else 'misses'}; {time.perf_counter() - t:.1f} s",
                          flush=True)
        finally:
            stop(procs)
    print(f"covered in {sum(c for c, _ in rows)} of {len(rows)} runs (Harrell's C) and {sum(a for _, a in rows)} of "
          f"{len(rows)} (AUC(730)) at epsilon {args.epsilon:g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
