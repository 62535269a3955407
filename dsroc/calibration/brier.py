"""Brier score from per-site sums of squared errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .._checks import check_scores_labels

__all__ = ["BrierParts", "brier_parts", "aggregate_brier", "brier_score"]


@dataclass(frozen=True)
class BrierParts:
    """One site's contribution: ``sum (y - s)^2`` and the number of patients."""

    sum_sq: float
    n: int


def brier_parts(scores, labels) -> BrierParts:
    """A site's Brier parts. Scores must be probabilities in [0, 1]."""
    s, y = check_scores_labels(scores, labels, score_range=(0.0, 1.0))
    return BrierParts(sum_sq=float(((y - s) ** 2).sum()), n=int(s.size))


def aggregate_brier(parts: Iterable[BrierParts]) -> float:
    """Pooled Brier score ``sum of sums / sum of n`` over sites."""
    parts = list(parts)
    n = sum(p.n for p in parts)
    if n == 0:
        raise ValueError("aggregate_brier needs at least one patient over all sites")
    return sum(p.sum_sq for p in parts) / n


def brier_score(scores, labels) -> float:
    """Brier score ``mean (y - s)^2`` of one data set."""
    return aggregate_brier([brier_parts(scores, labels)])
