"""TLS and mutual TLS with the development PKI, and the dsroc-site CLI run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.interceptors.auth import hash_token, new_token
from site_node.config import ConfigError, load_config
from site_node.cli.init import init_site
from site_node.security.pki import generate_dev_pki
from site_node.server import SiteServer
from site_node.testing import Daemon, running_server, running_site

ROOT = Path(__file__).resolve().parents[2]


def test_hash_and_new_token():
    import hashlib

    assert hash_token("abc") == hashlib.sha256(b"abc").hexdigest()
    a, b = new_token(), new_token()
    assert a != b and len(a) > 40
    with pytest.raises(ValueError):
        hash_token("")


def test_mutual_tls_with_the_dev_pki(tmp_path, client_factory):
    result = init_site(tmp_path / "site")
    config = load_config(result.config)
    pki = result.pki
    with running_site(config) as address:
        ok = client_factory(address, token=result.token, ca_cert=pki.ca_cert, client_cert=pki.client_cert,
                            client_key=pki.client_key)
        assert [d.name for d in ok.Describe(pb.DescribeRequest()).datasets] == ["sample"]
        # No client certificate: the TLS handshake fails under mutual TLS.
        no_cert = client_factory(address, token=result.token, ca_cert=pki.ca_cert)
        with pytest.raises(grpc.RpcError) as info:
            no_cert.Describe(pb.DescribeRequest())
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        # A certificate from another CA is not trusted by the client.
        other = generate_dev_pki(tmp_path / "other")
        wrong_ca = client_factory(address, token=result.token, ca_cert=other.ca_cert,
                                  client_cert=pki.client_cert, client_key=pki.client_key)
        with pytest.raises(grpc.RpcError):
            wrong_ca.Describe(pb.DescribeRequest())
        # Plain text to a TLS port fails.
        plain = client_factory(address, token=result.token)
        with pytest.raises(grpc.RpcError):
            plain.Describe(pb.DescribeRequest())


def test_tls_is_required_unless_insecure(make_site_config):
    config = make_site_config(tls=False)
    with pytest.raises(ConfigError, match="tls: TLS is on by default"):
        SiteServer(config, address="127.0.0.1:0")
    with running_server(config, insecure=True) as srv:
        assert srv.port > 0


def test_cli_init_serve_budget_audit(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cli = [sys.executable, "-m", "site_node"]
    out = subprocess.run(cli + ["init", str(tmp_path / "s"), "--listen", "127.0.0.1:0"], capture_output=True,
                         text=True, env=env, check=True).stdout
    token = out.split("SHA-256):")[1].split()[0]
    config_text = (tmp_path / "s" / "site.toml").read_text()
    assert hash_token(token) in config_text and token not in config_text

    with Daemon(tmp_path / "s" / "site.toml") as daemon:
        address = daemon.wait_serving().address
        adir = tmp_path / "s-analyst1"  # the analyst's folder lies beside the site folder
        daemon.wait_healthy(ca_cert=adir / "ca.crt", client_cert=adir / "client.crt", client_key=adir / "client.key")
        creds = dict(root_certificates=(adir / "ca.crt").read_bytes(), private_key=(adir / "client.key").read_bytes(),
                     certificate_chain=(adir / "client.crt").read_bytes())
        with grpc.secure_channel(address, grpc.ssl_channel_credentials(**creds)) as ch:
            from dsroc.v1 import site_pb2_grpc

            stub = site_pb2_grpc.SiteServiceStub(ch)
            md = [("authorization", f"Bearer {token}")]
            s = stub.OpenSession(pb.OpenSessionRequest(dataset="sample", outcome="y",
                                                       score=pb.ScoreSource(score_column="pred")), metadata=md)
            # init serves the histogram protocol only
            r = stub.ReleaseHistogram(pb.HistogramRequest(session_id=s.session_id, epsilon=3, delta=0.001, n_bins=20),
                                      metadata=md)
            assert not r.repeated and len(r.negatives) == 20
        assert daemon.stop(timeout=20) == 0
        logs = [json.loads(x) for x in daemon.log().splitlines() if x.startswith("{")]
        assert any("received SIGTERM" in e["message"] for e in logs) and logs[-1]["message"].endswith("stopped")

    config = str(tmp_path / "s" / "site.toml")
    budget = json.loads(subprocess.run(cli + ["budget", "--config", config, "--json"], capture_output=True, text=True,
                                       env=env, check=True).stdout)
    assert budget["budgets"][0]["releases"] == 1 and budget["releases"][0]["epsilon"] == 3
    audit = subprocess.run(cli + ["audit", "--config", config, "--last", "1"], capture_output=True, text=True,
                           env=env, check=True).stdout
    assert "ReleaseHistogram" in audit and "OpenSession" not in audit
    bad = subprocess.run(cli + ["serve", "--config", str(tmp_path / "missing.toml")], capture_output=True,
                         text=True, env=env)
    assert bad.returncode == 2 and "config file not found" in bad.stderr
    helptext = subprocess.run(cli + ["--help"], capture_output=True, text=True, env=env, check=True).stdout
    assert "dsroc-site init" in helptext and "serve" in helptext


def test_cli_check_reports_per_column_problems(tmp_path, capsys):
    import pandas as pd

    from site_node.cli import main

    result = init_site(tmp_path / "s")
    assert main(["check", "--config", str(result.config)]) == 0
    assert "no problems found" in capsys.readouterr().out
    frame = pd.read_csv(result.dataset)
    frame.loc[:4, "y"] = 3
    frame.to_csv(result.dataset, index=False)
    assert main(["check", "--config", str(result.config)]) == 1
    out = capsys.readouterr().out
    assert "y: dataset 'sample', outcome column 'y': labels must be 0 or 1" in out and "pred: ok" in out
