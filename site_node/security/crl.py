"""The site's certificate revocation list: revoked analysts' client certificates, signed by the CA, checked on every call.

``dsroc-site analyst revoke`` removes the analyst's token and adds the serial of their client
certificate to an X.509 CRL signed with the site's CA key (``site.crl``, by default
``<config stem>.crl`` beside the config). The daemon reads it at start and on every reload (SIGHUP),
accepts it only when the CA it trusts for client certificates signed it, and refuses every call made
with a revoked certificate (``UNAUTHENTICATED``, audited), whatever token comes with it: a revoked
analyst cannot keep using the site with another analyst's token, and a copied key is dead too.
gRPC's Python server offers no CRL check in the handshake, so it is done by the interceptor, before
any servicer code and before the call's request is read, on the certificate the TLS layer verified.
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

__all__ = ["certificate_serial", "revoke_certificate", "revoked_serials", "RevokedCertificates"]

_NEXT_UPDATE_DAYS = 3650  # the site is its own relying party: the list is replaced on every revocation


def certificate_serial(path) -> str:
    """The serial number of the PEM certificate at ``path``, in hexadecimal (as the config records it)."""
    return format(x509.load_pem_x509_certificate(Path(path).read_bytes()).serial_number, "x")


def revoked_serials(crl_path, ca_cert) -> frozenset[int]:
    """The serials revoked by the CRL at ``crl_path`` (none when the file does not exist).

    ValueError when the file is not a CRL issued and signed by the CA in ``ca_cert``.
    """
    crl_path = Path(crl_path)
    if not crl_path.exists():
        return frozenset()
    ca = x509.load_pem_x509_certificate(Path(ca_cert).read_bytes())
    try:
        crl = x509.load_pem_x509_crl(crl_path.read_bytes())
    except ValueError:
        raise ValueError(f"{crl_path}: not a PEM certificate revocation list") from None
    if crl.issuer != ca.subject or not crl.is_signature_valid(ca.public_key()):
        raise ValueError(f"{crl_path}: the revocation list is not signed by the client CA {ca_cert}")
    return frozenset(entry.serial_number for entry in crl)


def revoke_certificate(crl_path, ca_cert, ca_key, serial: str) -> None:
    """Add the certificate ``serial`` (hexadecimal) to the CRL at ``crl_path``, re-signed with ``ca_key``."""
    crl_path = Path(crl_path)
    ca = x509.load_pem_x509_certificate(Path(ca_cert).read_bytes())
    key = serialization.load_pem_private_key(Path(ca_key).read_bytes(), password=None)
    if key.public_key().public_numbers() != ca.public_key().public_numbers():
        raise ValueError(f"{ca_key} is not the private key of the CA certificate {ca_cert}")
    revoked = set(revoked_serials(crl_path, ca_cert)) | {int(serial, 16)}
    now = dt.datetime.now(dt.timezone.utc)
    builder = (x509.CertificateRevocationListBuilder().issuer_name(ca.subject).last_update(now)
               .next_update(now + dt.timedelta(days=_NEXT_UPDATE_DAYS)))
    for number in sorted(revoked):
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(number).revocation_date(now).build())
    pem = builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    partial = crl_path.with_name(crl_path.name + ".partial")
    partial.write_bytes(pem)
    partial.replace(crl_path)  # a daemon reloading meanwhile reads the old list or the new one, never half


class RevokedCertificates:
    """The serials a daemon refuses, and the check of one call's peer certificate (PEM from the auth context)."""

    def __init__(self, serials=frozenset()):
        self._serials = frozenset(serials)
        self._cache: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def replace(self, serials) -> None:
        """Refuse ``serials`` from the next call on (a reload)."""
        self._serials = frozenset(serials)

    def __bool__(self) -> bool:
        """Whether any certificate is revoked (else no call's certificate needs reading)."""
        return bool(self._serials)

    def revoked(self, peer_pem: bytes | None) -> int | None:
        """The serial of ``peer_pem`` if it is revoked, else None (also without a certificate)."""
        if not self._serials or not peer_pem:
            return None
        with self._lock:
            serial = self._cache.get(peer_pem)
            if serial is None:
                serial = x509.load_pem_x509_certificate(peer_pem).serial_number
                if len(self._cache) > 1024:  # a few analysts' certificates; bounded anyway
                    self._cache.clear()
                self._cache[peer_pem] = serial
        return serial if serial in self._serials else None
