"""Calibration curve from per-site bin sums, with cells below the privacy level suppressed entirely."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .._checks import check_privacy_level, check_scores_labels

__all__ = [
    "calibration_edges",
    "CalibrationParts",
    "calibration_parts",
    "SiteCalibration",
    "CalibrationCurve",
    "aggregate_calibration",
]


def calibration_edges(n_bins: int | None = 10, *, edges=None) -> np.ndarray:
    """Bin edges on [0, 1]: ``n_bins`` equal bins, or explicit ``edges``.

    Bins are ``[a, b)`` except the last, which is closed, so a score of exactly 0 or 1 has a bin.
    Explicit edges must be strictly increasing, at least two, inside [0, 1].
    """
    if edges is None:
        if isinstance(n_bins, bool) or n_bins is None or int(n_bins) != n_bins or n_bins < 1:
            raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
        return np.linspace(0.0, 1.0, int(n_bins) + 1)
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 2:
        raise ValueError(f"edges must be a one-dimensional array of at least 2 values, got shape {e.shape}")
    if not np.isfinite(e).all() or e.min() < 0.0 or e.max() > 1.0:
        raise ValueError("edges must be finite and lie in [0, 1]")
    if np.any(np.diff(e) <= 0.0):
        raise ValueError("edges must be strictly increasing")
    return e


def _bin_index(scores: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin of each score (-1 outside the edges); the last bin includes its upper edge."""
    idx = np.searchsorted(edges, scores, side="right") - 1
    idx[scores == edges[-1]] = edges.size - 2
    idx[(scores < edges[0]) | (scores > edges[-1])] = -1
    return idx


@dataclass(frozen=True)
class CalibrationParts:
    """What one site releases: sums for the bins with at least q patients, and which bins it withheld.

    Suppressed bins carry nothing but their index: no count, no sums.
    """

    edges: np.ndarray
    bins: np.ndarray
    count: np.ndarray
    sum_score: np.ndarray
    sum_label: np.ndarray
    suppressed: np.ndarray


def calibration_parts(scores, labels, edges, *, privacy_level: int) -> CalibrationParts:
    """A site's calibration parts: per bin count, sum of scores and sum of labels.

    Bins with fewer than ``privacy_level`` patients (including empty ones) are suppressed. That alone
    is not enough: whoever knows the site's n (it is released with the Brier parts) and the released
    counts knows the suppressed bins' total, which for a single sparse bin is its count. So the smallest
    released bins are suppressed as well (secondary suppression) until the suppressed bins together
    hold 0 or at least ``privacy_level`` patients.

    Scores must be probabilities in [0, 1].
    """
    s, y = check_scores_labels(scores, labels, score_range=(0.0, 1.0))
    edges = calibration_edges(edges=edges)
    q = check_privacy_level(privacy_level)
    idx = _bin_index(s, edges)
    inside = idx >= 0
    m = edges.size - 1
    count = np.bincount(idx[inside], minlength=m)
    sum_score = np.bincount(idx[inside], weights=s[inside], minlength=m)
    sum_label = np.bincount(idx[inside], weights=y[inside], minlength=m)
    released = count >= q
    hidden = int(count[~released].sum())
    for i in np.flatnonzero(released)[np.argsort(count[released], kind="stable")]:
        if hidden == 0 or hidden >= q:
            break
        released[i] = False
        hidden += int(count[i])
    bins = np.flatnonzero(released)
    return CalibrationParts(
        edges=edges,
        bins=bins,
        count=count[released].astype(np.int64),
        sum_score=sum_score[released],
        sum_label=sum_label[released],
        suppressed=np.flatnonzero(~released),
    )


@dataclass(frozen=True)
class SiteCalibration:
    """One site's released curve: observed event rate and mean prediction per released bin."""

    bins: np.ndarray
    count: np.ndarray
    observed: np.ndarray
    predicted: np.ndarray


@dataclass
class CalibrationCurve:
    """Aggregated calibration curve over sites.

    ``observed`` and ``predicted`` are NaN for a bin that no site released; ``count`` is the number of
    patients behind each aggregated bin (over the releasing sites only).
    """

    edges: np.ndarray
    count: np.ndarray
    observed: np.ndarray
    predicted: np.ndarray
    per_site: dict = field(default_factory=dict)
    suppressed: list = field(default_factory=list)

    @property
    def lower(self) -> np.ndarray:
        """Lower bin edges."""
        return self.edges[:-1]

    @property
    def upper(self) -> np.ndarray:
        """Upper bin edges."""
        return self.edges[1:]


def aggregate_calibration(parts: Sequence[CalibrationParts], *, site_names: Sequence[str] | None = None) -> CalibrationCurve:
    """Aggregate the sites' released cells: per bin ``sum sum_label / sum count`` and
    ``sum sum_score / sum count`` over the sites that released that bin."""
    parts = list(parts)
    if not parts:
        raise ValueError("aggregate_calibration needs the parts of at least one site")
    names = [f"site{i + 1}" for i in range(len(parts))] if site_names is None else list(site_names)
    if len(names) != len(parts):
        raise ValueError(f"site_names has {len(names)} names for {len(parts)} parts")
    edges = parts[0].edges
    if any(p.edges.shape != edges.shape or not np.array_equal(p.edges, edges) for p in parts):
        raise ValueError("all sites' calibration parts must use the same bin edges")
    m = edges.size - 1
    count, sum_score, sum_label = np.zeros(m), np.zeros(m), np.zeros(m)
    per_site, suppressed = {}, []
    for name, p in zip(names, parts):
        if np.any((p.bins < 0) | (p.bins >= m)) or np.any(p.count <= 0):
            raise ValueError(f"calibration parts of {name} have invalid bins or counts")
        count[p.bins] += p.count
        sum_score[p.bins] += p.sum_score
        sum_label[p.bins] += p.sum_label
        per_site[name] = SiteCalibration(p.bins, p.count, p.sum_label / p.count, p.sum_score / p.count)
        suppressed.extend((name, int(b)) for b in p.suppressed)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.where(count > 0, sum_label / count, np.nan)
        predicted = np.where(count > 0, sum_score / count, np.nan)
    return CalibrationCurve(edges, count.astype(np.int64), observed, predicted, per_site, suppressed)
