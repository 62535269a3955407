"""The key that seals a paper-protocol release in the ledger (AES-256-GCM); kept outside the ledger file.

The paper protocol's noise comes from an exact sampler on the operating system's CSPRNG, which no
seed reproduces, so the ledger keeps what it released (the noisy lattice points) to replay it. Kept
in the clear, a copy of the ledger (a backup, an export) beside the patients' scores would give the
noise of every release; the ledger therefore keeps them encrypted with a key derived from a file
outside ``state/`` (``site.noise_key``, by default ``<config stem>.noise.key`` beside the config,
mode 0600), bound to the release they belong to (the associated data): a copy of ``state/`` without
the key reveals nothing, and a sealed release moved to another ledger row does not open. A lost key
only makes earlier releases unreadable, and the ledger then refuses to replay them (no new values,
no new charge).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["NoiseKey"]

log = logging.getLogger("dsroc.site")
_KEY_BYTES = 32
_NONCE_BYTES = 12
_MAGIC = b"dsroc-sealed-1"  # also the label of the derived encryption key


class NoiseKey:
    """The site's noise key at ``path`` (created, mode 0600, if missing).

    Parameters
    ----------
    path : path
        The key file: 64 hexadecimal digits.
    """

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, (secrets.token_hex(_KEY_BYTES) + "\n").encode())
            finally:
                os.close(fd)
            log.info("created the noise key %s (keep it with the config, outside state/; releases made before a "
                     "key was lost cannot be replayed)", self.path)
        text = self.path.read_text(encoding="utf-8").strip()
        try:
            self._key = bytes.fromhex(text)
        except ValueError:
            self._key = b""
        if len(self._key) != _KEY_BYTES:
            raise ValueError(f"{self.path}: not a noise key (64 hexadecimal digits)")

    def seal(self, plaintext: bytes, associated: bytes) -> bytes:
        """``plaintext`` encrypted and authenticated (AES-256-GCM, fresh 96-bit nonce), bound to ``associated``."""
        nonce = os.urandom(_NONCE_BYTES)
        return _MAGIC + nonce + self._aead().encrypt(nonce, plaintext, associated)

    def open(self, sealed: bytes, associated: bytes) -> bytes:
        """The plaintext of :meth:`seal`; ValueError when the key or ``associated`` differ or the bytes changed."""
        head = len(_MAGIC) + _NONCE_BYTES
        if not sealed.startswith(_MAGIC) or len(sealed) < head:
            raise ValueError("not a sealed release")
        try:
            return self._aead().decrypt(sealed[len(_MAGIC):head], sealed[head:], associated)
        except InvalidTag:
            raise ValueError(f"the sealed release does not open with the noise key {self.path} "
                             "(the key was replaced, or the ledger row was altered)") from None

    def _aead(self) -> AESGCM:
        # A key for this use only, derived from the file's key.
        return AESGCM(hmac.new(self._key, _MAGIC, hashlib.sha256).digest())
