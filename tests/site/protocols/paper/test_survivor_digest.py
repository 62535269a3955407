"""The survivor function's content key (the query caps' key) is the SHA-256 of its sorted values, however they are counted."""

from __future__ import annotations

import hashlib

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from dsroc.v1 import site_pb2 as pb
from site_node.security.signing import public_key_text
from site_node.testing import running_server

from ...conftest import Client, peer_release

NEG = pb.SCORE_CLASS_NEGATIVES


def test_the_content_key_is_the_hash_of_the_sorted_values_on_a_grid_or_not(make_site_config):
    other = Ed25519PrivateKey.generate()
    config = make_site_config(peers={"testpeer2": public_key_text(other)})
    with running_server(config, insecure=True) as server:
        client = Client(server.bound_address)
        try:
            _upload_both_ways(client, other)
        finally:
            client.close()


def _upload_both_ways(client, other):
    rng = np.random.default_rng(4)
    lattice = np.sort(rng.integers(-300, 20_000, 5000)) * 2.0**-14  # released values: a power-of-two lattice
    anywhere = np.sort(rng.uniform(0.0, 1.0, 3000))  # values off any small grid: sorted and searched
    for values in (lattice, anywhere):
        a, b = values[::2], values[1::2]  # two segments, each sorted, neither the sorted whole
        session = client.open()

        def messages():
            yield pb.SurvivorChunk(header=pb.SurvivorHeader(
                session_id=session, score_class=NEG, n=values.size,
                segments=[peer_release(NEG, a), peer_release(NEG, b, key=other, site="testpeer2")]), scores=a.tobytes())
            yield pb.SurvivorChunk(scores=b.tobytes())

        reply = client.UploadSurvivor(messages())
        assert reply.n_received == values.size
        assert reply.survivor_id == hashlib.sha256(np.sort(values).tobytes()).hexdigest()
