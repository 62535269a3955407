"""Secagg rounds belong to their analyst (issue 36, item 3), over real mutual-TLS daemons.

A site kept 256 rounds in memory shared by every analyst, oldest forgotten first: 260 advertisements by another
analyst evicted a victim's round at one site, and the victim was charged at the others and got no sum. Now each
analyst's rounds are kept apart and bounded (``ROUNDS_PER_ANALYST``): an analyst's advertisements forget only its
own oldest rounds.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets

import grpc
import numpy as np
import pytest

from dsroc.secagg import unmask_sum
from dsroc.v1 import site_pb2 as pb
from site_node.protocols.histogram.secagg_rounds import ROUNDS_PER_ANALYST
from site_node.testing import running_server

from ...conftest import TOKENS, tls_client
from .test_secagg import HUGE, NAMES, advertise, mask, peered_configs, truth, unmask, vectors

MALLORY = "token-of-mallory"
ANALYSTS = {name: {"token_sha256": hashlib.sha256(token.encode()).hexdigest(), "datasets": ["*"]}
            for name, token in {**TOKENS, "mallory": MALLORY}.items()}


@pytest.fixture
def sites(tmp_path, tls_pki, client_factory):
    """Four running TLS sites, peers of each other: (configs, alice's clients and sessions, mallory's client at s0)."""
    tls = {"cert": str(tls_pki.server_cert), "key": str(tls_pki.server_key), "client_ca": str(tls_pki.ca_cert)}
    with contextlib.ExitStack() as stack:
        configs = peered_configs(tmp_path / "fed", tls, HUGE, analysts=ANALYSTS)
        addresses = [stack.enter_context(running_server(c)).bound_address for c in configs]
        clients = [tls_client(client_factory, a, tls_pki) for a in addresses]
        mallory = tls_client(client_factory, addresses[0], tls_pki, MALLORY)
        yield configs, clients, [c.open() for c in clients], mallory


def _advertise_many(client, session, count):
    request = dict(session_id=session, epsilon=4000.0, delta=0.01, n_bins=10, spacing="equal", sites=NAMES)
    ids = [secrets.token_bytes(32) for _ in range(count)]
    for round_id in ids:
        client.SecAggAdvertise(pb.SecAggAdvertiseRequest(round_id=round_id, **request))
    return ids


def test_another_analyst_s_advertisements_do_not_evict_a_round(sites):
    configs, clients, sessions, mallory = sites
    round_id = secrets.token_bytes(32)
    ads = advertise(clients, sessions, round_id)
    _advertise_many(mallory, mallory.open(), 260)  # more than the old shared 256, and than mallory's own quota
    masked = mask(clients, sessions, round_id, ads)
    seeds = unmask(clients, sessions, round_id, [m.receipt for m in masked])
    total = unmask_sum(vectors(masked), [s.self_seed for s in seeds])
    np.testing.assert_array_equal(total, truth(configs, np.asarray(ads[0].edges)))


def test_an_analyst_s_own_rounds_beyond_its_quota_forget_its_oldest(sites):
    _, _, _, mallory = sites
    session = mallory.open()
    ids = _advertise_many(mallory, session, ROUNDS_PER_ANALYST + 1)
    with pytest.raises(grpc.RpcError) as error:
        mallory.SecAggMask(pb.SecAggMaskRequest(session_id=session, round_id=ids[0], advertisements=[]))
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"at most {ROUNDS_PER_ANALYST} rounds" in error.value.details()
    with pytest.raises(grpc.RpcError) as error:  # the newest is kept: refused for its (missing) advertisements only
        mallory.SecAggMask(pb.SecAggMaskRequest(session_id=session, round_id=ids[-1], advertisements=[]))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "advertisements must be" in error.value.details()
