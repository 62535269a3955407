"""Pairwise masking (Bonawitz et al. 2017): masks cancel only in the full sum of one round's vectors."""

from __future__ import annotations

import secrets

import numpy as np
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from scipy.stats import chisquare

from dsroc.secagg import (PLAUSIBLE_BOUND, check_plausible, expand_seed, mask_vector, pair_seed, remove_pair_masks,
                          round_transcript, seed_commitment, unmask_sum)

_RAW = (serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _round(values: dict, round_id=b"r" * 32, request="req"):
    private = {name: X25519PrivateKey.generate() for name in values}
    keys = {name: k.public_key().public_bytes(*_RAW) for name, k in private.items()}
    transcript = round_transcript(round_id, request, keys)
    seeds = {name: secrets.token_bytes(32) for name in values}
    masked = {name: mask_vector(v, site=name, private=private[name], keys=keys, transcript=transcript,
                                self_seed=seeds[name]) for name, v in values.items()}
    return masked, seeds, private, keys, transcript


def test_the_full_sum_unmasks_exactly():
    rng = np.random.default_rng(1)
    values = {f"site{i}": rng.integers(-50, 5000, 40) for i in range(5)}
    masked, seeds, *_ = _round(values)
    total = unmask_sum(list(masked.values()), list(seeds.values()))
    np.testing.assert_array_equal(total, sum(values.values()))
    np.testing.assert_array_equal(check_plausible(total), total)


def test_both_ends_of_a_pair_derive_one_seed_bound_to_the_round():
    a, b = X25519PrivateKey.generate(), X25519PrivateKey.generate()
    ka, kb = (k.public_key().public_bytes(*_RAW) for k in (a, b))
    t1 = round_transcript(b"1" * 32, "req", {"a": ka, "b": kb})
    assert pair_seed(a, "a", "b", kb, t1) == pair_seed(b, "b", "a", ka, t1)
    for other in (round_transcript(b"2" * 32, "req", {"a": ka, "b": kb}),
                  round_transcript(b"1" * 32, "other", {"a": ka, "b": kb}),
                  round_transcript(b"1" * 32, "req", {"a": ka, "b": kb, "c": ka})):
        assert pair_seed(a, "a", "b", kb, other) != pair_seed(a, "a", "b", kb, t1)


def test_a_missing_site_leaves_every_cell_masked():
    values = {f"site{i}": np.full(30, 100) for i in range(4)}
    masked, seeds, *_ = _round(values)
    names = list(values)[:-1]
    partial = unmask_sum([masked[n] for n in names], [seeds[n] for n in names])
    assert np.all(partial != 300)
    with pytest.raises(ValueError, match="aborted"):
        check_plausible(partial)
    # without the self seeds not even the full sum is revealed
    hidden = unmask_sum(list(masked.values()), [secrets.token_bytes(32)] * 4)
    with pytest.raises(ValueError, match="aborted"):
        check_plausible(hidden)


def test_vectors_of_two_rounds_do_not_combine():
    values = {f"site{i}": np.full(20, 7) for i in range(3)}
    first, seeds1, *_ = _round(values, round_id=b"a" * 32)
    second, seeds2, *_ = _round(values, round_id=b"b" * 32)
    mixed = [first["site0"], second["site1"], second["site2"]]
    with pytest.raises(ValueError, match="aborted"):
        check_plausible(unmask_sum(mixed, [seeds1["site0"], seeds2["site1"], seeds2["site2"]]))


def test_one_masked_vector_is_uniform():
    values = {"a": np.zeros(4096, dtype=np.int64), "b": np.zeros(4096, dtype=np.int64)}
    masked, *_ = _round(values)
    top = (masked["a"] >> np.uint64(60)).astype(np.int64)  # 16 classes of the top four bits
    assert chisquare(np.bincount(top, minlength=16)).pvalue > 1e-4
    assert check_plausible(np.array([PLAUSIBLE_BOUND - 1, -(PLAUSIBLE_BOUND - 1)])).size == 2
    with pytest.raises(ValueError):
        check_plausible(np.array([np.iinfo(np.int64).min]))


def test_chacha20_prg_matches_rfc8439():
    # RFC 8439 section 2.4.2's key with a zero nonce and counter: our PRG's first block is the
    # ChaCha20 block function's output, which we cross-check against a direct implementation.
    key = bytes(range(32))
    block = expand_seed(key, 8).astype("<u8").tobytes()

    def quarter(s, a, b, c, d):
        m = 0xFFFFFFFF
        s[a] = (s[a] + s[b]) & m; s[d] ^= s[a]; s[d] = ((s[d] << 16) | (s[d] >> 16)) & m
        s[c] = (s[c] + s[d]) & m; s[b] ^= s[c]; s[b] = ((s[b] << 12) | (s[b] >> 20)) & m
        s[a] = (s[a] + s[b]) & m; s[d] ^= s[a]; s[d] = ((s[d] << 8) | (s[d] >> 24)) & m
        s[c] = (s[c] + s[d]) & m; s[b] ^= s[c]; s[b] = ((s[b] << 7) | (s[b] >> 25)) & m

    state = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574,
             *np.frombuffer(key, dtype="<u4").tolist(), 0, 0, 0, 0]
    s = list(state)
    for _ in range(10):
        for a, b, c, d in ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
                           (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14)):
            quarter(s, a, b, c, d)
    expected = np.array([(x + y) & 0xFFFFFFFF for x, y in zip(s, state)], dtype="<u4").tobytes()
    assert block == expected


def test_a_low_order_key_and_a_wrong_seed_are_refused():
    a = X25519PrivateKey.generate()
    with pytest.raises(ValueError, match="not a valid X25519"):
        pair_seed(a, "a", "b", bytes(32), b"t" * 32)
    with pytest.raises(ValueError, match="32 bytes"):
        expand_seed(b"short", 4)
    assert seed_commitment(b"t", b"s" * 32) != seed_commitment(b"u", b"s" * 32)


def test_the_survivors_pairwise_seeds_with_dropped_sites_recover_exactly_the_survivors_sum():
    """Every subset of dropped sites (names on both sides of each survivor, so masks added and subtracted)."""
    rng = np.random.default_rng(2)
    values = {f"site{i}": rng.integers(-50, 5000, 25) for i in range(5)}
    masked, seeds, private, keys, transcript = _round(values)
    for dropped in (["site0"], ["site2"], ["site4"], ["site1", "site3"]):
        alive = [n for n in values if n not in dropped]
        total = unmask_sum([masked[n] for n in alive], [seeds[n] for n in alive])
        with pytest.raises(ValueError):  # the dropped sites' pairwise masks are still in it
            check_plausible(total)
        pairs = [(u, v, pair_seed(private[u], u, v, keys[v], transcript)) for u in alive for v in dropped]
        np.testing.assert_array_equal(check_plausible(remove_pair_masks(total, pairs)), sum(values[n] for n in alive))
        garbage = [(u, v, secrets.token_bytes(32) if i == 0 else seed) for i, (u, v, seed) in enumerate(pairs)]
        with pytest.raises(ValueError):  # one wrong pairwise seed (a compromised survivor) spoils the sum
            check_plausible(remove_pair_masks(total, garbage))
