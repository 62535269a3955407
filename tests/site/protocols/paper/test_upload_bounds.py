"""Survivor uploads are checked (signatures, sizes) before any score is buffered: a real daemon, real streams."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from dsroc.v1 import site_pb2 as pb

from ...conftest import peer_release

NEG = pb.SCORE_CLASS_NEGATIVES
CHUNK = 65_536


def _stream(session, segments, n, sent, chunks=300):
    """An upload announcing ``n`` scores, then up to ``chunks`` full chunks; counts what the site pulled."""
    header = pb.SurvivorHeader(session_id=session, score_class=NEG, n=n, segments=segments)
    block = np.full(CHUNK, 0.5).tobytes()
    yield pb.SurvivorChunk(header=header, scores=block)
    for _ in range(chunks):
        sent.append(1)
        yield pb.SurvivorChunk(scores=block)


@pytest.mark.parametrize("forgery", ["unsigned", "unknown signer", "wrong size"])
def test_an_oversized_upload_with_forged_releases_is_refused_before_its_scores_are_read(server, client, snapshot,
                                                                                        forgery):
    session = client.open()
    n = 19_000_000  # under policy.max_survivor_scores: only the signed releases can refuse it early
    if forgery == "unsigned":
        segments = []
    elif forgery == "unknown signer":
        segments = [peer_release(NEG, np.zeros(n // 1000), key=Ed25519PrivateKey.generate())]
        segments[0].n = n
    else:  # a true peer release of 10 scores announced as 19 million
        segments = [peer_release(NEG, np.zeros(10))]
    before = snapshot(server.config.ledger_path)
    sent = []
    with pytest.raises(grpc.RpcError) as info:
        client.UploadSurvivor(_stream(session, segments, n, sent))
    code = info.value.code()
    assert code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT), info.value.details()
    assert ("signed releases" if forgery != "wrong size" else "header.n is 19000000") in info.value.details()
    # gRPC's flow control lets the client queue a few messages; the site read none of them (old code: all 300)
    assert len(sent) < 40, len(sent)
    assert snapshot(server.config.ledger_path) == before
