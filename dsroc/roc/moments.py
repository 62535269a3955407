"""Distributed mean and variance: sums and counts, and squared deviations from the global or each site's own mean."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .._checks import as_scores

__all__ = ["MeanParts", "mean_parts", "sq_dev_parts", "pooled_mean", "pooled_sq_dev", "pooled_variance"]


@dataclass(frozen=True)
class MeanParts:
    """One site's contribution to a global mean: the sum of its values and their number."""

    total: float
    n: int


def mean_parts(values, *, name: str = "values") -> MeanParts:
    """First pass: the sum and count of a site's values."""
    x = as_scores(values, name=name)
    return MeanParts(total=float(x.sum()), n=int(x.size))


def sq_dev_parts(values, mean: float, *, name: str = "values") -> float:
    """Second pass: the sum of squared deviations of a site's values from the global ``mean``.

    Deviations from the global mean (rather than sums of squares) avoid the cancellation of the
    one-pass formula ``sum(x^2) - n mean^2``.
    """
    if not np.isfinite(mean):
        raise ValueError(f"mean must be finite, got {mean}")
    x = as_scores(values, name=name)
    return float(np.sum((x - mean) ** 2))


def pooled_mean(parts: Iterable[MeanParts]) -> tuple[float, int]:
    """Global mean and count from the sites' :class:`MeanParts`."""
    parts = list(parts)
    n = sum(p.n for p in parts)
    if n == 0:
        raise ValueError("pooled_mean needs at least one value over all sites")
    return sum(p.total for p in parts) / n, n


def pooled_sq_dev(parts: Iterable[MeanParts], local_sq_devs: Iterable[float]) -> float:
    """Sum of squared deviations from the pooled mean, from each site's sum, count and squared deviations
    from its own mean: ``sum_k S_k + n_k (m_k - m)^2`` (Chan, Golub and LeVeque's parallel update).

    Equivalent to a second pass of :func:`sq_dev_parts` at the pooled mean, without the second round
    trip, and as free of cancellation (every term is a sum of squares).
    """
    parts, local = list(parts), [float(s) for s in local_sq_devs]
    if len(parts) != len(local):
        raise ValueError(f"need one local sum of squared deviations per part, got {len(local)} for {len(parts)}")
    mean, _ = pooled_mean(parts)
    total = 0.0
    for p, s in zip(parts, local):
        if not np.isfinite(s) or s < 0:
            raise ValueError(f"sums of squared deviations must be finite and non-negative, got {s}")
        if p.n:
            total += s + p.n * (p.total / p.n - mean) ** 2
    return total


def pooled_variance(sq_devs: Iterable[float], n: int) -> float:
    """Global sample variance (denominator n - 1) from the sites' sums of squared deviations."""
    if n < 2:
        raise ValueError(f"a sample variance needs n >= 2, got {n}")
    total = float(sum(sq_devs))
    if not np.isfinite(total) or total < 0:
        raise ValueError(f"sums of squared deviations must be finite and non-negative, got {total}")
    return total / (n - 1)
