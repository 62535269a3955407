"""The interceptor builds each (method, analyst)'s handler once; every call still gets its own checks and record."""

from __future__ import annotations

import grpc
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.interceptors import auth
from site_node.interceptors.audit import read_audit

from ..conftest import TOKENS, Client


def test_a_handler_is_built_once_per_method_and_analyst_and_each_call_is_audited(server, monkeypatch):
    built = []
    real = auth._wrap
    monkeypatch.setattr(auth, "_wrap", lambda *a: built.append(a[-2:]) or real(*a))
    alice, bob = Client(server), Client(server, TOKENS["bob"])
    try:
        for _ in range(3):
            alice.Describe(pb.DescribeRequest())
        bob.Describe(pb.DescribeRequest())
        alice.Budget(pb.BudgetRequest(dataset="test"))
        assert built == [("alice", "Describe"), ("bob", "Describe"), ("alice", "Budget")]
        records = [(r["analyst"], r["call"], r["decision"]) for r in read_audit(server.config.audit_path)]
        assert records[-5:] == [("alice", "Describe", "OK")] * 3 + [("bob", "Describe", "OK"), ("alice", "Budget", "OK")]
        # an analyst let go at a reload is refused at once, though their handler was built
        server.interceptor.set_analysts([a for a in server.config.analysts.values() if a.name != "alice"])
        with pytest.raises(grpc.RpcError) as refused:
            alice.Describe(pb.DescribeRequest())
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        bob.Describe(pb.DescribeRequest())
        assert built[-1] == ("bob", "Describe")  # the reload built bob's again
    finally:
        alice.close()
        bob.close()
