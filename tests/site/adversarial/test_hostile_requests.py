"""An attacker-analyst with a valid token sends huge and malformed requests: refused early, audited, still healthy."""

from __future__ import annotations

import resource

import numpy as np

from dsroc.v1 import site_pb2 as pb
from site_node.testing import running_server, site_stub

from ..conftest import channel_to, peer_release
from .common import NEG, C, f64, healthy, refused, audit_records

def test_huge_grid_and_bin_counts_are_refused_before_any_allocation(server, client, snapshot):
    s = client.open()
    client.upload(s, NEG, np.linspace(0.01, 0.99, 50))
    before, peak = snapshot(server.config.ledger_path), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    largest = 2**32 - 1  # uint32: a grid or edge array this long would take 32 GB
    refused(lambda: client.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1],
                                                              grid=pb.GridSpec(n_points=largest))),
             C.PERMISSION_DENIED, "at most 100")
    refused(lambda: client.CalibrationParts(pb.CalibrationPartsRequest(session_id=s, n_bins=largest)),
             C.PERMISSION_DENIED, "at most 100")
    # The server runs in this process: its peak memory grew by far less than one such array (KiB).
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 200 * 1024
    assert snapshot(server.config.ledger_path) == before
    assert healthy(server)


def test_undecodable_requests_are_refused_as_invalid_and_audited(server, client):
    unary = client.channel.unary_unary("/dsroc.v1.SiteService/OpenSession")
    details = refused(lambda: unary(b"\xff\xff\xff", metadata=client.metadata, timeout=10), C.INVALID_ARGUMENT,
                       "could not be parsed")
    streaming = client.channel.stream_unary("/dsroc.v1.SiteService/UploadSurvivor")
    refused(lambda: streaming(iter([b"\x0a\xff"]), metadata=client.metadata, timeout=10), C.INVALID_ARGUMENT,
             "could not be parsed")
    entries = audit_records(server)
    assert [(e["call"], e["decision"], e["analyst"]) for e in entries] == [
        ("OpenSession", "INVALID_ARGUMENT", "alice"), ("UploadSurvivor", "INVALID_ARGUMENT", "alice")]
    assert entries[0]["message"] == details
    assert client.Describe(pb.DescribeRequest()).datasets and healthy(server)


def test_malformed_survivor_streams(server, client, snapshot):
    s = client.open()
    before = snapshot(server.config.ledger_path)
    # Each stream announces signed releases (checked before any score is read), so that the malformation is reached.
    header = pb.SurvivorHeader(session_id=s, score_class=NEG, n=2, segments=[peer_release(NEG, [0.1, 0.2])])
    two_headers = [pb.SurvivorChunk(header=header, scores=f64([0.1])), pb.SurvivorChunk(header=header, scores=f64([0.2]))]
    refused(lambda: client.UploadSurvivor(iter(two_headers)), C.INVALID_ARGUMENT, "only the first")
    refused(lambda: client.UploadSurvivor(iter([])), C.INVALID_ARGUMENT, "header")
    refused(lambda: client.upload(s, 3, [0.1, 0.2]), C.INVALID_ARGUMENT, "score_class")
    refused(lambda: client.upload(s, NEG, [0.1, float("inf")]), C.INVALID_ARGUMENT, "non-finite")
    refused(lambda: client.upload(s, NEG, [0.1], n=2**64 - 1), C.INVALID_ARGUMENT, "at most")
    torn = [pb.SurvivorChunk(header=pb.SurvivorHeader(session_id=s, score_class=NEG, n=1,
                                                      segments=[peer_release(NEG, [0.0])]), scores=b"\x00" * 7)]
    refused(lambda: client.UploadSurvivor(iter(torn)), C.INVALID_ARGUMENT, "multiple of 8 bytes")

    sent = []

    def outgrowing():  # announces 10 scores, then keeps sending
        yield pb.SurvivorChunk(header=pb.SurvivorHeader(session_id=s, score_class=NEG, n=10,
                                                        segments=[peer_release(NEG, [0.5] * 10)]), scores=f64([0.5] * 10))
        for _ in range(2000):
            sent.append(1)
            yield pb.SurvivorChunk(scores=f64([0.5] * 1000))

    refused(lambda: client.UploadSurvivor(outgrowing()), C.INVALID_ARGUMENT, "header.n is 10 but more")
    assert len(sent) < 2000  # refused at the first extra chunk, long before the stream ended
    assert snapshot(server.config.ledger_path) == before
    # Nothing was stored in the session either: the next call is still out of order.
    refused(lambda: client.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1])), C.FAILED_PRECONDITION)
    assert healthy(server)


def test_a_negative_chunk_size_on_the_wire_is_capped(server, client):
    s = client.open()
    # chunk_size = -1 encoded as a 10-byte varint: it parses as the largest uint32, which the site caps.
    wire = pb.ReleaseRequest(session_id=s, score_class=NEG, epsilon=5, delta=0.01).SerializeToString()
    wire += b"\x30" + b"\xff" * 9 + b"\x01"
    raw = client.channel.unary_stream("/dsroc.v1.SiteService/ReleaseNoisyScores",
                                      response_deserializer=pb.ReleaseChunk.FromString)
    chunks = list(raw(wire, metadata=client.metadata, timeout=30))
    limit = server.config.policy.max_chunk_scores
    assert chunks[0].info.n == sum(len(c.scores) // 8 for c in chunks)
    assert all(len(c.scores) // 8 <= limit for c in chunks)


def test_messages_above_the_size_limit(make_site_config, client_factory):
    config = make_site_config(site={"max_message_bytes": 1024 * 1024})
    with running_server(config) as srv:
        c = client_factory(srv)
        c.channel.close()
        c.channel = channel_to(srv, max_message_bytes=64 << 20)
        c.stub = site_stub(c.channel)
        refused(lambda: c.OpenSession(pb.OpenSessionRequest(dataset="x" * (2 << 20))), C.RESOURCE_EXHAUSTED)
        s = c.open()
        refused(lambda: c.upload(s, NEG, np.linspace(0, 1, 200_000), chunk=200_000), C.RESOURCE_EXHAUSTED)
        # gRPC refuses an oversized message before the site sees it; to the site the stream just ends.
        # Logged as CANCELLED when gRPC has ended the call by then, else as the refusal of a stream
        # without its header (which changes nothing either).
        last = audit_records(srv)[-1]
        assert last["call"] == "UploadSurvivor" and last["decision"] in ("CANCELLED", "INVALID_ARGUMENT")
        assert srv.ledger.budget(srv.config.datasets["test"].population, srv.config.policy).releases == 0
        assert c.Describe(pb.DescribeRequest()).datasets and healthy(srv)
