"""Gaussian mechanism calibration (analytic, Balle and Wang 2018; classical) and Gaussian-DP composition."""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

__all__ = [
    "analytic_gaussian_sigma",
    "classical_gaussian_sigma",
    "gdp_release_mu",
    "gdp_mu",
    "gdp_delta",
    "gdp_epsilon",
    "add_gaussian_noise",
]

# Floor for log(delta) in the root finders: brentq needs finite values where delta underflows to 0.
_LOG_FLOOR = -1.0e4


def _check_positive(name: str, value: float) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{name} must be a finite positive number, got {value}")
    return value


def _check_delta(delta: float) -> float:
    delta = float(delta)
    if not (math.isfinite(delta) and 0.0 < delta < 1.0):
        raise ValueError(f"delta must lie strictly between 0 and 1, got {delta}")
    return delta


def _log_gdp_delta(mu: float, epsilon: float) -> float:
    """log of ``Phi(mu/2 - eps/mu) - exp(eps) Phi(-mu/2 - eps/mu)``, computed with log-space CDFs."""
    # Imported here, like brentq below: the site daemon needs this module (its ledger) before it serves,
    # and scipy.special alone costs it ~0.15 s and ~20 MB there.
    from scipy.special import log_ndtr

    log_a = float(log_ndtr(mu / 2.0 - epsilon / mu))
    log_b = epsilon + float(log_ndtr(-mu / 2.0 - epsilon / mu))
    gap = log_b - log_a
    if gap >= 0.0:  # the difference is zero to working precision
        return -math.inf
    return log_a + math.log(-math.expm1(gap))


def gdp_delta(mu: float, epsilon: float) -> float:
    """The delta at which a mu-Gaussian-DP mechanism is (epsilon, delta)-DP.

    ``delta(eps) = Phi(-eps/mu + mu/2) - exp(eps) Phi(-eps/mu - mu/2)`` (Dong, Roth and Su 2019).
    With ``mu = sensitivity / sigma`` this is exactly the analytic Gaussian mechanism's condition.
    """
    mu = _check_positive("mu", mu)
    epsilon = float(epsilon)
    if not (math.isfinite(epsilon) and epsilon >= 0.0):
        raise ValueError(f"epsilon must be finite and non-negative, got {epsilon}")
    return math.exp(_log_gdp_delta(mu, epsilon))


def _largest_mu(epsilon: float, delta: float) -> float:
    """Largest mu with gdp_delta(mu, epsilon) <= delta (gdp_delta increases with mu)."""
    log_delta = math.log(delta)

    def gap(log_mu: float) -> float:
        return max(_log_gdp_delta(math.exp(log_mu), epsilon), _LOG_FLOOR) - log_delta

    lo = hi = 0.0
    while gap(lo) > 0.0:
        lo -= 1.0
    while gap(hi) <= 0.0:
        hi += 1.0
    from scipy.optimize import brentq

    log_mu = brentq(gap, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    mu = math.exp(log_mu)
    # Round down onto the feasible side so that the returned calibration satisfies the condition.
    while math.exp(_log_gdp_delta(mu, epsilon)) > delta:
        mu *= 1.0 - 1e-14
    return mu


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest noise standard deviation giving (epsilon, delta)-DP for l2-sensitivity ``sensitivity``.

    The analytic Gaussian mechanism (Balle and Wang 2018, Theorem 8): the smallest sigma with
    ``Phi(D/(2 sigma) - eps sigma/D) - exp(eps) Phi(-D/(2 sigma) - eps sigma/D) <= delta``. Solved in
    log space with a bracketing root finder, valid for every epsilon > 0 (unlike the classical bound).

    Parameters
    ----------
    epsilon : float
        Privacy loss, > 0.
    delta : float
        Failure probability in (0, 1).
    sensitivity : float
        l2-sensitivity of the released quantity, > 0.

    Returns
    -------
    float
        sigma such that the condition holds at sigma and fails for any smaller value (to 1e-13).
    """
    epsilon = _check_positive("epsilon", epsilon)
    delta = _check_delta(delta)
    sensitivity = _check_positive("sensitivity", sensitivity)
    sigma = sensitivity / _largest_mu(epsilon, delta)
    if not math.isfinite(sigma):
        raise ValueError(f"sensitivity {sensitivity:g} at epsilon {epsilon:g}, delta {delta:g} needs a noise "
                         "standard deviation beyond the floating-point range")
    # The division may round sigma a hair below the feasible value: check in terms of sigma itself.
    while math.exp(_log_gdp_delta(sensitivity / sigma, epsilon)) > delta:
        sigma *= 1.0 + 1e-14
    return sigma


def classical_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Classical Gaussian mechanism ``sigma = sensitivity sqrt(2 ln(1.25/delta)) / epsilon``.

    Only valid for epsilon < 1 (Dwork and Roth 2014, Thm A.1); refuses larger epsilon instead of
    silently returning a calibration that does not give the promised guarantee.
    """
    epsilon = _check_positive("epsilon", epsilon)
    delta = _check_delta(delta)
    sensitivity = _check_positive("sensitivity", sensitivity)
    if epsilon >= 1.0:
        raise ValueError(
            f"the classical Gaussian mechanism is only valid for epsilon < 1, got {epsilon}; "
            "use analytic_gaussian_sigma"
        )
    return sensitivity * math.sqrt(2.0 * (math.log(1.25) - math.log(delta))) / epsilon  # 1.25 / delta can overflow


def gdp_release_mu(sensitivity: float, sigma: float) -> float:
    """Gaussian-DP parameter of one release: ``mu = sensitivity / sigma``."""
    return _check_positive("sensitivity", sensitivity) / _check_positive("sigma", sigma)


def gdp_mu(mus: Iterable[float]) -> float:
    """Compose Gaussian-DP releases: ``mu = sqrt(sum mu_i^2)`` (0 for no release)."""
    values = np.asarray(list(mus), dtype=np.float64)
    if values.size and not (np.isfinite(values).all() and (values >= 0).all()):
        raise ValueError("every mu_i must be finite and non-negative")
    return float(np.sqrt(np.sum(values**2)))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon >= 0 at which a mu-GDP mechanism is (epsilon, delta)-DP."""
    mu = _check_positive("mu", mu)
    delta = _check_delta(delta)
    log_delta = math.log(delta)

    def gap(epsilon: float) -> float:
        return max(_log_gdp_delta(mu, epsilon), _LOG_FLOOR) - log_delta

    if gap(0.0) <= 0.0:
        return 0.0
    hi = 1.0
    while gap(hi) > 0.0:
        hi *= 2.0
    from scipy.optimize import brentq

    epsilon = brentq(gap, 0.0, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)
    while gap(epsilon) > 0.0:  # round up onto the side where the guarantee holds
        epsilon *= 1.0 + 1e-14
    return float(epsilon)


def add_gaussian_noise(scores, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Gaussian mechanism: a copy of ``scores`` with independent ``N(0, sigma^2)`` noise added."""
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma >= 0.0):
        raise ValueError(f"sigma must be finite and non-negative, got {sigma}")
    s = np.asarray(scores, dtype=np.float64)
    return s + rng.normal(0.0, sigma, size=s.shape)
