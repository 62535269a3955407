"""The protocol-comparison design: binormal scores on the logit scale, prevalence 0.3, fixed n, five sites."""

from __future__ import annotations

import numpy as np
from scipy.special import expit
from scipy.stats import norm

from .dgp import N_SITES, Batch

__all__ = ["PREVALENCE", "SEPARATION", "binormal_means", "generate_binormal_batch", "generate_logit_batch"]

PREVALENCE = 0.3
SEPARATION = 1.0  # difference of the classes' mean logits (unit variance): AUC Phi(1 / sqrt 2) = 0.760


def binormal_means(prevalence: float = PREVALENCE, separation: float = SEPARATION) -> tuple[float, float]:
    """Mean logit of negatives and positives for which ``p = expit(z)`` is calibrated.

    With ``z | y ~ N(mu_y, 1)`` the log-likelihood ratio is ``separation (z - (mu0 + mu1) / 2)``; the model
    is calibrated (``P(y = 1 | z) = expit(z)``) when ``separation = 1`` and
    ``mu0 + mu1 = 2 logit(prevalence)``.
    """
    centre = float(np.log(prevalence / (1.0 - prevalence)))
    return centre - separation / 2.0, centre + separation / 2.0


def generate_binormal_batch(seed: int, reps, n: int, *, prevalence: float = PREVALENCE) -> Batch:
    """Replications ``reps`` of ``n`` patients: ``y ~ Bernoulli(prevalence)``, ``logit(p) | y ~ N(mu_y, 1)``.

    Each replication has its own stream ``default_rng([seed, n, rep])`` (so a replication does not depend
    on the chunking) and is split at random into five near-equal sites. Labels are redrawn in the rare
    case that a class has fewer than two patients.
    """
    return generate_logit_batch(seed, reps, n, lambda rng, size: rng.standard_normal(size),
                                auc_population=float(norm.cdf(SEPARATION / np.sqrt(2.0))), prevalence=prevalence)


def generate_logit_batch(seed: int, reps, n: int, spread, *, auc_population: float,
                         prevalence: float = PREVALENCE) -> Batch:
    """Replications of ``p = expit(mu_y + e)``: ``y ~ Bernoulli(prevalence)``, ``e = spread(rng, n)`` of any shape.

    As :func:`generate_binormal_batch` (which is this with standard normal ``e``), with the classes' mean
    logits :func:`binormal_means` and ``auc_population`` the design's population AUC.
    """
    if isinstance(n, bool) or int(n) != n or n < 10:
        raise ValueError(f"n must be an integer >= 10, got {n!r}")
    reps = [int(r) for r in reps]
    if not reps:
        raise ValueError("reps is empty")
    mu0, mu1 = binormal_means(prevalence)
    scores, labels, sites = [], [], []
    for rep in reps:
        rng = np.random.default_rng([int(seed), int(n), rep])
        while True:
            y = (rng.random(n) < prevalence).astype(np.int8)
            if 2 <= y.sum() <= n - 2:
                break
        scores.append(expit(np.where(y == 1, mu1, mu0) + spread(rng, n)))
        labels.append(y)
        site = np.empty(n, dtype=np.int8)
        site[rng.permutation(n)] = np.arange(n) % N_SITES
        sites.append(site)
    size = len(reps)
    return Batch(
        reps=np.array(reps, dtype=np.int64),
        scores=np.concatenate(scores),
        labels=np.concatenate(labels),
        sites=np.concatenate(sites),
        noise=np.zeros(size * n),
        groups=np.repeat(np.arange(size), n),
        n=np.full(size, n, dtype=np.int64),
        n1=np.array([int(y.sum()) for y in labels], dtype=np.int64),
        auc_population=np.full(size, auc_population),
    )
