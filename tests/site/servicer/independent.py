"""What the servicer tests check a site's answers against: brute-force placements, statsmodels' probit GLM."""

from __future__ import annotations

import numpy as np
import statsmodels.api as sm
from scipy.special import ndtri, xlogy
from scipy.stats import norm

from dsroc.v1 import site_pb2 as pb

__all__ = ["NEG", "POS", "GRID", "brute_placements", "statsmodels_parts"]

NEG, POS = pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES


GRID = np.linspace(0, 1, 30)[1:-1]


def brute_placements(ref, query):
    """S_ref(query) with mid-rank ties by an explicit n x m comparison (independent of dsroc's sorting)."""
    ref, query = np.asarray(ref)[None, :], np.asarray(query)[:, None]
    return ((ref > query).sum(1) + 0.5 * (ref == query).sum(1)) / ref.shape[1]


def statsmodels_parts(k, n1, theta, grid=GRID):
    X = sm.add_constant(ndtri(grid))
    model = sm.GLM(np.column_stack([k, n1 - k]), X, family=sm.families.Binomial(link=sm.families.links.Probit()))
    mu = norm.cdf(X @ theta)
    # Deviance of the indicator data set u_ij (Bernoulli; saturated log-likelihood 0): -2 loglik.
    deviance = -2 * np.sum(xlogy(k, mu) + xlogy(n1 - k, 1 - mu))
    return model.score(theta), -model.hessian(theta, observed=False), deviance
