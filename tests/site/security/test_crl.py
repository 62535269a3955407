"""A revoked analyst's client certificate is refused whatever token comes with it: the site's CRL (real daemons)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from dsroc.v1 import site_pb2 as pb
from site_node.interceptors.audit import read_audit
from site_node.cli import main
from site_node.config import ConfigError, load_config
from site_node.security.crl import revoke_certificate, revoked_serials
from site_node.cli.init import init_site
from site_node.testing import Daemon
from site_node.security.pki import generate_dev_pki
from site_node.server import SiteServer

from ..conftest import wait_until


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    logging.getLogger().handlers.clear()
    return code, out, err


def _describe(client_cls, address, folder: Path, token: str):
    """Describe with the certificate of the analyst folder ``folder`` and the bearer ``token``: OK or the refusal."""
    client = client_cls(address, token, ca_cert=folder / "ca.crt", client_cert=folder / "client.crt",
                        client_key=folder / "client.key")
    try:
        client.Describe(pb.DescribeRequest())
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as exc:
        return exc.code(), exc.details()
    finally:
        client.close()


def test_a_revoked_certificate_is_refused_even_with_another_analyst_s_token(tmp_path, capsys, client_cls):
    site = init_site(tmp_path / "site")
    first = site.snippet.parent
    code, _, _ = _cli(capsys, "analyst", "add", "bob", "--config", str(site.config))
    assert code == 0
    bob = tmp_path / "site-bob"
    serial = x509.load_pem_x509_certificate((bob / "client.crt").read_bytes()).serial_number
    config_text = site.config.read_text()
    daemon = Daemon(site.config)
    try:
        address = daemon.wait_serving().address
        # Bob learned analyst1's token (a shared notebook); with his own certificate it works, like his own token.
        assert _describe(client_cls, address, bob, site.token)[0] is grpc.StatusCode.OK
        assert _describe(client_cls, address, bob, (bob / "bob.token").read_text().strip())[0] is grpc.StatusCode.OK
        code, out, _ = _cli(capsys, "analyst", "revoke", "bob", "--config", str(site.config))
        assert code == 0, out
        # Before: revoking removed bob's token only, and his certificate with analyst1's token still served.
        assert wait_until(lambda: _describe(client_cls, address, bob, site.token)[0] is grpc.StatusCode.UNAUTHENTICATED)
        status, details = _describe(client_cls, address, bob, site.token)
        assert f"serial {serial:x}" in details and "revoked" in details
        assert _describe(client_cls, address, first, site.token)[0] is grpc.StatusCode.OK  # analyst1 unaffected
        assert daemon.proc.poll() is None
    finally:
        code = daemon.stop(timeout=60)
    assert code == 0, daemon.log()
    assert f'client_cert_serial = "{serial:x}"' in config_text  # recorded by analyst add
    config = load_config(site.config)
    assert revoked_serials(config.crl_path, config.tls.client_ca) == {serial}
    assert not config.crl_path.is_relative_to(config.state_dir)
    records = read_audit(site.config.parent / "state" / "audit.jsonl")
    revoke = next(r for r in records if r["call"] == "AnalystRevoke")
    assert revoke["parameters"]["client_cert_serial"] == f"{serial:x}"
    refused = [r for r in records if r["call"] == "Describe" and r["decision"] == "UNAUTHENTICATED"]
    assert refused and refused[0]["analyst"] == "analyst1" and "revoked" in refused[0]["message"]
    reloads = [r["parameters"]["revoked_certificates"] for r in records if r["call"] == "Reload"]
    assert reloads[-1] == 1


def test_a_crl_not_signed_by_the_client_ca_stops_the_daemon_from_starting(tmp_path, capsys):
    site = init_site(tmp_path / "site")
    config = load_config(site.config)
    other = generate_dev_pki(tmp_path / "other", ca_key_dir=tmp_path / "other-ca", client_dir=tmp_path / "other-client")
    revoke_certificate(config.crl_path, other.ca_cert, other.ca_key, "1234")  # a list of another CA
    with pytest.raises(ConfigError, match="site.crl: .*not signed by the client CA"):
        SiteServer(config)
    code, out, _ = _cli(capsys, "check", "--config", str(site.config))  # check names it too
    assert code == 1 and "tls: " in out and "site.crl" in out and "not signed by the client CA" in out
    config.crl_path.write_text("garbage\n")
    with pytest.raises(ConfigError, match="site.crl: .*not a PEM certificate revocation list"):
        SiteServer(config)
    with pytest.raises(ValueError, match="not the private key of the CA certificate"):
        revoke_certificate(config.crl_path, config.tls.client_ca, other.ca_key, "1234")


def test_revoking_without_the_ca_key_changes_nothing(tmp_path, capsys):
    site = init_site(tmp_path / "site")
    before = site.config.read_text()
    ca_key = tmp_path / "site-ca" / "ca.key"
    shutil.move(ca_key, tmp_path / "elsewhere.key")
    code, _, err = _cli(capsys, "analyst", "revoke", "analyst1", "--config", str(site.config))
    assert code == 2 and "ca.key: the CA key that signs client certificates is not there; give --ca-key" in err
    assert site.config.read_text() == before and not load_config(site.config).crl_path.exists()
    code, _, _ = _cli(capsys, "analyst", "revoke", "analyst1", "--config", str(site.config), "--ca-key",
                      str(tmp_path / "elsewhere.key"))
    config = load_config(site.config)
    assert code == 0 and "analyst1" not in config.analysts
    assert len(revoked_serials(config.crl_path, config.tls.client_ca)) == 1
