"""The site's keys and certificates: the development PKI, the revocation list, release signing, the noise key."""

from .crl import RevokedCertificates, certificate_serial, revoke_certificate, revoked_serials
from .noise_key import NoiseKey
from .pki import DevPki, generate_dev_pki, issue_client_certificate
from .signing import (ReleaseSigner, ensure_signing_key, load_signing_key, pair_message, parse_public_key,
    public_key_text, sign_release, values_digest)

__all__ = ["RevokedCertificates", "certificate_serial", "revoke_certificate", "revoked_serials", "NoiseKey",
           "DevPki", "generate_dev_pki", "issue_client_certificate", "ReleaseSigner", "ensure_signing_key",
           "load_signing_key", "pair_message", "parse_public_key", "public_key_text", "sign_release",
           "values_digest"]
