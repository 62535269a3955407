"""Robustness attacks on a daemon as regression tests, each over real mutual-TLS daemons: inputs that made it answer
INTERNAL, an unbounded and unrotated audit log (and a decision differing from the status sent), a second daemon
on a port in use. The paper protocol's disclosure attacks are in ``rules/test_disclosure.py``.
"""

from __future__ import annotations

import hashlib
import json

import grpc
import pytest

from dsroc import analytic_gaussian_sigma
from dsroc.v1 import site_pb2 as pb
from site_node.interceptors.audit import AuditLog, AuditRecord, audit_files, read_audit
from site_node.cli import main
from site_node.cli.init import free_port, init_site
from site_node.testing import Daemon, DaemonFailed

NEG = pb.SCORE_CLASS_NEGATIVES


def _refused(fn, code):
    with pytest.raises(grpc.RpcError) as info:
        fn()
    assert info.value.code() == code, info.value.details()
    return info.value.details()


def _records(server) -> list[dict]:
    return read_audit(server.config.audit_path)


def test_overflowing_threshold_and_sensitivity_are_invalid_not_internal(tls_site, snapshot):
    server, client = tls_site()
    s = client.open()
    before = snapshot(server.config.ledger_path)
    for threshold in (1e308, -1e308, 1.5, -0.2):
        details = _refused(lambda: client.ConfusionParts(pb.ConfusionPartsRequest(session_id=s, threshold=threshold)),
                           grpc.StatusCode.INVALID_ARGUMENT)
        assert details.startswith(f"threshold {threshold}") and "must lie in the score range [0, 1]" in details
    details = _refused(lambda: client.release(s, NEG, epsilon=0.48, delta=5e-324, sensitivity=1e308),
                       grpc.StatusCode.INVALID_ARGUMENT)
    assert details.startswith("sensitivity 1e+308 is more than 1e+06 times the width of the score range (1)")
    details = _refused(lambda: client.PlacementMoments(pb.PlacementMomentsRequest(
        session_id=s, global_means=pb.GlobalMeans(mean_pv0=1e308, mean_pv1=0.5))), grpc.StatusCode.INVALID_ARGUMENT)
    assert details == "global_means.mean_pv0 must lie in [0, 1] (a mean of placement values), got 1e+308"
    assert snapshot(server.config.ledger_path) == before
    assert [r["decision"] for r in _records(server)[1:]] == ["INVALID_ARGUMENT"] * 6
    # The calibration itself names the problem (it divided by zero) wherever it is called from.
    with pytest.raises(ValueError, match="beyond the floating-point range"):
        analytic_gaussian_sigma(0.48, 5e-324, 1e308)


def test_a_huge_string_is_bounded_and_the_audit_says_what_was_sent(tls_site):
    server, client = tls_site()
    name = "x" * 100_000
    details = _refused(lambda: client.Budget(pb.BudgetRequest(dataset=name)), grpc.StatusCode.NOT_FOUND)
    assert len(details) == 1024 and "...[cut: 100038 chars, sha256 " in details
    assert details.startswith("dataset 'xxx") and details.endswith("xxx' does not exist at this site")
    (record,) = _records(server)
    assert record["decision"] == "NOT_FOUND" and record["message"] == details
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    logged = record["parameters"]["dataset"]
    assert len(logged) == 256 and f"xxx...[cut: 100000 chars, sha256 {digest}]...xxx" in logged
    assert set(logged.replace(f"...[cut: 100000 chars, sha256 {digest}]...", "")) == {"x"}
    assert server.config.audit_path.stat().st_size < 3000  # was 200 kB: the name twice


def test_the_audit_log_rotates_and_the_cli_reads_every_file(tls_site, capsys):
    server, client = tls_site(site={"audit_max_bytes": 2000})
    for k in range(40):
        _refused(lambda: client.Budget(pb.BudgetRequest(dataset=f"missing-{k}")), grpc.StatusCode.NOT_FOUND)
    files = audit_files(server.config.audit_path)
    assert len(files) > 3 and files[-1] == server.config.audit_path
    assert [f.name for f in files[:-1]] == [f"audit.jsonl.{i:06d}" for i in range(1, len(files))]
    assert all(f.stat().st_size <= 2000 for f in files)
    records = read_audit(server.config.audit_path)
    assert [r["parameters"]["dataset"] for r in records] == [f"missing-{k}" for k in range(40)]
    assert [r["parameters"]["dataset"] for r in read_audit(server.config.audit_path, last=3)] == \
        ["missing-37", "missing-38", "missing-39"]
    config = server.config.source
    config.write_text(f'[site]\nname = "s"\nstate_dir = "{server.config.state_dir}"\n')
    assert main(["audit", "--config", str(config), "--last", "40", "--json"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["parameters"]["dataset"] for r in printed] == [f"missing-{k}" for k in range(40)]


def test_rotation_keeps_one_line_per_record_and_rejects_a_bad_size(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl", max_bytes=1)  # every record in its own file: never split
    for k in range(3):
        log.write(AuditRecord("a", f"Call{k}"))
    assert [r["call"] for r in read_audit(tmp_path / "audit.jsonl")] == ["Call0", "Call1", "Call2"]
    assert len(audit_files(tmp_path / "audit.jsonl")) == 3
    with pytest.raises(ValueError, match="max_bytes must be a positive integer"):
        AuditLog(tmp_path / "other.jsonl", max_bytes=0)


def test_a_second_daemon_on_a_port_in_use_refuses_to_start(tmp_path):
    port = free_port()
    result = init_site(tmp_path / "s", listen=f"127.0.0.1:{port}")
    with Daemon(result.config) as first:
        assert first.wait_serving().address == f"127.0.0.1:{port}"
        other = init_site(tmp_path / "t", name="other", listen=f"127.0.0.1:{port}")
        with Daemon(other.config) as second, pytest.raises(DaemonFailed) as refused:
            second.wait_serving()
        assert refused.value.returncode == 2, refused.value.log
        assert f"cannot listen on 127.0.0.1:{port}: the address is in use" in refused.value.log
        # the same site twice is refused before the port: two daemons must never write one ledger
        with Daemon(result.config) as same, pytest.raises(DaemonFailed) as refused:
            same.wait_serving()
        assert refused.value.returncode == 2, refused.value.log
        assert "another dsroc-site process is using this state" in refused.value.log
        assert first.proc.poll() is None  # the first one still serves


def test_an_underflowing_boyd_count_scale_is_invalid_not_internal(tls_site, snapshot):
    server, client = tls_site(policy={"protocols": ["histogram", "paper", "boyd"]})
    s = client.open()
    before = snapshot(server.config.ledger_path)
    details = _refused(lambda: client.ReleaseBoydStatistics(pb.BoydRequest(
        session_id=s, epsilon=1e-300, delta=1e-300, count_share=1e-300)), grpc.StatusCode.INVALID_ARGUMENT)
    assert details.startswith("epsilon * count_share must be at least 1e-300")
    assert snapshot(server.config.ledger_path) == before
