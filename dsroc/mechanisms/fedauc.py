"""Sun et al. (2022): label-private AUC in a federation -- FedAUC_RR (randomized response) and FedAUC_Lap.

Privacy unit: *labels* (epsilon-label-DP: neighbours differ in one label; scores are public to the
server, which ranks them). Neither mechanism protects the scores or the site sizes. Ranks are 0-based
global mid-ranks (Sun breaks ties arbitrarily; mid-ranks match the Mann-Whitney AUC). See
SPEC-mechanisms M4-M5.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import expit

from .._checks import as_labels, as_scores, check_scores_labels, split_by_class
from ._common import check_epsilon, check_fraction, check_rng


def rankdata(values):
    """``scipy.stats.rankdata`` (average ranks), imported on first use: scipy.stats costs a site daemon
    about a second at start-up."""
    from scipy.stats import rankdata as ranks

    return ranks(values)

__all__ = [
    "PRIVACY_UNIT",
    "FedAUCResult",
    "LAPLACE_METHODS",
    "global_ranks",
    "rank_auc",
    "flip_probability",
    "randomized_response",
    "debias_auc",
    "fedauc_rr",
    "SiteRankStatistics",
    "site_rank_statistics",
    "site_release",
    "fedauc_laplace",
    "fedauc_laplace_sd",
]

PRIVACY_UNIT = "labels (epsilon-label-DP: one patient's label may change; scores and site sizes are public)"
LAPLACE_METHODS = ("local", "global", "adaptive")


class FedAUCResult(NamedTuple):
    """A FedAUC release: the AUC estimate and the noisy positive count the server used."""

    auc: float
    n_pos: float
    n: int
    epsilon: float


def global_ranks(scores) -> np.ndarray:
    """0-based mid-ranks of all scores (what the server returns to the clients)."""
    return rankdata(as_scores(scores, name="scores")) - 1.0


def rank_auc(rank_sum, n_pos, n):
    """AUC from the positives' 0-based rank sum: ``(sum r y - P (P - 1) / 2) / (P (M - P))``.

    Arguments broadcast (noisy, non-integer values allowed); NaN where ``P`` is not in (0, M).
    """
    p = np.asarray(n_pos, dtype=np.float64)
    m = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where((p > 0) & (p < m), (np.asarray(rank_sum) - p * (p - 1.0) / 2.0) / (p * (m - p)), np.nan)
    return float(out) if out.ndim == 0 else out


def flip_probability(epsilon: float) -> float:
    """Randomized response's flip probability ``rho = 1 / (1 + e^epsilon)``."""
    return float(expit(-check_epsilon(epsilon)))


def randomized_response(labels, *, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Flip each 0/1 label independently with probability ``1 / (1 + e^epsilon)`` (epsilon-label-DP, local).

    ``labels`` may have any shape (e.g. one row per data set); the result has the same shape.
    """
    arr = np.asarray(labels)
    y = as_labels(arr.ravel()).reshape(arr.shape)
    flip = check_rng(rng).random(y.shape) < flip_probability(epsilon)
    return (y ^ flip).astype(np.int8)


def debias_auc(auc_noisy, *, n_pos_noisy, n, epsilon: float):
    """Debias an AUC computed on randomized-response labels (Menon et al. 2015; Sun et al. 2022 Alg. 3).

    With ``rho = 1 / (1 + e^eps)``: ``P' = (P~ (1 - rho) - N~ rho) / (1 - 2 rho)``, ``pi' = P' / M``
    clipped to ``[1/M, 1 - 1/M]``, ``alpha = (1 - pi') rho / (pi' (1 - rho) + (1 - pi') rho)``,
    ``beta = pi' rho / (pi' rho + (1 - pi') (1 - rho))`` and
    ``AUC = (AUC~ - (alpha + beta) / 2) / (1 - alpha - beta)`` (not clipped, as Sun). Arrays broadcast.
    """
    rho = flip_probability(epsilon)
    p_noisy = np.asarray(n_pos_noisy, dtype=np.float64)
    m = np.asarray(n, dtype=np.float64)
    p_clean = (p_noisy * (1.0 - rho) - (m - p_noisy) * rho) / (1.0 - 2.0 * rho)
    pi = np.clip(p_clean / m, 1.0 / m, 1.0 - 1.0 / m)
    alpha = (1.0 - pi) * rho / (pi * (1.0 - rho) + (1.0 - pi) * rho)
    beta = pi * rho / (pi * rho + (1.0 - pi) * (1.0 - rho))
    out = (np.asarray(auc_noisy, dtype=np.float64) - (alpha + beta) / 2.0) / (1.0 - alpha - beta)
    return float(out) if out.ndim == 0 else out


def fedauc_rr(scores, labels, *, epsilon: float, rng: np.random.Generator) -> FedAUCResult:
    """FedAUC_RR: flip the labels by randomized response, compute the AUC on the global ranks, debias.

    In a federation each site flips its own labels and returns ``(sum r y~, P~_k)`` for the global ranks
    of its patients; the sums are what this function computes on the pooled data (the flips are
    independent per label, so the split over sites does not change the release's distribution).
    Privacy unit: :data:`PRIVACY_UNIT`.
    """
    epsilon = check_epsilon(epsilon)
    s, y = check_scores_labels(scores, labels)
    split_by_class(s, y)  # both classes present
    flipped = randomized_response(y, epsilon=epsilon, rng=rng)
    ranks = rankdata(s) - 1.0
    p_noisy = float(flipped.sum())
    auc_noisy = rank_auc(float(ranks @ flipped), p_noisy, s.size)
    return FedAUCResult(float(debias_auc(auc_noisy, n_pos_noisy=p_noisy, n=s.size, epsilon=epsilon)), p_noisy,
                        s.size, epsilon)


class SiteRankStatistics(NamedTuple):
    """What each site knows after the server returns the global ranks: per site, the positives' rank sum,
    the number of positives, the site size, the largest rank (LocalLaplace's sensitivity), the mean rank
    and the largest deviation from it (the adaptive split's ``||v||_inf``), and the data set size M."""

    rank_sum: np.ndarray
    n_pos: np.ndarray
    size: np.ndarray
    max_rank: np.ndarray
    mean_rank: np.ndarray
    spread: np.ndarray
    total: int


def site_rank_statistics(ranks, labels, sites, *, n_groups: int | None = None) -> SiteRankStatistics:
    """Per-site rank statistics of FedAUC_Lap, for all sites (groups) at once.

    Parameters
    ----------
    ranks : array_like
        0-based global ranks (:func:`global_ranks`) of the patients.
    labels : array_like
        Their 0/1 labels.
    sites : array_like of int
        Site (group) id of each patient, in ``[0, n_groups)``; every site must hold a patient.
    n_groups : int, optional
        Number of sites; ``max(sites) + 1`` by default.
    """
    r = as_scores(ranks, name="ranks")
    y = as_labels(labels)
    if r.size != y.size:
        raise ValueError(f"ranks and labels must have the same length, got {r.size} and {y.size}")
    k = np.asarray(sites)
    if k.ndim != 1 or k.size != r.size or k.dtype.kind not in "iu" or (k.size and k.min() < 0):
        raise ValueError(f"sites must be non-negative integer site ids, one per patient ({r.size})")
    n_groups = int(k.max()) + 1 if n_groups is None else int(n_groups)
    size = np.bincount(k, minlength=n_groups)
    if size.size != n_groups or np.any(size == 0):
        raise ValueError("every site id in [0, n_groups) must hold at least one patient")
    mean = np.bincount(k, weights=r, minlength=n_groups) / size
    max_rank = np.full(n_groups, -np.inf)
    np.maximum.at(max_rank, k, r)
    spread = np.zeros(n_groups)
    np.maximum.at(spread, k, np.abs(r - mean[k]))
    return SiteRankStatistics(np.bincount(k, weights=r * y, minlength=n_groups),
                              np.bincount(k, weights=y, minlength=n_groups), size, max_rank, mean, spread, int(r.size))


def site_release(stats: SiteRankStatistics, *, method: str = "local", epsilon: float, rng: np.random.Generator,
                 alpha: float = 0.5, exact_counts: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Every site's FedAUC_Lap release ``(localSum', localP')`` (Sun et al. 2022, Alg. 4 and the adaptive split).

    "local"/"global": ``localSum' = localSum + Lap(D_k / (alpha eps))`` with ``D_k`` the site's largest
    rank ("local") or ``M - 1`` ("global"), and ``localP' = localP + Lap(1 / ((1 - alpha) eps))``.
    "adaptive": ``localP' = localP + Lap(1 / (b_k eps))`` and
    ``localSum' = r_bar localP' + <v, y> + ||v||_inf Lap(1 / ((1 - b_k) eps))`` with
    ``b_k = r_bar^(2/3) / (r_bar^(2/3) + ||v||_inf^(2/3))`` (1 when ``v = 0``).
    ``exact_counts=True`` releases localP without noise and spends all of epsilon on the sums (not
    label-DP for the counts: only to reproduce Sun et al.'s Table 2).
    """
    if method not in LAPLACE_METHODS:
        raise ValueError(f"method must be one of {LAPLACE_METHODS}, got {method!r}")
    epsilon = check_epsilon(epsilon)
    alpha = check_fraction(alpha, name="alpha")
    rng = check_rng(rng)
    m = stats.rank_sum.size
    if method == "adaptive":
        r_bar, spread = stats.mean_rank, stats.spread
        if exact_counts:
            noisy_p, noise = stats.n_pos, spread * rng.laplace(0.0, 1.0 / epsilon, size=m)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(spread > 0, r_bar ** (2 / 3) / (r_bar ** (2 / 3) + spread ** (2 / 3)), 1.0)
                noisy_p = stats.n_pos + rng.laplace(0.0, 1.0, size=m) / (share * epsilon)
                noise = np.where(spread > 0, spread * rng.laplace(0.0, 1.0, size=m) / ((1.0 - share) * epsilon), 0.0)
        return r_bar * noisy_p + (stats.rank_sum - r_bar * stats.n_pos) + noise, noisy_p
    sens = stats.max_rank if method == "local" else np.full(m, stats.total - 1.0)
    eps_sum = epsilon if exact_counts else alpha * epsilon
    noisy_sum = stats.rank_sum + rng.laplace(0.0, 1.0, size=m) * sens / eps_sum
    noisy_p = stats.n_pos if exact_counts else stats.n_pos + rng.laplace(0.0, 1.0 / ((1.0 - alpha) * epsilon), size=m)
    return noisy_sum, noisy_p


def fedauc_laplace(scores, labels, *, sites, epsilon: float, rng: np.random.Generator, method: str = "local",
                   alpha: float = 0.5, exact_counts: bool = False) -> FedAUCResult:
    """FedAUC_Lap: Laplace noise on each site's positives' rank sum and positive count (Sun et al. 2022).

    The server ranks all M scores and returns the 0-based ranks; each site releases
    :func:`site_release` of its :func:`site_rank_statistics`; the server computes :func:`rank_auc`
    of the summed releases. Privacy unit: :data:`PRIVACY_UNIT` (the sensitivity ``D_k`` depends on the
    scores, which is fine under label-DP only).

    Parameters
    ----------
    sites : array_like of int
        Site id of each patient.
    method : {"local", "global", "adaptive"}
    alpha : float, default 0.5
        Share of epsilon for the rank sums (local and global).
    exact_counts : bool, default False
        See :func:`site_release`; only for reproducing Sun et al.'s Table 2.
    """
    epsilon = check_epsilon(epsilon)
    s, y = check_scores_labels(scores, labels)
    split_by_class(s, y)  # both classes present
    k = np.asarray(sites)
    if k.ndim != 1 or k.size != s.size or k.dtype.kind not in "iu" or (k.size and k.min() < 0):
        raise ValueError(f"sites must be non-negative integer site ids, one per score ({s.size})")
    _, k = np.unique(k, return_inverse=True)  # drop unused ids
    stats = site_rank_statistics(rankdata(s) - 1.0, y, k)
    noisy_sum, noisy_p = site_release(stats, method=method, epsilon=epsilon, rng=rng, alpha=alpha,
                                      exact_counts=exact_counts)
    p_total = float(noisy_p.sum())
    return FedAUCResult(float(rank_auc(float(noisy_sum.sum()), p_total, s.size)), p_total, s.size, epsilon)


def fedauc_laplace_sd(*, n_pos: int, n_neg: int, n_sites: int, epsilon: float, method: str = "global") -> float:
    """Sun et al.'s SD of the FedAUC_Lap AUC with exact counts and all of epsilon on the rank sums.

    "global": ``sqrt(2 K) (M - 1) / (P N eps)``; "local" with one patient per site (K = M):
    ``sqrt(K (K - 1) (2K - 1) / 3) / (P N eps)``.
    """
    epsilon = check_epsilon(epsilon)
    p, n, k = float(n_pos), float(n_neg), float(n_sites)
    if method == "global":
        return math.sqrt(2.0 * k) * (p + n - 1.0) / (p * n * epsilon)
    if method == "local":
        if k != p + n:
            raise ValueError("the local formula holds for one patient per site (n_sites = n_pos + n_neg)")
        return math.sqrt(k * (k - 1.0) * (2.0 * k - 1.0) / 3.0) / (p * n * epsilon)
    raise ValueError(f"method must be 'global' or 'local', got {method!r}")
