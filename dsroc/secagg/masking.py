"""Pairwise and self masks of Bonawitz et al. (CCS 2017) on X25519, HKDF-SHA256 and ChaCha20, bound to one round."""

from __future__ import annotations

import hashlib
import json
from typing import Mapping

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["MASK_BITS", "SEED_BYTES", "PLAUSIBLE_BOUND", "request_digest", "advertisement_message", "round_transcript",
           "receipt_message", "survivors_message", "masked_digest", "seed_commitment", "expand_seed", "pair_seed",
           "mask_vector", "unmask_sum", "remove_pair_masks", "check_plausible"]

#: Every vector is masked modulo 2^MASK_BITS (numpy uint64 arithmetic wraps there).
MASK_BITS = 64
SEED_BYTES = 32
#: Largest magnitude a cell of an honest sum can have: counts and noise are far below 2^40, while a
#: cell of a sum spoiled by one garbage vector is uniform on 2^64 values (inside with chance 2^-23).
PLAUSIBLE_BOUND = 2**40
_LABEL = b"dsroc secagg v1"


def _canonical(body: dict) -> bytes:
    return json.dumps({"dsroc_secagg": 1, **body}, sort_keys=True, separators=(",", ":")).encode("utf-8")


def request_digest(request: Mapping) -> str:
    """SHA-256 of a round's request (grid, epsilon, delta, sites, colluders): what every site must agree on."""
    return hashlib.sha256(_canonical({"request": dict(request)})).hexdigest()


def advertisement_message(site: str, round_id: bytes, request_sha256: str, public_key: bytes) -> bytes:
    """What a site signs (Ed25519) when it advertises its round key: the round, the request and the key."""
    return _canonical({"advertise": {"site": site, "round": bytes(round_id).hex(), "request": request_sha256,
                                     "key": bytes(public_key).hex()}})


def round_transcript(round_id: bytes, request_sha256: str, keys: Mapping[str, bytes]) -> bytes:
    """The round's binding: SHA-256 over the round id, the request and every site's name and round key.

    Every key derivation of the round uses it, so masks made for another round, another request or
    another set of sites never cancel against this round's.
    """
    body = {"round": bytes(round_id).hex(), "request": request_sha256,
            "sites": {name: bytes(key).hex() for name, key in sorted(keys.items())}}
    return hashlib.sha256(_canonical({"transcript": body})).digest()


def receipt_message(site: str, transcript: bytes, masked_sha256: str, commitment: str) -> bytes:
    """What a site signs with its masked vector: the round, the vector's digest and its self-seed commitment."""
    return _canonical({"receipt": {"site": site, "transcript": bytes(transcript).hex(), "masked": masked_sha256,
                                   "commitment": commitment}})


def survivors_message(site: str, transcript: bytes, survivors: Mapping[str, str]) -> bytes:
    """What a site signs when it confirms a round's surviving sites: the round and each survivor's masked-vector
    digest. A site signs one such set per round; it reveals anything only given every survivor's signature on it."""
    return _canonical({"survivors": {"site": site, "transcript": bytes(transcript).hex(),
                                     "masked": {name: survivors[name] for name in sorted(survivors)}}})


def masked_digest(masked: np.ndarray) -> str:
    """SHA-256 of a masked vector as little-endian uint64."""
    return hashlib.sha256(np.ascontiguousarray(masked, dtype="<u8").tobytes()).hexdigest()


def seed_commitment(transcript: bytes, seed: bytes) -> str:
    """Commitment to a self-mask seed (SHA-256 over the transcript and the 256-bit seed)."""
    return hashlib.sha256(_LABEL + b" commit" + bytes(transcript) + bytes(seed)).hexdigest()


def expand_seed(seed: bytes, length: int) -> np.ndarray:
    """The PRG: ChaCha20 keystream of a 256-bit seed (zero nonce; each seed is used once) as ``length`` uint64."""
    if len(seed) != SEED_BYTES:
        raise ValueError(f"a mask seed has {SEED_BYTES} bytes, got {len(seed)}")
    stream = Cipher(algorithms.ChaCha20(bytes(seed), bytes(16)), mode=None).encryptor().update(bytes(8 * length))
    return np.frombuffer(stream, dtype="<u8").astype(np.uint64)


def pair_seed(private: X25519PrivateKey, site: str, peer: str, peer_key: bytes, transcript: bytes) -> bytes:
    """The seed both ``site`` and ``peer`` derive for their pairwise mask: HKDF-SHA256 of the X25519 secret.

    Salt: the round transcript; info: the label and the pair's names in order. ``ValueError`` for a
    peer key that is not a valid X25519 public key (including low-order points).
    """
    try:
        shared = private.exchange(X25519PublicKey.from_public_bytes(bytes(peer_key)))
    except ValueError:
        raise ValueError(f"site {peer!r}'s round key is not a valid X25519 public key") from None
    first, second = sorted((site, peer))
    info = _LABEL + b" pair " + json.dumps([first, second]).encode("utf-8")
    return HKDF(algorithm=hashes.SHA256(), length=SEED_BYTES, salt=bytes(transcript), info=info).derive(shared)


def mask_vector(values: np.ndarray, *, site: str, private: X25519PrivateKey, keys: Mapping[str, bytes],
                transcript: bytes, self_seed: bytes) -> np.ndarray:
    """Bonawitz et al.'s masked input ``y = x + PRG(b) + sum_{v > u} PRG(s_uv) - sum_{v < u} PRG(s_uv)`` mod 2^64.

    ``values`` are the site's integers (noisy counts); ``keys`` every site's round key, this site's included;
    sites are ordered by name.
    """
    values = np.asarray(values, dtype=np.int64)
    out = values.view(np.uint64) + expand_seed(self_seed, values.size)
    for peer, key in keys.items():
        if peer == site:
            continue
        mask = expand_seed(pair_seed(private, site, peer, key, transcript), values.size)
        out = out + mask if site < peer else out - mask
    return out


def unmask_sum(masked: list[np.ndarray], self_seeds: list[bytes]) -> np.ndarray:
    """The sum of the sites' integers: the masked vectors summed (pairwise masks cancel) minus every self mask."""
    if not masked or len(masked) != len(self_seeds):
        raise ValueError("one masked vector and one self seed per site are needed")
    length = masked[0].size
    total = np.zeros(length, dtype=np.uint64)
    for vector, seed in zip(masked, self_seeds):
        if vector.size != length:
            raise ValueError("masked vectors of different lengths")
        total = total + np.asarray(vector, dtype=np.uint64) - expand_seed(seed, length)
    return total.view(np.int64)


def remove_pair_masks(total: np.ndarray, pair_seeds) -> np.ndarray:
    """``total`` (a sum over the surviving sites, self masks removed) less the survivors' pairwise masks with the
    sites that dropped out: ``pair_seeds`` holds ``(site, peer, seed)`` for each survivor ``site`` and dropped
    ``peer`` (the seed ``site`` revealed; :func:`mask_vector` added its mask when ``site < peer``, else subtracted it)."""
    out = np.asarray(total, dtype=np.int64).view(np.uint64).copy()
    for site, peer, seed in pair_seeds:
        mask = expand_seed(bytes(seed), out.size)
        out = out - mask if site < peer else out + mask
    return out.view(np.int64)


def check_plausible(total: np.ndarray) -> np.ndarray:
    """``total`` if every cell is below :data:`PLAUSIBLE_BOUND` in magnitude, else ``ValueError`` (a garbage vector)."""
    if np.any((total >= PLAUSIBLE_BOUND) | (total <= -PLAUSIBLE_BOUND)):
        raise ValueError("the unmasked sum is not a sum of counts (a site sent a masked vector that does not "
                         "belong to this round): the round is aborted")
    return total
