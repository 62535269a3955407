"""Scale benchmark: K TLS site daemons on loopback, n patients split over them, a full validation per protocol.

For each number of sites K the daemons are started one after another (``python -m site_node serve``,
mutual TLS, each with one dataset per size n, n/K patients each); then for each n the analyst runs
``Federation.validate`` and the same statistics are computed in process on the same data (releases,
pooled survivor functions, placement values, distributed Fisher scoring, moments, Brier, calibration:
the daemons' work without the network, and the analyst's own noise-corrected AUC and PR summary). Prints per (K, n): wall time of the validation, the in-process
time, their ratio, the daemons' largest RSS; per K: start-up time to SERVING (median and largest) and
idle RSS. Run from the repository root:

    python -m benchmarks.scale                        # K = 5, 20, 50; n = 1e4, 1e5 (1e6 for K = 5): minutes
    python -m benchmarks.scale --large                # adds n = 1e6 for every K and n = 1e7 for K = 5
    python -m benchmarks.scale --sites 5 --n 10000000

The histogram protocol (issue 8) is benchmarked once ``Federation.validate`` takes ``protocol=``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_SITES = (5, 20, 50)
DEFAULT_N = (10_000, 100_000)
EPSILON, DELTA = 5.0, 0.01


def memory_mb(pid: int) -> float:
    """Resident set size (VmRSS) of a process in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def site_data(n: int, k_sites: int, seed: int = 0):
    """Scores, labels and site of n patients (a logistic score, labels drawn from it)."""
    rng = np.random.default_rng([seed, n])
    pred = rng.uniform(0.0, 1.0, n)
    y = (rng.uniform(0.0, 1.0, n) < pred).astype(np.int8)
    site = np.arange(n) % k_sites
    return pred, y, site


def write_sites(root: Path, k_sites: int, sizes, pki, token_hash: str) -> list[Path]:
    """One folder per site: its config (TLS, generous budget, one dataset per n) and Parquet files."""
    import pandas as pd

    configs = []
    for k in range(k_sites):
        d = root / f"site{k}"
        (d / "data").mkdir(parents=True)
        datasets = []
        for n in sizes:
            pred, y, site = site_data(n, k_sites)
            mine = site == k
            pd.DataFrame({"pred": pred[mine], "y": y[mine]}).to_parquet(d / "data" / f"n{n}.parquet")
            datasets.append(f'[datasets.n{n}]\npath = "data/n{n}.parquet"\noutcomes = ["y"]\nscores = ["pred"]\n'
                            f'score_range = [0.0, 1.0]\n')
        (d / "site.toml").write_text(f"""
[site]
name = "site{k}"
state_dir = "state"
listen = "127.0.0.1:0"

[tls]
cert = "{pki.server_cert}"
key = "{pki.server_key}"
client_ca = "{pki.ca_cert}"

[policy]
protocols = ["histogram", "paper"]
sensitivity = "value"
sensitivity_value = 0.1
max_epsilon = 10.0
max_delta = 0.05
budget_epsilon = 1000.0
budget_delta = 0.5
max_survivor_scores = 20000000

[analysts.bench]
token_sha256 = "{token_hash}"
datasets = ["*"]

""" + "\n".join(datasets))
        configs.append(d / "site.toml")
    return configs


def start_daemons(configs):
    """Start the daemons one after another; returns (processes, addresses, start-up seconds)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs, addresses, startup = [], [], []
    for config in configs:
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "site_node", "serve", "--config", str(config)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        line = p.stdout.readline()
        startup.append(time.perf_counter() - t)
        procs.append(p)
        try:
            addresses.append(json.loads(line)["address"])
        except (ValueError, KeyError):
            stop(procs)
            raise RuntimeError(f"daemon for {config} did not start: {line!r}") from None
    return procs, addresses, startup


def stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


def in_process(n: int, k_sites: int) -> float:
    """The statistics of a validation computed in one process on the same data (no network), in seconds."""
    import dsroc
    from analyst.pr import pr_from_released_scores

    pred, y, site = site_data(n, k_sites)
    t = time.perf_counter()
    tau = dsroc.analytic_gaussian_sigma(EPSILON, DELTA, 0.1)
    rng = np.random.default_rng(1)
    classes = [(pred[(site == k) & (y == 0)], pred[(site == k) & (y == 1)]) for k in range(k_sites)]
    released = [(dsroc.add_gaussian_noise(s0, tau, rng), dsroc.add_gaussian_noise(s1, tau, rng)) for s0, s1 in classes]
    pooled0 = np.sort(np.concatenate([r[0] for r in released]))
    pooled1 = np.sort(np.concatenate([r[1] for r in released]))
    surv0, surv1 = dsroc.SurvivorFunction(pooled0), dsroc.SurvivorFunction(pooled1)
    pv0 = [np.sort(surv0(s1)) for _, s1 in classes]
    pv1 = [np.sort(surv1(s0)) for s0, _ in classes]
    fit = dsroc.fit_rocglm([dsroc.RocGlmParts.from_placements(p, None) for p in pv0])
    mean0, n1 = dsroc.pooled_mean(dsroc.mean_parts(p) for p in pv0)
    mean1, n0 = dsroc.pooled_mean(dsroc.mean_parts(p) for p in pv1)
    var = dsroc.delong_variance_from_moments(
        var_pv0=dsroc.pooled_variance([dsroc.sq_dev_parts(p, mean0) for p in pv0], n1), n1=n1,
        var_pv1=dsroc.pooled_variance([dsroc.sq_dev_parts(p, mean1) for p in pv1], n0), n0=n0)
    dsroc.auc_ci(fit.auc, var)
    edges = dsroc.calibration_edges(10)
    for k in range(k_sites):
        mine = site == k
        dsroc.brier_parts(pred[mine], y[mine])
        dsroc.calibration_parts(pred[mine], y[mine], edges, privacy_level=5)
    # What the validation also computes from the release: the noise-corrected AUC and the PR summary.
    dsroc.noise_corrected_auc(mean_pv0=mean0, mean_pv1=mean1,
                              correction=dsroc.deconvolution_correction(pooled0, pooled1, tau, tau),
                              delong_variance=var, noise_variance=dsroc.noise_variance(pooled0, pooled1, tau, tau))
    pr_from_released_scores(pooled0, pooled1)
    return time.perf_counter() - t


def protocols() -> list[str]:
    """The protocols ``Federation.validate`` offers (the paper's and the histogram one)."""
    from analyst import Federation

    return ["paper", "histogram"] if "protocol" in inspect.signature(Federation.validate).parameters else ["paper"]


def run(k_sites: int, sizes, *, repeat: int, out) -> list[dict]:
    from analyst import Federation, SiteConfig
    from site_node.auth import hash_token
    from site_node.pki import generate_dev_pki

    token = "bench-token"
    rows = []
    with tempfile.TemporaryDirectory(prefix=f"dsroc-scale-{k_sites}-") as tmp:
        root = Path(tmp)
        pki = generate_dev_pki(root / "pki")
        configs = write_sites(root, k_sites, sizes, pki, hash_token(token))
        try:  # signed releases: every site must know the others' release-signing keys
            from site_node.init import link_peers
        except ImportError:  # a tree from before signed releases (for before/after runs)
            link_peers = None
        if link_peers is not None:
            link_peers(configs)
        procs, addresses, startup = start_daemons(configs)
        try:
            idle = max(memory_mb(p.pid) for p in procs)
            print(f"K = {k_sites}: start-up to SERVING median {np.median(startup):.2f} s, largest {max(startup):.2f} s; "
                  f"idle RSS up to {idle:.0f} MB", file=out, flush=True)
            sites = [SiteConfig(name=f"site{k}", address=a, token=token, ca_file=pki.ca_cert,
                                client_cert=pki.client_cert, client_key=pki.client_key)
                     for k, a in enumerate(addresses)]
            with Federation(sites, timeout=600.0) as fed:
                for n in sizes:
                    for protocol in protocols():
                        options = {"protocol": protocol}
                        walls = []
                        for _ in range(repeat):
                            t = time.perf_counter()
                            fed.validate(f"n{n}", "y", score="pred", epsilon=EPSILON, delta=DELTA, **options)
                            walls.append(time.perf_counter() - t)
                        local = min(in_process(n, k_sites) for _ in range(repeat)) if protocol == "paper" else float("nan")
                        wall = min(walls)
                        rss = max(memory_mb(p.pid) for p in procs)
                        row = {"sites": k_sites, "n": n, "protocol": protocol, "wall_s": wall, "in_process_s": local,
                               "ratio": wall / local, "first_s": walls[0], "rss_mb": rss,
                               "startup_median_s": float(np.median(startup)), "startup_max_s": max(startup)}
                        rows.append(row)
                        print(f"  n = {n:>10,}  {protocol:<9}  validate {wall:8.3f} s (first {walls[0]:.3f} s)  "
                              f"in process {local:8.3f} s  network/in-process {wall / local:5.2f}x  "
                              f"daemon RSS up to {rss:6.0f} MB", file=out, flush=True)
        finally:
            stop(procs)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, nargs="+", help=f"numbers of sites (default {' '.join(map(str, DEFAULT_SITES))})")
    parser.add_argument("--n", type=int, nargs="+", help="patients in total (default 1e4 1e5, and 1e6 for the smallest K)")
    parser.add_argument("--large", action="store_true", help="add n = 1e6 for every K and n = 1e7 for the smallest K")
    parser.add_argument("--repeat", type=int, default=2, help="validations per point; the fastest counts (default 2)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    sites = sorted(args.sites or DEFAULT_SITES)
    print(f"scale benchmark: loopback, mutual TLS, {os.cpu_count()} CPUs, epsilon {EPSILON:g}, delta {DELTA:g}; "
          f"protocols: {', '.join(protocols())}", flush=True)
    rows = []
    for k in sites:
        if args.n:
            sizes = sorted(args.n)
        else:
            sizes = list(DEFAULT_N) + ([1_000_000] if (k == sites[0] or args.large) else [])
            sizes += [10_000_000] if (args.large and k == sites[0]) else []
        rows += run(k, sizes, repeat=args.repeat, out=sys.stdout)
    print_targets(rows, sys.stdout)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def print_targets(rows: list[dict], out) -> None:
    """The issue's targets beside what this run measured (paper protocol; a target needs its rows)."""
    paper = {(r["sites"], r["n"]): r for r in rows if r["protocol"] == "paper"}
    lines = []
    if (5, 10_000) in paper:
        lines.append(f"10^4 patients over 5 sites: {paper[5, 10_000]['wall_s']:.3f} s (target <= 0.08 s)")
    if (5, 10_000_000) in paper:
        lines.append(f"10^7 patients over 5 sites: {paper[5, 10_000_000]['wall_s']:.2f} s (target <= 6 s)")
    for (k, n), r in sorted(paper.items()):
        if n >= 1_000_000:
            lines.append(f"network / in-process, {k} sites, n = {n:,}: {r['ratio']:.2f}x (target <= 1.0x)")
    if (5, 100_000) in paper and (50, 100_000) in paper:
        ratio = paper[50, 100_000]["wall_s"] / paper[5, 100_000]["wall_s"]
        lines.append(f"n = 10^5: 50 sites / 5 sites: {ratio:.2f}x (target <= 2x)")
    if rows:
        lines.append(f"daemon start-up to SERVING: largest {max(r['startup_max_s'] for r in rows):.2f} s (target <= 1 s)")
        big = max(rows, key=lambda r: r["n"] / r["sites"])
        lines.append(f"daemon RSS with {big['n'] // big['sites']:,} rows each: up to {big['rss_mb']:.0f} MB "
                     "(target <= 200 MB at 10^6 rows; one daemon: python -m benchmarks.daemon)")
    if lines:
        print("\ntargets (issue 12), this run:", *("  " + line for line in lines), sep="\n", file=out, flush=True)


if __name__ == "__main__":
    sys.exit(main())
