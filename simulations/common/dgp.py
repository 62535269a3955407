"""The data-generating process of the paper's published simulation code, one seeded stream per replication."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["N_MIN", "N_MAX", "PREVALENCE_WINDOW", "N_SITES", "Replication", "Batch", "generate_replication", "generate_batch",
           "population_auc"]

N_MIN, N_MAX = 100, 2500
PREVALENCE_WINDOW = (0.1, 0.9)
N_SITES = 5


@dataclass(frozen=True)
class Replication:
    """One simulated data set.

    Attributes
    ----------
    rep : int
        Replication index.
    scores, labels : ndarray
        True scores ``U[0, 1]`` and labels after the random relabelling.
    sites : ndarray of int8
        Site (0..4) of each patient: a random split into five near-equal parts (protocol mode).
    noise : ndarray
        Standard normal draws, one per patient: paper mode adds ``tau * noise`` in every setting
        (common random numbers across settings, as the published code does by reseeding).
    gamma : float
        Fraction of patients whose label was redrawn.
    """

    rep: int
    scores: np.ndarray
    labels: np.ndarray
    sites: np.ndarray
    noise: np.ndarray
    gamma: float


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def generate_replication(seed: int, rep: int, n: int | None = None) -> Replication:
    """Simulate replication ``rep`` of the study with base ``seed``.

    The stream depends on ``(seed, rep)`` only, so any split of the replications over workers gives
    identical data. As in the published code (which differs from the paper's text): n uniform in
    {100, ..., 2500}; scores ``U[0, 1]``; ``y = 1(s > 0.5)``; a random subset of size
    ``floor(gamma n)``, ``gamma ~ U[0, 1]``, gets labels redrawn from Bernoulli(0.5); redrawn (from the
    perfect labels) while the prevalence lies outside [0.1, 0.9]. A given ``n`` (at least 100) replaces
    the uniform draw of the size (the coverage study at n = 10^3 ... 10^6); the rest is unchanged.
    """
    seed = _check_seed(seed)
    if n is not None and (isinstance(n, bool) or int(n) != n or n < N_MIN):
        raise ValueError(f"n must be an integer >= {N_MIN}, got {n!r}")
    if isinstance(rep, bool) or int(rep) != rep or rep < 0:
        raise ValueError(f"rep must be a non-negative integer, got {rep!r}")
    rng = np.random.default_rng([seed, int(rep)])
    n = int(rng.integers(N_MIN, N_MAX + 1)) if n is None else int(n)
    scores = rng.random(n)
    perfect = (scores > 0.5).astype(np.int8)
    lo, hi = PREVALENCE_WINDOW
    while True:
        gamma = float(rng.random())
        m = int(np.floor(gamma * n))
        labels = perfect.copy()
        labels[rng.choice(n, size=m, replace=False)] = rng.integers(0, 2, size=m, dtype=np.int8)
        if lo <= labels.mean() <= hi:
            break
    sites = np.empty(n, dtype=np.int8)
    sites[rng.permutation(n)] = np.arange(n) % N_SITES
    noise = rng.standard_normal(n)
    return Replication(int(rep), scores, labels, sites, noise, gamma)


@dataclass(frozen=True)
class Batch:
    """Replications stacked into one array each, with ``groups`` the position (0..B-1) of each element."""

    reps: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    sites: np.ndarray
    noise: np.ndarray
    groups: np.ndarray
    n: np.ndarray
    n1: np.ndarray
    auc_population: np.ndarray

    @property
    def size(self) -> int:
        """Number of replications."""
        return self.reps.size


def generate_batch(seed: int, reps, n: int | None = None) -> Batch:
    """Generate replications ``reps`` and stack them (each from its own stream, see :func:`generate_replication`)."""
    data = [generate_replication(seed, r, n) for r in reps]
    if not data:
        raise ValueError("reps is empty")
    n = np.array([d.scores.size for d in data], dtype=np.int64)
    return Batch(
        reps=np.array([d.rep for d in data], dtype=np.int64),
        scores=np.concatenate([d.scores for d in data]),
        labels=np.concatenate([d.labels for d in data]),
        sites=np.concatenate([d.sites for d in data]),
        noise=np.concatenate([d.noise for d in data]),
        groups=np.repeat(np.arange(n.size), n),
        n=n,
        n1=np.array([int(d.labels.sum()) for d in data], dtype=np.int64),
        auc_population=population_auc(np.floor(np.array([d.gamma for d in data]) * n) / n),
    )


def population_auc(redrawn) -> np.ndarray:
    """AUC of the population a replication is drawn from, given the fraction ``redrawn`` of relabelled patients.

    With ``u = 1 - redrawn`` and ``v = redrawn / 2`` the class densities on [0, 1] are
    ``f0 = 2 (u 1(s < 1/2) + v)`` and ``f1 = 2 (u 1(s > 1/2) + v)``, so ``P(S1 > S0) = u^2 + 3 u v + 2 v^2``
    (1 without relabelling, 1/2 when all labels are redrawn). The prevalence window conditions on the
    sample and is ignored here.
    """
    r = np.asarray(redrawn, dtype=np.float64)
    u, v = 1.0 - r, r / 2.0
    return u * u + 3.0 * u * v + 2.0 * v * v
