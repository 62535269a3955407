"""The one check of a privacy request's (epsilon, delta): used by the analyst, the site and the mechanisms."""

from __future__ import annotations

import math
import numbers

__all__ = ["check_epsilon", "check_delta", "check_privacy_request"]


def _real(value, name: str, rule: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be {rule}, got {value!r}")
    return float(value)


def check_epsilon(epsilon, *, name: str = "epsilon") -> float:
    """``epsilon`` as a float; ``ValueError`` naming ``name`` unless it is a finite number > 0."""
    value = _real(epsilon, name, "a positive finite number")
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{name} must be a positive finite number, got {epsilon!r}")
    return value


def check_delta(delta, *, name: str = "delta", zero: bool = True) -> float:
    """``delta`` as a float; ``ValueError`` naming ``name`` unless it lies in [0, 1) (``zero=False``: in (0, 1))."""
    rule = "a number in [0, 1)" if zero else "a number strictly between 0 and 1"
    value = _real(delta, name, rule)
    if not (math.isfinite(value) and (value >= 0.0 if zero else value > 0.0) and value < 1.0):
        raise ValueError(f"{name} must be {rule}, got {delta!r}")
    return value


def check_privacy_request(epsilon, delta, *, zero_delta: bool = True) -> tuple[float, float]:
    """A request's ``(epsilon, delta)`` as floats, each checked (:func:`check_epsilon`, :func:`check_delta`)."""
    return check_epsilon(epsilon), check_delta(delta, zero=zero_delta)
