"""CPU an analyst can make a site spend on request (issue 36, item 6), over real mutual-TLS daemons.

Before, a single Budget or Describe call carried any number of release queries (a 16 MiB request took ~80 s of
CPU), and every secagg advertisement or Budget query with a new epsilon cost a fresh calibration (a secagg share
up to ~1 s, a boyd release's events ~0.14 s), as often as the analyst asked. Now a call carries at most
``MAX_QUERIES`` queries (INVALID_ARGUMENT beyond, nothing evaluated), and new calibrations are kept and their CPU
bounded per analyst (``site.calibration_cpu_seconds_per_minute``; RESOURCE_EXHAUSTED beyond).
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import time

import grpc
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.interceptors.audit import read_audit
from site_node.protocols.budget import MAX_QUERIES
from site_node.testing import running_server

from ..conftest import TOKENS, tls_client
from ..protocols.histogram.test_secagg import HUGE, NAMES, peered_configs

C = grpc.StatusCode
MALLORY = "token-of-mallory"
ANALYSTS = {name: {"token_sha256": hashlib.sha256(token.encode()).hexdigest(), "datasets": ["*"]}
            for name, token in {**TOKENS, "mallory": MALLORY}.items()}


def _refused(fn, code):
    with pytest.raises(grpc.RpcError) as info:
        fn()
    assert info.value.code() == code, info.value.details()
    return info.value.details()


def test_a_budget_or_describe_call_carries_at_most_max_queries(tls_site, snapshot):
    server, client = tls_site()
    before = snapshot(server.config.ledger_path)
    queries = [pb.ReleaseQuery(protocol="paper", epsilon=1.0 + k * 1e-6, delta=1e-5) for k in range(10_000)]
    started = time.monotonic()
    details = _refused(lambda: client.Budget(pb.BudgetRequest(dataset="test", queries=queries)), C.INVALID_ARGUMENT)
    assert details == f"queries: a call may ask at most {MAX_QUERIES} release queries, got 10000"
    details = _refused(lambda: client.Describe(pb.DescribeRequest(queries=queries[:MAX_QUERIES + 1])),
                       C.INVALID_ARGUMENT)
    assert details == f"queries: a call may ask at most {MAX_QUERIES} release queries, got {MAX_QUERIES + 1}"
    assert time.monotonic() - started < 5
    assert snapshot(server.config.ledger_path) == before
    assert [r["decision"] for r in read_audit(server.config.audit_path)] == ["INVALID_ARGUMENT"] * 2
    # MAX_QUERIES queries are answered, each as the ledger's accountant says (paper: one Gaussian release each)
    left = client.Budget(pb.BudgetRequest(dataset="test", queries=queries[:MAX_QUERIES])).budget.left
    assert len(left) == MAX_QUERIES and all(x.releases > 0 and not x.refused for x in left)


@pytest.fixture
def secagg_site(tmp_path, tls_pki, client_factory):
    """One running TLS secagg site (s0 of a four-site federation) with a small calibration allowance: (config,
    alice, mallory, their sessions)."""
    tls = {"cert": str(tls_pki.server_cert), "key": str(tls_pki.server_key), "client_ca": str(tls_pki.ca_cert)}
    configs = peered_configs(tmp_path / "fed", tls, {**HUGE, "protocols": ["histogram", "secagg", "boyd"]},
                             analysts=ANALYSTS)
    config = configs[0]
    text = config.source.read_text().replace("[site]\n", "[site]\ncalibration_cpu_seconds_per_minute = 1.0\n", 1)
    config.source.write_text(text)
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(running_server(config.source))
        alice = tls_client(client_factory, server.bound_address, tls_pki)
        mallory = tls_client(client_factory, server.bound_address, tls_pki, MALLORY)
        yield server.config, alice, mallory, alice.open(), mallory.open()


def _advertise(client, session, epsilon):
    return client.SecAggAdvertise(pb.SecAggAdvertiseRequest(
        session_id=session, round_id=secrets.token_bytes(32), epsilon=epsilon, delta=1e-5, n_bins=10,
        spacing="equal", sites=NAMES, colluders=0))


def test_new_calibrations_are_kept_and_their_cpu_bounded_per_analyst(secagg_site, snapshot):
    config, alice, mallory, a_session, m_session = secagg_site
    first = _advertise(mallory, m_session, 1.0)
    before = snapshot(config.ledger_path)
    started, refusal = time.process_time(), None
    for k in range(1, 200):  # a new epsilon every time: before, each was calibrated (~0.1-1 s of CPU)
        try:
            _advertise(mallory, m_session, 1.0 + k / 997)
        except grpc.RpcError as exc:
            refusal = exc
            break
    spent = time.process_time() - started
    assert refusal is not None and refusal.code() == C.RESOURCE_EXHAUSTED, spent
    assert "limit per analyst (1 s a minute)" in refusal.details() and refusal.details().startswith("secagg share")
    assert spent < 1.0 + 3.0  # the allowance, the calibration that crossed it and the calls around them
    # a calibration made before is kept and free; a Budget query with a new epsilon counts against the same allowance
    again = _advertise(mallory, m_session, 1.0)
    assert again.share_sigma == first.share_sigma
    boyd = pb.ReleaseQuery(protocol="boyd", epsilon=1.2345, delta=1e-5, count_share=0.5)
    details = _refused(lambda: mallory.Budget(pb.BudgetRequest(dataset="test", queries=[boyd])), C.RESOURCE_EXHAUSTED)
    assert details.startswith("release query") and "limit per analyst" in details
    # another analyst has an allowance of its own: her new calibrations are made at once
    assert _advertise(alice, a_session, 1.0 + 5 / 997).share_sigma > 0
    assert alice.Budget(pb.BudgetRequest(dataset="test", queries=[boyd])).budget.left[0].releases > 0
    # refusals record nothing but their audit record
    assert snapshot(config.ledger_path) == before
    decisions = [(r["analyst"], r["call"], r["decision"]) for r in read_audit(config.audit_path)]
    assert ("mallory", "SecAggAdvertise", "RESOURCE_EXHAUSTED") in decisions
    assert ("mallory", "Budget", "RESOURCE_EXHAUSTED") in decisions
