"""Benchmark of the audit log's bounds under a flood of calls without a valid token.

Starts ``python -m site_node serve`` on a site from ``dsroc-site init`` (plain text on loopback) with a small
audit bound (``site.audit_max_bytes``, ``site.audit_max_total_bytes``) and, by default, every refusal
logged one by one (``--rate``, ``site.audit_unauthenticated_per_minute``, set far above the flood), so
that the size bound alone keeps the folder small; then sends ``--calls`` Describe calls with a wrong
token from ``--threads`` threads and prints the calls per second, the bytes the audit files hold
(largest seen while flooding, and at the end) against the bound, and how many files were rotated and
deleted. Run from the repository root:

    python -m benchmarks.audit_flood                       # 1e6 calls, 8 MB bound
    python -m benchmarks.audit_flood --calls 100000 --rate 600
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

__all__ = ["main"]


def _audit_bytes(state: Path) -> int:
    return sum(p.stat().st_size for p in state.glob("audit.jsonl*") if p.exists())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000, help="calls without a valid token (default 1e6)")
    parser.add_argument("--threads", type=int, default=8, help="client threads (default 8)")
    parser.add_argument("--max-bytes", type=int, default=1 << 20, help="site.audit_max_bytes (default 1 MiB)")
    parser.add_argument("--total-bytes", type=int, default=8 << 20, help="site.audit_max_total_bytes (default 8 MiB)")
    parser.add_argument("--rate", type=int, default=10**9,
                        help="site.audit_unauthenticated_per_minute (default: every refusal logged)")
    args = parser.parse_args(argv)

    from dsroc.v1 import site_pb2 as pb
    from site_node.interceptors.audit import read_audit
    from site_node.cli.init import init_site
    from site_node.testing import Daemon, site_channel, site_stub

    with tempfile.TemporaryDirectory(prefix="dsroc-audit-bench-") as tmp:
        result = init_site(Path(tmp) / "site", listen="127.0.0.1:0")
        text = result.config.read_text().replace(
            "[tls]", f"audit_max_bytes = {args.max_bytes}\naudit_max_total_bytes = {args.total_bytes}\n"
                     f"audit_unauthenticated_per_minute = {args.rate}\n\n[tls]", 1)
        result.config.write_text(text)
        state = result.config.parent / "state"
        daemon = Daemon(result.config)
        tls = dict(ca_cert=result.pki.ca_cert, client_cert=result.pki.client_cert, client_key=result.pki.client_key)
        largest, done = [0], threading.Event()

        def watch():
            while not done.wait(0.05):
                largest[0] = max(largest[0], _audit_bytes(state))

        watcher = threading.Thread(target=watch, daemon=True)
        try:
            address = daemon.wait_serving().address
            watcher.start()
            per_thread = args.calls // args.threads

            def flood(_):
                channel = site_channel(address, **tls)
                stub, metadata, refused = site_stub(channel), [("authorization", "Bearer wrong")], 0
                for _ in range(per_thread):
                    try:
                        stub.Describe(pb.DescribeRequest(), metadata=metadata, timeout=30)
                    except grpc.RpcError as exc:
                        refused += exc.code() is grpc.StatusCode.UNAUTHENTICATED
                channel.close()
                return refused

            start = time.perf_counter()
            with ThreadPoolExecutor(args.threads) as pool:
                refused = sum(pool.map(flood, range(args.threads)))
            wall = time.perf_counter() - start
        finally:
            daemon.stop(timeout=60)
            done.set()
        final = _audit_bytes(state)
        records = read_audit(state / "audit.jsonl")
        deleted = sum(r["call"] == "AuditRetention" for r in records)
        rotated = max((int(p.name.rsplit(".", 1)[1]) for p in state.glob("audit.jsonl.*")), default=0)
    print(f"{refused:,} of {per_thread * args.threads:,} calls refused UNAUTHENTICATED in {wall:.0f} s "
          f"({refused / wall:,.0f}/s); rate limit {args.rate:,} logged refusals a minute")
    print(f"audit files: largest {largest[0] / 1e6:.2f} MB while flooding, {final / 1e6:.2f} MB at the end; bound "
          f"site.audit_max_total_bytes = {args.total_bytes / 1e6:.2f} MB; {rotated} rotations, {deleted} deletions "
          "in the kept records")
    return 0 if largest[0] <= args.total_bytes and final <= args.total_bytes else 1


if __name__ == "__main__":
    sys.exit(main())
