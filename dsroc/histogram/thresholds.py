"""Decision thresholds as bin edges: a clinician's risk thresholds put exactly on the histogram protocol's grid.

A threshold is a public input of the request (not learnt from any release), so an edge there discloses nothing that
the grid's other public edges do not; at an edge the net benefit, the confusion table and every calibration statistic
are read off the counts without interpolation. A site still checks every explicit edge against its policy (each an
edge of a grid it allows, at most its largest bin count): :func:`off_policy` is that rule for probabilities, so that
the analyst refuses a threshold before any site is asked, and :func:`with_thresholds` keeps the grid within the most
bins every site allows.
"""

from __future__ import annotations

import math

import numpy as np

from .grid import EDGE_TOLERANCE, allowed_edges

__all__ = ["check_thresholds", "off_policy", "with_thresholds"]


def check_thresholds(values) -> tuple[float, ...]:
    """Risk thresholds, sorted: each a finite number strictly between 0 and 1, no two the same (ValueError naming
    ``thresholds`` and the rule otherwise)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"thresholds must be a sequence of risks in (0, 1), got {values!r}")
    out = []
    for v in values:
        if isinstance(v, bool):
            raise ValueError(f"thresholds must be numbers in (0, 1), got {v!r}")
        try:
            t = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"thresholds must be numbers in (0, 1), got {v!r}") from None
        if not (math.isfinite(t) and 0.0 < t < 1.0):
            raise ValueError(f"thresholds must lie strictly between 0 and 1 (risks), got {v!r}")
        out.append(t)
    out.sort()
    if any(b - a <= EDGE_TOLERANCE for a, b in zip(out, out[1:])):
        raise ValueError(f"thresholds must be distinct, got {list(values)!r}")
    return tuple(out)


def off_policy(thresholds, bins, spacings, logit_range) -> list[float]:
    """The thresholds that are not an edge of any grid a site's policy allows for probabilities: an equal grid of an
    allowed bin count (``bins``) on [0, 1] when ``"equal"`` is among ``spacings``, a logit grid on ``logit_range`` when
    ``"logit"`` is (:func:`dsroc.histogram.grid.allowed_edges`, to :data:`~dsroc.histogram.grid.EDGE_TOLERANCE`) —
    the rule a site applies to an explicit grid on the score range [0, 1]."""
    ranges = {"equal": (0.0, 1.0), "logit": tuple(float(v) for v in logit_range)}
    grids = [allowed_edges(tuple(int(b) for b in bins), sp, lo=ranges[sp][0], hi=ranges[sp][1])
             for sp in spacings if sp in ranges]
    if not grids:
        return [float(t) for t in thresholds]
    grid = np.unique(np.concatenate(grids))
    return [float(t) for t in thresholds if np.min(np.abs(grid - float(t))) > EDGE_TOLERANCE]


def with_thresholds(interior, thresholds, *, most: int) -> np.ndarray:
    """Interior edges ``interior`` (e.g. the quantile grid's) with the ``thresholds`` added as edges exactly.

    An edge within :data:`~dsroc.histogram.grid.EDGE_TOLERANCE` of a threshold is that threshold (no bin a few ulps
    wide). Where the union would make more than ``most`` bins, the edges of ``interior`` nearest a threshold (on the
    logit scale, where the bins of risks are placed) are left out, one at a time, until it fits: the thresholds stay.
    ValueError (naming ``thresholds`` and the rule) when the thresholds alone need more than ``most`` bins.
    """
    t = np.asarray(thresholds, dtype=np.float64)
    if isinstance(most, bool) or not float(most).is_integer() or most < 2:
        raise ValueError(f"most must be an integer >= 2, got {most!r}")
    if t.size + 1 > most:
        raise ValueError(f"thresholds: {t.size} thresholds make {t.size + 1} bins; every site's policy allows at most "
                         f"{int(most)} bins in this validation (policy: histogram_bins, histogram_max_cells)")
    e = np.asarray(interior, dtype=np.float64)
    if t.size == 0:
        return e
    near = np.min(np.abs(e[:, None] - t[None, :]), axis=1) if e.size else np.zeros(0)
    e = e[near > EDGE_TOLERANCE]
    while e.size + t.size + 1 > most:
        distance = np.min(np.abs(_logit(e)[:, None] - _logit(t)[None, :]), axis=1)
        e = np.delete(e, int(np.argmin(distance)))
    return np.unique(np.concatenate([e, t]))


def _logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-12, 1 - 1e-12)
    return np.log(q / (1 - q))
