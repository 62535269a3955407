"""The lattice noise's calibration over a grid of (epsilon, delta): it always ends, with noise no worse than allowed.

Each point either gets a lattice noise whose proven Gaussian-DP mu is at most the continuous mechanism's (whose
largest allowed mu scipy computes here from Balle and Wang 2018, Thm 8) and whose SD is within 0.2 % of that
mechanism's, or a ValueError (the site's INVALID_ARGUMENT) naming epsilon and delta; never another exception.
(0.08, 0.01) and (0.2099, 1e-6) are points where the search once stalled: its sigma steps were smaller than the
rounding of the integer variance, so the same variance was tried again and again.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from dsroc.privacy.lattice import lattice_gaussian


def _largest_mu(epsilon: float, delta: float) -> float:
    def excess(mu):
        return norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2) - delta
    return brentq(excess, 1e-8, 60.0, xtol=1e-15)


def _check(epsilon: float, delta: float, sensitivity: float = 1.0) -> str:
    try:
        noise = lattice_gaussian.__wrapped__(epsilon, delta, sensitivity)
    except ValueError as error:
        assert f"epsilon {epsilon}" in str(error) and f"delta {delta}" in str(error)
        return "refused"
    mu0 = _largest_mu(epsilon, delta)  # scale-free: the Gaussian-DP mu is Delta / tau
    assert noise.mu <= mu0 * (1 + 1e-9), (epsilon, delta, noise)
    assert sensitivity / mu0 * (1 - 1e-9) <= noise.sigma < sensitivity / mu0 * 1.002, (epsilon, delta, noise)
    return "released"


@pytest.mark.parametrize("epsilon, delta", [(0.08, 0.01), (0.2099, 1e-6), (1.5362, 1e-10), (0.2899, 1e-5)])
def test_the_points_where_the_search_stalled_are_released(epsilon, delta):
    assert _check(epsilon, delta) == "released"


def test_a_coarse_grid_is_released_everywhere():
    outcomes = [_check(float(e), d) for e in np.round(np.geomspace(0.02, 10.0, 12), 4) for d in (1e-8, 1e-5, 1e-2)]
    assert outcomes == ["released"] * len(outcomes)


@pytest.mark.slow
def test_the_policy_grid_of_720_points_is_released_everywhere():
    """epsilon from 0.01 to 10 (4 significant digits, 80 values) x delta from 1e-10 to 1e-2 (9 values)."""
    grid = [(float(e), float(d)) for e in np.round(np.geomspace(0.01, 10.0, 80), 4) for d in np.geomspace(1e-10, 1e-2, 9)]
    outcomes = [_check(e, d) for e, d in grid]
    assert len(outcomes) == 720 and outcomes.count("released") == 720
