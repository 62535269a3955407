"""AUC from noisy histograms: binned empirical AUC, ROC-GLM through the bin edges, and variances including the noise.

Counts are consistent (see :func:`dsroc.histogram.grid.consistent_counts`) arrays of shape ``(..., B)``.
``sigma`` is the standard deviation of the noise in each summed cell (``sqrt`` of the sum of the
sites' variances); it enters the variances only, never the point estimates.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from ..roc.auc import delong_variance_from_moments
from .grid import check_counts, consistent_counts, survivor_at_edges
from ..roc.rocglm import rocglm_auc
from ..roc.rocglm_fit import fit_rocglm_batch
from .resolved import concordance_placements

__all__ = [
    "HistogramRocGlm",
    "check_sigma",
    "histogram_auc",
    "histogram_placements",
    "histogram_delong_variance",
    "histogram_auc_noise_variance",
    "histogram_rocglm",
    "histogram_rocglm_noise_variance",
    "noise_replicates",
    "replicate_rocglm_auc",
    "replicate_variance",
]

DEFAULT_TAIL_COUNT = 0.0


def check_sigma(sigma, *, name: str = "sigma") -> float:
    """Validate a noise standard deviation: a finite number >= 0 (0: exact counts)."""
    if isinstance(sigma, bool):
        raise ValueError(f"{name} must be a finite number >= 0, got {sigma!r}")
    s = float(sigma)
    if not (np.isfinite(s) and s >= 0.0):
        raise ValueError(f"{name} must be a finite number >= 0, got {sigma!r}")
    return s


def _pair(h0, h1):
    c0 = check_counts(h0, name="h0")
    c1 = check_counts(h1, name="h1")
    if c0.shape != c1.shape:
        raise ValueError(f"h0 and h1 must have the same shape, got {c0.shape} and {c1.shape}")
    if np.any(c0 < 0) or np.any(c1 < 0):
        raise ValueError("counts must be non-negative: make noisy counts consistent first (consistent_counts)")
    return c0, c1


def histogram_placements(h0, h1) -> tuple[np.ndarray, np.ndarray]:
    """Placement values per bin with ties counted one half.

    Returns ``(pv0, pv1)``, each ``(..., B)``: ``pv0[b] = S0`` at a positive in bin ``b`` (its false
    positive rate, ``#{neg above} + 1/2 #{neg in b}`` over ``n0``) and ``pv1[b] = S1`` at a negative in bin
    ``b``: the mid-rank placement values of the binned scores.
    """
    c0, c1 = _pair(h0, h1)
    s0, s1 = survivor_at_edges(c0), survivor_at_edges(c1)
    return 0.5 * (s0[..., :-1] + s0[..., 1:]), 0.5 * (s1[..., :-1] + s1[..., 1:])


def histogram_auc(h0, h1) -> np.ndarray | float:
    """Empirical AUC of the binned scores: the Mann-Whitney statistic with within-bin pairs counted one half.

    ``sum_b h0_b S1mid_b / n0``, the mean of the negatives' placement values; equal to the AUC of the
    scores replaced by their bin index.
    """
    c0, _ = _pair(h0, h1)
    _, pv1 = histogram_placements(h0, h1)
    value = (c0 * pv1).sum(-1) / c0.sum(-1)
    return float(value) if value.ndim == 0 else value


def _weighted_var(values, weights):
    n = weights.sum(-1)
    mean = (weights * values).sum(-1) / n
    return (weights * (values - mean[..., None]) ** 2).sum(-1) / (n - 1.0)


def histogram_delong_variance(h0, h1, concordance=None) -> np.ndarray | float:
    """DeLong variance of the binned empirical AUC: ``var(PV1)/n0 + var(PV0)/n1`` over the binned placement values.

    Sampling variance only (the counts taken as exact); needs at least two of each class. ``concordance``
    (per bin, default 1/2): the probability that a within-bin pair is ordered, for the resolved AUC's placement
    values (:func:`dsroc.histogram.resolved.concordance_placements`).
    """
    c0, c1 = _pair(h0, h1)
    pv0, pv1 = concordance_placements(c0, c1, 0.5 if concordance is None else concordance)
    n0, n1 = c0.sum(-1), c1.sum(-1)
    return delong_variance_from_moments(var_pv0=_weighted_var(pv0, c1), n1=n1, var_pv1=_weighted_var(pv1, c0), n0=n0)


def histogram_auc_noise_variance(h0, h1, *, sigma: float) -> np.ndarray | float:
    """Variance of the binned empirical AUC due to independent noise of SD ``sigma`` in every cell (delta method).

    ``dAUC/dh0_b = (S1mid_b - AUC) / n0`` and ``dAUC/dh1_b = (1 - S0mid_b - AUC) / n1``, so the variance is
    ``sigma^2 (sum_b (S1mid_b - AUC)^2 / n0^2 + sum_b (1 - S0mid_b - AUC)^2 / n1^2)``. Evaluated at the
    consistent counts; it ignores the (variance-reducing) consistency step, so it is conservative where
    that step binds.
    """
    sigma = check_sigma(sigma)
    c0, c1 = _pair(h0, h1)
    pv0, pv1 = histogram_placements(c0, c1)
    auc = np.asarray(histogram_auc(c0, c1))[..., None]
    n0, n1 = c0.sum(-1), c1.sum(-1)
    value = sigma**2 * (((pv1 - auc) ** 2).sum(-1) / n0**2 + ((1.0 - pv0 - auc) ** 2).sum(-1) / n1**2)
    return float(value) if np.ndim(value) == 0 else value


class HistogramRocGlm(NamedTuple):
    """ROC-GLM fitted through the ROC points at the bin edges (one row per histogram).

    ``params`` (..., 2) is ``(gamma1, gamma2)``, NaN where no fit exists (fewer than two usable edges,
    or separated counts); ``points`` the number of edges used.
    """

    params: np.ndarray
    auc: np.ndarray
    converged: np.ndarray
    points: np.ndarray


def _edge_points(s0, s1, n0, n1, tail_count):
    """Which inner edges of each histogram (rows of survivor functions (R, E)) are usable as ROC-GLM thresholds:
    FPR strictly inside (0, 1), at least ``tail_count`` estimated negatives and positives on each side, one edge
    per distinct FPR (the lowest edge, i.e. the highest TPR). A mask (R, E)."""
    keep = (s0 > 0) & (s0 < 1)
    if tail_count > 0:
        keep &= (n0[:, None] * np.minimum(s0, 1 - s0) >= tail_count) & (n1[:, None] * np.minimum(s1, 1 - s1) >= tail_count)
    # The survivor function falls along the edges, so equal FPRs are neighbours among the kept edges: an edge is a
    # repeat where the kept edge before it has the same FPR.
    before = np.maximum.accumulate(np.where(keep, np.arange(s0.shape[-1]), -1), axis=-1)
    before = np.concatenate([np.full(before.shape[:-1] + (1,), -1), before[..., :-1]], axis=-1)
    repeat = (before >= 0) & (np.take_along_axis(s0, np.maximum(before, 0), -1) == s0)
    return keep & ~repeat


def histogram_rocglm(h0, h1, *, tail_count: float = DEFAULT_TAIL_COUNT, tol: float = 1e-8, max_iter: int = 25) -> HistogramRocGlm:
    """ROC-GLM from histograms: the binormal curve fitted by the ROC-GLM's Fisher scoring through the bin edges.

    At threshold ``e_b`` the ROC point is exact: ``t_b = S0(e_b)`` and every positive scoring at least
    ``e_b`` has placement value at most ``t_b``, so the ROC-GLM counts on the threshold grid
    ``{t_b}`` are ``k_b = n1 S1(e_b)``. These are fitted with :func:`dsroc.fit_rocglm_batch` (the same
    Fisher scoring as the pooled and distributed fits), each histogram on its own grid, the histograms with
    the same number of usable edges in one batch. Noisy counts make ``n1`` and ``k_b`` non-integer, which the
    binomial probit handles as weights.

    Parameters
    ----------
    h0, h1 : array_like, shape (..., B)
        Consistent counts.
    tail_count : float, default 0
        Use only edges with at least this many estimated negatives and positives on each side (drops
        the noisiest ROC points of noisy histograms).
    tol, max_iter
        Passed to the Fisher scoring.
    """
    c0, c1 = _pair(h0, h1)
    tail_count = check_sigma(tail_count, name="tail_count")
    batch = c0.shape[:-1]
    f0, f1 = c0.reshape(-1, c0.shape[-1]), c1.reshape(-1, c1.shape[-1])
    params = np.full((f0.shape[0], 2), np.nan)
    converged = np.zeros(f0.shape[0], dtype=bool)
    points = np.zeros(f0.shape[0], dtype=np.int64)
    n0, n1 = f0.sum(-1), f1.sum(-1)
    rows = np.flatnonzero((n0 > 0) & (n1 > 0))
    s0 = survivor_at_edges(f0[rows])[:, 1:-1]
    s1 = survivor_at_edges(f1[rows])[:, 1:-1]
    usable = _edge_points(s0, s1, n0[rows], n1[rows], tail_count)
    points[rows] = usable.sum(-1)
    for size in np.unique(points[rows][points[rows] >= 2]).tolist():
        group = np.flatnonzero(points[rows] == size)
        edges = np.nonzero(usable[group])[1].reshape(-1, size)[:, ::-1]  # increasing FPR
        grid = np.take_along_axis(s0[group], edges, 1)
        n = n1[rows[group]]
        k = np.clip(np.take_along_axis(s1[group], edges, 1) * n[:, None], 0.0, n[:, None])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            fit = fit_rocglm_batch(k, n, grid, tol=tol, max_iter=max_iter)
        params[rows[group]], converged[rows[group]] = fit.params, fit.converged
    with np.errstate(over="ignore"):  # a near-vertical curve (huge gamma2) has AUC Phi(0 or +-inf), still defined
        auc = np.asarray(rocglm_auc(params))
    return HistogramRocGlm(params.reshape(batch + (2,)), auc.reshape(batch), converged.reshape(batch), points.reshape(batch))


def noise_replicates(h0, h1, *, sigma: float, draws: int, seeds, extra: int = 0):
    """Replicates of consistent counts ``(R, B)`` with the known noise drawn again: ``(b0, b1, more)``.

    For row ``r``, ``numpy.random.default_rng(seeds[r])`` draws ``draws`` standard normal vectors for ``h0``,
    then ``h1``, then ``extra`` further blocks (``more``, shape ``(R, extra, draws, B)``, e.g. for the score
    sums' noise); ``b0, b1`` (``(R, draws, B)``) are the counts plus ``sigma`` times the first two, made
    consistent again.
    """
    c0, c1 = _pair(h0, h1)
    if isinstance(draws, bool) or not float(draws).is_integer() or draws < 2:
        raise ValueError(f"draws must be an integer >= 2, got {draws!r}")
    if len(seeds) != c0.shape[0]:
        raise ValueError(f"seed must give one seed per histogram ({c0.shape[0]}), got {len(seeds)}")
    d, m = int(draws), c0.shape[-1]
    noise = np.empty((c0.shape[0], 2 + extra, d, m))
    for i, s in enumerate(seeds):
        rng = np.random.default_rng(s)
        for j in range(2 + extra):
            noise[i, j] = rng.standard_normal((d, m))
    b0 = consistent_counts(c0[:, None, :] + sigma * noise[:, 0])
    b1 = consistent_counts(c1[:, None, :] + sigma * noise[:, 1])
    return b0, b1, noise[:, 2:]


def replicate_rocglm_auc(b0, b1, *, tail_count: float = DEFAULT_TAIL_COUNT) -> np.ndarray:
    """ROC-GLM AUC of each replicate ``(R, D, B)`` (NaN where a class is empty or no fit exists)."""
    ok = (b0.sum(-1) > 0) & (b1.sum(-1) > 0)
    auc = np.full(ok.shape, np.nan)
    if ok.any():
        auc[ok] = histogram_rocglm(b0[ok], b1[ok], tail_count=tail_count).auc
    return auc


def replicate_variance(values) -> np.ndarray:
    """Sample variance over the last axis of replicate values, ignoring NaN; NaN with fewer than two finite."""
    fitted = np.isfinite(values).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(fitted >= 2, np.nanvar(np.where(fitted[..., None] >= 2, values, 0.0), axis=-1, ddof=1), np.nan)


def histogram_rocglm_noise_variance(h0, h1, *, sigma: float, draws: int = 100, seed=0,
                                    tail_count: float = DEFAULT_TAIL_COUNT) -> np.ndarray | float:
    """Variance of the histogram ROC-GLM AUC due to the noise, by a parametric bootstrap of the known noise.

    For each histogram (row of ``h0, h1``, shape ``(..., B)``), draws ``draws`` independent Gaussian noise
    vectors of SD ``sigma`` for ``h0`` and then ``h1`` from ``numpy.random.default_rng(seed)`` (``seed``: one
    per row for a batch, any value ``default_rng`` accepts), adds them to the consistent counts, makes
    each consistent again, refits, and returns the sample variance of the AUCs (0 when ``sigma`` is 0,
    NaN when fewer than two draws could be fitted); see :func:`noise_replicates`.
    """
    sigma = check_sigma(sigma)
    c0, c1 = _pair(h0, h1)
    batch, m = c0.shape[:-1], c0.shape[-1]
    f0, f1 = c0.reshape(-1, m), c1.reshape(-1, m)
    seeds = [seed] if c0.ndim == 1 else list(seed)
    b0, b1, _ = noise_replicates(f0, f1, sigma=sigma, draws=draws, seeds=seeds)
    if sigma == 0.0:
        out = np.zeros(f0.shape[0])
    else:
        out = replicate_variance(replicate_rocglm_auc(b0, b1, tail_count=tail_count))
    out = out.reshape(batch)
    return float(out) if out.ndim == 0 else out
