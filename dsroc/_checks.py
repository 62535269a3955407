"""Input validation shared by the core's public functions: clear errors that name the field and the rule."""

from __future__ import annotations

import numpy as np

__all__ = ["is_sorted", "as_scores", "as_labels", "check_scores_labels", "split_by_class", "check_privacy_level", "check_rng"]


def as_scores(values, *, name: str = "scores", score_range: tuple[float, float] | None = None) -> np.ndarray:
    """Return ``values`` as a finite 1-D float64 array, or raise ``ValueError`` naming ``name``."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    finite = np.isfinite(arr)
    if not finite.all():
        bad = int((~finite).sum())
        raise ValueError(f"{name} contains {bad} non-finite value(s) (NaN or inf); scores must be finite")
    if score_range is not None:
        lo, hi = score_range
        if arr.min() < lo or arr.max() > hi:
            raise ValueError(f"{name} must lie in [{lo}, {hi}]; found values in [{arr.min()}, {arr.max()}]")
    return arr


def as_labels(values, *, name: str = "labels") -> np.ndarray:
    """Return ``values`` as a 1-D int8 array of 0/1 labels, or raise ``ValueError`` naming ``name``."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if arr.dtype.kind == "b":
        return arr.astype(np.int8)
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be numeric 0/1 labels, got dtype {arr.dtype}")
    ok = (arr == 0) | (arr == 1)
    if not ok.all():
        raise ValueError(f"{name} must contain only 0 and 1; found {int((~ok).sum())} other value(s)")
    return arr.astype(np.int8)


def check_scores_labels(scores, labels, *, score_range: tuple[float, float] | None = None):
    """Validate a (scores, labels) pair: same length, finite scores (optionally in a range), 0/1 labels.

    Returns
    -------
    scores : ndarray of float64
    labels : ndarray of int8
    """
    s = as_scores(scores, name="scores", score_range=score_range)
    y = as_labels(labels, name="labels")
    if s.shape != y.shape:
        raise ValueError(f"scores and labels must have the same length, got {s.size} and {y.size}")
    return s, y


def split_by_class(scores, labels, *, min_per_class: int = 1):
    """Split validated scores into negatives and positives; each class needs ``min_per_class`` members."""
    s, y = check_scores_labels(scores, labels)
    s0, s1 = s[y == 0], s[y == 1]
    for name, part in (("negatives (label 0)", s0), ("positives (label 1)", s1)):
        if part.size < min_per_class:
            raise ValueError(
                f"need at least {min_per_class} {name}, got {part.size}; both classes must be present"
            )
    return s0, s1


def check_privacy_level(privacy_level) -> int:
    """Validate the privacy level q: an integer of at least 1."""
    if isinstance(privacy_level, bool) or not float(privacy_level).is_integer() or privacy_level < 1:
        raise ValueError(f"privacy_level must be an integer >= 1, got {privacy_level!r}")
    return int(privacy_level)


def is_sorted(values: np.ndarray) -> bool:
    """Whether a one-dimensional array is in ascending order (O(n); lets callers skip a sort)."""
    return bool(values.size < 2 or (values[1:] >= values[:-1]).all())


def check_rng(rng) -> np.random.Generator:
    """The caller's explicit ``numpy.random.Generator`` (no hidden global state)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), got {type(rng).__name__}")
    return rng
