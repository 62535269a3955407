"""A copy of the ledger does not regenerate a paper-protocol release's noise: the key lies outside it (real daemon)."""

from __future__ import annotations

import sqlite3

import grpc
import numpy as np
import pytest

from dsroc import add_gaussian_noise
from dsroc.v1 import site_pb2 as pb
from site_node.testing import running_server

NEG = pb.SCORE_CLASS_NEGATIVES


def test_the_ledger_seed_alone_does_not_regenerate_the_noise_and_a_lost_key_refuses_the_replay(site_config, client_cls,
                                                                                             snapshot):
    with running_server(site_config, insecure=True) as server:
        client = client_cls(server.bound_address)
        session = client.open()
        info, values, _ = client.release(session, NEG)
        negatives = server.site.sessions.get("alice", session).data.negatives
        client.close()
    with sqlite3.connect(site_config.ledger_path) as db:
        (seed,) = db.execute("SELECT seed FROM releases").fetchone()
    # Before (issue 18): the seed in the ledger seeded the generator, so a copy of the ledger and the released
    # values gave the noise, and with it the patients' scores.
    from_ledger = np.sort(add_gaussian_noise(negatives, info.tau, np.random.default_rng(int.from_bytes(seed, "big"))))
    assert not np.allclose(from_ledger, values)
    key = site_config.noise_key_path
    assert key.exists() and not key.is_relative_to(site_config.state_dir)
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    before = snapshot(site_config.ledger_path)
    key.unlink()  # lost with the config folder: a new key, and the old release cannot be regenerated
    with running_server(site_config, insecure=True) as server:
        client = client_cls(server.bound_address)
        with pytest.raises(grpc.RpcError) as refused:
            client.release(client.open(), NEG)
        client.close()
    assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert snapshot(site_config.ledger_path) == before  # no new values, no new charge
