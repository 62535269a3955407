"""Signed releases: each site signs its noisy-score releases (Ed25519) and accepts survivor functions only
as unions of releases signed by itself or a peer listed in its config.

Without this an analyst could upload any S~0 (a single value c, say) and read class counts at c from the
placement moments, bisecting a patient's score far below the threshold lattice.
With it every cut point the paper protocol evaluates is a noisy score some federation site released
under its ledger.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = ["PAIR_FIELDS", "SIGNED_FIELDS", "ReleaseSigner", "ensure_signing_key", "load_signing_key", "public_key_text",
           "parse_public_key", "values_digest", "release_message", "pair_message", "sign_release"]

# The ReleaseInfo fields a signature covers, in this order.
SIGNED_FIELDS = ("site", "population", "dataset", "source", "outcome", "release_id", "score_class", "epsilon",
                 "delta", "sensitivity", "n", "values_sha256")
# What a pair signature covers: both classes of one release at once (ReleaseInfo.pair_signature), so that a site
# verifies one signature for a peer's two segments of an upload instead of two.
PAIR_FIELDS = ("site", "population", "dataset", "source", "outcome", "release_id", "epsilon", "delta", "sensitivity",
               "n_negatives", "negatives_sha256", "n_positives", "positives_sha256")
_NEGATIVES = 1  # dsroc.v1.SCORE_CLASS_NEGATIVES
_PAIR_TAG = "dsroc_release_pair"
_RELEASE_TAG = "dsroc_release"


def ensure_signing_key(path) -> Ed25519PrivateKey:
    """The site's release-signing key at ``path``, created (mode 0600) if it does not exist yet."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, pem)
        finally:
            os.close(fd)
    return load_signing_key(path)


def load_signing_key(path) -> Ed25519PrivateKey:
    """Read a PEM Ed25519 private key."""
    key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path}: not an Ed25519 private key")
    return key


def public_key_text(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """The public key as base64 of its 32 raw bytes: what peers put in ``[peers.NAME] public_key``."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return base64.b64encode(public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()


def parse_public_key(text: str) -> Ed25519PublicKey:
    """A public key from :func:`public_key_text`'s form; ``ValueError`` if it is not one."""
    try:
        raw = base64.b64decode(text, validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, TypeError):
        raise ValueError("must be the base64 of a 32-byte Ed25519 public key (dsroc-site init prints it)") from None


def values_digest(values: np.ndarray) -> str:
    """SHA-256 of the released values as little-endian float64, in release order (ascending)."""
    return hashlib.sha256(memoryview(np.ascontiguousarray(values, dtype="<f8"))).hexdigest()  # no copy of the bytes


def release_message(fields: dict) -> bytes:
    """The canonical bytes a signature covers (JSON of :data:`SIGNED_FIELDS`, floats as their repr)."""
    return _canonical(_RELEASE_TAG, SIGNED_FIELDS, fields)


def pair_message(fields: dict) -> bytes:
    """The canonical bytes a pair signature covers (JSON of :data:`PAIR_FIELDS`, floats as their repr)."""
    return _canonical(_PAIR_TAG, PAIR_FIELDS, fields)


def _canonical(tag: str, names, fields: dict) -> bytes:
    return _message(tag, _body(names, fields))


def _body(names, fields: dict) -> dict:
    """What a signature covers, before its JSON: the fields, floats as their repr."""
    return {name: repr(float(fields[name])) if name in ("epsilon", "delta", "sensitivity") else fields[name]
            for name in names}


def _message(tag: str, body: dict) -> bytes:
    return json.dumps({tag: 1, **body}, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _pair_body(segment) -> dict:
    """What one class's ``ReleaseInfo``'s pair signature covers (:data:`PAIR_FIELDS`, floats as their repr): its own
    ``n`` and ``values_sha256`` in its class's place, ``other_n`` and ``other_values_sha256`` in the other's."""
    own, other = (int(segment.n), segment.values_sha256), (int(segment.other_n), segment.other_values_sha256)
    (n0, sha0), (n1, sha1) = (own, other) if segment.score_class == _NEGATIVES else (other, own)
    return {"site": segment.site, "population": segment.population, "dataset": segment.dataset,
            "source": segment.source, "outcome": segment.outcome, "release_id": segment.release_id,
            "epsilon": repr(float(segment.epsilon)), "delta": repr(float(segment.delta)),
            "sensitivity": repr(float(segment.sensitivity)), "n_negatives": n0, "negatives_sha256": sha0,
            "n_positives": n1, "positives_sha256": sha1}


def sign_release(key: Ed25519PrivateKey, fields: dict) -> bytes:
    """Sign a release's fields."""
    return key.sign(release_message(fields))


class ReleaseSigner:
    """A site's signing key and its peers' public keys: signs its releases, verifies survivor segments.

    Parameters
    ----------
    name : str
        This site's name (``site.name``): what its signatures say.
    key_path : path
        Its Ed25519 private key (created if missing).
    peers : mapping of str to str
        Peer site name to public key text (``[peers.NAME] public_key``).
    """

    #: Signatures remembered as valid (a validation re-sends every site's release: 2 K^2 checks per
    #: validation over K sites, ~0.1-0.2 ms each; a repeat of the same signed message costs none).
    VERIFIED_CACHE = 4096

    def __init__(self, name: str, key_path, peers: dict):
        self.name = name
        self._key = ensure_signing_key(key_path)
        self._keys = {name: self._key.public_key(), **{p: parse_public_key(k) for p, k in peers.items()}}
        self._verified: OrderedDict[tuple[str, tuple, bytes], None] = OrderedDict()
        self._verified_lock = threading.Lock()

    def _valid(self, segment) -> bool:
        """Whether a ``ReleaseInfo`` carries its site's signature: its pair signature when it has one (over both
        classes, :func:`pair_message`), else its own (:func:`release_message`). Valid signatures are remembered by
        what they cover and the signature (the message is a function of it, so a hit is the very message verified
        before): a pair-signed release's two segments cost one verification, and neither is serialized."""
        if segment.pair_signature:
            tag, body, signature = _PAIR_TAG, _pair_body(segment), bytes(segment.pair_signature)
        else:
            tag, signature = _RELEASE_TAG, bytes(segment.signature)
            body = _body(SIGNED_FIELDS, {name: getattr(segment, name) for name in SIGNED_FIELDS})
        key = (tag, tuple(body.items()), signature)  # the body (floats as their repr) fixes the message
        with self._verified_lock:
            if key in self._verified:
                self._remember(key)
                return True
        message = _message(tag, body)
        try:
            self._keys[segment.site].verify(signature, message)
        except InvalidSignature:
            return False
        with self._verified_lock:
            self._remember(key)
        return True

    def _remember(self, key) -> None:
        self._verified[key] = None
        self._verified.move_to_end(key)
        while len(self._verified) > self.VERIFIED_CACHE:
            self._verified.popitem(last=False)

    def sign_pair(self, fields: dict) -> bytes:
        """Sign both classes of a release of this site (:data:`PAIR_FIELDS` without ``site``, which is added)."""
        return self._key.sign(pair_message({**fields, "site": self.name}))

    @property
    def public_key(self) -> str:
        """This site's public key text."""
        return public_key_text(self._key)

    def sign(self, fields: dict) -> bytes:
        """Sign a release of this site (``fields`` without ``site``, which is added)."""
        return sign_release(self._key, {**fields, "site": self.name})

    def sign_message(self, message: bytes) -> bytes:
        """Sign a protocol message (canonical bytes that name this site and their purpose)."""
        return self._key.sign(bytes(message))

    def knows(self, site: str) -> bool:
        """Whether ``site`` is this site or a peer in its config (a key to verify its signatures)."""
        return site in self._keys

    def verify_message(self, site: str, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is ``site``'s signature of ``message`` (False for a site without a known key)."""
        if site not in self._keys:
            return False
        try:
            self._keys[site].verify(bytes(signature), bytes(message))
            return True
        except InvalidSignature:
            return False

    def verify_header(self, segments, n: int, score_class: int) -> None:
        """Check the signed releases an upload announces, before any of its values is read.

        Each segment must be of ``score_class``, signed by this site or a configured peer (one segment
        per site), and the segments' sizes must add up to ``n``: an upload is buffered only once it is
        known to carry at most what the federation's sites released. Raises ``InvalidArgument`` or
        ``PermissionDenied``.
        """
        from ..errors import InvalidArgument, PermissionDenied

        if not segments:
            raise PermissionDenied(
                "signed releases: this site accepts a survivor function only as the union of signed noisy releases "
                "of the federation's sites (header.segments: the ReleaseInfo of each site's release, as received)")
        _check_sizes(segments, n)
        seen = set()
        for k, s in enumerate(segments):
            where = f"header.segments[{k}] (site {s.site!r})"
            if s.score_class != score_class:
                raise InvalidArgument(f"{where}: a release of another score class than the upload's")
            if s.site in seen:
                raise PermissionDenied(f"signed releases: {where}: one release per site in a survivor function")
            seen.add(s.site)
            if s.site not in self._keys:
                raise PermissionDenied(f"signed releases: {where}: not this site nor a peer in its config")
            if not self._valid(s):
                raise PermissionDenied(f"signed releases: {where}: the signature does not match the release and its "
                                       "values (send each site's released values unchanged, in release order)")

    def verify_segments(self, segments, values: np.ndarray, score_class: int, known_release, *,
                        header_checked: bool = False) -> None:
        """Check that ``values`` is the concatenation of the signed releases ``segments`` (ReleaseInfo messages).

        :meth:`verify_header` (with ``header_checked``, made already for these segments: only their sizes against
        ``values``), then each segment's values must be the signed ones and this site's own segment must be in
        its ledger (``known_release(release_id)``). Raises ``InvalidArgument`` or ``PermissionDenied``.
        """
        from ..errors import PermissionDenied

        if header_checked:
            _check_sizes(segments, values.size)
        else:
            self.verify_header(segments, values.size, score_class)
        offset = 0
        for k, s in enumerate(segments):
            part = values[offset:offset + int(s.n)]
            offset += int(s.n)
            where = f"header.segments[{k}] (site {s.site!r})"
            if s.values_sha256 != values_digest(part):
                raise PermissionDenied(f"signed releases: {where}: the signature does not match the release and its "
                                       "values (send each site's released values unchanged, in release order)")
            if s.site == self.name and not known_release(s.release_id):
                raise PermissionDenied(f"signed releases: {where}: release {s.release_id!r} is not in this site's ledger")


def _check_sizes(segments, n: int) -> None:
    """Refuse segments whose sizes do not add up to the ``n`` scores of the upload (``InvalidArgument``)."""
    from ..errors import InvalidArgument

    announced = sum(int(s.n) for s in segments)
    if announced != n:
        raise InvalidArgument(f"header.n is {n} (the scores of the upload) but header.segments announce {announced}")
