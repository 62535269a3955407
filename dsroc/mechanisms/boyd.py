"""Boyd, Lantz and Page (2015): differentially private AUC and average precision by smooth sensitivity.

Privacy unit: *bounded* DP on rows. Neighbouring data sets have the same size N (public); one row's
score and/or label changes, so n1 and n0 may each move by one and are private. ``delta = 0`` gives
epsilon-DP with heavy-tailed noise (density proportional to ``1 / (1 + |z|^gamma)``, the standard
Cauchy for gamma = 2); ``delta > 0`` gives (epsilon, delta)-DP with Laplace noise (Nissim,
Raskhodnikova and Smith 2007, quoted as Thm 2 of the paper). Releases are clipped to [0, 1]
(post-processing). See SPEC-mechanisms M1-M3.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr, ndtri

from .._checks import split_by_class
from ..roc.auc import check_ties, placement_values
from ..pr.space import average_precision
from ._common import check_count, check_delta, check_epsilon, check_rng

__all__ = [
    "PRIVACY_UNIT",
    "DPRelease",
    "NoiseCalibration",
    "auc_local_sensitivity",
    "ap_local_sensitivity",
    "smooth_sensitivity",
    "smooth_noise_calibration",
    "smooth_noise",
    "smooth_sensitivity_release",
    "dp_auc",
    "dp_average_precision",
    "dp_binormal_roc",
    "dp_class_count",
    "combine_site_releases",
]

PRIVACY_UNIT = "rows (bounded DP: N public, one row's score and label may change; n1, n0 private)"
_BOUNDS = ("log", "harmonic")
_STATISTICS = ("auc", "ap")


class NoiseCalibration(NamedTuple):
    """Smooth-sensitivity noise parameters: ``beta`` for the smoothing and ``factor`` with
    ``noise scale = factor * S*_beta``; ``distribution`` is ``"laplace"`` or ``"cauchy"`` (gamma-tailed)."""

    beta: float
    factor: float
    distribution: str
    gamma: float


class DPRelease(NamedTuple):
    """One smooth-sensitivity release (or arrays of them, see :func:`smooth_sensitivity_release`).

    ``value`` is the released number (clipped to [0, 1]); ``unclipped`` the statistic plus noise;
    ``smooth_sensitivity`` S*_beta and ``scale`` the noise scale actually used; ``n`` the data set size.
    Only ``value`` may be published: ``unclipped``, ``smooth_sensitivity`` and ``scale`` depend on the
    private class counts (S* is a function of n1) and reveal them.
    """

    value: float
    unclipped: float
    smooth_sensitivity: float
    scale: float
    epsilon: float
    delta: float
    n: int


def auc_local_sensitivity(n1, n0):
    """Local sensitivity of the AUC under bounded DP (B15 Thm 3): ``1 / min(n1, n0)``, and 1 if a class is empty.

    Arguments broadcast; a float is returned for scalar input.
    """
    n1 = check_count(n1, name="n1", minimum=0)
    n0 = check_count(n0, name="n0", minimum=0)
    smaller = np.minimum(n1, n0).astype(np.float64)
    with np.errstate(divide="ignore"):
        out = np.where(smaller >= 1, 1.0 / np.maximum(smaller, 1.0), 1.0)
    return float(out) if out.ndim == 0 else out


def _harmonic(k: np.ndarray) -> np.ndarray:
    """Harmonic numbers ``H_k`` for integer arrays ``k >= 0`` (exact cumulative sums up to the largest k)."""
    top = int(np.max(k)) if np.size(k) else 0
    table = np.concatenate(([0.0], np.cumsum(1.0 / np.arange(1, top + 1))))
    return table[k]


def ap_local_sensitivity(n1, *, bound: str = "log"):
    """Local sensitivity of average precision for ``n1`` positives (Boyd 2014, eq. 5.44 / B15 Thm 5).

    ``bound="log"`` (the paper's printed form, default):
    ``max(ln(n+1)/n, (9+ln(n-1))/(4(n-1))) + max(ln(n+1)/n, (9+ln n)/(4n))``;
    ``bound="harmonic"`` (the thesis' tighter form):
    ``max((H_{n+1}-1)/n, (8+H_{n-1})/(4(n-1))) + max((H_{n+1}-1)/n, (8+H_n)/(4n))``.
    Both are 1 for ``n <= 1`` and capped at 1 (AP lies in [0, 1]).
    """
    if bound not in _BOUNDS:
        raise ValueError(f"bound must be one of {_BOUNDS}, got {bound!r}")
    n = check_count(n1, name="n1", minimum=0)
    scalar = n.ndim == 0
    n = np.atleast_1d(n)
    big = n > 1
    m = np.where(big, n, 2).astype(np.float64)
    if bound == "log":
        first = np.maximum(np.log(m + 1) / m, (9 + np.log(m - 1)) / (4 * (m - 1)))
        second = np.maximum(np.log(m + 1) / m, (9 + np.log(m)) / (4 * m))
    else:
        k = m.astype(np.int64)
        h_next, h_prev, h_n = _harmonic(k + 1), _harmonic(k - 1), _harmonic(k)
        first = np.maximum((h_next - 1) / m, (8 + h_prev) / (4 * (m - 1)))
        second = np.maximum((h_next - 1) / m, (8 + h_n) / (4 * m))
    out = np.where(big, np.minimum(first + second, 1.0), 1.0)
    return float(out[0]) if scalar else out


def smooth_sensitivity(n1, n, *, beta: float, statistic: str = "auc", bound: str = "log"):
    """Smooth sensitivity ``S*_beta = max_{0<=i<=N} LS(i) exp(-beta |i - n1|)`` (B15 Thm 4).

    ``LS(i)`` is :func:`auc_local_sensitivity` ``(i, N - i)`` for ``statistic="auc"`` and
    :func:`ap_local_sensitivity` ``(i)`` for ``"ap"``. Vectorised over ``i``; ``n1`` and ``n`` broadcast
    (one maximum per element).

    Parameters
    ----------
    n1 : int or array of int
        Number of positives, ``0 <= n1 <= n``.
    n : int or array of int
        Data set size N (public under bounded DP).
    beta : float
        Smoothing parameter, > 0 (see :func:`smooth_noise_calibration`).
    statistic : {"auc", "ap"}
    bound : {"log", "harmonic"}
        AP only: which local-sensitivity bound.
    """
    if statistic not in _STATISTICS:
        raise ValueError(f"statistic must be one of {_STATISTICS}, got {statistic!r}")
    beta = check_epsilon(beta, name="beta")
    n1, n = np.broadcast_arrays(check_count(n1, name="n1", minimum=0), check_count(n, name="n", minimum=1))
    if np.any(n1 > n):
        raise ValueError("n1 must not exceed n")
    out = np.empty(n1.shape)
    flat_n1, flat_n, flat_out = n1.ravel(), n.ravel(), out.reshape(-1)
    for size in np.unique(flat_n).tolist():
        i = np.arange(size + 1)
        local = auc_local_sensitivity(i, size - i) if statistic == "auc" else ap_local_sensitivity(i, bound=bound)
        where = np.flatnonzero(flat_n == size)
        # Rows of at most ~4 million cells at a time.
        step = max(1, 4_000_000 // (size + 1))
        for lo in range(0, where.size, step):
            idx = where[lo : lo + step]
            dist = np.abs(i[None, :] - flat_n1[idx, None])
            flat_out[idx] = np.max(local[None, :] * np.exp(-beta * dist), axis=1)
    return float(out) if out.ndim == 0 else out


def smooth_noise_calibration(epsilon: float, delta: float = 0.0, *, gamma: float = 2.0) -> NoiseCalibration:
    """Smoothing parameter and noise factor of the smooth-sensitivity framework (NRS 2007; B15 Thm 2).

    ``delta = 0``: ``beta = epsilon / (2 (gamma + 1))`` and noise ``2 (gamma + 1) S* / epsilon`` times a
    variable with density proportional to ``1 / (1 + |z|^gamma)`` (gamma > 1; the standard Cauchy for
    gamma = 2). ``0 < delta < 1``: ``beta = epsilon / (2 ln(2 / delta))`` and noise ``2 S* / epsilon``
    times a standard Laplace variable.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if delta > 0.0:
        # ln(2 / delta) as ln 2 - ln delta: 2 / delta overflows for a subnormal delta (beta 0: no calibration)
        return NoiseCalibration(epsilon / (2.0 * (math.log(2.0) - math.log(delta))), 2.0 / epsilon, "laplace", math.nan)
    gamma = float(gamma)
    if not (math.isfinite(gamma) and gamma > 1.0):
        raise ValueError(f"gamma must be finite and > 1, got {gamma!r}")
    return NoiseCalibration(epsilon / (2.0 * (gamma + 1.0)), 2.0 * (gamma + 1.0) / epsilon, "cauchy", gamma)


def smooth_noise(calibration: NoiseCalibration, *, rng: np.random.Generator, size=None):
    """Standard noise variables of ``calibration``'s distribution (scale 1).

    Laplace: ``rng.laplace``. Gamma-tailed: ``|Z| = (W / (1 - W))^(1/gamma)`` with
    ``W ~ Beta(1/gamma, 1 - 1/gamma)`` and a random sign -- exact, since ``|Z|^gamma`` is then beta-prime
    distributed with density proportional to ``t^(1/gamma - 1) / (1 + t)``; gamma = 2 draws the standard
    Cauchy directly.
    """
    rng = check_rng(rng)
    if calibration.distribution == "laplace":
        return rng.laplace(0.0, 1.0, size=size)
    if calibration.gamma == 2.0:
        return rng.standard_cauchy(size=size)
    g = calibration.gamma
    w = rng.beta(1.0 / g, 1.0 - 1.0 / g, size=size)
    sign = np.where(rng.random(size=size) < 0.5, -1.0, 1.0)
    return sign * (w / (1.0 - w)) ** (1.0 / g)


def smooth_sensitivity_release(stat, n1, n, *, epsilon: float, delta: float = 0.0, rng: np.random.Generator,
                               statistic: str = "auc", bound: str = "log", gamma: float = 2.0) -> DPRelease:
    """Release statistic(s) ``stat`` (AUC or AP of data sets with ``n1`` positives among ``n``) by smooth sensitivity.

    ``stat + factor * S*_beta * eta`` with the calibration of :func:`smooth_noise_calibration` and
    :func:`smooth_sensitivity`, clipped to [0, 1]. Arrays broadcast (one independent draw per element),
    so that many data sets are released at once; :func:`dp_auc` and :func:`dp_average_precision` are the
    one-data-set forms.
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    calibration = smooth_noise_calibration(epsilon, delta, gamma=gamma)
    s_star = smooth_sensitivity(n1, n, beta=calibration.beta, statistic=statistic, bound=bound)
    value = np.asarray(stat, dtype=np.float64)
    if not (np.isfinite(value).all() and (value >= 0).all() and (value <= 1).all()):
        raise ValueError("stat must lie in [0, 1]")
    scale = calibration.factor * np.asarray(s_star)
    shape = np.broadcast_shapes(value.shape, scale.shape)
    noisy = value + scale * smooth_noise(calibration, rng=check_rng(rng), size=shape or None)
    clipped = np.clip(noisy, 0.0, 1.0)
    if np.ndim(noisy) == 0:
        return DPRelease(float(clipped), float(noisy), float(s_star), float(scale), epsilon, delta, int(np.max(n)))
    return DPRelease(clipped, noisy, s_star, np.broadcast_to(scale, shape), epsilon, delta, np.asarray(n))


def dp_auc(scores, labels, *, epsilon: float, delta: float = 0.0, rng: np.random.Generator, gamma: float = 2.0,
           ties: str = "strict") -> DPRelease:
    """Differentially private AUC by smooth sensitivity (Boyd, Lantz and Page 2015, M1).

    Parameters
    ----------
    scores, labels : array_like
        Finite scores (higher means positive) and 0/1 labels; both classes present.
    epsilon : float
        Privacy loss, > 0.
    delta : float, default 0
        0 for epsilon-DP (gamma-tailed noise), in (0, 1) for (epsilon, delta)-DP (Laplace noise).
    rng : numpy.random.Generator
        Source of the noise.
    gamma : float, default 2
        Tail exponent of the delta = 0 noise (2: standard Cauchy).
    ties : {"strict", "mid"}, default "strict"
        ``"strict"``: Boyd's convention, a tied pair counts 0; ``"mid"``: one half. The sensitivity bound
        holds for both (each comparison moves by at most one).

    Returns
    -------
    DPRelease
        The clipped release and the quantities behind it. Privacy unit: :data:`PRIVACY_UNIT`.
    """
    check_ties(ties)
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    s0, s1 = split_by_class(scores, labels)
    auc = float(placement_values(s1, s0, ties=ties).mean())  # mean over negatives of S1(x) = P(Y > X)
    return smooth_sensitivity_release(auc, s1.size, s0.size + s1.size, epsilon=epsilon, delta=delta, rng=rng,
                                      statistic="auc", gamma=gamma)


def dp_average_precision(scores, labels, *, epsilon: float, delta: float = 0.0, rng: np.random.Generator,
                         bound: str = "log", gamma: float = 2.0) -> DPRelease:
    """Differentially private average precision by smooth sensitivity (B15 M2).

    AP is :func:`dsroc.pr.space.average_precision` (negatives tied with a positive rank above it). The
    smooth sensitivity uses :func:`ap_local_sensitivity` with ``bound`` ("log": the paper's printed
    bound; "harmonic": the thesis' tighter one). Noise and clipping as :func:`dp_auc`; the release is
    not clipped to AP_min, which depends on the private class counts.
    """
    if bound not in _BOUNDS:
        raise ValueError(f"bound must be one of {_BOUNDS}, got {bound!r}")
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    s0, s1 = split_by_class(scores, labels)
    ap = average_precision(scores, labels)
    return smooth_sensitivity_release(ap, s1.size, s0.size + s1.size, epsilon=epsilon, delta=delta, rng=rng,
                                      statistic="ap", bound=bound, gamma=gamma)


def dp_binormal_roc(auc: float, fpr) -> tuple[float, np.ndarray]:
    """Symmetric binormal ROC curve through a (private) AUC (B15 M3), pure post-processing.

    ``a = sqrt(2) Phi^-1(A)`` with A clipped to [1e-9, 1 - 1e-9], ``b = 1`` and
    ``ROC(t) = Phi(a + Phi^-1(t))``.

    Returns
    -------
    (a, tpr) : float and ndarray of the true positive rate at each ``fpr``.
    """
    a_value = float(auc)
    if not math.isfinite(a_value):
        raise ValueError(f"auc must be finite, got {auc!r}")
    t = np.asarray(fpr, dtype=np.float64)
    if not (np.isfinite(t).all() and (t >= 0).all() and (t <= 1).all()):
        raise ValueError("fpr must lie in [0, 1]")
    a = math.sqrt(2.0) * float(ndtri(min(max(a_value, 1e-9), 1.0 - 1e-9)))
    with np.errstate(divide="ignore"):
        return a, ndtr(a + ndtri(t))


def dp_class_count(n1, n, *, epsilon: float, rng: np.random.Generator):
    """A site's noisy class counts for H-B1: ``n1~ = n1 + Lap(1 / epsilon)``, ``n0~ = N - n1~`` (N public).

    Under bounded DP one changed row moves n1 by at most one, so this is epsilon-DP. Arrays broadcast.
    """
    epsilon = check_epsilon(epsilon)
    n1 = check_count(n1, name="n1", minimum=0)
    n = check_count(n, name="n", minimum=1)
    noisy = n1 + check_rng(rng).laplace(0.0, 1.0 / epsilon, size=np.shape(n1))
    return noisy, n - noisy


def combine_site_releases(values, n1_noisy, n, *, statistic: str = "auc"):
    """The analyst's combination of per-site releases (H-B1): a weighted mean along the last axis.

    Weights ``n1~_k n0~_k`` for the AUC (the stratified Mann-Whitney weights) and ``n1~_k`` for AP, with
    ``n1~_k`` clipped to ``[0, N_k]`` (post-processing); equal weights where all are zero. The estimand
    is the within-site (stratified) statistic, not the pooled one.
    """
    if statistic not in _STATISTICS:
        raise ValueError(f"statistic must be one of {_STATISTICS}, got {statistic!r}")
    v = np.asarray(values, dtype=np.float64)
    n = np.broadcast_to(np.asarray(n, dtype=np.float64), v.shape)
    n1 = np.clip(np.broadcast_to(np.asarray(n1_noisy, dtype=np.float64), v.shape), 0.0, n)
    w = n1 * (n - n1) if statistic == "auc" else n1
    total = w.sum(axis=-1, keepdims=True)
    w = np.where(total > 0, w, 1.0)
    out = (w * v).sum(axis=-1) / w.sum(axis=-1)
    return float(out) if out.ndim == 0 else out
