"""Argument checks and noise helpers shared by the other seeds' mechanisms (Boyd, Sun)."""

from __future__ import annotations

import math

import numpy as np

from .._checks import check_rng
from ..privacy.request import check_delta, check_epsilon

__all__ = ["check_epsilon", "check_delta", "check_rng", "check_fraction", "check_count"]


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
