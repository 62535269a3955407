"""A site's state cannot be lost quietly: real site folders, real daemons (subprocess and in-process), real SQLite files."""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
from pathlib import Path

import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.interceptors.audit import read_audit
from site_node.cli import main
from site_node.config import load_config
from site_node.cli.init import init_site
from site_node.server import SiteServer
from site_node.store.state import StateError
from site_node.testing import Daemon, DaemonFailed, running_server


def _client(client_cls, server, site):
    """A mutual-TLS client of ``server`` with the certificate ``init`` gave the analyst of ``site``."""
    return client_cls(server, site.token, ca_cert=site.pki.ca_cert, client_cert=site.pki.client_cert,
                      client_key=site.pki.client_key)


def _release(site, client_cls):
    """One histogram release (a charge in the ledger) from a real in-process daemon of an ``init`` site."""
    with running_server(load_config(site.config)) as server:
        client = _client(client_cls, server, site)
        try:
            session = client.open(dataset="sample")
            client.ReleaseHistogram(pb.HistogramRequest(session_id=session, epsilon=1.0, delta=1e-5, n_bins=10))
        finally:
            client.close()


@pytest.fixture
def served(tmp_path, client_cls):
    """A site folder from ``init`` whose daemon served and charged one release; returns init's result."""
    result = init_site(tmp_path / "site", listen="127.0.0.1:0")
    _release(result, client_cls)
    return result


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    logging.getLogger().handlers.clear()  # main's handler writes to this test's captured stderr only
    return code, out, err


def _serve(config, *extra):
    """``dsroc-site serve`` as a real process; it either refuses at once or is stopped after it served."""
    daemon = Daemon(config, args=extra)
    with contextlib.suppress(DaemonFailed):
        daemon.wait_serving()
    code = daemon.stop()
    return code, daemon.output(), daemon.log()


def test_a_deleted_state_is_refused_by_serve_check_and_budget_and_no_command_recreates_it(served, capsys):
    config_path = served.config
    state = config_path.parent / "state"
    assert json.loads(_cli(capsys, "budget", "--config", str(config_path), "--json")[1])["releases"]
    shutil.rmtree(state)
    code, out, err = _serve(config_path)
    assert code == 2 and not out, (out, err)
    assert "this site served before" in err and "state folder is missing" in err
    assert "dsroc-site restore BACKUP" in err and "--reset-state" in err and "Traceback" not in err
    code, out, _ = _cli(capsys, "check", "--config", str(config_path))
    assert code == 1 and "state folder is missing" in out
    code, _, err = _cli(capsys, "budget", "--config", str(config_path))
    assert code == 2 and "state folder is missing" in err
    assert _cli(capsys, "audit", "--config", str(config_path))[0] == 2
    assert _cli(capsys, "model", "list", "--config", str(config_path))[0] == 2
    assert not state.exists()  # read-only commands never create state


@pytest.mark.parametrize("damage", ["garbage", "empty", "fresh", "foreign"])
def test_a_damaged_empty_or_replaced_ledger_is_refused_with_a_clear_message(served, capsys, tmp_path, client_cls,
                                                                           damage):
    config_path = served.config
    ledger = config_path.parent / "state" / "ledger.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(str(ledger) + suffix).unlink(missing_ok=True)
    if damage == "garbage":
        ledger.write_bytes(b"this is not a database" * 100)
    elif damage == "empty":
        ledger.write_bytes(b"")
    elif damage == "fresh":  # a new, valid but empty ledger in place of the old one
        ledger.unlink()
        import sqlite3

        sqlite3.connect(ledger).execute("CREATE TABLE releases (x)").connection.close()
    else:  # the ledger of another site that served too
        other = init_site(tmp_path / "other", listen="127.0.0.1:0")
        _release(other, client_cls)
        shutil.copyfile(other.config.parent / "state" / "ledger.sqlite", ledger)
    expected = {"garbage": "is damaged", "empty": "is empty", "fresh": "carries no state id",
                "foreign": "is of another state"}[damage]
    code, _, err = _cli(capsys, "budget", "--config", str(config_path))
    assert code == 2 and expected in err and "Traceback" not in err, err
    with pytest.raises(StateError, match=expected):
        SiteServer(load_config(config_path), address="127.0.0.1:0")


def test_read_only_commands_on_a_site_that_never_served_create_no_state(tmp_path, capsys):
    result = init_site(tmp_path / "site", listen="127.0.0.1:0")
    state = result.config.parent / "state"
    shutil.rmtree(state, ignore_errors=True)
    code, out, _ = _cli(capsys, "budget", "--config", str(result.config), "--json")
    assert code == 0 and json.loads(out)["budgets"][0]["releases"] == 0
    assert _cli(capsys, "audit", "--config", str(result.config))[0] == 0
    assert _cli(capsys, "model", "list", "--config", str(result.config))[0] == 0
    code, out, _ = _cli(capsys, "check", "--config", str(result.config))
    assert code == 0 and "state: not served yet" in out
    assert not state.exists() and not result.config.with_suffix(".served").exists()


def test_backup_while_serving_then_restore_after_loss_brings_the_budget_back(served, capsys, tmp_path, client_cls):
    config_path = served.config
    config = load_config(config_path)
    with running_server(config) as server:
        # consistent copy while the daemon holds the ledger open; restore is refused while it serves
        assert _cli(capsys, "backup", str(tmp_path / "bk"), "--config", str(config_path))[0] == 0
        code, _, err = _cli(capsys, "restore", str(tmp_path / "bk"), "--config", str(config_path))
        assert code == 2 and "another dsroc-site process is using this state" in err
        client = _client(client_cls, server, served)
        session = client.open(dataset="sample")
        client.ReleaseHistogram(pb.HistogramRequest(session_id=session, epsilon=2.0, delta=1e-5, n_bins=10))
        client.close()
    manifest = json.loads((tmp_path / "bk" / "manifest.json").read_text())
    assert {"ledger.sqlite", "release_signing.key", "audit.jsonl"} <= set(manifest["files"])
    (config_path.parent / "state" / "ledger.sqlite").write_bytes(b"lost")
    code, out, _ = _cli(capsys, "restore", str(tmp_path / "bk"), "--config", str(config_path))
    assert code == 0 and "not in the restored ledger" in out
    code, out, _ = _cli(capsys, "budget", "--config", str(config_path), "--json")
    assert [r["epsilon"] for r in json.loads(out)["releases"]] == [1.0]  # the backup's one release, not zero
    calls = [(r["call"], r["parameters"].get("epsilon")) for r in read_audit(config.audit_path)]
    assert calls[-4:] == [("BackupState", None), ("OpenSession", None), ("ReleaseHistogram", 2.0),
                          ("RestoreState", None)]  # the replaced state's newer audit log is kept
    with running_server(config):  # the restored state serves
        pass
    # a damaged backup is refused before anything is moved
    (tmp_path / "bk" / "ledger.sqlite").write_bytes(b"x")
    code, _, err = _cli(capsys, "restore", str(tmp_path / "bk"), "--config", str(config_path))
    assert code == 2 and "differs from the backup's manifest" in err


def test_reset_state_is_explicit_audited_and_refused_while_the_state_is_intact(served, capsys):
    config_path = served.config
    config = load_config(config_path)
    with pytest.raises(StateError, match="the state is intact"):
        SiteServer(config, address="127.0.0.1:0", reset_state=True)
    (config_path.parent / "state" / "ledger.sqlite").write_bytes(b"")
    code, out, err = _serve(config_path, "--reset-state")
    assert code == 0 and json.loads(out.splitlines()[0])["event"] == "serving", err
    moved = [p for p in config_path.parent.iterdir() if p.name.startswith("state.reset-")]
    assert len(moved) == 1 and (moved[0] / "ledger.sqlite").exists()
    reset = [r for r in read_audit(config.audit_path) if r["call"] == "ResetState"]
    assert len(reset) == 1 and "ledger.sqlite is empty" in reset[0]["message"]
    code, out, _ = _cli(capsys, "budget", "--config", str(config_path), "--json")
    assert code == 0 and json.loads(out)["releases"] == []
