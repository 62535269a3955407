"""Share calibrations and checks kept across processes: a small keyed, content-hashed cache of their results.

A share's calibration (:func:`dsroc.secagg.share_sigma`) and a site's check of a proposed share
(:func:`dsroc.secagg.shares_meet`) are pure functions of the round's (epsilon, delta), its honest shares, its parts
and the accountant's grid: each costs tenths of a CPU-second of privacy-loss distributions, and a validation repeats
them whenever it asks again what it asked before (another model, another outcome, the same request tomorrow).
:class:`CalibrationCache` holds their results by a key naming the function, every argument and
:data:`ACCOUNTANT_VERSION`, each entry with the SHA-256 of its key and value: an entry whose hash does not match
(edited, cut short) is dropped when read. The cache is an answer its owner computed: a site keeps its own (it
trusts an entry because only it writes that file, beside its ledger) and never another party's; the analyst's
share proposals are checked by every site whatever cache they came from. This module does no I/O: the owner
stores :meth:`CalibrationCache.dumps` where it keeps its state.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Callable

__all__ = ["ACCOUNTANT_VERSION", "CalibrationCache", "calibration_key", "cached_share_sigma", "cached_shares_meet",
           "cached_two_stage_plan"]

#: Bumped whenever the accountant's answers change (its grid, its PLDs, the calibrations' searches): entries of
#: another version are never read.
ACCOUNTANT_VERSION = 1
_FORMAT = "dsroc-calibrations/1"


def _canonical(value):
    """JSON-ready and exact: floats by their repr (round-trips), tuples as lists."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, (tuple, list)):
        return [_canonical(v) for v in value]
    raise TypeError(f"a calibration's argument must be a number, a string or a tuple of them, got {value!r}")


def calibration_key(kind: str, **arguments) -> str:
    """The key of one calibration: ``kind`` (the function), its arguments and the accountant's version."""
    return json.dumps({"kind": str(kind), "accountant": ACCOUNTANT_VERSION,
                       "arguments": {k: _canonical(v) for k, v in sorted(arguments.items())}},
                      sort_keys=True, separators=(",", ":"))


def _digest(key: str, value) -> str:
    return hashlib.sha256(json.dumps([key, _canonical(value)], separators=(",", ":")).encode("utf-8")).hexdigest()


class CalibrationCache:
    """Calibration results by :func:`calibration_key`, at most ``limit`` of them (the oldest dropped first).

    ``changed`` tells the owner that there is something new to store (:meth:`dumps`).
    """

    def __init__(self, *, limit: int = 512):
        if isinstance(limit, bool) or int(limit) != limit or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        self.limit = int(limit)
        self._entries: dict[str, object] = {}
        self.changed = False

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str):
        """The cached value of ``key``, or None."""
        return self._entries.get(key)

    def put(self, key: str, value) -> None:
        self._entries.pop(key, None)
        self._entries[key] = value
        while len(self._entries) > self.limit:
            del self._entries[next(iter(self._entries))]
        self.changed = True

    def lookup(self, key: str, compute: Callable[[], object]):
        """The cached value of ``key``, else ``compute()`` (cached when it returns; an exception is not)."""
        value = self.get(key)
        if value is None:
            value = compute()
            self.put(key, value)
        return value

    def dumps(self) -> bytes:
        """The entries as JSON, each with its content hash (clears ``changed``)."""
        self.changed = False
        entries = [{"key": k, "value": _canonical(v), "sha256": _digest(k, v)} for k, v in self._entries.items()]
        return json.dumps({"format": _FORMAT, "entries": entries}, separators=(",", ":")).encode("utf-8")

    @classmethod
    def loads(cls, data: bytes, *, limit: int = 512) -> "CalibrationCache":
        """The cache :meth:`dumps` wrote; entries whose hash does not match, of another accountant version or not
        a value this module writes are dropped, and data that is not such a cache gives an empty one."""
        out = cls(limit=limit)
        try:
            body = json.loads(bytes(data).decode("utf-8"))
            entries = body["entries"] if body.get("format") == _FORMAT else []
        except (ValueError, TypeError, KeyError, AttributeError):
            return out
        for entry in entries if isinstance(entries, list) else []:
            try:
                key, raw, digest = entry["key"], entry["value"], entry["sha256"]
                value = _decode(raw)
                if json.loads(key)["accountant"] != ACCOUNTANT_VERSION or _digest(key, value) != digest:
                    continue
            except (ValueError, TypeError, KeyError, AttributeError):
                continue
            out._entries[key] = value
        while len(out._entries) > out.limit:
            del out._entries[next(iter(out._entries))]
        return out


def _decode(raw):
    """A value :func:`_canonical` wrote: a float (its repr), a bool, or a list of floats."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        value = float(raw)
        if not math.isfinite(value):
            raise ValueError("not a finite calibration")
        return value
    if isinstance(raw, list):
        return tuple(_decode(v) for v in raw)
    raise ValueError(f"not a calibration value: {raw!r}")


def cached_share_sigma(epsilon: float, delta: float, honest: int, *, parts: tuple = ((1, 1.0),),
                       hint: float | None = None, cache: CalibrationCache | None = None) -> float:
    """:func:`dsroc.secagg.share_sigma` (default grid), from ``cache`` when it holds this calibration."""
    from .noise import share_sigma

    parts = tuple((int(k), float(r)) for k, r in parts)
    args = (float(epsilon), float(delta), int(honest))
    if cache is None:
        return share_sigma(*args, parts=parts, hint=hint)
    key = calibration_key("share_sigma", epsilon=args[0], delta=args[1], honest=args[2], parts=parts,
                          hint=None if hint is None else float(hint))
    return float(cache.lookup(key, lambda: share_sigma(*args, parts=parts, hint=hint)))


def cached_shares_meet(sigma: float, epsilon: float, delta: float, honest: int, *, parts: tuple = ((1, 1.0),),
                       cache: CalibrationCache | None = None) -> bool:
    """:func:`dsroc.secagg.shares_meet` (default grid), from ``cache`` when it holds this check (both answers are
    kept: the check is the site's own, its cache the site's own file)."""
    from .noise import shares_meet

    parts = tuple((int(k), float(r)) for k, r in parts)
    args = (float(sigma), float(epsilon), float(delta), int(honest))
    if cache is None:
        return shares_meet(*args, parts=parts)
    key = calibration_key("shares_meet", sigma=args[0], epsilon=args[1], delta=args[2], honest=args[3], parts=parts)
    return bool(cache.lookup(key, lambda: shares_meet(*args, parts=parts)))


def cached_two_stage_plan(epsilon: float, delta: float, *, score_sums: bool = True, scalars: int = 0,
                          cache: CalibrationCache | None = None):
    """:func:`dsroc.histogram.stages.two_stage_plan` (the analyst's split of a secagg validation's budget), from
    ``cache`` when it holds this plan."""
    from ..histogram.stages import TwoStage, two_stage_plan

    if cache is None:
        return two_stage_plan(epsilon, delta, score_sums=score_sums, scalars=scalars)
    key = calibration_key("two_stage_plan", epsilon=float(epsilon), delta=float(delta), score_sums=bool(score_sums),
                          scalars=int(scalars))
    return TwoStage(*cache.lookup(key, lambda: tuple(two_stage_plan(epsilon, delta, score_sums=score_sums,
                                                                     scalars=scalars))))
