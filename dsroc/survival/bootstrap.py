"""Many estimates from one bootstrap of a release: every replicate's vector of estimates and normal intervals.

The release and its replicates are one stack of cells ``(1 + draws, K, 2, J)``; each statistic is evaluated on
the whole stack at once (:class:`Stacked`), from the Kaplan-Meier ``S``, the censoring survival ``G`` and its
weights computed once per stack rather than once per statistic and replicate (every AUC(t), Brier score and
C-index reads the same ``G``), and the AUC at all horizons in one pass of cumulative sums over the time bins.
"""

from __future__ import annotations

from functools import cached_property
from statistics import NormalDist
from typing import Callable

import numpy as np

from .brier import brier_by_index, control_weights, integrated_by_index, scaled_by_index
from .calibration import observed_expected
from .counts import SurvivalHistogram
from .discrimination import auc_by_index, concordance, uno_weights, weights_of
from .intervals import ReplicateCells, SurvivalInterval, replicate_cells
from .kaplan_meier import SurvivalCurve, life_table

__all__ = ["Stacked", "bootstrap", "interval_from"]


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


class Stacked:
    """The survival statistics of every histogram of a stack of cells at once, each an array over the stack.

    Each equals its public function (:func:`~dsroc.survival.discrimination.cumulative_dynamic_auc`,
    :func:`~dsroc.survival.brier.brier_score`, ...) on each histogram, NaN where that function raises.
    """

    def __init__(self, cells: ReplicateCells):
        self.cells, self.counts, self.times = cells, cells.counts, cells.hist.time_points

    @cached_property
    def survival(self) -> np.ndarray:
        """Kaplan-Meier ``S`` ``(rows, K)``."""
        return life_table(self.counts, self.times).survival

    @cached_property
    def censoring(self) -> SurvivalCurve:
        """Censoring survival ``G`` (arrays ``(rows, K)``)."""
        return life_table(self.counts, self.times, censoring=True)

    @cached_property
    def case_weights(self) -> np.ndarray:
        return weights_of(self.censoring)

    @cached_property
    def control_weights(self) -> np.ndarray:
        return control_weights(self.censoring)

    @cached_property
    def _aucs(self) -> np.ndarray:
        return auc_by_index(self.counts, self.case_weights)

    @cached_property
    def _brier(self) -> np.ndarray:
        return brier_by_index(self.counts, self.cells.risk_sums(), self.case_weights, self.control_weights)

    def auc(self, kh) -> np.ndarray:
        """AUC(t) with ``kh`` (an int, or an array of them: one column each) time bins before ``t``."""
        return self._aucs[:, kh]

    def harrell_c(self) -> np.ndarray:
        return concordance(self.counts, np.ones(self.counts.shape[1]))

    def uno_c(self, tau) -> np.ndarray:
        try:
            weights = uno_weights(self.case_weights, self.times, tau)
        except ValueError:
            return np.full(self.counts.shape[0], np.nan)
        return concordance(self.counts, weights)

    def brier(self, kh: int) -> np.ndarray:
        return self._brier[:, kh]

    def integrated_brier(self, kh: int) -> np.ndarray:
        """Over the time points up to ``t`` (``kh`` of them; NaN with fewer than two)."""
        if kh < 2:
            return np.full(self.counts.shape[0], np.nan)
        return integrated_by_index(self._brier, self.times, np.arange(kh))

    def scaled_brier(self, kh: int) -> np.ndarray:
        return scaled_by_index(self._brier, self.counts, self.survival, self.case_weights, self.control_weights, kh)

    def observed_expected(self, kh: int, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Observed and expected risk and ``O/E`` of score bins ``start .. stop-1`` at the horizon."""
        return observed_expected(self.counts, self.cells.risk_sums()[0], self.times, kh, start, stop)[2:]


def bootstrap(hist: SurvivalHistogram, estimates: Callable[[Stacked], np.ndarray], *, count_sd: float,
              sums_sd: float, draws: int, seed) -> tuple[np.ndarray, np.ndarray]:
    """``estimates`` (rows of vectors, one per histogram of the stack) on ``hist`` and on each of ``draws``
    replicates of :func:`~dsroc.survival.intervals.survival_replicates` (rows), from one resampling and one
    evaluation for all of them: ``hist`` is the stack's first row."""
    reps = replicate_cells(hist, count_sd=count_sd, sums_sd=sums_sd, draws=draws, seed=seed)
    stack = [np.concatenate([x[None], y]) if y is not None else None for x, y in
             ((hist.counts, reps.counts), (hist.score_sum, reps.score_sum), (hist.score_sq_sum, reps.score_sq_sum))]
    rows = np.asarray(estimates(Stacked(ReplicateCells(hist, *stack))), dtype=np.float64)
    return rows[0], rows[1:]
