"""Benchmark of the site daemon at 1 000 000 patients, over loopback with mutual TLS, measured in one run.

Prints: time of ReleaseNoisyScores for 1 000 000 rows (first request: noise drawn, ledger charged and
persisted; both classes), round-trip time of one RocGlmParts call, and the daemon process's memory.
Run from the repository root: ``python benchmarks/site.py [--rows N]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dsroc.v1 import site_pb2 as pb  # noqa: E402
from site_node.cli.init import init_site  # noqa: E402
from benchmarks._harness import memory_and_peak_mb  # noqa: E402
from site_node.testing import Daemon, site_channel, site_stub  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--glm-calls", type=int, default=25)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="dsroc-site-bench-") as tmp:
        site = init_site(Path(tmp) / "site", listen="127.0.0.1:0")
        rng = np.random.default_rng(0)
        pred = rng.uniform(0, 1, args.rows)
        y = (rng.uniform(0, 1, args.rows) < pred).astype(np.int8)
        pd.DataFrame({"pred": pred, "y": y}).to_parquet(Path(tmp) / "site" / "data" / "big.parquet")
        with site.config.open("a") as f:
            f.write('\n[datasets.big]\npath = "data/big.parquet"\noutcomes = ["y"]\nscores = ["pred"]\n')
        site.config.write_text(site.config.read_text().replace('datasets = ["sample"]', 'datasets = ["*"]')
                               .replace('protocols = ["histogram"]', 'protocols = ["histogram", "paper"]'))

        with Daemon(site.config) as daemon:
            address = daemon.wait_serving().address
            idle_rss, _ = memory_and_peak_mb(daemon.pid)
            channel = site_channel(address, ca_cert=site.pki.ca_cert, client_cert=site.pki.client_cert,
                                   client_key=site.pki.client_key)
            stub, md = site_stub(channel), [("authorization", f"Bearer {site.token}")]
            stub.Describe(pb.DescribeRequest(), metadata=md, timeout=600)  # loads the table

            t = time.perf_counter()
            session = stub.OpenSession(pb.OpenSessionRequest(
                dataset="big", outcome="y", score=pb.ScoreSource(score_column="pred")), metadata=md).session_id
            t_open = time.perf_counter() - t

            def release(score_class):
                chunks = stub.ReleaseNoisyScores(pb.ReleaseRequest(
                    session_id=session, score_class=score_class, epsilon=5.0, delta=1e-5), metadata=md, timeout=600)
                chunks = list(chunks)
                return chunks[0].info, np.concatenate([np.frombuffer(c.scores, dtype="<f8") for c in chunks])

            t = time.perf_counter()
            neg_info, neg = release(pb.SCORE_CLASS_NEGATIVES)
            t_neg = time.perf_counter() - t
            t = time.perf_counter()
            _, pos = release(pb.SCORE_CLASS_POSITIVES)
            t_pos = time.perf_counter() - t
            assert neg.size + pos.size == args.rows

            def upload(score_class, values, info, chunk=65536):
                # The site's own signed release as the only segment (a one-site federation).
                yield pb.SurvivorChunk(header=pb.SurvivorHeader(session_id=session, score_class=score_class,
                                                                n=values.size, segments=[info]),
                                       scores=values[:chunk].tobytes())
                for i in range(chunk, values.size, chunk):
                    yield pb.SurvivorChunk(scores=values[i:i + chunk].tobytes())

            t = time.perf_counter()
            stub.UploadSurvivor(upload(pb.SCORE_CLASS_NEGATIVES, neg, neg_info), metadata=md, timeout=600)
            t_upload = time.perf_counter() - t
            rtts = []
            for i in range(args.glm_calls):
                t = time.perf_counter()
                stub.RocGlmParts(pb.RocGlmPartsRequest(session_id=session, theta=[0.5, 1.0 + i / 100]),
                                 metadata=md, timeout=60)
                rtts.append(time.perf_counter() - t)
            rss, peak = memory_and_peak_mb(daemon.pid)
            channel.close()

    rows = [
        (f"OpenSession (column checks on {args.rows:,} rows)", f"{t_open * 1e3:.1f} ms"),
        ("ReleaseNoisyScores, first class: noise drawn, ledger charged, persisted, streamed", f"{t_neg * 1e3:.1f} ms"),
        ("ReleaseNoisyScores, second class: the same release, from the ledger", f"{t_pos * 1e3:.1f} ms"),
        (f"ReleaseNoisyScores, all {args.rows:,} rows (both calls)", f"{(t_neg + t_pos) * 1e3:.1f} ms"),
        (f"UploadSurvivor of {neg.size:,} scores", f"{t_upload * 1e3:.1f} ms"),
        ("RocGlmParts round trip, first call (placement values computed)", f"{rtts[0] * 1e3:.2f} ms"),
        (f"RocGlmParts round trip, median of the next {len(rtts) - 1}", f"{np.median(rtts[1:]) * 1e3:.2f} ms"),
        ("daemon memory (RSS) idle, before loading data", f"{idle_rss:.0f} MB"),
        (f"daemon memory (RSS) at {args.rows:,} rows after the run / peak", f"{rss:.0f} / {peak:.0f} MB"),
    ]
    print(f"site benchmark: {args.rows:,} patients ({neg.size:,} negatives, {pos.size:,} positives), "
          f"loopback, mutual TLS, {os.cpu_count()} CPUs")
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"  {label:<{width}}  {value:>14}")


if __name__ == "__main__":
    main()
