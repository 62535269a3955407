"""The calibration cache: the cached answers are the functions' own, read back only when intact and of this
accountant, bounded, and never computed again once held."""

from __future__ import annotations

import json

import pytest

from dsroc.histogram.stages import release_parts, two_stage_plan
from dsroc.secagg import share_sigma, shares_meet
from dsroc.secagg.calibrations import (ACCOUNTANT_VERSION, CalibrationCache, cached_share_sigma, cached_shares_meet,
                                       cached_two_stage_plan, calibration_key)

PARTS = tuple(release_parts(score_sums=True))


def _never():
    raise AssertionError("computed again although cached")


def test_cached_answers_are_the_functions_and_survive_a_round_trip():
    cache = CalibrationCache()
    sigma = cached_share_sigma(2.0, 1e-5, 4, parts=PARTS, cache=cache)
    assert sigma == share_sigma(2.0, 1e-5, 4, parts=PARTS)
    assert cached_shares_meet(sigma, 2.0, 1e-5, 4, parts=PARTS, cache=cache) is True
    assert cached_shares_meet(sigma * 0.99, 2.0, 1e-5, 4, parts=PARTS, cache=cache) is False
    plan = cached_two_stage_plan(3.0, 1e-3, cache=cache)
    assert plan == two_stage_plan(3.0, 1e-3)
    assert len(cache) == 4 and cache.changed
    again = CalibrationCache.loads(cache.dumps())
    assert not cache.changed and len(again) == 4
    key = calibration_key("share_sigma", epsilon=2.0, delta=1e-5, honest=4, parts=PARTS, hint=None)
    assert again.lookup(key, _never) == sigma  # bit for bit (floats stored by their repr)
    key = calibration_key("shares_meet", sigma=sigma * 0.99, epsilon=2.0, delta=1e-5, honest=4, parts=PARTS)
    assert again.lookup(key, _never) is False
    assert cached_two_stage_plan(3.0, 1e-3, cache=again) == plan
    assert cached_share_sigma(2.0, 1e-5, 4, parts=PARTS, cache=again) == sigma and not again.changed


def test_every_argument_is_in_the_key():
    base = dict(epsilon=2.0, delta=1e-5, honest=4, parts=PARTS, hint=None)
    keys = {calibration_key("share_sigma", **base)}
    for name, value in [("epsilon", 2.0 + 1e-15), ("delta", 2e-5), ("honest", 5), ("parts", ((1, 1.0),)),
                        ("hint", 0.7)]:
        keys.add(calibration_key("share_sigma", **{**base, name: value}))
    keys.add(calibration_key("shares_meet", **base))
    assert len(keys) == 7
    assert json.loads(calibration_key("share_sigma", **base))["accountant"] == ACCOUNTANT_VERSION


def test_an_edited_entry_another_version_and_garbage_are_not_read():
    cache = CalibrationCache()
    sigma = cached_share_sigma(2.0, 1e-5, 4, cache=cache)
    cached_shares_meet(sigma * 0.5, 2.0, 1e-5, 4, cache=cache)
    body = json.loads(cache.dumps())
    assert [e["value"] for e in body["entries"]] == [repr(sigma), False]
    body["entries"][1]["value"] = True  # a too-small share claimed to meet the target, its hash left as it was
    other = json.loads(body["entries"][0]["key"])
    other["accountant"] = ACCOUNTANT_VERSION + 1
    body["entries"].append({**body["entries"][0], "key": json.dumps(other)})
    read = CalibrationCache.loads(json.dumps(body).encode())
    assert len(read) == 1
    assert cached_shares_meet(sigma * 0.5, 2.0, 1e-5, 4, cache=read) is False  # computed again: refused
    for garbage in (b"", b"not json", b"[]", json.dumps({"format": "other", "entries": []}).encode(),
                    json.dumps({"format": "dsroc-calibrations/1", "entries": [{"key": 1}]}).encode()):
        assert len(CalibrationCache.loads(garbage)) == 0


def test_the_cache_is_bounded_and_failures_are_not_kept():
    cache = CalibrationCache(limit=2)
    for i in range(3):
        cache.put(calibration_key("x", i=i), float(i))
    assert len(cache) == 2 and cache.get(calibration_key("x", i=0)) is None
    with pytest.raises(ValueError):
        cached_share_sigma(float("nan"), 1e-5, 4, cache=cache)
    assert len(cache) == 2
    with pytest.raises(ValueError):
        CalibrationCache(limit=0)
    with pytest.raises(TypeError):
        calibration_key("x", value=object())


def test_without_a_cache_the_functions_answer():
    assert cached_share_sigma(2.0, 1e-5, 4) == share_sigma(2.0, 1e-5, 4)
    assert cached_shares_meet(1.0, 2.0, 1e-5, 4) == shares_meet(1.0, 2.0, 1e-5, 4)
