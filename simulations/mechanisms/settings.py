"""The mechanisms study's grid: epsilon x n x K (sites), and the data-generating process shared by every mechanism."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np
from scipy.special import expit, ndtri

__all__ = [
    "EPSILONS", "SIZES", "SITES", "DELTA", "PREVALENCE", "TRUE_AUC", "SHIFT", "MechanismSetting",
    "all_mechanism_settings", "select_mechanism_settings", "MechanismData", "generate_data", "predict",
]

EPSILONS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
SIZES = (250, 1000, 10_000)
SITES = (1, 5, 20)
DELTA = 1e-5  # delta of every approximate-DP mechanism in the grid (Gaussian, discrete Gaussian, Boyd Laplace)
PREVALENCE = 0.3
TRUE_AUC = 0.8
SHIFT = float(np.sqrt(2.0) * ndtri(TRUE_AUC))  # binormal mean shift of the positives' latent score
INTERCEPT = -1.0  # model: p = expit(x + INTERCEPT)


@dataclass(frozen=True)
class MechanismSetting:
    """One cell of the grid: data size ``n``, number of sites ``k`` and privacy loss ``epsilon``."""

    n: int
    k: int
    epsilon: float

    @property
    def name(self) -> str:
        """Stable identifier (file names, tables)."""
        return f"n={self.n}_K={self.k}_eps={self.epsilon:g}"


def all_mechanism_settings() -> list[MechanismSetting]:
    """The 63 settings, ordered by n, K, epsilon."""
    return [MechanismSetting(n, k, e) for n, k, e in product(SIZES, SITES, EPSILONS)]


def select_mechanism_settings(names=None) -> list[MechanismSetting]:
    """Settings by name, or by a prefix such as ``"n=1000"`` or ``"n=1000_K=5"``; all when ``names`` is empty."""
    settings = all_mechanism_settings()
    if not names:
        return settings
    wanted = set()
    for name in names:
        hits = [s for s in settings if s.name == name or s.name.startswith(name + "_")]
        if not hits:
            raise ValueError(f"unknown setting {name!r}; use e.g. 'n=1000', 'n=1000_K=5' or '{settings[0].name}'")
        wanted.update(hits)
    return [s for s in settings if s in wanted]


def predict(x: np.ndarray) -> np.ndarray:
    """The validated model: ``p = expit(x - 1)`` of the one feature ``x`` (rows of an (n, 1) array)."""
    return expit(np.asarray(x)[:, 0] + INTERCEPT)


@dataclass(frozen=True)
class MechanismData:
    """Replications of one data size, stacked: ``b`` replications of ``n`` patients each (row-major).

    ``x`` is the feature (the latent binormal score), ``scores = predict(x)``, ``labels`` exactly
    ``round(PREVALENCE n)`` positives per replication, and ``site_rank`` a random position used to deal
    the patients to K sites stratified by class (:meth:`sites`).
    """

    reps: np.ndarray
    x: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    site_rank: np.ndarray

    @property
    def b(self) -> int:
        """Number of replications."""
        return self.reps.size

    def sites(self, k: int) -> np.ndarray:
        """Site of each patient for K sites: each class dealt round-robin in random order (IID sites of
        near-equal size and equal prevalence)."""
        return (self.site_rank % k).astype(np.int64)


def generate_data(seed: int, reps, n: int) -> MechanismData:
    """Replications ``reps`` of size ``n``; replication r draws from ``default_rng([seed, n, r])`` only."""
    n1 = int(round(PREVALENCE * n))
    xs, ys, ranks = [], [], []
    for r in reps:
        rng = np.random.default_rng([int(seed), int(n), int(r)])
        labels = np.zeros(n, dtype=np.int8)
        labels[:n1] = 1
        x = rng.standard_normal(n) + SHIFT * labels
        rank = np.empty(n, dtype=np.int64)  # position within the class after a random shuffle
        for members in (np.flatnonzero(labels == 0), np.flatnonzero(labels == 1)):
            rank[rng.permutation(members)] = np.arange(members.size)
        xs.append(x), ys.append(labels), ranks.append(rank)
    x = np.stack(xs)
    return MechanismData(np.asarray(list(reps), dtype=np.int64), x, expit(x + INTERCEPT), np.stack(ys), np.stack(ranks))
