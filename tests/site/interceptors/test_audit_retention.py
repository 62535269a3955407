"""The audit log stays within its bounds: total size and age of the kept files, and a rate limit on refusals of
callers without a valid token (a real daemon, real calls, real files)."""

from __future__ import annotations

import os
import time

import grpc
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.interceptors.audit import AuditLog, AuditRecord, audit_files, read_audit
from site_node.testing import running_server


def _flood(client_cls, server, calls):
    client = client_cls(server, "not-a-token")
    try:
        for _ in range(calls):
            with pytest.raises(grpc.RpcError) as err:
                client.Describe(pb.DescribeRequest())
            assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
    finally:
        client.close()


def test_a_flood_of_unauthenticated_calls_keeps_the_audit_files_within_their_total_bound(make_site_config,
                                                                                         client_cls):
    config = make_site_config(site={"audit_max_bytes": 4096, "audit_max_total_bytes": 16384,
                                    "audit_unauthenticated_per_minute": 10_000})
    with running_server(config) as server:
        _flood(client_cls, server, 400)  # ~270 bytes each: ~108 KB unbounded
    files = audit_files(config.audit_path)
    assert sum(f.stat().st_size for f in files) <= 16384
    records = read_audit(config.audit_path)
    deleted = [r for r in records if r["call"] == "AuditRetention"]
    assert deleted and all(r["parameters"]["deleted"].startswith("audit.jsonl.") for r in deleted)
    # the newest refusals are kept, one record each; the numbering of rotated files goes on
    assert sum(r["decision"] == "UNAUTHENTICATED" for r in records) >= 16384 // 2 // 300
    assert int(files[-2].name.rsplit(".", 1)[1]) > len(files)


def test_unauthenticated_refusals_beyond_the_rate_are_counted_in_one_summary_record(make_site_config, client_cls):
    config = make_site_config(site={"audit_unauthenticated_per_minute": 25})
    start = time.time()
    with running_server(config) as server:
        _flood(client_cls, server, 300)
    records = [r for r in read_audit(config.audit_path) if r["decision"] == "UNAUTHENTICATED"]
    single = [r for r in records if r["call"] == "Describe"]
    summaries = [r for r in records if r["call"] == "Unauthenticated"]
    counted = sum(sum(r["parameters"]["calls_by_peer"].values()) for r in summaries)
    assert len(single) + counted == 300  # every refusal accounted for
    assert len(single) <= 25 * (1 + int(time.time() // 60) - int(start // 60))  # one window per minute begun
    assert summaries and "127.0.0.1" in next(iter(summaries[-1]["parameters"]["calls_by_peer"]))
    assert "site.audit_unauthenticated_per_minute = 25" in summaries[-1]["message"]


def test_rotated_files_older_than_the_age_bound_are_deleted_and_the_deletion_recorded(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, max_bytes=1)
    for k in range(4):
        log.write(AuditRecord("a", f"Call{k}"))
    old = time.time() - 10 * 86400
    for f in audit_files(path)[:2]:
        os.utime(f, (old, old))
    AuditLog(path, max_bytes=1, max_age_days=7)  # retention runs when the log is opened (and at each rotation)
    records = read_audit(path)
    assert [r["call"] for r in records if r["call"].startswith("Call")] == ["Call2", "Call3"]
    assert [r["parameters"]["deleted"] for r in records if r["call"] == "AuditRetention"] == \
        ["audit.jsonl.000001", "audit.jsonl.000002"]
