"""kill -9 of a real TLS daemon (and of model approvals) in the middle of releases, query caps and cut records.

After each kill the daemon restarts on the same folder; then nothing it answered is missing from its
stores (a repeat of every answered question is free and identical) and nothing is charged twice.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc

from dsroc.v1 import site_pb2 as pb
from site_node.cli.init import init_site
from site_node.testing import Daemon

ROOT = Path(__file__).resolve().parents[2]
NEG = pb.SCORE_CLASS_NEGATIVES
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
CLI = [sys.executable, "-m", "site_node"]


def _daemon(site, client_factory):
    """``dsroc-site serve`` of an init'ed site in a subprocess, and a mutual-TLS client of it."""
    daemon = Daemon(site.config).wait_serving()
    pki = site.pki
    daemon.client = client_factory(daemon.address, site.token, ca_cert=pki.ca_cert, client_cert=pki.client_cert,
                                   client_key=pki.client_key)
    return daemon


def _hammer(client, session, answered, stop):
    """Releases, ROC-GLM evaluations and confusion thresholds from three threads until the daemon dies."""

    def releases():
        for k in range(1000):
            if stop.is_set():
                return
            eps = round(1.01 + 0.01 * k, 2)
            info, values, _ = client.release(session, NEG, epsilon=eps, delta=1e-3)
            answered["releases"][eps] = (info.release_id, values.tobytes())

    def evaluations():
        for k in range(1000):
            if stop.is_set():
                return
            theta = [0.1 * k, 1.0]
            client.RocGlmParts(pb.RocGlmPartsRequest(session_id=session, theta=theta))
            answered["thetas"].append(theta)

    def thresholds():
        for k in range(1, 100):
            if stop.is_set():
                return
            t = k / 100
            try:
                client.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=t))
                answered["thresholds"].append(t)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.PERMISSION_DENIED:
                    raise

    def run(fn):
        try:
            fn()
        except grpc.RpcError:
            pass  # the daemon was killed

    threads = [threading.Thread(target=run, args=(fn,)) for fn in (releases, evaluations, thresholds)]
    for t in threads:
        t.start()
    return threads


def _approve_in_background(site, tmp_path, k):
    model = {"link": "logit", "intercept": -float(k), "coefficients": {"age": 0.01 * (k + 1)}}
    path = tmp_path / f"model{k}.json"
    path.write_text(json.dumps(model))
    return subprocess.Popen(CLI + ["model", "approve", str(path), "--config", str(site.config)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV)


def test_kill_9_during_releases_caps_approvals_and_cuts_loses_nothing_and_charges_nothing_twice(
        tmp_path, client_factory):
    site = init_site(tmp_path / "s", listen="127.0.0.1:0")
    text = site.config.read_text()
    assert 'protocols = ["histogram"]' in text
    site.config.write_text(text.replace('protocols = ["histogram"]', 'protocols = ["histogram", "paper"]', 1))
    ledger = tmp_path / "s" / "state" / "ledger.sqlite"
    answered = {"releases": {}, "thetas": [], "thresholds": []}
    approved, killed_approvals = [], 0
    first = None
    for cycle, delay in enumerate((0.5, 1.2)):
        daemon = _daemon(site, client_factory)
        c = daemon.client
        session = c.open(dataset="sample")
        info, noisy, _ = c.release(session, NEG, epsilon=1.0, delta=1e-3)
        first = first or (info.release_id, noisy.tobytes())
        assert (info.release_id, noisy.tobytes()) == first  # also after every restart: identical, free
        assert cycle == 0 or info.mu_charged == 0 and info.repeated
        c.upload(session, NEG, noisy, segments=[info])
        stop = threading.Event()
        threads = _hammer(c, session, answered, stop)
        approvals = [_approve_in_background(site, tmp_path, 10 * cycle + k) for k in range(4)]
        time.sleep(delay)
        # On a loaded machine a release can take longer than the delay: wait until this cycle has answered some
        # (the release thread keeps going, so the kill still lands in the middle of the stream).
        deadline = time.monotonic() + 120
        while len(answered["releases"]) < 2 * (cycle + 1) and time.monotonic() < deadline:
            time.sleep(0.05)
        daemon.kill()
        for k, proc in enumerate(approvals):
            if k % 2:
                proc.send_signal(signal.SIGKILL)  # an approval killed at any point: all or nothing
        for k, proc in enumerate(approvals):
            out, _ = proc.communicate(timeout=60)
            if proc.returncode == 0:
                approved.append(out.split()[1])
            else:
                killed_approvals += 1
        stop.set()
        for t in threads:
            t.join(timeout=60)

        # Restart on the same folder: everything answered is recorded.
        daemon = _daemon(site, client_factory)
        c = daemon.client
        s = c.open(dataset="sample")
        for eps, (release_id, values) in answered["releases"].items():
            again, v, _ = c.release(s, NEG, epsilon=eps, delta=1e-3)
            assert again.repeated and again.mu_charged == 0 and again.release_id == release_id
            assert v.tobytes() == values
        with sqlite3.connect(ledger) as db:
            ids = {r[0] for r in db.execute("SELECT release_id FROM releases")}
            rows, distinct = db.execute("SELECT COUNT(*), COUNT(DISTINCT population || '|' || source || '|' || outcome "
                                        "|| '|' || kind || '|' || request) FROM releases").fetchone()
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert {r for r, _ in answered["releases"].values()} | {first[0]} <= ids  # every answer recorded
        assert rows == distinct  # each release charged once (a release killed before its answer may be recorded)
        info0, noisy0, _ = c.release(s, NEG, epsilon=1.0, delta=1e-3)
        left = c.upload(s, NEG, noisy0, segments=[info0]).evaluations_left
        for theta in answered["thetas"][-5:]:  # a recorded question is answered again without counting
            assert c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=theta)).evaluations_left == left
        with sqlite3.connect(tmp_path / "s" / "state" / "disclosure.sqlite") as db:
            recorded = {float(r[0]) for r in db.execute("SELECT lo FROM answered_counts WHERE lo != '-inf'")}
        assert set(answered["thresholds"]) <= recorded
        listed = subprocess.run(CLI + ["model", "list", "--json", "--config", str(site.config)], capture_output=True,
                                text=True, env=ENV, check=True).stdout
        assert set(approved) <= {row["model_sha256"] for row in json.loads(listed)}
        daemon.kill()
    # The run exercised every path: releases, evaluations and cuts answered before kills, approvals killed.
    assert len(answered["releases"]) >= 3 and answered["thetas"] and answered["thresholds"]
    assert approved and killed_approvals
