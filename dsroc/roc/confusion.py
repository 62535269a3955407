"""Confusion matrix at a threshold from per-site cell counts, each cell at least the privacy level."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .._checks import check_privacy_level, check_scores_labels
from ..errors import DisclosureError

__all__ = ["ConfusionParts", "confusion_parts", "ConfusionSummary", "aggregate_confusion"]


@dataclass(frozen=True)
class ConfusionParts:
    """Cell counts: a patient is predicted positive when ``score >= threshold``."""

    tp: int
    fp: int
    fn: int
    tn: int


def confusion_parts(scores, labels, threshold: float, *, privacy_level: int) -> ConfusionParts:
    """A site's confusion-matrix cells; raises :class:`DisclosureError` if any cell is below q."""
    s, y = check_scores_labels(scores, labels)
    if not np.isfinite(threshold):
        raise ValueError(f"threshold must be finite, got {threshold}")
    q = check_privacy_level(privacy_level)
    pred = s >= threshold
    pos = y == 1
    cells = ConfusionParts(
        tp=int(np.sum(pred & pos)), fp=int(np.sum(pred & ~pos)), fn=int(np.sum(~pred & pos)), tn=int(np.sum(~pred & ~pos))
    )
    if min(cells.tp, cells.fp, cells.fn, cells.tn) < q:
        raise DisclosureError(
            f"privacy level: every confusion-matrix cell must describe at least q = {q} patients at this threshold"
        )
    return cells


@dataclass(frozen=True)
class ConfusionSummary:
    """Pooled confusion matrix and the rates derived from it."""

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def sensitivity(self) -> float:
        """True positive rate ``tp / (tp + fn)``."""
        return self.tp / (self.tp + self.fn)

    @property
    def specificity(self) -> float:
        """True negative rate ``tn / (tn + fp)``."""
        return self.tn / (self.tn + self.fp)

    @property
    def ppv(self) -> float:
        """Positive predictive value ``tp / (tp + fp)``."""
        return self.tp / (self.tp + self.fp)

    @property
    def npv(self) -> float:
        """Negative predictive value ``tn / (tn + fn)``."""
        return self.tn / (self.tn + self.fn)


def aggregate_confusion(parts: Iterable[ConfusionParts]) -> ConfusionSummary:
    """Sum the sites' cells."""
    parts = list(parts)
    if not parts:
        raise ValueError("aggregate_confusion needs the parts of at least one site")
    return ConfusionSummary(*(sum(getattr(p, c) for p in parts) for c in ("tp", "fp", "fn", "tn")))
