"""Argument checks and noise helpers shared by the other seeds' mechanisms (Boyd, Sun)."""

from __future__ import annotations

import math

import numpy as np

from .._checks import check_rng

__all__ = ["check_epsilon", "check_delta", "check_rng", "check_fraction", "check_count"]


def check_epsilon(epsilon, *, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float, or raise ``ValueError`` unless it is finite and > 0."""
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number > 0, got {epsilon!r}") from None
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{name} must be finite and > 0, got {epsilon!r}")
    return value


def check_delta(delta, *, name: str = "delta") -> float:
    """Return ``delta`` as a float, or raise ``ValueError`` unless it lies in [0, 1)."""
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [0, 1), got {delta!r}") from None
    if not (math.isfinite(value) and 0.0 <= value < 1.0):
        raise ValueError(f"{name} must lie in [0, 1), got {delta!r}")
    return value


def check_fraction(value, *, name: str) -> float:
    """A fraction strictly between 0 and 1."""
    value = float(value)
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return value


def check_count(value, *, name: str, minimum: int = 1) -> np.ndarray:
    """Integer count(s) of at least ``minimum`` (arrays allowed), returned as int64."""
    arr = np.asarray(value)
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer count, got {value!r}")
    if np.any(arr < minimum):
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return arr.astype(np.int64)
