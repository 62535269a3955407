"""Scale benchmark: K TLS site daemons on loopback, n patients split over them, the issue's targets beside their anchors.

For each number of sites K the daemons are started one after another (``python -m site_node serve``,
mutual TLS, each with one dataset per size n, n/K patients each) and waited for until ready (each one's CPU
seconds to then, its table reader's included); on every size the analyst runs the default protocol first
(histogram: its first validation after "datasets ready" and warm ones, the CPU seconds of the analyst, of the
daemons and of the post-processing), then, up to n = 10^5, secure aggregation interleaved with the histogram
protocol (CPU seconds of each, a new epsilon each validation), then ``Federation.validate`` with the paper protocol
(a new release each time); the same statistics
are computed in process on the same data with the same noise (the daemons' exact lattice sampler): the
daemons' work without the network, the anchor of the network's cost. Per (K, n) it prints the fastest validation, the first one after start-up, the
in-process time, the CPU seconds of both (the analyst's process and every daemon together, and the
in-process run: on a shared machine they move less with the load than wall-clock times), the analyst's
peak memory (VmHWM of its process during one validation), the daemons' CPU per validation, the calls one
daemon served per validation (from its audit log) and their memory. Then the simulation study's batched paper-mode replication against
a minimal numpy implementation of the same replication (and R's, when Rscript and pROC are installed),
and at the end every scale target with the anchor it is measured against, all from this run.

Every measurement runs in a worker process with the tree under test first on PYTHONPATH (its daemons
too), so ``--baseline DIR`` (another checkout, e.g. ``git worktree add /tmp/base COMMIT``) runs the same
measurements on that tree, interleaved with this one (A, B, then B, A for the next K), and the targets
get a "before" column. Run from the repository root:

    python -m benchmarks.scale                         # K = 5 (n = 1e4 ... 1e7) and K = 50 (n = 1e5): minutes
    python -m benchmarks.scale --baseline /tmp/base    # before / after, interleaved
    python -m benchmarks.scale --sites 5 --n 10000 100000 --study-reps 20
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
if __name__ == "__main__":  # this checkout's harness, whatever tree comes first on the path (a --baseline's has its own)
    import importlib.util

    import benchmarks  # noqa: F401 - the namespace the harness is a module of

    _HERE = Path(__file__).resolve().parent / "_harness"
    _SPEC = importlib.util.spec_from_file_location("benchmarks._harness", _HERE / "__init__.py",
                                                   submodule_search_locations=[str(_HERE)])
    sys.modules["benchmarks._harness"] = importlib.util.module_from_spec(_SPEC)
    _SPEC.loader.exec_module(sys.modules["benchmarks._harness"])

import numpy as np

from benchmarks._harness import (DELTA, EPSILON, ROOT, TOKEN, cpu_seconds, memory_mb, peak_mb, reset_peak,
                                 site_configs, site_data, start_daemons, stop, study_worker, trim_heap, worker_answer,
                                 write_data, write_dev_sites)
from benchmarks._harness.validations import default_protocol_row, ready_cpu, secagg_row

DEFAULT_SITES = (5, 50)


def in_process(n: int, k_sites: int) -> tuple[float, float, float]:
    """The statistics of a validation computed in one process on the same data (no network): seconds in all,
    of them the release noise's, and the CPU seconds it took.

    Like for like: the noise is the daemons' (scores on the public lattice plus exact discrete Gaussian
    noise, ``dsroc.privacy.lattice``), drawn site after site; what the anchor leaves out is what the network
    path adds: the wire, TLS, the ledger, sealing and signing the release.
    """
    import dsroc
    from analyst.result.pr import pr_from_released_scores
    from dsroc.privacy.lattice import lattice_gaussian

    pred, y, site = site_data(n, k_sites)
    t, cpu = time.perf_counter(), time.process_time()
    noise = lattice_gaussian(EPSILON, DELTA, 0.1)
    tau = noise.sigma
    classes = [(pred[(site == k) & (y == 0)], pred[(site == k) & (y == 1)]) for k in range(k_sites)]
    # A tree from before sorted_noisy_points (a --baseline) sorts the points as its daemons did.
    points = getattr(noise, "sorted_noisy_points", lambda s: np.sort(noise.noisy_points(s)))
    released = [tuple(noise.values(points(s)) for s in pair) for pair in classes]
    noise_s = time.perf_counter() - t
    pooled0 = np.sort(np.concatenate([r[0] for r in released]), kind="stable")
    pooled1 = np.sort(np.concatenate([r[1] for r in released]), kind="stable")
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
    return time.perf_counter() - t, noise_s, time.process_time() - cpu


# ---------------------------------------------------------------------------------------------- workers
def sites_worker(tree: str, k_sites: int, sizes, repeat: int, data_dir: str) -> list[dict]:
    """Daemons and analyst of the tree on PYTHONPATH: the rows of one K (run in a worker process)."""
    import inspect

    from analyst import Federation
    from site_node.server import SiteServer

    warms = "warm_up" in inspect.signature(SiteServer).parameters
    token, me, rows = TOKEN, os.getpid(), []
    with tempfile.TemporaryDirectory(prefix=f"dsroc-scale-{k_sites}-") as tmp:
        root = Path(tmp)
        pki, configs = write_dev_sites(root, k_sites, sizes, token=token, data_dir=Path(data_dir),
                                       protocols=("histogram", "paper", "secagg"))
        try:  # signed releases: every site must know the others' release-signing keys
            from site_node.cli.init import link_peers
        except ImportError:  # a tree from before signed releases
            link_peers = None
        if link_peers is not None:
            link_peers(configs)
        procs, addresses, startup = start_daemons(configs, tree=Path(tree), wait_ready=warms)
        try:
            ready = ready_cpu(procs)  # each daemon's start to "datasets ready", its table reader included
            idle = max(memory_mb(p.pid) for p in procs)
            with Federation(site_configs(addresses, pki, token), timeout=600.0) as fed:
                # The analyst's own first use (imports, TLS handshakes) is not the daemons' cold start.
                import grpc

                in_process(1000, k_sites)
                for conn in fed.connections:
                    grpc.channel_ready_future(conn.channel).result(timeout=60)
                audit = root / "site0" / "state" / "audit.jsonl"
                for i, n in enumerate(sizes):
                    # The default protocol first (its first validation is the first after "datasets ready"), then
                    # secagg beside it (small n: its cost hardly grows with n), then the paper protocol.
                    extra = default_protocol_row(fed, procs, n, repeat, offset=100 + 10 * i * (repeat + 1))
                    if k_sites > 1 and n <= 100_000:
                        extra.update(secagg_row(fed, procs, n, repeat, offset=500 + 10 * i * (repeat + 1)))
                    walls, peaks, cpus, bases, mine = [], [], [], [], []
                    logged = audit.stat().st_size if audit.exists() else 0
                    for j in range(repeat + 1):  # the first is the first validation after start-up
                        # A new release every time (epsilon moves a little), as a new validation makes.
                        eps = EPSILON - 1e-3 * (i * (repeat + 1) + j)
                        before = [cpu_seconds(p.pid) for p in procs]
                        trim_heap()  # the benchmark's own leftovers (data, in-process runs) are not the analyst's
                        bases.append(memory_mb(me))
                        reset_peak(me)
                        t, cpu = time.perf_counter(), time.process_time()
                        fed.validate(f"n{n}", "y", score="pred", epsilon=eps, delta=DELTA, protocol="paper")
                        walls.append(time.perf_counter() - t)
                        mine.append(time.process_time() - cpu)
                        peaks.append(peak_mb(me))
                        cpus.append(sum(cpu_seconds(p.pid) - b for p, b in zip(procs, before)) / k_sites)
                    calls = _calls_logged(audit, logged) / (repeat + 1)
                    # The analyst closes the sessions after the validation returns (in the background): the daemons'
                    # memory between validations is read once they are closed, as benchmarks.first_validation does.
                    time.sleep(0.5)
                    rss = max(memory_mb(p.pid) for p in procs)
                    local, local_noise, local_cpu = min(in_process(n, k_sites) for _ in range(1 if n >= 10_000_000 else 2))
                    warm = min(walls[1:])
                    rows.append({"sites": k_sites, "n": n, "wall_s": warm, "first_s": walls[0],
                                 "warm_median_s": float(np.median(walls[1:])), "in_process_s": local,
                                 "in_process_noise_s": local_noise, "in_process_cpu_s": local_cpu,
                                 # CPU seconds of one validation: the analyst's process and all daemons together
                                 "network_cpu_s": float(np.median(mine[1:])) + k_sites * float(np.median(cpus[1:])),
                                 "analyst_peak_mb": max(peaks[1:]), "analyst_base_mb": max(bases[1:]), "daemon_cpu_ms": 1e3 * float(np.median(cpus[1:])),
                                 "calls_per_site": calls,
                                 "rss_mb": rss, "idle_mb": idle, "startup_max_s": max(startup),
                                 "ready_s": procs[0].ready_s, "warm_up": warms, "ready_cpu_max_s": max(ready),
                                 "ready_cpu_median_s": float(np.median(ready)), **extra})
                    print(f"    K = {k_sites:>2} n = {n:>10,}: validate {warm:7.3f} s (first {walls[0]:.3f} s), "
                          f"in process {local:7.3f} s, analyst peak {max(peaks[1:]):5.0f} MB, daemon CPU "
                          f"{rows[-1]['daemon_cpu_ms']:7.1f} ms per site ({calls:.0f} calls), daemon RSS up to {rss:5.0f} MB",
                          file=sys.stderr, flush=True)
        finally:
            stop(procs)
    return rows


def _calls_logged(audit: Path, offset: int) -> int:
    """The calls a daemon's audit log recorded after byte ``offset`` (a combined call's parts, which name it in
    ``in_call``, are not calls of their own)."""
    if not audit.exists():
        return 0
    with audit.open("rb") as f:
        f.seek(offset)
        records = [json.loads(line) for line in f.read().splitlines() if line.strip()]
    return sum("in_call" not in r.get("parameters", {}) for r in records)


def daemon_worker(tree: str, n: int, data_dir: str) -> dict:
    """One daemon with n rows: RSS when ready (idle), after a validation, and its peak."""
    rows = sites_worker(tree, 1, [n], 1, data_dir)
    return {"rows": n, "idle_mb": rows[0]["idle_mb"], "after_mb": rows[0]["rss_mb"]}


def r_study_ms(reps: int) -> float | None:
    """R's (pROC + glm) milliseconds per replication of the paper-mode study, or None without Rscript and pROC."""
    try:
        from benchmarks.r_reference import check_r, export_replications, run_r
        from simulations.common.settings import all_settings
        rscript = check_r()
    except (ImportError, RuntimeError):
        return None
    settings = all_settings("paper")
    with tempfile.TemporaryDirectory(prefix="dsroc-scale-r-") as tmp:
        export_replications(tmp, seed=1, reps=range(reps), settings=settings)
        out = run_r(rscript, tmp, n_reps=reps, n_settings=len(settings))
    return 1e3 * out["timing"]["study_wall"] / reps


def _run_worker(job: dict):
    tree = os.environ["PYTHONPATH"].split(os.pathsep)[0]
    if job["kind"] == "sites":
        return sites_worker(tree, job["sites"], job["sizes"], job["repeat"], job["data_dir"])
    if job["kind"] == "daemon":
        return daemon_worker(tree, job["n"], job["data_dir"])
    return study_worker(job["reps"], job["rounds"])


# ---------------------------------------------------------------------------------------------- report
def targets(results: dict) -> list[tuple[str, float, str, str, str]]:
    """(name, value, unit, target, anchor) of every scale target that ``results`` (one tree) has."""
    rows = {(r["sites"], r["n"]): r for r in results.get("sites", [])}
    out = []
    if (5, 10_000_000) in rows:
        r = rows[5, 10_000_000]
        out.append(("10^7 patients over 5 TLS sites, paper", r["wall_s"], "s", "<= 5 s",
                    f"in process {r['in_process_s']:.2f} s{_noise_share(r)}{_cpu(r)}"))
        base = f"RSS before it {r['analyst_base_mb']:.0f} MB, " if "analyst_base_mb" in r else ""
        out.append(("analyst peak memory at 10^7", r["analyst_peak_mb"], "MB", "<= 600 MB",
                    f"{base}the pooled scores {8 * 10_000_000 / 2**20:.0f} MB"))
    if (5, 1_000_000) in rows:
        r = rows[5, 1_000_000]
        out.append(("network / in-process at 10^6 (5 sites)", r["wall_s"] / r["in_process_s"], "x", "<= 1.1x",
                    f"{r['wall_s']:.3f} s / {r['in_process_s']:.3f} s in process{_noise_share(r)}{_cpu(r)}"))
    if "daemon" in results:
        d = results["daemon"]
        out.append((f"daemon RSS at {d['rows']:,} rows (ready / after a validation)", d["after_mb"], "MB",
                    "<= 200 MB", f"idle when ready {d['idle_mb']:.0f} MB"))
    if (5, 100_000) in rows and (50, 100_000) in rows:
        a, b = rows[5, 100_000], rows[50, 100_000]
        out.append(("n = 10^5: 50 sites / 5 sites", b["wall_s"] / a["wall_s"], "x", "<= 4x",
                    f"{b['wall_s']:.3f} s / {a['wall_s']:.3f} s"))
        calls = f"; {b['calls_per_site']:.0f} calls per site" if "calls_per_site" in b else ""
        out.append(("daemon CPU per validation per site (50 sites, 10^5)", b["daemon_cpu_ms"], "ms", "<= 15 ms",
                    f"5 sites: {a['daemon_cpu_ms']:.1f} ms{calls}"))
    out += _default_targets(rows)
    if "study" in results:
        st = results["study"]
        out.append(("study per replication / minimal numpy", st["batched_ms"] / st["minimal_ms"], "x", "<= 1.2x",
                    f"{st['batched_ms']:.1f} ms / {st['minimal_ms']:.1f} ms ({st['settings']} settings; "
                    f"max |difference| {st['max_difference']:.1e})"))
        if results.get("r_ms"):
            out.append(("R (pROC + glm) / study per replication", results["r_ms"] / st["batched_ms"], "x", ">= 25x",
                        f"R {results['r_ms']:.0f} ms / {st['batched_ms']:.1f} ms"))
        else:
            out.append(("R (pROC + glm) / study per replication", float("nan"), "x", ">= 25x",
                        "not measured: Rscript with pROC is not installed"))
    return out


def _default_targets(rows: dict) -> list[tuple[str, float, str, str, str]]:
    """The default protocol's and secagg's targets: first validation after ready against a warm one, secagg's CPU
    against the histogram protocol's, the analyst's post-processing, a site's start to ready, 50 against 5 sites."""
    out = []
    for k in sorted({k for k, _ in rows}):
        n, r = min((n, r) for (kk, n), r in rows.items() if kk == k)
        if "default_cpu_s" not in r:
            continue
        out.append((f"first default validation after ready / warm, daemons' CPU ({k} sites, n = {n:,})",
                    r["default_first_daemons_cpu_s"] / r["default_daemons_cpu_s"], "x", "<= 1.5x",
                    f"{r['default_first_daemons_cpu_s']:.3f} / {r['default_daemons_cpu_s']:.3f} CPU-s; wall "
                    f"{r['default_first_wall_s']:.3f} s / {r['default_wall_s']:.3f} s (the first with the analyst's "
                    f"own first use)"))
        out.append((f"site ready: CPU per daemon, its table reader included ({k} sites)", r["ready_cpu_max_s"], "s",
                    "<= 1.5 s", f"median {r['ready_cpu_median_s']:.2f} CPU-s; all ready {r['ready_s']:.1f} s after "
                    f"the first started"))
        out.append((f"analyst post-processing per default validation (CPU, {k} sites, n = {n:,})",
                    r["default_analysis_cpu_s"], "s", "<= 0.1 s",
                    f"the analyst's whole validation {r['default_analyst_cpu_s']:.3f} CPU-s"))
        if "secagg_ratio" in r:
            out.append((f"secagg / histogram CPU per validation, a new epsilon each ({k} sites, n = {n:,})",
                        r["secagg_ratio"], "x", "<= 2x",
                        f"{r['secagg_cpu_s']:.3f} CPU-s (analyst {r['secagg_analyst_cpu_s']:.3f}) / "
                        f"{r['histogram_cpu_s']:.3f} CPU-s (analyst {r['histogram_analyst_cpu_s']:.3f}), analyst "
                        "and daemons"))
    if (5, 100_000) in rows and (50, 100_000) in rows and "default_wall_s" in rows[5, 100_000]:
        a, b = rows[5, 100_000], rows[50, 100_000]
        out.append(("n = 10^5: 50 sites / 5 sites, default protocol", b["default_wall_s"] / a["default_wall_s"], "x",
                    "<= 4x", f"{b['default_wall_s']:.3f} s / {a['default_wall_s']:.3f} s; CPU "
                    f"{b['default_cpu_s']:.2f} / {a['default_cpu_s']:.2f} s"))
    return out


def _cpu(row: dict) -> str:
    """CPU seconds of a validation over the network (analyst and daemons) and in process, when measured: on a
    shared machine they move less with the load than the wall-clock times."""
    if "network_cpu_s" not in row:
        return ""
    return f"; CPU {row['network_cpu_s']:.2f} s (analyst and daemons) / {row['in_process_cpu_s']:.2f} s in process"


def _noise_share(row: dict) -> str:
    """The in-process anchor's share of the release noise (the daemons' exact sampler), when measured."""
    if "in_process_noise_s" not in row:
        return ""
    return f", {row['in_process_noise_s']:.2f} s of it the daemons' exact noise"


def print_targets(results: dict, baseline: dict | None, out) -> None:
    """The targets table: before (``baseline``), after, the target and the anchors of this run."""
    after = targets(results)
    before = {name: (value, anchor) for name, value, _, _, anchor in targets(baseline)} if baseline else {}
    load = "%.2f %.2f %.2f" % os.getloadavg()
    print(f"\ntargets, this run (load average now {load} on {os.cpu_count()} CPUs):", file=out)
    for name, value, unit, target, anchor in after:
        old = before.get(name)
        was = f"before {old[0]:8.2f} {unit:<2} ({old[1]}); " if old else ""
        print(f"  {name:<58} {was}after {value:8.2f} {unit:<2} ({anchor})  target {target}", file=out, flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, nargs="+", help=f"numbers of sites (default {' '.join(map(str, DEFAULT_SITES))})")
    parser.add_argument("--n", type=int, nargs="+", help="patients in total (default 1e4 ... 1e7 for 5 sites, 1e5 for more)")
    parser.add_argument("--repeat", type=int, default=3, help="validations per point after the first (default 3)")
    parser.add_argument("--study-reps", type=int, default=100, help="replications of the study comparison, one chunk (0: none)")
    parser.add_argument("--daemon-rows", type=int, default=1_000_000, help="rows of the one-daemon memory check (0: none)")
    parser.add_argument("--baseline", help="another tree to run the same measurements on, interleaved (before)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_run_worker(json.loads(args.worker))))
        return 0
    trees = {"after": ROOT}
    if args.baseline:
        trees = {"before": Path(args.baseline).resolve(), "after": ROOT}
    results = {name: {"sites": []} for name in trees}
    print(f"scale benchmark: loopback, mutual TLS, {os.cpu_count()} CPUs, epsilon {EPSILON:g}, delta {DELTA:g}, "
          f"default, secagg and paper protocols; trees: {', '.join(f'{k} {v}' for k, v in trees.items())}", flush=True)
    flip = 0

    def each_tree(job: dict):
        nonlocal flip
        names = list(trees) if flip % 2 == 0 else list(reversed(trees))
        flip += 1
        answers = {}
        for name in names:
            print(f"  {name}: {job['kind']} {json.dumps({k: v for k, v in job.items() if k not in ('kind', 'data_dir')})}",
                  flush=True)
            answers[name] = worker_answer(__file__, trees[name], job, ROOT)
        return answers

    with tempfile.TemporaryDirectory(prefix="dsroc-scale-data-") as data:
        for k in sorted(args.sites or DEFAULT_SITES):
            sizes = sorted(args.n) if args.n else ([10_000, 100_000, 1_000_000, 10_000_000] if k <= 5 else [100_000])
            data_dir = Path(data) / f"k{k}"
            write_data(data_dir, k, sizes)
            job = {"kind": "sites", "sites": k, "sizes": sizes, "repeat": args.repeat, "data_dir": str(data_dir)}
            for name, rows in each_tree(job).items():
                results[name]["sites"] += rows
        if args.daemon_rows:
            data_dir = Path(data) / "daemon"
            write_data(data_dir, 1, [args.daemon_rows])
            for name, d in each_tree({"kind": "daemon", "n": args.daemon_rows, "data_dir": str(data_dir)}).items():
                results[name]["daemon"] = d
    if args.study_reps:
        for name, st in each_tree({"kind": "study", "reps": args.study_reps, "rounds": 3}).items():
            results[name]["study"] = st
        r_ms = r_study_ms(min(args.study_reps, 20))
        for name in trees:
            results[name]["r_ms"] = r_ms
    for name, res in results.items():
        print(f"\n{name}:")
        for r in res["sites"]:
            print(f"  K = {r['sites']:>2} n = {r['n']:>10,}: validate {r['wall_s']:7.3f} s (first {r['first_s']:.3f} s) "
                  f"in process {r['in_process_s']:7.3f} s, ratio {r['wall_s'] / r['in_process_s']:5.2f}x{_cpu(r)}, analyst peak "
                  f"{r['analyst_peak_mb']:5.0f} MB, daemon CPU {r['daemon_cpu_ms']:7.1f} ms per site"
                  + (f" ({r['calls_per_site']:.0f} calls)" if "calls_per_site" in r else "") + ", "
                  f"daemon RSS {r['rss_mb']:5.0f} MB (idle {r['idle_mb']:.0f}), start-up to SERVING up to "
                  f"{r['startup_max_s']:.2f} s")
    print_targets(results["after"], results.get("before"), sys.stdout)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
