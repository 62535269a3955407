"""A rolled-back ledger or a lost WAL file is refused at start (issue 36, item 4), with real ``dsroc-site serve`` daemons.

An older copy of ``state/`` carries the same state id as the current one, so the marker let it through and the
budget spent went back (epsilon 7.89 -> 1.91 in the review); deleting ``ledger.sqlite-wal`` after a kill -9 lost the
releases committed since the last checkpoint (16.90 -> 7.89). Now every release's commit advances the ledger's
*head*, a file beside the marker (outside ``state/``): the number of releases and the id of the latest. A ledger
that holds fewer releases, or another release at that place, is refused by ``serve`` and ``check`` with the way
out; ``restore`` (audited) moves the head to the restored ledger.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.cli.init import init_site
from site_node.testing import CHECKOUT, Daemon, DaemonFailed

CLI = [sys.executable, "-m", "site_node"]
ENV = dict(os.environ, PYTHONPATH=str(CHECKOUT))  # the commands of this checkout, as the daemons run


@pytest.fixture
def site(tmp_path):
    out = init_site(tmp_path / "s", listen="127.0.0.1:0")
    return out


def _serve(site, client_factory) -> Daemon:
    """``dsroc-site serve`` of the site in a subprocess, with a mutual-TLS client (``daemon.client``)."""
    daemon = Daemon(site.config).wait_serving()
    pki = site.pki
    daemon.client = client_factory(daemon.address, site.token, ca_cert=pki.ca_cert, client_cert=pki.client_cert,
                                   client_key=pki.client_key)
    return daemon


def _release(daemon, epsilon):
    c = daemon.client
    return c.ReleaseHistogram(pb.HistogramRequest(session_id=c.open(dataset="sample"), epsilon=epsilon, delta=1e-5,
                                                  n_bins=10)).epsilon_spent


def _serve_refused(site) -> str:
    """``serve`` on the site folder: its exit status must be 2 and its log is returned (a daemon that starts
    instead is stopped and the test fails)."""
    daemon = Daemon(site.config)
    try:
        daemon.wait_serving()
    except DaemonFailed as failed:
        assert failed.returncode == 2, failed.log
        return failed.log
    daemon.kill()
    pytest.fail(f"serve started on a rolled-back ledger at {daemon.address}")


def _ledger_files(state):
    return [p for p in state.iterdir() if p.name.startswith("ledger.sqlite")]


def test_an_older_copy_of_the_ledger_is_refused_at_start(site, tmp_path, client_factory):
    state = site.config.parent / "state"
    daemon = _serve(site, client_factory)
    first = _release(daemon, 1.0)
    daemon.stop()
    old = tmp_path / "old"
    old.mkdir()
    for p in _ledger_files(state):
        shutil.copy2(p, old / p.name)
    daemon = _serve(site, client_factory)
    _release(daemon, 2.0)
    spent = _release(daemon, 3.0)
    daemon.stop()
    assert spent > first
    for p in _ledger_files(state):
        p.unlink()
    for p in old.iterdir():
        shutil.copy2(p, state / p.name)
    err = _serve_refused(site)
    assert "ledger.sqlite holds 1 release where this site had committed 3" in err
    assert "an older copy of the state, or its -wal file lost" in err and "dsroc-site restore" in err
    check = subprocess.run(CLI + ["check", "--config", str(site.config)], capture_output=True, text=True, env=ENV)
    assert check.returncode != 0 and "had committed 3" in check.stdout + check.stderr


def test_a_ledger_that_lost_its_wal_after_a_kill_is_refused_at_start(site, client_factory):
    state = site.config.parent / "state"
    daemon = _serve(site, client_factory)
    _release(daemon, 0.5)
    daemon.stop()  # a clean stop checkpoints the WAL: the state id and this release are in ledger.sqlite
    daemon = _serve(site, client_factory)
    for epsilon in (1.0, 1.5, 2.0):
        _release(daemon, epsilon)
    daemon.kill()
    wal = state / "ledger.sqlite-wal"
    assert wal.exists() and wal.stat().st_size > 0
    wal.unlink()
    err = _serve_refused(site)
    assert "ledger.sqlite holds 1 release where this site had committed 4" in err and "-wal file lost" in err


def test_a_restored_backup_moves_the_head_and_serves(site, tmp_path, client_factory):
    daemon = _serve(site, client_factory)
    _release(daemon, 1.0)
    backup = tmp_path / "backup"
    subprocess.run(CLI + ["backup", "--config", str(site.config), str(backup)], check=True, capture_output=True,
                   env=ENV)
    _release(daemon, 2.0)
    daemon.stop()
    subprocess.run(CLI + ["restore", "--config", str(site.config), str(backup)], check=True, capture_output=True,
                   env=ENV)
    daemon = _serve(site, client_factory)  # the administrator's explicit way back: served
    budget = daemon.client.Budget(pb.BudgetRequest(dataset="sample")).budget
    assert budget.releases == 1
    daemon.stop()
