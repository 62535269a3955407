"""The sealed form of a paper-protocol release (site_node.protocols.paper.sealed): the format ledgers already hold, both ways."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from site_node.store.ledger_api import ReleaseKey
from site_node.security.noise_key import NoiseKey
from site_node.protocols.paper.sealed import _associated, open_points, seal_points


def _plain_as_first_written(negatives, positives) -> bytes:
    """The plaintext as the first sealing code wrote it (header n0, n1; deflated int64 differences)."""
    parts = [np.diff(np.asarray(p, dtype=np.int64), prepend=np.int64(0)) for p in (negatives, positives)]
    return struct.pack("<QQ", parts[0].size, parts[1].size) + zlib.compress(
        np.concatenate(parts).astype("<i8").tobytes(), 1)


def test_sealed_points_are_the_format_ledgers_hold_and_open_both_ways(tmp_path):
    key = NoiseKey(tmp_path / "noise.key")
    release = ReleaseKey("p", "column:pred", "y", "scores", '{"epsilon": 1.0}')
    rng = np.random.default_rng(2)
    negatives = np.sort(rng.integers(-(2**40), 2**40, 5000))
    positives = np.sort(rng.integers(-50, 20_000, 3000))
    sealed = seal_points(key, release, negatives, positives)
    assert key.open(sealed, _associated(release)) == _plain_as_first_written(negatives, positives)
    older = key.seal(_plain_as_first_written(negatives, positives), _associated(release))
    for payload in (sealed, older):
        n, p = open_points(key, release, payload)
        assert np.array_equal(n, negatives) and np.array_equal(p, positives) and n.dtype == np.int64
    empty = open_points(key, release, seal_points(key, release, negatives[:0], positives[:1]))
    assert empty[0].size == 0 and np.array_equal(empty[1], positives[:1])
