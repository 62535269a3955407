"""A score release is opened once for both its classes and its repeats, and the kept releases stay bounded."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.protocols.paper import sealed
from site_node.protocols.paper import protocol as paper
from site_node.protocols.paper.release_cache import ReleaseCache

NEG, POS = pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES


def test_concurrent_callers_open_a_release_once_and_failures_are_not_kept():
    cache, opened = ReleaseCache(max_bytes=10_000), []

    def slow_open():
        opened.append(1)
        time.sleep(0.05)
        return (np.arange(10.0), "digest")

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("r1", slow_open))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 1 and all(r is results[0] for r in results)

    def failing():
        raise ValueError("cannot open")

    with pytest.raises(ValueError):
        cache.get("r2", failing)
    assert cache.get("r2", lambda: (np.zeros(3),))[0].size == 3  # tried again, not a kept failure


def test_the_kept_releases_stay_within_their_bytes():
    cache = ReleaseCache(max_bytes=3 * 800)
    for i in range(5):
        cache.get(f"r{i}", lambda: (np.zeros(100),))  # 800 bytes each
    assert len(cache) == 3
    calls = []
    cache.get("r0", lambda: calls.append(1) or (np.zeros(100),))  # the oldest went first
    cache.get("r4", lambda: calls.append(1) or (np.zeros(100),))
    assert calls == [1]
    cache.get("big", lambda: (np.zeros(1000),))  # larger than the bound: returned, not kept
    assert len(cache) == 3


def test_both_classes_and_a_repeat_open_the_sealed_points_once(client, frame, monkeypatch):
    opened = []
    real_open = sealed.open_points

    def counting(*args):
        opened.append(1)
        return real_open(*args)

    monkeypatch.setattr(paper, "open_points", counting)
    session = client.open()
    info0, neg, _ = client.release(session, NEG, epsilon=4.0, delta=0.01)
    info1, pos, _ = client.release(session, POS, epsilon=4.0, delta=0.01)
    again, neg_again, _ = client.release(client.open(), NEG, epsilon=4.0, delta=0.01)
    assert len(opened) == 1 and info1.release_id == info0.release_id == again.release_id
    np.testing.assert_array_equal(neg_again, neg)
    y = frame["y"].to_numpy()
    assert (neg.size, pos.size) == ((y == 0).sum(), (y == 1).sum())
    # The values are the release's own: its signed digest is the SHA-256 of what was sent.
    import hashlib

    assert info0.values_sha256 == hashlib.sha256(neg.astype("<f8").tobytes()).hexdigest()
    assert info1.values_sha256 == hashlib.sha256(pos.astype("<f8").tobytes()).hexdigest()


def test_both_classes_in_one_stream_equal_the_two_class_streams(client, frame):
    session = client.open()
    chunks = list(client.ReleaseNoisyScores(pb.ReleaseRequest(session_id=session, epsilon=3.0, delta=0.01,
                                                              both_classes=True, chunk_size=64)))
    starts = [i for i, c in enumerate(chunks) if c.HasField("info")]
    info0, info1 = chunks[starts[0]].info, chunks[starts[1]].info
    assert starts[0] == 0 and (info0.score_class, info1.score_class) == (NEG, POS)
    assert info0.mu_charged > 0 and info1.mu_charged == 0 and info1.repeated  # one release, charged once
    neg = np.frombuffer(b"".join(c.scores for c in chunks[:starts[1]]), dtype="<f8")
    pos = np.frombuffer(b"".join(c.scores for c in chunks[starts[1]:]), dtype="<f8")
    assert [c.offset for c in chunks[starts[1]:]] == list(range(0, pos.size, 64))  # offsets restart per class
    y = frame["y"].to_numpy()
    assert (neg.size, pos.size) == (info0.n, info1.n) == ((y == 0).sum(), (y == 1).sum())
    for cls, values, info in ((NEG, neg, info0), (POS, pos, info1)):
        alone, again, _ = client.release(session, cls, epsilon=3.0, delta=0.01)  # each class alone: a free repeat
        np.testing.assert_array_equal(again, values)
        assert alone.signature == info.signature and alone.values_sha256 == info.values_sha256


def test_the_last_session_to_end_lets_the_opened_releases_go(client, server, monkeypatch):
    opened = []
    real_open = sealed.open_points
    monkeypatch.setattr(paper, "open_points", lambda *args: opened.append(1) or real_open(*args))
    first, second = client.open(), client.open()
    info, neg, _ = client.release(first, NEG, epsilon=4.0, delta=0.01)
    assert len(server.site.releases) == 1 and len(opened) == 1
    client.CloseSession(pb.CloseSessionRequest(session_id=first))
    assert len(server.site.releases) == 1  # a session is still open: its repeats find the release
    again, neg_again, _ = client.release(second, NEG, epsilon=4.0, delta=0.01)
    assert len(opened) == 1 and again.release_id == info.release_id
    client.CloseSession(pb.CloseSessionRequest(session_id=second))
    assert len(server.site.releases) == 0  # no session left: the opened scores are not kept resident
    later, neg_later, _ = client.release(client.open(), NEG, epsilon=4.0, delta=0.01)
    assert len(opened) == 2 and later.release_id == info.release_id and later.repeated
    np.testing.assert_array_equal(neg_later, neg)  # opened again from the sealed points: the same release
    assert later.values_sha256 == info.values_sha256
