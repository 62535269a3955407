"""What a site exposes: plain text only on loopback, its files private to the site account, every command explained."""

from __future__ import annotations

import os

import pytest

from site_node.cli import build_parser
from site_node.config import ConfigError
from site_node.server import SiteServer, is_loopback

def test_plain_text_only_on_loopback(make_site_config):
    assert all(map(is_loopback, ["127.0.0.1:1", "localhost:1", "[::1]:1", "127.0.0.2:0"]))
    assert not any(map(is_loopback, ["0.0.0.0:1", "[::]:1", "10.1.2.3:1", "example.org:1"]))
    with pytest.raises(ConfigError, match="--insecure serves only a loopback address"):
        SiteServer(make_site_config(), insecure=True, address="0.0.0.0:0")


def test_help_texts_explain_every_command():
    parser = build_parser()
    top = parser.format_help()
    commands = ["init", "token", "serve", "check", "budget", "audit", "model", "key", "backup", "restore", "analyst"]
    assert all(c in top for c in commands) and "privacy" in top
    sub = parser._subparsers._group_actions[0].choices
    assert sorted(sub) == sorted(commands)
    serve = sub["serve"].format_help()
    for option in ("--config", "--insecure", "--grace", "--workers", "--listen", "--reset-state"):
        assert option in serve
    assert "loopback" in serve and "SIGTERM" in serve and "NOT_SERVING" in serve
    for name in commands:  # every command says what it does on its own --help, not only in the list
        assert len(sub[name].description or "") > 60, name


def test_keys_ledger_and_audit_are_private_to_the_site_account(server, client, tmp_path):
    from site_node.security.pki import generate_dev_pki

    client.open()
    pki = generate_dev_pki(tmp_path / "pki")
    for path in (pki.ca_key, pki.server_key, pki.client_key, server.config.ledger_path, server.config.audit_path):
        assert os.stat(path).st_mode & 0o077 == 0, path
    assert os.stat(pki.ca_cert).st_mode & 0o044  # certificates are public
