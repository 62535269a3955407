"""Secagg-protocol benchmark: validations over K TLS site daemons by secure aggregation beside the histogram protocol.

Both protocols bin the same scores at each site (by default both on the two-round quantile grid with score
sums); secagg adds two round trips per round (masked vectors, seeds) and the X25519/HKDF/ChaCha20 work of
K - 1 pairwise masks per site. Several federations (``--sites 5,20``) run at once and their validations are
interleaved (one of each federation and protocol in turn, a new epsilon each time), so that the ratios of
one run compare like with like on a shared machine. Run from the repository root:

    python -m benchmarks.secagg                            # K = 5 and 20 sites, n = 100 000 patients
    python -m benchmarks.secagg --sites 5 --n 100000 --repeat 3 --profile /tmp/secagg.prof
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._harness import DELTA, EPSILON, TOKEN, site_configs, start_daemons, stop, write_sites

PROTOCOLS = ("histogram", "secagg")


def _federation(stack, root: Path, k: int, n: int, pki, token: str):
    """Start ``k`` peered daemons that serve secagg; the analyst's federation over them."""
    from analyst import Federation
    from site_node.interceptors.auth import hash_token
    from site_node.cli.init import link_peers

    configs = write_sites(root / f"k{k}", k, [n], pki, hash_token(token))
    for path in configs:  # serve secagg too; every site a peer of every other
        path.write_text(path.read_text().replace('protocols = ["histogram", "paper"]',
                                                 'protocols = ["histogram", "paper", "secagg"]'))
    link_peers(configs)
    procs, addresses, _ = start_daemons(configs)
    stack.callback(stop, procs)
    return stack.enter_context(Federation(site_configs(addresses, pki, token), timeout=600.0))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", default="5,20", help="site counts, comma-separated (default 5,20)")
    parser.add_argument("--n", type=int, default=100_000, help="patients in total (default 1e5)")
    parser.add_argument("--bins", type=int, default=None, help="bins (default: each protocol's default grid)")
    parser.add_argument("--repeat", type=int, default=5, help="validations per federation and protocol (default 5)")
    parser.add_argument("--profile", default=None, metavar="FILE",
                        help="also write the analyst's cProfile of the secagg validations to FILE (pstats)")
    args = parser.parse_args(argv)
    counts = [int(k) for k in args.sites.split(",")]

    from site_node.security.pki import generate_dev_pki

    token = TOKEN
    profile = cProfile.Profile() if args.profile else None
    walls = {(k, p): [] for k in counts for p in PROTOCOLS}
    options = {} if args.bins is None else {"n_bins": args.bins}
    with tempfile.TemporaryDirectory(prefix="dsroc-secagg-bench-") as tmp, contextlib.ExitStack() as stack:
        pki = generate_dev_pki(Path(tmp) / "pki")
        feds = {k: _federation(stack, Path(tmp), k, args.n, pki, token) for k in counts}
        for i in range(args.repeat + 1):  # the first round reads the data at each site (warm-up, not counted)
            for k in counts:
                for protocol in PROTOCOLS:
                    on = profile is not None and protocol == "secagg" and i > 0
                    t = time.perf_counter()
                    with profile if on else contextlib.nullcontext():
                        res = feds[k].validate(f"n{args.n}", "y", score="pred", epsilon=EPSILON + 1e-3 * i,
                                               delta=DELTA, protocol=protocol, **options)
                    wall = time.perf_counter() - t
                    if i:
                        walls[k, protocol].append(wall)
                    print(f"  K = {k:>2} {protocol:<9} #{i}: {wall:.3f} s  (AUC {res.auc:.4f}, "
                          f"{res.detail.n_bins} bins)", flush=True)
    if profile is not None:
        profile.dump_stats(args.profile)
    med = {key: statistics.median(v) for key, v in walls.items()}
    for k in counts:
        print(f"K = {k} sites, n = {args.n}: median validation histogram {med[k, 'histogram']:.3f} s, secagg "
              f"{med[k, 'secagg']:.3f} s, ratio {med[k, 'secagg'] / med[k, 'histogram']:.2f}")
    for k in counts[1:]:
        print(f"{k} vs {counts[0]} sites: histogram {med[k, 'histogram'] / med[counts[0], 'histogram']:.2f}x, "
              f"secagg {med[k, 'secagg'] / med[counts[0], 'secagg']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
