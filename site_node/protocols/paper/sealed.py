"""A paper-protocol release as the ledger keeps it: both classes' sorted noisy lattice points, compressed and sealed.

The points are sorted, so consecutive differences are small non-negative integers: delta-encoded
and deflated, a million scores take a few megabytes or less (8 MB as raw float64). The result is
sealed with the site's noise key (:mod:`site_node.security.noise_key`), bound to the release's ledger key.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import astuple

import numpy as np

from ...security.noise_key import NoiseKey
from ...store.ledger_api import ReleaseKey

__all__ = ["seal_points", "open_points"]

_HEADER = struct.Struct("<QQ")  # n0, n1


def _associated(key: ReleaseKey) -> bytes:
    return json.dumps(astuple(key)).encode()


def seal_points(noise_key: NoiseKey, key: ReleaseKey, negatives: np.ndarray, positives: np.ndarray) -> bytes:
    """Seal the sorted int64 lattice points of both classes of the release ``key``."""
    n0, n1 = len(negatives), len(positives)
    diffs = np.empty(n0 + n1, dtype="<i8")  # both classes' differences in one array, compressed without a copy
    for points, out in ((negatives, diffs[:n0]), (positives, diffs[n0:])):
        points = np.asarray(points, dtype=np.int64)
        if points.size:
            out[0] = points[0]
            np.subtract(points[1:], points[:-1], out=out[1:])
    plain = _HEADER.pack(n0, n1) + zlib.compress(memoryview(diffs).cast("B"), 1)
    return noise_key.seal(plain, _associated(key))


def open_points(noise_key: NoiseKey, key: ReleaseKey, sealed: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The sorted lattice points ``(negatives, positives)`` of :func:`seal_points`; ValueError if they do not open."""
    plain = noise_key.open(sealed, _associated(key))
    n0, n1 = _HEADER.unpack_from(plain)
    diffs = np.frombuffer(zlib.decompress(memoryview(plain)[_HEADER.size:]), dtype="<i8")
    if diffs.size != n0 + n1:
        raise ValueError("a sealed release holds the wrong number of points")
    return np.cumsum(diffs[:n0], dtype=np.int64), np.cumsum(diffs[n0:], dtype=np.int64)
