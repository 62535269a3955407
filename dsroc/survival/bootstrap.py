"""Many estimates from one bootstrap of a release: every replicate's vector of estimates and normal intervals."""

from __future__ import annotations

from statistics import NormalDist
from typing import Callable

import numpy as np

from .counts import SurvivalHistogram
from .intervals import SurvivalInterval, survival_replicates

__all__ = ["bootstrap", "interval_from"]


def interval_from(value: float, replicates, level: float, *, bounds=(-np.inf, np.inf)) -> SurvivalInterval:
    """A normal ``level`` interval ``value +- z se`` from bootstrap replicates (their SD, NaNs left out), clipped
    to ``bounds``; NaN when fewer than two replicates are finite."""
    reps = np.asarray(replicates, dtype=np.float64)
    reps = reps[np.isfinite(reps)]
    se = float(np.std(reps, ddof=1)) if reps.size >= 2 else float("nan")
    half = NormalDist().inv_cdf(0.5 + level / 2.0) * se
    lo, hi = bounds
    return SurvivalInterval(float(value), se, float(np.clip(value - half, lo, hi)), float(np.clip(value + half, lo, hi)),
                            int(reps.size))


def bootstrap(hist: SurvivalHistogram, estimates: Callable[[SurvivalHistogram], np.ndarray], *, count_sd: float,
              sums_sd: float, draws: int, seed) -> tuple[np.ndarray, np.ndarray]:
    """``estimates`` (a vector) on ``hist`` and on each of ``draws`` replicates of
    :func:`~dsroc.survival.intervals.survival_replicates` (rows), from one resampling for all of them."""
    rows: list[np.ndarray] = []

    def record(h):  # survival_replicates keeps one number per replicate; the whole vector is kept here
        rows.append(estimates(h))
        return 0.0

    survival_replicates(hist, record, count_sd=count_sd, sums_sd=sums_sd, draws=draws, seed=seed)
    return estimates(hist), np.vstack(rows)
