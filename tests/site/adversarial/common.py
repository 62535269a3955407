"""What the attacker-analyst tests share: scores on the wire, the health check, refusals, the audit log."""

from __future__ import annotations

import json

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dsroc.v1 import site_pb2 as pb

from ..conftest import channel_to

__all__ = ["NEG", "POS", "C", "ALICE", "CAROL", "f64", "healthy", "refused", "audit_records"]

NEG, POS = pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES
C = grpc.StatusCode
ALICE, CAROL = "token-of-alice", "token-of-carol"  # alice as in conftest


def f64(values) -> bytes:
    """Scores as the wire carries them: little-endian float64 bytes."""
    return np.asarray(values, dtype="<f8").tobytes()


def healthy(server) -> bool:
    with channel_to(server) as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def refused(fn, code, match=None):
    with pytest.raises(grpc.RpcError) as info:
        fn()
    assert info.value.code() == code, info.value.details()
    if match:
        assert match in info.value.details(), info.value.details()
    return info.value.details()


def audit_records(server) -> list[dict]:
    return [json.loads(line) for line in server.config.audit_path.read_text().splitlines()]
