"""The audit log stays within its bounds: total size and age of the kept files, and a rate limit on refusals of
callers without a valid token (a real daemon, real calls, real files)."""

from __future__ import annotations

import json
import os
import sqlite3
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


def test_retention_never_deletes_the_record_of_a_charged_release(make_site_config, client_cls):
    # Before: an analyst's cheap calls pushed its own release records out of the kept files (10 000 Budget calls
    # under a 2 MiB cap; here 300 under 16 KiB), while the ledger kept charging them.
    config = make_site_config(site={"audit_max_bytes": 4096, "audit_max_total_bytes": 16384})
    with running_server(config) as server:
        client = client_cls(server)
        session = client.open()
        paper, _, _ = client.release(session, pb.SCORE_CLASS_NEGATIVES)
        client.release(session, pb.SCORE_CLASS_NEGATIVES)  # its replay: nothing charged, nothing to keep
        histogram = client.ReleaseHistogram(pb.HistogramRequest(session_id=session, epsilon=2.0, delta=1e-5,
                                                                n_bins=10, spacing="equal"))
        for _ in range(300):
            client.Budget(pb.BudgetRequest(dataset="test"))
        client.close()
    records = read_audit(config.audit_path)
    assert [r for r in records if r["call"] == "AuditRetention"], "retention deleted no file"
    with sqlite3.connect(config.ledger_path) as db:
        charged = {row[0] for row in db.execute("SELECT release_id FROM releases")}
    assert charged == {paper.release_id, histogram.release_id}
    kept = [r for r in records if r["parameters"].get("release_id") in charged]
    # every release the ledger charged keeps its record (the first of each), once, with what it charged
    assert [(r["call"], r["parameters"]["release_id"]) for r in kept[:2]] == \
        [("ReleaseNoisyScores", paper.release_id), ("ReleaseHistogram", histogram.release_id)]
    assert kept[0]["privacy_cost"] > 0 and kept[1]["parameters"]["epsilon_charged"] == 2.0
    # the kept records are the only ones beyond the size bound; the Budget calls' oldest records are gone
    charges = config.audit_path.with_name("audit.jsonl.charges")
    assert [json.loads(line)["parameters"]["release_id"] for line in charges.read_text().splitlines()] == \
        [paper.release_id, histogram.release_id]
    files = audit_files(config.audit_path)
    assert files[0] == charges and sum(f.stat().st_size for f in files[1:]) <= 16384
    assert sum(r["call"] == "Budget" for r in records) < 300
