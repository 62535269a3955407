"""Secagg-protocol benchmark: a validation over K TLS site daemons by secure aggregation beside the histogram protocol.

Both protocols bin the same scores at each site; secagg adds two round trips (round keys, masked
vectors, seeds) and the X25519/HKDF/ChaCha20 work of K - 1 pairwise masks per site. Run from the
repository root:

    python -m benchmarks.secagg                          # K = 5 sites, n = 100 000 patients
    python -m benchmarks.secagg --sites 20 --n 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.scale import DELTA, EPSILON, start_daemons, stop, write_sites


def _validations(fed, dataset: str, protocol: str, repeat: int, bins: int) -> list[float]:
    walls = []
    for i in range(repeat + 1):  # the first run reads the data at each site (warm-up, not counted)
        t = time.perf_counter()
        res = fed.validate(dataset, "y", score="pred", epsilon=EPSILON + 1e-3 * i, delta=DELTA, protocol=protocol,
                           n_bins=bins)
        walls.append(time.perf_counter() - t)
        print(f"  {protocol} #{i}: {walls[-1]:.3f} s  (AUC {res.auc:.4f})", flush=True)
    return walls[1:]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=5, help="number of sites (default 5)")
    parser.add_argument("--n", type=int, default=100_000, help="patients in total (default 1e5)")
    parser.add_argument("--bins", type=int, default=12, help="histogram bins (default 12)")
    parser.add_argument("--repeat", type=int, default=3, help="validations per protocol (new epsilon each)")
    args = parser.parse_args(argv)

    from analyst import Federation, SiteConfig
    from site_node.auth import hash_token
    from site_node.pki import generate_dev_pki
    from site_node.init import link_peers

    token = "bench-token"
    with tempfile.TemporaryDirectory(prefix="dsroc-secagg-bench-") as tmp:
        root = Path(tmp)
        pki = generate_dev_pki(root / "pki")
        configs = write_sites(root, args.sites, [args.n], pki, hash_token(token))
        for path in configs:  # serve secagg too; every site a peer of every other
            path.write_text(path.read_text().replace('protocols = ["histogram", "paper"]',
                                                     'protocols = ["histogram", "paper", "secagg"]'))
        link_peers(configs)
        procs, addresses, _ = start_daemons(configs)
        try:
            sites = [SiteConfig(name=f"site{k}", address=a, token=token, ca_file=pki.ca_cert,
                                client_cert=pki.client_cert, client_key=pki.client_key)
                     for k, a in enumerate(addresses)]
            with Federation(sites, timeout=600.0) as fed:
                plain = _validations(fed, f"n{args.n}", "histogram", args.repeat, args.bins)
                secure = _validations(fed, f"n{args.n}", "secagg", args.repeat, args.bins)
        finally:
            stop(procs)
    p, s = statistics.median(plain), statistics.median(secure)
    print(f"K = {args.sites} sites, n = {args.n}: median validation histogram {p:.3f} s, secagg {s:.3f} s, "
          f"ratio {s / p:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
