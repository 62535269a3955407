"""A paper-protocol release: exact lattice noise, and a ledger that replays it without holding anything usable
without the noise key (real daemon)."""

from __future__ import annotations

import shutil
import sqlite3

import grpc
import numpy as np
import pytest

from dsroc.privacy.lattice import lattice_gaussian
from dsroc.v1 import site_pb2 as pb
from site_node.testing import running_server

NEG, POS = pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES


def test_released_scores_lie_on_a_public_lattice_and_the_ledger_alone_holds_no_noise(site_config, client_cls):
    with running_server(site_config) as server:
        client = client_cls(server)
        session = client.open()
        info0, values0, _ = client.release(session, NEG)
        info1, values1, _ = client.release(session, POS)
        data = server.site.sessions.get("alice", session).data
        client.close()
    # Before: floating-point Gaussian noise, whose low-order bits depend on the noiseless score (Mironov
    # 2012). Now every released value is a multiple of a power of two set by (epsilon, delta, sensitivity) alone.
    noise = lattice_gaussian(info0.epsilon, info0.delta, info0.sensitivity)
    for values in (values0, values1):
        assert np.array_equal(values * 2.0**30, np.round(values * 2.0**30))  # on the 2^-30 grid at least
        points = values / noise.step
        assert np.array_equal(points, np.round(points))
    assert info0.tau == pytest.approx(noise.sigma)
    # Noise of mean 0: the released mean is the scores' mean within five standard errors.
    for values, scores in ((values0, data.negatives), (values1, data.positives)):
        assert abs(values.mean() - scores.mean()) < 5 * noise.sigma / np.sqrt(scores.size)
    # Before: the ledger kept a seed that, with the key, regenerated the noise; now it keeps no seed, and the released
    # values appear in the file neither as float64 nor as lattice points nor deflated: only sealed.
    with sqlite3.connect(site_config.ledger_path) as db:
        (seed, payload) = db.execute("SELECT seed, payload FROM releases").fetchone()
    assert seed == b"" and payload.startswith(b"dsroc-sealed-1")
    raw = site_config.ledger_path.read_bytes() + b"".join(p.read_bytes() for p in site_config.state_dir.glob("*-wal"))
    for values in (values0, values1):  # any 4 consecutive released values, as float64 or as lattice points
        for i in range(0, values.size - 4, 7):
            assert values[i:i + 4].tobytes() not in raw
            assert np.round(values[i:i + 4] / noise.step).astype(np.int64).tobytes() not in raw


def test_a_copy_of_state_without_the_key_replays_nothing_and_with_the_key_the_same_values(site_config, client_cls,
                                                                                        snapshot, tmp_path):
    with running_server(site_config) as server:
        client = client_cls(server)
        info, values, _ = client.release(client.open(), NEG)
        client.close()
    key = site_config.noise_key_path
    assert key.exists() and not key.is_relative_to(site_config.state_dir)
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    with running_server(site_config) as server:  # restarted, with the key: the identical release, free
        client = client_cls(server)
        again, replayed, _ = client.release(client.open(), NEG)
        client.close()
    assert np.array_equal(replayed, values) and again.release_id == info.release_id and again.mu_charged == 0
    before = snapshot(site_config.ledger_path)
    saved = tmp_path / "saved.key"
    shutil.copy(key, saved)
    key.unlink()  # lost with the config folder (or a copy of state/ elsewhere): a new key does not open the release
    with running_server(site_config) as server:
        client = client_cls(server)
        with pytest.raises(grpc.RpcError) as refused:
            client.release(client.open(), NEG)
        client.close()
    assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "cannot be replayed" in refused.value.details() and "different parameters" in refused.value.details()
    assert snapshot(site_config.ledger_path) == before  # no new values, no new charge
