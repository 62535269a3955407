"""The key that turns a ledger's stored seed into a paper-protocol release's noise; kept outside the ledger file.

The ledger stores a release of noisy scores as a 256-bit seed and digests, and regenerates the values
on a replay. If the seed alone regenerated the noise, anyone holding a copy of the ledger (a backup,
an export) could subtract it from the released values and read the patients' exact scores. So the
noise generator is seeded with HMAC-SHA256(key, seed), the key being a file outside ``state/``
(``site.noise_key``, by default ``<config stem>.noise.key`` beside the config, mode 0600): a copy of
``state/`` without it regenerates nothing. A lost key only makes earlier releases irreproducible, and
the ledger then refuses to replay them (no new values, no new charge).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from pathlib import Path

import numpy as np

__all__ = ["NoiseKey"]

log = logging.getLogger("dsroc.site")
_KEY_BYTES = 32


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

    def generator(self, seed: bytes) -> np.random.Generator:
        """The noise generator of the release whose ledger seed is ``seed``: seeded with HMAC-SHA256(key, seed)."""
        return np.random.default_rng(int.from_bytes(hmac.new(self._key, seed, hashlib.sha256).digest(), "big"))
