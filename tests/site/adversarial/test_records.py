"""What the site records holds against an attacker: release once, caps and records across restarts, audit, crashes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.testing import running_server

from .common import NEG, C, ALICE, refused, audit_records

ROOT = Path(__file__).resolve().parents[3]


def test_release_once_and_a_larger_sensitivity_is_a_new_charge(server, client):
    s = client.open()
    first, v1, _ = client.release(s, NEG, epsilon=4.0)
    again, v2, _ = client.release(client.open(), NEG, epsilon=4.0)
    assert again.mu_charged == 0.0 and again.repeated and np.array_equal(v1, v2)
    wider, v3, _ = client.release(s, NEG, epsilon=4.0, sensitivity=2.0)
    assert wider.sensitivity == 2.0 and wider.mu_charged == pytest.approx(first.mu)  # Delta/tau: same ratio
    assert wider.release_id != first.release_id and not np.array_equal(v1, v3)
    assert np.std(v3 - np.sort(v3)) == 0 and wider.tau == pytest.approx(2 * first.tau)
    assert server.ledger.budget(server.config.datasets["test"].population, server.config.policy).releases == 2
    refused(lambda: client.release(s, NEG, epsilon=4.0, sensitivity=0.5), C.INVALID_ARGUMENT, "larger sensitivity")


def test_models_are_capped_per_dataset_also_after_a_restart(make_site_config, client_cls, snapshot):
    config = make_site_config(policy={"max_models": 2})

    def model(intercept):
        return pb.GlmModel(link=pb.LINK_LOGIT, intercept=intercept, coefficients=[pb.Coefficient(name="age", value=0.05)])

    with running_server(config) as srv:
        c = client_cls(srv)
        c.open(model=model(-3))
        c.open(model=model(-2))
        c.open(model=model(-3))  # the same model again is free
        before = snapshot(config.ledger_path)
        details = refused(lambda: c.open(model=model(-2.5)), C.RESOURCE_EXHAUSTED, "at most 2 different models")
        assert "age" not in details
        assert snapshot(config.ledger_path) == before
        assert c.open()  # the administrator's score columns are not models
        assert c.Describe(pb.DescribeRequest()).policy.max_models == 2
        c.close()
    with running_server(config) as srv:
        c = client_cls(srv)
        refused(lambda: c.open(model=model(-1)), C.RESOURCE_EXHAUSTED)
        assert c.open(model=model(-2))
        c.close()


def test_a_refused_session_records_no_model(make_site_config, client_cls, snapshot):
    config = make_site_config(site={"max_sessions": 1})
    model = pb.GlmModel(link=pb.LINK_PROBIT, coefficients=[pb.Coefficient(name="nodes", value=0.1)])
    with running_server(config) as srv:
        c = client_cls(srv)
        c.open()
        before = snapshot(config.ledger_path)
        refused(lambda: c.open(model=model), C.RESOURCE_EXHAUSTED, "open sessions")
        assert snapshot(config.ledger_path) == before
        c.close()


def test_the_audit_log_records_every_request_and_only_grows(server, client, client_factory):
    s = client.open()  # 1
    _, noisy, _ = client.release(s, NEG)  # 2
    client.upload(s, NEG, noisy)  # 3
    client.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1]))  # 4
    refused(lambda: client.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0])), C.INVALID_ARGUMENT)  # 5
    refused(lambda: client.release(s, NEG, epsilon=99), C.PERMISSION_DENIED)  # 6
    stranger = client_factory(server, token="stolen?")
    refused(lambda: stranger.upload(s, NEG, noisy), C.UNAUTHENTICATED)  # 7
    refused(lambda: client_factory(server, token=None).BrierParts(
        pb.BrierPartsRequest(session_id=s)), C.UNAUTHENTICATED)  # 8
    first = server.config.audit_path.read_text()
    entries = audit_records(server)
    assert [(e["call"], e["decision"]) for e in entries] == [
        ("OpenSession", "OK"), ("ReleaseNoisyScores", "OK"), ("UploadSurvivor", "OK"), ("RocGlmParts", "OK"),
        ("RocGlmParts", "INVALID_ARGUMENT"), ("ReleaseNoisyScores", "PERMISSION_DENIED"),
        ("UploadSurvivor", "UNAUTHENTICATED"), ("BrierParts", "UNAUTHENTICATED"),
    ]
    assert all({"time", "analyst", "call", "parameters", "decision", "message", "privacy_cost"} <= set(e)
               for e in entries)
    assert entries[1]["privacy_cost"] > 0 and entries[6]["analyst"] == ""
    assert all(e["peer"].startswith("ipv4:127.0.0.1:") for e in entries)  # also who tried without a token
    # Never a released or uploaded score, never a token.
    assert not any(f"{v:.6f}"[:8] in first for v in noisy[:20])
    assert "stolen?" not in first and ALICE not in first
    client.BrierParts(pb.BrierPartsRequest(session_id=s))
    assert server.config.audit_path.read_text().startswith(first)  # appended, nothing rewritten
    assert os.stat(server.config.audit_path).st_mode & 0o077 == 0  # readable by the site account only


_CRASH = """
import os, sys
import numpy as np
sys.path.insert(0, {root!r})
from site_node.config import Policy
from site_node.store.ledger import ReleaseKey, SqliteLedger

ledger = SqliteLedger({path!r})
from dsroc.privacy.accounting import Gaussian

key = ReleaseKey("test", "column:pred", "y", "scores", "{{}}")

def make(seed):
    if {how!r} == "raise":
        raise MemoryError("while drawing")
    os._exit(3)  # the process dies inside the charging transaction

try:
    ledger.release(key, dataset="test", analyst="a", events=(Gaussian(4.0),), epsilon=1.0, delta=1e-3, rule="range",
                   fingerprint="f", policy=Policy(), make=make, store=False)
except MemoryError:
    sys.exit(4)
"""


@pytest.mark.parametrize("how, code", [("crash", 3), ("raise", 4)])
def test_a_crash_while_charging_leaves_neither_charge_nor_release(tmp_path, how, code, snapshot):
    path = tmp_path / "ledger.sqlite"
    proc = subprocess.run([sys.executable, "-c", _CRASH.format(root=str(ROOT), path=str(path), how=how)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert snapshot(path)[0] == ()  # reopened after the crash: no release


def test_query_records_survive_a_restart(make_site_config, client_cls):
    config = make_site_config(policy={"max_glm_evaluations": 2, "max_survivor_uploads": 1})
    s0 = np.linspace(0.05, 0.95, 60)
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        c.upload(s, NEG, s0)
        for i in range(2):
            c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1 + i]))
        c.ConfusionParts(pb.ConfusionPartsRequest(session_id=s, threshold=0.31))
        c.CalibrationParts(pb.CalibrationPartsRequest(session_id=s, n_bins=2))
        c.close()
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        assert c.upload(s, NEG, s0).evaluations_left == 0
        refused(lambda: c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 3])), C.RESOURCE_EXHAUSTED)
        refused(lambda: c.upload(s, NEG, s0[1:]), C.RESOURCE_EXHAUSTED, "at most 1 different survivor")
        refused(lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=s, threshold=0.32)),
                 C.PERMISSION_DENIED, "disclosure auditor")
        c.close()
