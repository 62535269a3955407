"""The ROC-GLM (Pepe 2000): threshold grid, counts, a site's parts, and the binormal curve and its AUC."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from .._checks import as_scores, is_sorted
from .probit import OneCounts, ProbitCounts, ProbitTerms

__all__ = [
    "rocglm_grid",
    "rocglm_counts",
    "PartsAtTheta",
    "RocGlmParts",
    "rocglm_auc",
    "rocglm_intercept_for_auc",
    "rocglm_curve",
]

DEFAULT_GRID_SIZE = 30  # the paper's simulation grid: linspace(0, 1, 30) without its end points
_VALIDATED: dict[bytes, np.ndarray] = {}  # explicit grids already checked (bytes -> grid): few per process
_MAX_VALIDATED = 64


def rocglm_grid(spec=None) -> np.ndarray:
    """Threshold grid ``T`` of the ROC-GLM, strictly inside (0, 1).

    Parameters
    ----------
    spec : None, int or array_like
        ``None``: the paper's grid, ``linspace(0, 1, 30)`` without its end points (28 points).
        An integer ``m >= 4``: ``linspace(0, 1, m)`` without its end points. An array: explicit
        thresholds, strictly increasing, all strictly inside (0, 1), at least two.
    """
    if spec is None:
        spec = DEFAULT_GRID_SIZE
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if spec < 4:
            raise ValueError(f"grid size must be an integer >= 4 (two inner points at least), got {spec}")
        return _rational_grid(int(spec))
    grid = np.asarray(spec, dtype=np.float64)
    known = _VALIDATED.get(grid.tobytes()) if grid.ndim == 1 else None
    if known is not None:
        return known.copy()
    if grid.ndim != 1 or grid.size < 2:
        raise ValueError(f"grid must be a one-dimensional array of at least 2 thresholds, got shape {grid.shape}")
    if not np.isfinite(grid).all():
        raise ValueError("grid contains non-finite values")
    if grid.min() <= 0.0 or grid.max() >= 1.0:
        raise ValueError(
            "grid thresholds must lie strictly inside (0, 1): probit(0) and probit(1) are infinite; "
            f"found values in [{grid.min()}, {grid.max()}]"
        )
    if np.any(np.diff(grid) <= 0.0):
        raise ValueError("grid thresholds must be strictly increasing (no duplicates)")
    checked = grid.copy()
    if np.array_equal(grid, np.linspace(0.0, 1.0, grid.size + 2)[1:-1]):
        checked = _rational_grid(grid.size + 2)  # the same grid, each point rounded once (see _rational_grid)
    if len(_VALIDATED) < _MAX_VALIDATED:
        _VALIDATED[grid.tobytes()] = checked.copy()
    return checked


def _rational_grid(m: int) -> np.ndarray:
    """``t_j = j / (m - 1)``, j = 1 .. m - 2, each the correctly rounded quotient.

    ``linspace`` computes ``j * (1 / (m - 1))``, which can be one unit in the last place off ``j / (m - 1)``
    (3 of the 28 default points), so that a placement value ``k / n0`` *equal* to ``j / (m - 1)`` (``n0`` a
    multiple of ``m - 1``) would fall on either side by rounding. With both sides correctly rounded
    quotients of integers the float comparison ``PV0 <= t_j`` is exact: rounding is monotone and maps
    equal rationals to equal floats, and two different ratios of integers below 2**40 differ by far more
    than the rounding error, so their order is kept.
    """
    return np.arange(1, m - 1, dtype=np.float64) / (m - 1)


def rocglm_counts(pv0, grid) -> np.ndarray:
    """Counts ``k_j = #{i : PV0_i <= t_j}`` of the positives' placement values on the grid."""
    return _counts(as_scores(pv0, name="pv0", score_range=(0.0, 1.0)), rocglm_grid(grid))


def _counts(pv: np.ndarray, grid: np.ndarray) -> np.ndarray:
    return np.searchsorted(pv if is_sorted(pv) else np.sort(pv), grid, side="right").astype(np.int64)


def degenerate_counts(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Rows whose counts separate the indicator data, so that the probit has no finite MLE.

    With thresholds in increasing order, the successes lie at the thresholds with ``k_j > 0`` and the
    failures at those with ``k_j < n``. The data are separated when every k_j is 0 or n, and
    quasi-completely separated when the failures all lie at or below the first success (or the
    successes at or below the first failure): they then meet at one threshold at most, and the
    likelihood grows towards the saturated fit of that threshold as the slope grows without bound.
    A fit of such data drifts along a flat likelihood, where rounding decides when it stops.
    """
    k = np.asarray(k)
    nn = np.asarray(n)[..., None]
    success, failure = k > 0, k < nn
    idx = np.arange(k.shape[-1])
    last = lambda m: np.max(np.where(m, idx, -1), axis=-1)  # noqa: E731 - -1 when none
    first = lambda m: np.min(np.where(m, idx, k.shape[-1]), axis=-1)  # noqa: E731 - J when none
    quasi = (last(failure) <= first(success)) | (last(success) <= first(failure))
    return quasi | np.all(~success | ~failure, axis=-1)


@dataclass(frozen=True)
class PartsAtTheta:
    """One site's (or the sum of all sites') ROC-GLM parts at a parameter value theta."""

    score: np.ndarray
    information: np.ndarray
    deviance: float

    def __add__(self, other: "PartsAtTheta") -> "PartsAtTheta":
        return PartsAtTheta(self.score + other.score, self.information + other.information, self.deviance + other.deviance)


def _matrix(info3: np.ndarray) -> np.ndarray:
    """The symmetric 2 x 2 matrix from its three entries ``(I00, I01, I11)``."""
    return np.array([[info3[0], info3[1]], [info3[1], info3[2]]])


def as_theta(theta) -> np.ndarray:
    t = np.asarray(theta, dtype=np.float64)
    if t.shape != (2,) or not np.isfinite(t).all():
        raise ValueError(f"theta must be two finite numbers (gamma1, gamma2), got {theta!r}")
    return t


class RocGlmParts:
    """A site's ROC-GLM model on its threshold counts: a binomial probit with ``k_j`` of ``n_trials``.

    Exposes ``loglike``, ``score``, ``information`` (expected) and ``deviance`` at any parameter value,
    like a statsmodels model; ``evaluate`` bundles the three quantities a site returns per Fisher-scoring
    step. The pooled fit and the distributed fit sum these same parts.

    Parameters
    ----------
    counts : array_like of int
        ``k_j = #{i : PV0_i <= t_j}`` for each threshold.
    n_trials : int
        Number of positives ``n1`` (trials per threshold).
    grid : None, int or array_like
        The threshold grid, see :func:`rocglm_grid`.
    """

    def __init__(self, counts, n_trials: int, grid=None):
        self.grid = rocglm_grid(grid)
        self.x = ndtri(self.grid)
        k = np.asarray(counts, dtype=np.float64)
        if k.shape != self.grid.shape:
            raise ValueError(f"counts must have one entry per threshold ({self.grid.size}), got shape {k.shape}")
        if isinstance(n_trials, bool) or not float(n_trials).is_integer() or n_trials < 1:
            raise ValueError(f"n_trials must be a positive integer, got {n_trials!r}")
        if not np.isfinite(k).all() or np.any(k != np.round(k)) or k.min() < 0 or k.max() > n_trials:
            raise ValueError(f"counts must be integers between 0 and n_trials = {n_trials}")
        self.counts = k
        self.n_trials = int(n_trials)
        self._probit = None
        self._one = None
        self._is_degenerate = None

    @classmethod
    def from_placements(cls, pv0, grid=None) -> "RocGlmParts":
        """Build the parts from the positives' placement values."""
        grid = rocglm_grid(grid)
        pv = as_scores(pv0, name="pv0", score_range=(0.0, 1.0))
        return cls(_counts(pv, grid), pv.size, grid)

    @property
    def probit(self) -> ProbitCounts:
        """The counts laid out for fast evaluation (built on first use)."""
        if self._probit is None:
            self._probit = ProbitCounts(self.x, self.counts[None, :], np.array([float(self.n_trials)]))
        return self._probit

    @property
    def one(self) -> OneCounts:
        """The counts laid out for a fit in Python floats, with R's first iterate as start (built on first use)."""
        if self._one is None:
            self._one = OneCounts(self.x, self.counts, float(self.n_trials))
        return self._one

    def _terms(self, theta) -> ProbitTerms:
        return self.probit(as_theta(theta)[None, :])

    def loglike(self, theta) -> float:
        """Log-likelihood (without the binomial coefficients) at theta."""
        return -0.5 * float(self._terms(theta).deviance[0])

    def score(self, theta) -> np.ndarray:
        """Score vector (gradient of the log-likelihood) at theta."""
        return self._terms(theta).score[0]

    def information(self, theta) -> np.ndarray:
        """Expected (Fisher) information matrix at theta."""
        return _matrix(self._terms(theta).info[0])

    def observed_information(self, theta) -> np.ndarray:
        """Observed information (minus the Hessian of the log-likelihood) at theta."""
        return _matrix(self.probit.observed(self._terms(theta))[0])

    def deviance(self, theta) -> float:
        """Deviance of the indicator data set at theta (``-2 loglike``; its saturated model has loglike 0)."""
        return float(self._terms(theta).deviance[0])

    def evaluate(self, theta) -> PartsAtTheta:
        """Score, information and deviance at theta: what a site returns per Fisher-scoring step."""
        t = self._terms(theta)
        return PartsAtTheta(t.score[0], _matrix(t.info[0]), float(t.deviance[0]))

    @property
    def is_degenerate(self) -> bool:
        """True when the counts are (quasi-completely) separated: no finite estimate (see ``degenerate_counts``)."""
        if self._is_degenerate is None:
            self._is_degenerate = bool(degenerate_counts(self.counts, self.n_trials))
        return self._is_degenerate


def rocglm_auc(params) -> float | np.ndarray:
    """AUC of the binormal ROC curve: ``Phi(gamma1 / sqrt(1 + gamma2^2))`` (vectorised over rows)."""
    p = np.asarray(params, dtype=np.float64)
    value = ndtr(p[..., 0] / np.sqrt(1.0 + p[..., 1] ** 2))
    return float(value) if np.ndim(value) == 0 else value


def rocglm_intercept_for_auc(auc, gamma2: float):
    """The intercept gamma1 whose binormal curve with slope ``gamma2`` has area ``auc`` (inverse of
    :func:`rocglm_auc`): ``Phi^-1(auc) sqrt(1 + gamma2^2)``. Used to draw a CI band of curves."""
    a = np.asarray(auc, dtype=np.float64)
    if np.any((a <= 0) | (a >= 1)) or not np.isfinite(a).all():
        raise ValueError(f"auc must lie strictly between 0 and 1, got {auc}")
    if not np.isfinite(gamma2):
        raise ValueError(f"gamma2 must be finite, got {gamma2}")
    value = ndtri(a) * np.sqrt(1.0 + float(gamma2) ** 2)
    return float(value) if value.ndim == 0 else value


def rocglm_curve(params, t) -> np.ndarray:
    """Binormal ROC curve ``Phi(gamma1 + gamma2 Phi^-1(t))`` at false positive rates ``t`` in [0, 1]."""
    g1, g2 = as_theta(params)
    t = np.asarray(t, dtype=np.float64)
    if np.any((t < 0) | (t > 1)) or not np.isfinite(t).all():
        raise ValueError("t must lie in [0, 1]")
    with np.errstate(invalid="ignore"):
        # At t in {0, 1} the probit is infinite; the curve's limits are 0 and 1 for gamma2 > 0.
        return np.where(t == 0.0, 0.0, np.where(t == 1.0, 1.0, ndtr(g1 + g2 * ndtri(t))))
