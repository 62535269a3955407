"""Noise-corrected AUC of the paper protocol: the known Gaussian release noise deconvolved from the released scores, and its CI.

In the paper's distributed procedure the sites place their *true* scores under the pooled *released*
scores (``s + tau z``). The mean placement values then estimate ``A(tau)``, the AUC of the true scores
blurred by noise of variance ``tau^2``: biased towards 0.5 by about ``tau^2 f'(0) / 2`` (``f`` the density
of ``D = s1 - s0``). The correction estimates that blur from the released scores alone: each class's
true-score distribution is deconvolved from its released scores (a Gaussian-mixture NPMLE: components
of a fixed small width at the centres of a grid spanning the releases, weights fitted by EM to the
binned releases, each component blurred by the known ``tau``; Kiefer & Wolfowitz 1956, Laird 1978),
and the AUC is

    A_c = A(tau) + [A_G(0) - A_G(tau)],

where ``A_G(sigma)`` is the fitted distributions' AUC under pair noise ``sigma`` (closed form). Only the
blur from ``0`` to ``tau`` comes from the model; ``A(tau)`` itself is the sites' answer on the true
scores. It needs nothing beyond what the protocol already releases or answers (the placement moments'
means and the released scores). With ``tau = 0`` it is the exact empirical AUC. Sites with different
``tau`` are deconvolved jointly, and ``A_G(tau)`` mixes the sites' levels as the placement means do.
The first-order extrapolation ``2 A(tau) - A(sqrt 2 tau)`` used before leaves an ``O(tau^4)`` bias that
does not shrink with ``n`` on smooth scores (docs/simulations.md).

Its variance is the DeLong variance (sampling) plus the noise's own variance, estimated by redrawing
the known noise around the released scores and recomputing ``A_c`` (deconvolution included): a
parametric bootstrap on what the analyst already holds. The deconvolution is not exact (finite grid,
EM stopped early, shapes it cannot resolve): the CI is bias-aware (Armstrong & Kolesar 2020) for a bias
of at most :data:`MISFIT_SHARE` of the correction.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import ndtr

from .._checks import is_sorted
from .auc import BatchCI, auc_ci_batch
from .batch import check_groups, group_sizes, grouped_mean, grouped_placement_values

__all__ = ["NoiseCorrectedAUC", "noise_corrected_auc", "deconvolution_correction", "grouped_deconvolution_correction",
           "noise_variance", "grouped_noise_variance"]

DEFAULT_DRAWS = 6
DEFAULT_MAX_SIZE = 4_000  # released scores per data set used by the noise bootstrap (variance scaled to n)
GRID_BINS = 60  # bins (and mixture components) spanning each data set's released scores
EM_ITERATIONS = 500  # fixed: the fitted weights are a deterministic function of the binned releases
_CHUNK = 1 << 18  # released scores per step of a pass over them (its temporaries hold this many, not n)
# The deconvolution's own error, as a share of the blur it removes: at most 3-5 % in the study's shapes
# (docs/simulations.md, coverage by score shape); the CI allows 10 % as a bias bound.
MISFIT_SHARE = 0.1


class NoiseCorrectedAUC(NamedTuple):
    """The noise-corrected AUC, its variance and CI (arrays when the inputs are arrays).

    ``auc_tau``: AUC of the true scores against the released ones (from the mean placement values);
    ``correction``: the deconvolved blur ``A_G(0) - A_G(tau)`` added to it; ``noise_variance``: the
    noise's share of ``variance``; ``bias_bound``: the bias the CI allows for (``misfit_share |correction|``).
    """

    auc: float | np.ndarray
    variance: float | np.ndarray
    ci: BatchCI
    auc_tau: float | np.ndarray
    correction: float | np.ndarray
    noise_variance: float | np.ndarray
    bias_bound: float | np.ndarray


def noise_corrected_auc(*, mean_pv0, mean_pv1, correction, delong_variance, noise_variance, level: float = 0.95,
                        method: str = "logit", misfit_share: float = MISFIT_SHARE) -> NoiseCorrectedAUC:
    """``A_c = A(tau) + correction`` with ``A(tau) = (1 - mean PV0 + mean PV1) / 2``, and its CI.

    Parameters
    ----------
    mean_pv0 : float or array
        Mean over the positives of ``PV0 = S~0(s1)``, their true scores placed under the released negatives.
    mean_pv1 : float or array
        Mean over the negatives of ``PV1 = S~1(s0)``.
    correction : float or array
        The deconvolved blur ``A_G(0) - A_G(tau)`` (:func:`deconvolution_correction`); 0 without noise.
    delong_variance : float or array
        DeLong variance from the placement values' moments (the sampling part).
    noise_variance : float or array
        Variance of ``A_c`` due to the noise (:func:`noise_variance`).
    level, method
        As for :func:`dsroc.auc_ci`; where the interval does not exist (``A_c`` outside (0, 1) with the
        logit method) ``ci.defined`` is False and the bounds are NaN.
    misfit_share : float
        Bound on the deconvolution's error as a share of ``|correction|``: the CI is bias-aware for a bias
        of at most ``misfit_share |correction|`` (:func:`dsroc.roc.auc.bias_aware_critical_value`); 0
        gives the plain interval with the variance alone.
    """
    if not (np.isfinite(misfit_share) and 0.0 <= misfit_share <= 1.0):
        raise ValueError(f"misfit_share must lie in [0, 1], got {misfit_share}")
    for name, value in (("mean_pv0", mean_pv0), ("mean_pv1", mean_pv1)):
        v = np.asarray(value, dtype=np.float64)
        if not (np.isfinite(v).all() and ((v >= 0) & (v <= 1)).all()):
            raise ValueError(f"{name} must lie in [0, 1], got {value}")
    c = np.asarray(correction, dtype=np.float64)
    if not (np.isfinite(c).all() and (np.abs(c) <= 1).all()):
        raise ValueError(f"correction must be a finite AUC difference in [-1, 1], got {correction}")
    for name, value in (("delong_variance", delong_variance), ("noise_variance", noise_variance)):
        v = np.asarray(value, dtype=np.float64)
        if not (np.isfinite(v).all() and (v >= 0).all()):
            raise ValueError(f"{name} must be a finite non-negative variance, got {value}")
    auc_tau = 0.5 * (1.0 - np.asarray(mean_pv0, dtype=np.float64) + np.asarray(mean_pv1, dtype=np.float64))
    auc = auc_tau + c
    variance = np.asarray(delong_variance, dtype=np.float64) + np.asarray(noise_variance, dtype=np.float64)
    inside = (auc >= 0.0) & (auc <= 1.0)
    bound = misfit_share * np.abs(c)
    ci = auc_ci_batch(np.where(inside, auc, np.nan), variance, level=level, method=method, bias=bound)
    out = (auc, variance, auc_tau, c, np.asarray(noise_variance, dtype=np.float64), bound)
    if np.ndim(auc) == 0:
        auc, variance, auc_tau, c, noise, bound = (float(v) for v in out)
        return NoiseCorrectedAUC(auc, variance, BatchCI(float(ci.lower), float(ci.upper), bool(ci.defined)),
                                 auc_tau, c, noise, bound)
    return NoiseCorrectedAUC(*out[:2], ci, *out[2:])


def _check_taus(tau, r: np.ndarray) -> np.ndarray:
    t = np.broadcast_to(np.asarray(tau, dtype=np.float64), r.shape)
    if not (np.isfinite(t).all() and (t >= 0).all()):
        raise ValueError("tau must be finite and non-negative")
    return t


def _bin_likelihood(ratio: np.ndarray) -> np.ndarray:
    """``L[c, j, k]``: probability that a score from component ``k`` lands in bin ``j`` after noise, per cell.

    Components sit at the bin centres with SD half a bin; ``ratio`` is each cell's ``tau`` in bin widths.
    The outer bins extend to infinity.
    """
    m = GRID_BINS
    s = np.sqrt(ratio**2 + 0.25)[:, None, None]
    edges = np.arange(1, m)[None, :, None] - np.arange(m)[None, None, :] - 0.5  # inner edges j = 1..m-1
    cdf = ndtr(edges / s)  # (cells, m - 1, m)
    ones, zeros = np.ones_like(cdf[:, :1]), np.zeros_like(cdf[:, :1])
    return np.diff(np.concatenate([zeros, cdf, ones], axis=1), axis=1)


def _pair_auc(w0: np.ndarray, w1: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """``A_G(sigma)`` per cell: fitted positives above fitted negatives under pair noise ``sigma`` (``ratio``
    = ``sigma`` in bin widths); each pair of components differs by ``(j - k)`` bins with SD ``sqrt(1/2 + ratio^2)``."""
    m = GRID_BINS
    diff = np.arange(m)[:, None] - np.arange(m)[None, :]
    kernel = ndtr(diff[None] / np.sqrt(0.5 + ratio**2)[:, None, None])
    return np.einsum("cj,cjk,ck->c", w1, kernel, w0)


def _one_group(size: int) -> np.ndarray:
    """The group ids of a single data set: zeros as a read-only view (no memory per score)."""
    return np.broadcast_to(np.int64(0), (size,))


def _group_bounds(groups: np.ndarray, n_groups: int) -> np.ndarray | None:
    """The ``n_groups + 1`` offsets of the groups' slices when they are stored one after another (the
    batch layout, and a single data set), else None."""
    if groups.size > 1 and not np.all(groups[1:] >= groups[:-1]):
        return None
    return np.searchsorted(groups, np.arange(n_groups + 1))


def _levels(tau, r: np.ndarray) -> np.ndarray:
    """The distinct noise levels of the scores ``r`` (``tau``: a scalar or one per score)."""
    return np.unique(np.asarray(tau, dtype=np.float64)) if r.size else np.empty(0)


def _extremes(lo: np.ndarray, hi: np.ndarray, r: np.ndarray, g: np.ndarray, bounds: np.ndarray | None) -> None:
    """Lower ``lo`` and raise ``hi`` to each group's smallest and largest score of ``r`` (in place)."""
    if bounds is None:
        np.minimum.at(lo, g, r)
        np.maximum.at(hi, g, r)
        return
    full = np.flatnonzero(bounds[1:] > bounds[:-1])
    if full.size:
        lo[full] = np.minimum(lo[full], np.minimum.reduceat(r, bounds[full]))
        hi[full] = np.maximum(hi[full], np.maximum.reduceat(r, bounds[full]))


def _binned(r: np.ndarray, g: np.ndarray, t: np.ndarray, lo: np.ndarray, width: np.ndarray,
            levels: np.ndarray) -> np.ndarray:
    """Counts ``(level, group, bin)`` of the scores ``r`` on their groups' grids, ``_CHUNK`` scores at a time."""
    n_groups = lo.size
    counts = np.zeros((levels.size, n_groups * GRID_BINS), dtype=np.int64)
    for a in range(0, r.size, _CHUNK):
        gc = g[a:a + _CHUNK]
        cells = ((r[a:a + _CHUNK] - lo[gc]) / width[gc]).astype(np.int64)
        np.clip(cells, 0, GRID_BINS - 1, out=cells)
        cells += gc * GRID_BINS
        if levels.size == 1:
            counts[0] += np.bincount(cells, minlength=n_groups * GRID_BINS)
            continue
        tc = t[a:a + _CHUNK]
        for i, level in enumerate(levels):
            counts[i] += np.bincount(cells[tc == level], minlength=n_groups * GRID_BINS)
    return counts.reshape(levels.size, n_groups, GRID_BINS)


def grouped_deconvolution_correction(released0, groups0, released1, groups1, tau0, tau1, *, n_groups: int) -> np.ndarray:
    """:func:`deconvolution_correction` of many data sets at once (group ids as in :mod:`dsroc.batch`).

    Each group's value equals :func:`deconvolution_correction` on that group alone. The scores are
    binned in chunks: beyond the inputs it holds a few arrays of ``_CHUNK`` scores, whatever their number.
    """
    r0, r1 = np.asarray(released0, dtype=np.float64), np.asarray(released1, dtype=np.float64)
    g0, g1 = check_groups(groups0, r0.size, n_groups, name="groups0"), check_groups(groups1, r1.size, n_groups, name="groups1")
    t0, t1 = _check_taus(tau0, r0), _check_taus(tau1, r1)
    if not (np.isfinite(r0).all() and np.isfinite(r1).all()):
        raise ValueError("released scores must be finite")
    lo = np.full(n_groups, np.inf)
    hi = np.full(n_groups, -np.inf)
    for r, g in ((r0, g0), (r1, g1)):
        _extremes(lo, hi, r, g, _group_bounds(g, n_groups))
    span = hi - lo
    width = np.where(np.isfinite(span) & (span > 0), span / GRID_BINS, 1.0)
    lo = np.where(np.isfinite(lo), lo, 0.0)
    levels = np.unique(np.concatenate([_levels(tau0, r0), _levels(tau1, r1)]))
    weights, shares, noisy = [], [], np.zeros(n_groups, dtype=bool)
    for r, g, t in ((r0, g0, t0), (r1, g1, t1)):
        counts = _binned(r, g, t, lo, width, levels)
        per_level = counts.sum(axis=2)  # (level, group)
        size = np.maximum(per_level.sum(axis=0), 1)
        noisy |= per_level[levels > 0].sum(axis=0) > 0
        parts = [(counts[i], _bin_likelihood(level / width)) for i, level in enumerate(levels)]
        w = np.full((n_groups, GRID_BINS), 1.0 / GRID_BINS)
        for _ in range(EM_ITERATIONS):  # EM for the mixing weights (the likelihood is concave in them)
            step = np.zeros_like(w)
            for c, lik in parts:
                fitted = np.matmul(lik, w[:, :, None])[:, :, 0]
                ratio = np.divide(c, fitted, out=np.zeros_like(fitted), where=c > 0)
                step += np.matmul(ratio[:, None, :], lik)[:, 0, :]
            w = w * step / size[:, None]
        weights.append(w)
        shares.append([per_level[i] / size for i in range(levels.size)])
    w0, w1 = weights
    blurred = sum(0.5 * (s0 + s1) * _pair_auc(w0, w1, level / width) for level, s0, s1 in zip(levels, *shares))
    out = _pair_auc(w0, w1, np.zeros(n_groups)) - blurred
    return np.where(noisy, out, 0.0)


def deconvolution_correction(released0, released1, tau0, tau1) -> float:
    """The blur ``A_G(0) - A_G(tau)`` that the noise put on ``A(tau)``, estimated from the released scores.

    Each class's true-score distribution ``G`` is deconvolved from its released scores: a mixture of
    Gaussians of SD half a bin at the centres of :data:`GRID_BINS` equal bins spanning the releases,
    whose weights :data:`EM_ITERATIONS` steps of EM fit to the binned releases, each component blurred by
    the known ``tau`` of each released score. ``A_G(sigma)`` is the fitted positives' AUC against the
    fitted negatives under pair noise ``sigma``; ``A_G(tau)`` mixes the release levels as the placement
    means do (half the negatives' shares, half the positives'). 0 when no score carries noise.

    Parameters
    ----------
    released0, released1 : array_like
        The pooled released negatives and positives.
    tau0, tau1 : float or array_like
        Noise standard deviation of each released negative / positive (a scalar when all sites used the same).
    """
    r0, r1 = np.asarray(released0, dtype=np.float64), np.asarray(released1, dtype=np.float64)
    return float(grouped_deconvolution_correction(r0, _one_group(r0.size), r1, _one_group(r1.size),
                                                  tau0, tau1, n_groups=1)[0])


def noise_variance(released0, released1, tau0, tau1, *, draws: int = DEFAULT_DRAWS,
                   max_size: int = DEFAULT_MAX_SIZE, seed=0) -> float:
    """Variance of the noise-corrected AUC due to the release noise, by redrawing the known noise.

    The released scores stand in for the true ones: each draw adds fresh ``N(0, tau^2)`` noise to them,
    computes ``A_c`` as the protocol would (placement means and deconvolution), and the variance over the
    draws is the estimate. At most ``max_size`` scores (a random subset, class proportions kept in
    expectation) are used and the variance is scaled to the full size (the noise variance falls like
    1/n). Deterministic for a given ``seed``.

    Parameters
    ----------
    released0, released1 : array_like
        The pooled released negatives and positives.
    tau0, tau1 : float or array_like
        Noise standard deviation of each released negative / positive (a scalar when all sites used
        the same).
    seed : int or sequence of int
        Seed of the redrawn noise (``numpy.random.default_rng``).
    """
    r0, r1 = np.asarray(released0, dtype=np.float64), np.asarray(released1, dtype=np.float64)
    return float(grouped_noise_variance(r0, _one_group(r0.size), r1, _one_group(r1.size),
                                        tau0, tau1, n_groups=1, draws=draws, max_size=max_size, seeds=[seed])[0])


def _by_group(groups: np.ndarray, n_groups: int) -> tuple[list, np.ndarray]:
    """Each group's elements, in their order (a slice when the groups are stored one after another,
    else their indices), and the groups' sizes."""
    bounds = _group_bounds(groups, n_groups)
    if bounds is not None:
        return [slice(a, b) for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())], np.diff(bounds)
    sizes = group_sizes(groups, n_groups)
    return np.split(np.argsort(groups, kind="stable"), np.cumsum(sizes)[:-1]), sizes


def _kept(rng: np.random.Generator, idx, p: float) -> np.ndarray:
    """The indices of ``idx`` (a slice or indices) that a uniform draw below ``p`` keeps, one draw per
    element in order (drawn ``_CHUNK`` at a time: the same stream as one draw of all)."""
    size = idx.stop - idx.start if isinstance(idx, slice) else idx.size
    keep = [np.flatnonzero(rng.random(min(_CHUNK, size - a)) < p) + a for a in range(0, size, _CHUNK)]
    keep = np.concatenate(keep) if keep else np.empty(0, dtype=np.intp)
    return keep + idx.start if isinstance(idx, slice) else idx[keep]


def grouped_noise_variance(released0, groups0, released1, groups1, tau0, tau1, *, n_groups: int, seeds,
                           draws: int = DEFAULT_DRAWS, max_size: int = DEFAULT_MAX_SIZE) -> np.ndarray:
    """:func:`noise_variance` of many data sets at once (group ids as in :mod:`dsroc.batch`), one sort per term.

    ``seeds`` holds one seed per group, so each group's value equals :func:`noise_variance` on that
    group alone with its seed (however the groups are batched).
    """
    if isinstance(draws, bool) or int(draws) != draws or draws < 2:
        raise ValueError(f"draws must be an integer >= 2, got {draws!r}")
    if isinstance(max_size, bool) or int(max_size) != max_size or max_size < 4:
        raise ValueError(f"max_size must be an integer >= 4, got {max_size!r}")
    if len(seeds) != n_groups:
        raise ValueError(f"seeds must hold one seed per group ({n_groups}), got {len(seeds)}")
    r0, r1 = np.asarray(released0, dtype=np.float64), np.asarray(released1, dtype=np.float64)
    g0, g1 = check_groups(groups0, r0.size, n_groups, name="groups0"), check_groups(groups1, r1.size, n_groups, name="groups1")
    t0, t1 = _check_taus(tau0, r0), _check_taus(tau1, r1)
    d = int(draws)
    (members0, n0), (members1, n1) = _by_group(g0, n_groups), _by_group(g1, n_groups)
    n = n0 + n1
    # Per group, from its own generator: a random subset of at most ~max_size scores, then d noise draws
    # per kept score. Cell (group, draw) = group * d + draw holds one redrawn data set.
    parts = {0: [], 1: []}
    kept = np.zeros(n_groups)
    for g, (i0, i1), seed in zip(range(n_groups), zip(members0, members1), seeds):
        rng = np.random.default_rng(seed)
        p = min(1.0, max_size / max(int(n[g]), 1))
        for cls, idx, r, t in ((0, i0, r0, t0), (1, i1, r1, t1)):
            if not is_sorted(r[idx]):  # canonical order: the result ignores the input order
                order = np.argsort(r[idx], kind="stable")
                idx = order + idx.start if isinstance(idx, slice) else idx[order]
            if p < 1.0:
                idx = _kept(rng, idx, p)
            elif isinstance(idx, slice):
                idx = np.arange(idx.start, idx.stop)
            kept[g] += idx.size
            s = np.repeat(r[idx][None, :], d, axis=0)  # (draws, kept)
            tt = np.repeat(t[idx][None, :], d, axis=0)
            x = s + tt * rng.standard_normal(s.shape)
            parts[cls].append((s.ravel(), x.ravel(), tt.ravel(), np.repeat(g * d + np.arange(d), idx.size)))
    (s0, x0, u0, c0), (s1, x1, u1, c1) = ([np.concatenate(col) for col in zip(*parts[cls])] for cls in (0, 1))
    cells = n_groups * d
    pv0 = grouped_placement_values(x0, c0, s1, c1, n_groups=cells)  # stand-in positives under noisy negatives
    pv1 = grouped_placement_values(x1, c1, s0, c0, n_groups=cells)
    mean0, mean1 = grouped_mean(pv0, c1, n_groups=cells), grouped_mean(pv1, c0, n_groups=cells)
    correction = grouped_deconvolution_correction(x0, c0, x1, c1, u0, u1, n_groups=cells)
    corrected = 0.5 * (1.0 - mean0 + mean1) + correction
    var = corrected.reshape(n_groups, d).var(axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return var * kept / n
