"""A development PKI made with ``cryptography``: a CA, a server certificate and a client certificate."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["DevPki", "generate_dev_pki", "issue_client_certificate"]

_VALID_DAYS = 365


@dataclass(frozen=True)
class DevPki:
    """Paths of the generated PEM files."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dsroc development"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: Path, data: bytes, *, private: bool = False) -> Path:
    # A private key is created readable by its owner only: never world-readable, not even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        if private:
            os.fchmod(fd, 0o600)  # an existing file keeps its mode under O_CREAT
        f.write(data)
    return path


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _issue(subject: str, key, ca_key, ca_cert, *, usage, sans=()):
    now = dt.datetime.now(dt.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def generate_dev_pki(directory, *, hosts=("localhost", "127.0.0.1"), client_name: str = "analyst",
                     ca_key_dir=None, client_dir=None) -> DevPki:
    """Write a development CA, a server certificate for ``hosts`` and a client certificate (mutual TLS).

    For development and demos only: the keys are unencrypted files (mode 0600). A hospital uses
    certificates from its own PKI.

    Parameters
    ----------
    directory : path
        Created if missing; gets ``ca.crt``, ``ca.key``, ``server.crt``, ``server.key``,
        ``client.crt``, ``client.key``.
    hosts : sequence of str
        DNS names and IP addresses the server certificate is valid for.
    client_name : str
        Common name of the client certificate.
    ca_key_dir, client_dir : path, optional
        Write ``ca.key``, and ``client.crt`` with ``client.key``, there instead (created mode 0700 if
        missing): ``dsroc-site init`` keeps the CA key and the analyst's key out of the served folder.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key_dir, client_dir = (Path(d) if d is not None else directory for d in (ca_key_dir, client_dir))
    for d in (ca_key_dir, client_dir):
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    hosts = list(hosts)
    if not hosts:
        raise ValueError("hosts must name at least one DNS name or IP address")
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = _key()
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("dsroc development CA"))
        .issuer_name(_name("dsroc development CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    sans = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    server_key, client_key = _key(), _key()
    server_cert = _issue(hosts[0], server_key, ca_key, ca_cert, usage=ExtendedKeyUsageOID.SERVER_AUTH, sans=sans)
    client_cert = _issue(client_name, client_key, ca_key, ca_cert, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    pem = serialization.Encoding.PEM
    return DevPki(
        ca_cert=_write(directory / "ca.crt", ca_cert.public_bytes(pem)),
        ca_key=_write(ca_key_dir / "ca.key", _key_pem(ca_key), private=True),
        server_cert=_write(directory / "server.crt", server_cert.public_bytes(pem)),
        server_key=_write(directory / "server.key", _key_pem(server_key), private=True),
        client_cert=_write(client_dir / "client.crt", client_cert.public_bytes(pem)),
        client_key=_write(client_dir / "client.key", _key_pem(client_key), private=True),
    )


def issue_client_certificate(ca_cert, ca_key, name: str, directory) -> tuple[Path, Path]:
    """Issue a client certificate (mutual TLS) for analyst ``name`` with the CA in ``ca_cert`` / ``ca_key``.

    Writes ``client.crt`` and ``client.key`` (mode 0600) into ``directory`` (created if missing) and
    returns their paths. Each analyst gets a key of their own, so that one analyst's key can be
    replaced without touching the others'.
    """
    ca = x509.load_pem_x509_certificate(Path(ca_cert).read_bytes())
    ca_private = serialization.load_pem_private_key(Path(ca_key).read_bytes(), password=None)
    if ca_private.public_key().public_numbers() != ca.public_key().public_numbers():
        raise ValueError(f"{ca_key} is not the private key of the CA certificate {ca_cert}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    key = _key()
    cert = _issue(name, key, ca_private, ca, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    return (_write(directory / "client.crt", cert.public_bytes(serialization.Encoding.PEM)),
            _write(directory / "client.key", _key_pem(key), private=True))
