"""Fitting the ROC-GLM to the maximum-likelihood estimate over pooled counts, remote sites' parts, or many data sets at once."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy.special import ndtri

from .probit import ProbitCounts, ProbitTerms, empirical_probit_start
from .probit_fit import OneFit, iterate_to_mle, newton_one
from .rocglm import PartsAtTheta, RocGlmParts, as_theta, degenerate_counts, rocglm_auc, rocglm_curve, rocglm_grid

__all__ = ["RocGlmResult", "RocGlmBatchResult", "fit_rocglm", "fit_rocglm_batch"]

DEFAULT_START = (0.0, 1.0)  # the diagonal ROC(t) = t: neutral, valid for every data set
_SEPARATED = "the ROC-GLM counts are degenerate"
_BLOCK = 512  # rows per block of a batched fit (see fit_rocglm_batch)
_ETA_SATURATED = 8.0  # |eta| beyond which Phi(eta) is 0 or 1 to about 1e-15, as in R's glm warning


@dataclass
class RocGlmResult:
    """Result of an ROC-GLM fit.

    Attributes
    ----------
    params : ndarray
        ``(gamma1, gamma2)`` of ``ROC(t) = Phi(gamma1 + gamma2 Phi^-1(t))``.
    auc : float
        ``Phi(gamma1 / sqrt(1 + gamma2^2))``.
    iterations : int
        Steps taken. The last step of a converged fit to the MLE is not evaluated (its end point is the
        MLE to ``xtol``), so ``evaluations`` is ``iterations`` then, ``iterations + 1`` otherwise.
    converged : bool
        R's deviance rule met by the last step and, unless ``xtol = 0``, the estimate within ``xtol``
        (relative) of the MLE by the size of the last step and its ratio to the one before (the deviance
        change of an unevaluated last step is the quadratic model's prediction).
    deviance_trace : list of float
        Deviance at each evaluation (a step taken back repeats the deviance it did not improve).
    cov : ndarray
        Inverse expected information at the last evaluation (2 x 2): at the estimate, or one step of
        relative size ``last_step`` from it.
    warnings : list of str
        Non-convergence or extreme fitted values, reported rather than raised.
    last_step : float
        Size of the last step relative to the parameters, ``max|step| / max(max|theta|, 1)``.
    evaluations : int
        Evaluations of the parts (for remote parts: round trips to every site).
    """

    params: np.ndarray
    auc: float
    iterations: int
    converged: bool
    deviance_trace: list
    cov: np.ndarray
    warnings: list = field(default_factory=list)
    last_step: float = float("nan")
    evaluations: int = 0

    @property
    def deviance(self) -> float:
        """Deviance at the last evaluation (at the estimate, to a change of order ``last_step`` squared)."""
        return float(self.deviance_trace[-1])

    def curve(self, t) -> np.ndarray:
        """The fitted ROC curve at false positive rates ``t``."""
        return rocglm_curve(self.params, t)


def _summed_evaluator(parts) -> Callable[[np.ndarray], PartsAtTheta]:
    if callable(parts) and not hasattr(parts, "evaluate"):
        return parts
    if hasattr(parts, "evaluate"):
        return parts.evaluate
    parts = list(parts)
    if not parts or not all(hasattr(p, "evaluate") for p in parts):
        raise ValueError("parts must be a RocGlmParts, a non-empty sequence of objects with .evaluate(theta), or a callable")

    def evaluate(theta):
        total = parts[0].evaluate(theta)
        for p in parts[1:]:
            total = total + p.evaluate(theta)
        return total

    return evaluate


def _grid_probits(parts) -> np.ndarray:
    """Probits of the parts' thresholds, or of the default grid's when the grid is not known (a callable)."""
    if isinstance(parts, RocGlmParts):
        return parts.x
    grid = getattr(parts, "grid", None)
    if grid is None and isinstance(parts, Sequence) and parts:
        grid = getattr(parts[0], "grid", None)
    return ndtri(rocglm_grid() if grid is None else np.asarray(grid, dtype=np.float64))


def _check_local_degenerate(parts) -> None:
    """When the counts are at hand (local parts), refuse separated data up front with a clear cause."""
    seq = [parts] if isinstance(parts, RocGlmParts) else list(parts) if isinstance(parts, Sequence) else []
    if not seq or not all(isinstance(p, RocGlmParts) for p in seq):
        return
    if len(seq) == 1:
        if not seq[0].is_degenerate:
            return
    elif len({p.grid.tobytes() for p in seq}) != 1:
        raise ValueError("all parts must use the same threshold grid")
    k = sum(p.counts for p in seq)
    n = sum(p.n_trials for p in seq)
    if degenerate_counts(k, n):
        if np.all(k == 0):
            cause = "every count k_j is 0 (no positive has a placement value at or below any threshold)"
        elif np.all(k == n):
            cause = "every count k_j equals n1 (all positives' placement values lie below the first threshold: AUC of 1)"
        elif np.all((k == 0) | (k == n)):
            cause = "every count is 0 or n1 (all placement values fall between the same two thresholds)"
        else:
            cause = ("every count is 0 below one threshold and n1 above it (all placement values fall between "
                     "the two thresholds around it: quasi-complete separation)")
        raise ValueError(f"{_SEPARATED}: {cause}; the probit regression has no finite estimate (separation)")


def _check_options(tol: float, xtol: float, max_iter: int) -> None:
    if not (tol > 0):
        raise ValueError(f"tol must be positive, got {tol}")
    if not (xtol >= 0):
        raise ValueError(f"xtol must be non-negative, got {xtol}")
    if isinstance(max_iter, bool) or int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")


def _remote_evaluator(parts):
    """Terms at theta (1, 2) from objects returning :class:`PartsAtTheta` (summed over sites)."""
    evaluate_one = _summed_evaluator(parts)

    def evaluate(theta):
        p = evaluate_one(theta[0])
        score = np.asarray(p.score, dtype=np.float64).reshape(1, 2)
        info = np.asarray(p.information, dtype=np.float64).reshape(2, 2)
        dev = np.asarray([p.deviance], dtype=np.float64)
        if not (np.isfinite(score).all() and np.isfinite(info).all() and np.isfinite(dev).all()):
            raise ValueError(f"the ROC-GLM parts at theta = {theta[0].tolist()} are not finite")
        return ProbitTerms(score, info[[0, 0, 1], [0, 1, 1]][None, :], dev)

    return evaluate


def fit_rocglm(parts, *, start=None, tol: float = 1e-8, xtol: float = 1e-10, max_iter: int = 25) -> RocGlmResult:
    """Fit the ROC-GLM over one or many sites' parts to the maximum-likelihood estimate, in few evaluations.

    Parameters
    ----------
    parts : RocGlmParts, sequence, or callable
        A single :class:`RocGlmParts` (pooled data), a sequence of objects with ``.evaluate(theta)``
        returning :class:`PartsAtTheta` (one per site; their sums drive the update), or a callable
        ``theta -> PartsAtTheta`` that already sums (e.g. a parallel fan-out to remote sites). The grid
        of remote parts is read from ``parts.grid`` (or the first part's), the default grid otherwise.
    start : (float, float), optional
        Starting value. Default: for a single :class:`RocGlmParts`, R's ``glm`` first iterate from the
        counts (no evaluation); otherwise the diagonal ``(0, 1)``.
    tol : float, default 1e-8
        R's ``glm`` rule: the relative deviance change of the last step below ``tol``.
    xtol : float, default 1e-10
        The estimate within ``xtol`` of the MLE relative to the parameters. A single
        :class:`RocGlmParts` (counts at hand) takes Newton steps; other parts (only the score,
        information and deviance known at each theta) a moment step from the start, then quasi-Newton
        steps corrected by the change of the score along the steps (see :func:`dsroc.roc.probit_fit.iterate_to_mle`).
        ``0``: Fisher scoring from the diagonal until R's rule, reproducing R's ``glm`` estimate (about
        1e-6 from the MLE).
    max_iter : int, default 25
        Maximum steps. Non-convergence is reported in ``warnings``, not raised.

    Returns
    -------
    RocGlmResult
    """
    _check_options(tol, xtol, max_iter)
    _check_local_degenerate(parts)
    if start is None:
        theta0 = parts.one.start if isinstance(parts, RocGlmParts) and xtol > 0 else DEFAULT_START
    else:
        theta0 = tuple(as_theta(start).tolist())
    if isinstance(parts, RocGlmParts):
        x = parts.x
        if xtol > 0:
            fit = newton_one(parts.one, *theta0, tol=tol, xtol=xtol, max_iter=max_iter)
        else:
            fit = OneFit.row(iterate_to_mle(parts.probit, np.array([theta0]), tol=tol, xtol=0.0, max_iter=max_iter))
    else:
        x = _grid_probits(parts)
        fit = OneFit.row(iterate_to_mle(_remote_evaluator(parts), np.array([theta0]), tol=tol, xtol=xtol,
                                        max_iter=max_iter, x=x))
    return _result(fit, parts.one.x_ends if isinstance(parts, RocGlmParts) else (x[0], x[-1]),
                   tol=tol, xtol=xtol, max_iter=max_iter)


def _result(fit: OneFit, ends, *, tol: float, xtol: float, max_iter: int) -> RocGlmResult:
    """The result of a one-row fit, with its warnings (also issued); ``ends`` are the grid's first and last probit."""
    g1, g2 = fit.g1, fit.g2
    notes = []
    if not fit.converged:
        rule = "the deviance rule was met but the parameters still moved" if fit.deviance_rule else (
            f"relative deviance change >= {tol:g}")
        notes.append(f"Fisher scoring did not converge in {max_iter} iterations ({rule}; last relative step "
                     f"{fit.last_step:.2g}, xtol {xtol:g})")
    # R's glm warns when fitted probabilities are numerically 0 or 1; check the curve at the ends of the
    # grid (the default grid's when the parts are remote and their grid is not known here).
    if max(abs(g1 + g2 * ends[0]), abs(g1 + g2 * ends[1])) > _ETA_SATURATED:
        notes.append(
            "fitted probabilities numerically 0 or 1 occurred at the ends of the threshold grid: the indicator "
            "data are close to separation (the positives' placement values crowd between few thresholds, "
            "e.g. an AUC near 0 or 1, or a very steep binormal curve); read the estimate with care"
        )
    for note in notes:
        warnings.warn(note, RuntimeWarning, stacklevel=3)
    return RocGlmResult(
        params=np.array([g1, g2]),
        auc=_auc(g1, g2),
        iterations=fit.iterations,
        converged=fit.converged,
        deviance_trace=fit.trace,
        cov=_inverse(*fit.info),
        warnings=notes,
        last_step=fit.last_step,
        evaluations=fit.evaluations,
    )


@dataclass
class RocGlmBatchResult:
    """Results of many independent ROC-GLM fits (one row each).

    ``degenerate`` rows (separated counts) are not fitted: their params and AUC are NaN.
    """

    params: np.ndarray
    auc: np.ndarray
    converged: np.ndarray
    iterations: np.ndarray
    deviance: np.ndarray
    degenerate: np.ndarray
    evaluations: np.ndarray


def fit_rocglm_batch(counts, n_trials, grid=None, *, start=None, tol: float = 1e-8, xtol: float = 1e-10,
                     max_iter: int = 25, newton: bool = True) -> RocGlmBatchResult:
    """Fit many ROC-GLMs at once, vectorised over rows, with the iteration of :func:`fit_rocglm`.

    The rows are fitted in blocks of up to 512 (each row's estimate does not depend on the others).

    Parameters
    ----------
    counts : array_like, shape (B, nT)
        Counts per data set and threshold.
    n_trials : array_like, shape (B,)
        Positives per data set.
    grid : None, int or array_like
        The common threshold grid, or one grid per row (array (B, nT), each row as :func:`rocglm_grid` accepts;
        only with ``newton``): the rows are then fitted as independent one-row fits of their own grids.
    start, tol, xtol, max_iter
        As for :func:`fit_rocglm`.
    newton : bool, default True
        The iteration :func:`fit_rocglm` takes on a single :class:`RocGlmParts` (R's first iterate as
        start, Newton steps); ``False``: the iteration it takes on remote sites' parts, which know only the
        score, information and deviance at each theta (diagonal start, moment step, quasi-Newton steps):
        same steps, same number of evaluations as the distributed fit.
    """
    _check_options(tol, xtol, max_iter)
    grid = _row_grids(grid) if np.ndim(grid) == 2 else rocglm_grid(grid)
    if grid.ndim == 2 and not newton:
        raise ValueError("one grid per row needs newton=True (the remote iteration's moment step has one grid)")
    k = np.asarray(counts, dtype=np.float64)
    n = np.asarray(n_trials, dtype=np.float64)
    if k.ndim != 2 or k.shape[1] != grid.shape[-1] or (grid.ndim == 2 and k.shape[0] != grid.shape[0]):
        raise ValueError(f"counts must have shape (B, {grid.shape[-1]}) (B = {grid.shape[0]} with a grid per row), "
                         f"got {k.shape}")
    if n.shape != (k.shape[0],):
        raise ValueError(f"n_trials must have shape ({k.shape[0]},), got {n.shape}")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n[:, None]):
        raise ValueError("counts must lie between 0 and n_trials, and n_trials must be >= 1")
    degenerate = degenerate_counts(k, n)
    fit = ~degenerate
    B = k.shape[0]
    params = np.full((B, 2), np.nan)
    out_dev = np.full(B, np.nan)
    iterations, evaluations = np.zeros(B, dtype=np.int64), np.zeros(B, dtype=np.int64)
    converged = np.zeros(B, dtype=bool)
    x = ndtri(grid)
    rows = np.flatnonzero(fit)
    # The rows are independent: fitted in blocks whose arrays stay in the CPU cache, and a block iterates
    # only as long as its own slowest row (one block of 12 600 rows took 3x the time of 25 blocks).
    for block in np.array_split(rows, -(-rows.size // _BLOCK)) if rows.size else ():
        kb, nb, xb = k[block], n[block], x if x.ndim == 1 else x[block]
        model = ProbitCounts(xb, kb, nb)
        if start is not None:
            theta0 = np.tile(as_theta(start), (block.size, 1))
        elif newton and xtol > 0:
            theta0 = empirical_probit_start(xb, kb, nb)
        else:
            theta0 = np.tile(DEFAULT_START, (block.size, 1))
        res = iterate_to_mle(model, theta0, tol=tol, xtol=xtol, max_iter=max_iter,
                             observed=model.observed if newton else None, x=None if newton else x)
        params[block], out_dev[block], converged[block] = res.theta, res.deviance, res.converged
        iterations[block], evaluations[block] = res.iterations, res.evaluations
    return RocGlmBatchResult(params, rocglm_auc(params), converged, iterations, out_dev, degenerate, evaluations)


def _row_grids(grid) -> np.ndarray:
    """Validate one threshold grid per row (B, nT), each as :func:`rocglm_grid` requires."""
    g = np.asarray(grid, dtype=np.float64)
    if g.shape[1] < 2:
        raise ValueError(f"each row's grid needs at least 2 thresholds, got shape {g.shape}")
    if not np.isfinite(g).all() or g.min(initial=0.5) <= 0.0 or g.max(initial=0.5) >= 1.0:
        raise ValueError("grid thresholds must be finite and lie strictly inside (0, 1)")
    if np.any(np.diff(g, axis=1) <= 0.0):
        raise ValueError("each row's grid thresholds must be strictly increasing (no duplicates)")
    return g


def _auc(g1: float, g2: float) -> float:
    """:func:`rocglm_auc` of one pair of floats."""
    return 0.5 * math.erfc(-g1 / math.sqrt(1.0 + g2 * g2) / math.sqrt(2.0))


def _inverse(a: float, b: float, d: float) -> np.ndarray:
    """Inverse of the symmetric 2 x 2 matrix ``[[a, b], [b, d]]`` in closed form (pseudo-inverse when singular)."""
    det = a * d - b * b
    if det == 0.0 or not math.isfinite(det):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.linalg.pinv(np.array([[a, b], [b, d]]))
    return np.array([[d / det, -b / det], [-b / det, a / det]])
