"""Running a site for years: live analyst changes (SIGHUP), free ports, unusable configs, pipes (real daemons, real files)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from dsroc.v1 import site_pb2 as pb
from site_node.interceptors.audit import AuditLog, AuditRecord, read_audit
from site_node.cli import main
from site_node.cli.init import init_site
from site_node.testing import Daemon

from .conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    logging.getLogger().handlers.clear()  # main's handler writes to this test's captured stderr only
    return code, out, err


def _describe(client_cls, address, folder: Path, name: str):
    """Describe as the analyst whose folder is ``folder``: the status code (OK or the refusal)."""
    client = client_cls(address, (folder / f"{name}.token").read_text().strip(), ca_cert=folder / "ca.crt",
                        client_cert=folder / "client.crt", client_key=folder / "client.key")
    try:
        client.Describe(pb.DescribeRequest())
        return grpc.StatusCode.OK
    except grpc.RpcError as exc:
        return exc.code()
    finally:
        client.close()


def test_analysts_are_added_and_revoked_live_each_with_a_certificate_of_their_own(tmp_path, capsys, client_cls):
    # Before: SIGHUP ended the daemon without a log line, a new analyst needed a hand-pasted token hash and a
    # restart, and every analyst shared one client key.
    site = init_site(tmp_path / "site")
    daemon = Daemon(site.config)
    try:
        address = daemon.wait_serving().address
        first = site.snippet.parent
        daemon.signal(signal.SIGHUP)  # a plain reload changes nothing and ends nothing
        time.sleep(0.5)
        assert daemon.proc.poll() is None and _describe(client_cls, address, first, "analyst1") is grpc.StatusCode.OK

        code, out, _ = _cli(capsys, "analyst", "add", "bob", "--config", str(site.config))
        assert code == 0 and "was told to reload" in out, out
        bob = tmp_path / "site-bob"
        assert not bob.is_relative_to(site.config.parent)  # the analyst's folder is not in the served folder
        assert wait_until(lambda: _describe(client_cls, address, bob, "bob") is grpc.StatusCode.OK)
        names = {d: x509.load_pem_x509_certificate((d / "client.crt").read_bytes()).subject.rfc4514_string()
                 for d in (first, bob)}
        assert "CN=bob" in names[bob] and names[bob] != names[first]
        assert oct((bob / "client.key").stat().st_mode & 0o777) == "0o600"
        federation = (bob / "federation.toml").read_text()
        assert f'address = "{address}"' in federation and 'client_key = "client.key"' in federation

        code, out, _ = _cli(capsys, "analyst", "list", "--config", str(site.config))
        assert code == 0 and "analyst1" in out and "bob" in out
        code, out, _ = _cli(capsys, "analyst", "revoke", "bob", "--config", str(site.config))
        assert code == 0, out
        assert wait_until(lambda: _describe(client_cls, address, bob, "bob") is grpc.StatusCode.UNAUTHENTICATED)
        assert _describe(client_cls, address, first, "analyst1") is grpc.StatusCode.OK
        assert daemon.proc.poll() is None  # the same daemon all along
    finally:
        code = daemon.stop(timeout=60)
    err = daemon.log()
    assert code == 0
    assert err.count("reloaded its analysts") == 3 and "added ['bob']" in err and "removed ['bob']" in err
    calls = [r["call"] for r in read_audit(site.config.parent / "state" / "audit.jsonl")]
    assert [c for c in calls if c in ("AnalystAdd", "AnalystRevoke", "Reload")] == \
        ["Reload", "AnalystAdd", "Reload", "AnalystRevoke", "Reload"]
    assert "[analysts.bob]" not in site.config.read_text()


def test_init_picks_a_free_port(tmp_path):
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", 50051))  # the port every init took before
        except OSError:
            pass  # something else holds it: all the more reason not to take it
        ports = {init_site(tmp_path / f"s{k}").address for k in range(2)}
    assert "127.0.0.1:50051" not in ports and len(ports) == 2


@pytest.mark.parametrize("remove", ["analysts", "datasets"])
def test_check_fails_on_a_config_nobody_can_use(tmp_path, capsys, remove):
    site = init_site(tmp_path / "site")
    text = site.config.read_text().replace('datasets = ["sample"]', 'datasets = ["*"]')
    head, _, rest = text.partition(f"[{remove}.")
    site.config.write_text(head + ("\n[" + rest.split("\n[", 1)[1] if "\n[" in rest else ""))
    code, out, _ = _cli(capsys, "check", "--config", str(site.config))
    assert code == 1 and f"{remove}: none configured" in out


def test_a_closed_pipe_ends_a_command_quietly(tmp_path):
    site = init_site(tmp_path / "site")
    log = AuditLog(site.config.parent / "state" / "audit.jsonl")
    for k in range(20_000):
        log.write(AuditRecord("analyst1", f"Call{k}"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "site_node", "audit", "--config", str(site.config), "--last",
                             "20000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Broken pipe" not in err and "BrokenPipeError" not in err, err


def test_init_keeps_the_ca_key_and_the_analysts_credentials_out_of_the_served_folder(tmp_path):
    # Before: pki/ca.key (which can sign any client certificate) and a copy of the analyst's client key and
    # token lay in the folder the site serves from.
    site = init_site(tmp_path / "site")
    served = site.config.parent
    private = sorted(str(p.relative_to(served)) for p in served.rglob("*")
                     if p.is_file() and b"PRIVATE KEY" in p.read_bytes())
    assert private == ["pki/server.key", "state/release_signing.key"]  # the site's own keys only
    assert not any(site.token in p.read_text(errors="replace") for p in served.rglob("*") if p.is_file())
    assert site.pki.ca_key == tmp_path / "site-ca" / "ca.key" and oct(site.pki.ca_key.stat().st_mode & 0o777) == "0o600"
    assert site.snippet.parent == tmp_path / "site-analyst1"
    assert {p.name for p in site.snippet.parent.iterdir()} == {"analyst1.token", "ca.crt", "client.crt", "client.key",
                                                               "federation.toml"}
