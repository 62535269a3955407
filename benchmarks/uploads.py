"""Benchmark of a daemon's memory under oversized survivor uploads with forged releases.

Starts ``python -m site_node serve`` on a site from ``dsroc-site init`` (paper protocol on, plain text on
loopback), opens a session, then sends ``--uploads`` concurrent UploadSurvivor streams, each announcing
``--scores`` scores (default 20 million, 160 MB) under releases whose signatures are forged, and sends the
scores until the site refuses. Prints the daemon's resident memory (VmRSS) before and its peak (VmHWM)
after, with the scores each stream got to send before the refusal. Run from the repository root:

    python -m benchmarks.uploads                  # 10 uploads of 2e7 scores
    python -m benchmarks.uploads --uploads 4 --scores 5000000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np

from benchmarks._harness import memory_and_peak_mb

__all__ = ["main"]

CHUNK = 65_536


def _upload(stub, metadata, session: str, n: int) -> tuple[str, int]:
    from dsroc.v1 import site_pb2 as pb

    segment = pb.ReleaseInfo(site="hospital", population="p", dataset="sample", source="column:pred", outcome="y",
                             release_id="f" * 32, score_class=pb.SCORE_CLASS_NEGATIVES, epsilon=1.0, delta=1e-5,
                             sensitivity=1.0, n=n, values_sha256="0" * 64, signature=os.urandom(64))
    sent = []

    def messages():
        block = np.full(CHUNK, 0.5).tobytes()
        header = pb.SurvivorHeader(session_id=session, score_class=pb.SCORE_CLASS_NEGATIVES, n=n, segments=[segment])
        yield pb.SurvivorChunk(header=header, scores=block)
        for _ in range(n // CHUNK - 1):
            sent.append(CHUNK)
            yield pb.SurvivorChunk(scores=block)

    try:
        stub.UploadSurvivor(messages(), metadata=metadata, timeout=600)
        return "accepted", CHUNK + sum(sent)
    except grpc.RpcError as exc:
        return exc.code().name, CHUNK + sum(sent)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uploads", type=int, default=10, help="concurrent uploads (default 10)")
    parser.add_argument("--scores", type=int, default=20_000_000, help="scores each upload announces (default 2e7)")
    args = parser.parse_args(argv)

    from dsroc.v1 import site_pb2 as pb
    from site_node.cli.init import init_site
    from site_node.testing import Daemon, site_channel, site_stub

    with tempfile.TemporaryDirectory(prefix="dsroc-upload-bench-") as tmp:
        result = init_site(Path(tmp) / "site", listen="127.0.0.1:0")
        text = result.config.read_text().replace('protocols = ["histogram"]', 'protocols = ["histogram", "paper"]')
        result.config.write_text(text)
        with Daemon(result.config, args=["--workers", str(2 * args.uploads)]) as daemon:
            address = daemon.wait_serving().address
            channel = site_channel(address, ca_cert=result.pki.ca_cert, client_cert=result.pki.client_cert,
                                   client_key=result.pki.client_key)
            stub, metadata = site_stub(channel), [("authorization", f"Bearer {result.token}")]
            session = stub.OpenSession(pb.OpenSessionRequest(dataset="sample", outcome="y",
                                                             score=pb.ScoreSource(score_column="pred")),
                                       metadata=metadata).session_id
            before = memory_and_peak_mb(daemon.pid)[0]
            start = time.perf_counter()
            with ThreadPoolExecutor(args.uploads) as pool:
                outcomes = list(pool.map(lambda _: _upload(stub, metadata, session, args.scores), range(args.uploads)))
            wall = time.perf_counter() - start
            rss, peak = memory_and_peak_mb(daemon.pid)
            channel.close()
    codes = sorted({code for code, _ in outcomes})
    print(f"{args.uploads} concurrent uploads announcing {args.scores:,} scores each ({args.scores * 8 / 1e6:.0f} MB), "
          f"forged release signatures: {', '.join(codes)} in {wall:.2f} s")
    print(f"scores sent per upload before the refusal: max {max(n for _, n in outcomes):,}")
    print(f"daemon memory: {before:.0f} MB before, {rss:.0f} MB after, peak {peak:.0f} MB (target <= 300 MB)")
    return 0 if peak <= 300 else 1


if __name__ == "__main__":
    sys.exit(main())
