"""A site with 1 000 000 patients: releases and uploads stream in chunks within the message-size limits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.testing import running_server

N = 1_000_000


def test_a_million_rows_stream_both_ways(make_site_config, client_cls, tmp_path):
    rng = np.random.default_rng(11)
    pred = rng.uniform(0, 1, N)
    y = (rng.uniform(0, 1, N) < pred).astype(np.int8)
    folder = tmp_path / "big"
    (folder / "data").mkdir(parents=True)
    pd.DataFrame({"pred": pred, "y": y}).to_parquet(folder / "data" / "big.parquet")
    config = make_site_config("big", frames={}, site={"max_message_bytes": 4 * 1024 * 1024}, datasets={
        "big": {"path": "data/big.parquet", "outcomes": ["y"], "scores": ["pred"]}})
    with running_server(config) as srv:
        c = client_cls(srv, max_message_bytes=4 * 1024 * 1024)
        s = c.open(dataset="big")
        info0, neg, chunks = c.release(s, pb.SCORE_CLASS_NEGATIVES, epsilon=5.0)
        _, pos, _ = c.release(s, pb.SCORE_CLASS_POSITIVES, epsilon=5.0)
        # One message cannot carry 500 000 doubles under a 4 MB limit: the release streamed in chunks.
        assert len(chunks) > 1 and max(len(ch.scores) // 8 for ch in chunks) <= 65536
        assert neg.size == (y == 0).sum() and pos.size == (y == 1).sum() and neg.size + pos.size == N
        assert np.all(np.diff(neg) >= 0)
        # The ledger does not keep 16 MB of values: it keeps the noisy lattice points,
        # delta-encoded, deflated and sealed with the noise key, well under 1 MB.
        import sqlite3

        with sqlite3.connect(config.ledger_path) as db:
            (stored,) = db.execute("SELECT SUM(LENGTH(seed) + LENGTH(digest) + IFNULL(LENGTH(payload), 0) + "
                                   "LENGTH(fingerprint)) FROM releases").fetchone()
        assert stored < 1_000_000
        again, neg2, _ = c.release(c.open(dataset="big"), pb.SCORE_CLASS_NEGATIVES, epsilon=5.0)
        assert again.repeated and np.array_equal(neg, neg2)  # opened from the sealed points, bit for bit
        up = c.upload(s, pb.SCORE_CLASS_NEGATIVES, neg, chunk=65536)
        assert up.n_received == neg.size
        c.upload(s, pb.SCORE_CLASS_POSITIVES, pos, chunk=65536)
        r = c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0.5, 1.0]))
        assert np.all(np.isfinite(r.score)) and r.deviance > 0
        m = c.PlacementMoments(pb.PlacementMomentsRequest(session_id=s))
        assert (m.pv0.n, m.pv1.n) == (pos.size, neg.size)
        b = c.BrierParts(pb.BrierPartsRequest(session_id=s))
        assert b.n == N and b.sum_sq == pytest.approx(((y - pred) ** 2).sum())
        c.close()
