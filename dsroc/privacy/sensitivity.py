"""Data-derived l2-sensitivity of a prediction model over histogram-adjacent feature vectors, in O(n p)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

__all__ = ["SensitivityEstimate", "model_sensitivity"]

NOTE = (
    "data-dependent estimate, not a formal bound: the largest change of the model's output observed when "
    "one feature of one record moves to an adjacent histogram bin"
)


@dataclass(frozen=True)
class SensitivityEstimate:
    """Estimated l2-sensitivity of a model.

    Attributes
    ----------
    value : float
        Largest absolute change of the output over all records and single-bin moves.
    feature : str
        The feature whose move attains it.
    per_feature : dict
        The largest change per feature.
    note : str
        What kind of number this is (an estimate, not a bound).
    """

    value: float
    feature: str
    per_feature: dict
    note: str = NOTE


def _neighbours(column: np.ndarray, n_bins: int):
    """The one-bin-down and one-bin-up versions of a column (NaN where no such bin exists).

    Features with at most ``n_bins`` distinct values (binary, ordinal) use their distinct values as bins;
    continuous ones use ``n_bins`` equal-width bins over their range and move by one bin width.
    """
    levels = np.unique(column)
    down = np.full(column.shape, np.nan)
    up = np.full(column.shape, np.nan)
    if levels.size <= 1:
        return down, up
    if levels.size <= n_bins:
        pos = np.searchsorted(levels, column)
        has_down, has_up = pos > 0, pos < levels.size - 1
        down[has_down] = levels[pos[has_down] - 1]
        up[has_up] = levels[pos[has_up] + 1]
        return down, up
    lo, hi = levels[0], levels[-1]
    width = (hi - lo) / n_bins
    down = np.where(column - width >= lo, column - width, np.nan)
    up = np.where(column + width <= hi, column + width, np.nan)
    return down, up


def model_sensitivity(
    predict: Callable[[np.ndarray], np.ndarray],
    X,
    *,
    n_bins: int = 10,
    feature_names: Sequence[str] | None = None,
) -> SensitivityEstimate:
    """Estimate the l2-sensitivity of ``predict`` from the data ``X`` (Schalk et al. 2024).

    Every record is moved one histogram bin down and up in each feature in turn and the model is
    re-evaluated: ``2 p`` vectorised calls of ``predict`` on ``n`` rows, O(n p) evaluations, never an
    n x n distance matrix. The result is a data-dependent estimate, not a formal bound.

    Parameters
    ----------
    predict : callable
        Maps an (n, p) float array to n outputs.
    X : array_like, shape (n, p)
        Finite feature values.
    n_bins : int, default 10
        Histogram bins for continuous features.
    feature_names : sequence of str, optional
        Names for the report; default ``x0, x1, ...``.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty two-dimensional array, got shape {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError("X contains missing or non-finite values")
    if isinstance(n_bins, bool) or int(n_bins) != n_bins or n_bins < 2:
        raise ValueError(f"n_bins must be an integer >= 2, got {n_bins!r}")
    names = [f"x{j}" for j in range(X.shape[1])] if feature_names is None else list(feature_names)
    if len(names) != X.shape[1]:
        raise ValueError(f"feature_names has {len(names)} names for {X.shape[1]} columns")
    base = np.asarray(predict(X), dtype=np.float64)
    if base.shape != (X.shape[0],) or not np.isfinite(base).all():
        raise ValueError("predict must return one finite output per row")
    per_feature = {}
    for j, name in enumerate(names):
        largest = 0.0
        for moved in _neighbours(X[:, j], int(n_bins)):
            rows = np.isfinite(moved)
            if not rows.any():
                continue
            X_moved = X[rows].copy()
            X_moved[:, j] = moved[rows]
            change = np.abs(np.asarray(predict(X_moved), dtype=np.float64) - base[rows])
            largest = max(largest, float(change.max()))
        per_feature[name] = largest
    feature = max(per_feature, key=per_feature.get)
    return SensitivityEstimate(value=per_feature[feature], feature=feature, per_feature=per_feature)
