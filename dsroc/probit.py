"""Binomial probit likelihood on threshold counts and its Fisher-scoring / Newton iteration, batched over rows."""

from __future__ import annotations

from typing import Callable, NamedTuple

import math

import numpy as np
from scipy.special import log_ndtr

__all__ = ["ProbitCounts", "ProbitTerms", "iterate_to_mle"]

_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


class ProbitTerms(NamedTuple):
    """Log-likelihood derivatives of a batch of binomial probit models at theta (one row per model).

    ``score`` (B, 2); ``info`` (B, 3) holds the symmetric 2 x 2 expected information as
    ``(I00, I01, I11)``; ``deviance`` (B,) is ``-2 loglike``; ``state`` keeps the linear predictors and
    Mills ratios so that :meth:`ProbitCounts.observed` can follow without evaluating again.
    """

    score: np.ndarray
    info: np.ndarray
    deviance: np.ndarray
    state: tuple | None = None


class ProbitCounts:
    """``k_j`` successes out of ``n`` trials at covariate ``x_j``, ``P(success) = Phi(g1 + g2 x_j)``, for B rows.

    The arrays are laid out once so that one evaluation is a dozen vectorised operations on (B, 2 nT)
    arrays: the per-call cost of a 28-point fit is a few microseconds. Everything is in log space
    (log-CDFs, Mills ratios), so extreme linear predictors neither underflow nor divide by zero, and the
    log-likelihood is a sum of log terms.

    Parameters
    ----------
    x : ndarray, shape (nT,)
    k : ndarray, shape (B, nT)
        Successes (float64 holding integers).
    n : ndarray, shape (B,)
        Trials per row.
    """

    def __init__(self, x: np.ndarray, k: np.ndarray, n: np.ndarray):
        nt = x.size
        ones = np.ones(nt)
        # Both tails side by side: column j < nT is Phi(eta_j), column nT + j is 1 - Phi(eta_j) = Phi(-eta_j).
        self.design = np.stack([np.r_[ones, -ones], np.r_[x, -x]])  # (2, 2 nT): eta2 = theta @ design
        self.events = np.concatenate([k, n[:, None] - k], axis=1)  # k_j successes, n - k_j failures
        # d loglike / d eta_j = k r1 - (n - k) r0 with Mills ratios r = phi / Phi(+-eta); sign and
        # 1/sqrt(2 pi) folded in, and both halves summed by the design (2 nT, 2).
        self.signed = np.concatenate([k, k - n[:, None]], axis=1) * _INV_SQRT_2PI
        self.score_design = np.stack([np.r_[ones, ones], np.r_[x, x]], axis=1)
        self.info_design = np.stack([ones, x, x * x], axis=1)  # (nT, 3)
        self.info_design2 = np.concatenate([self.info_design, self.info_design])  # (2 nT, 3)
        self.weight = (n * _INV_SQRT_2PI**2)[:, None]
        self.nt = nt

    def __call__(self, theta: np.ndarray) -> ProbitTerms:
        """Score, expected information and deviance at ``theta`` (B, 2)."""
        eta = theta @ self.design  # (B, 2 nT): eta_j, then -eta_j
        log_cdf = log_ndtr(eta)
        r = eta * eta
        r *= -0.5
        r -= log_cdf
        np.exp(r, out=r)  # sqrt(2 pi) times the Mills ratios phi / Phi(eta) and phi / Phi(-eta)
        score = (r * self.signed) @ self.score_design
        info = (r[:, : self.nt] * r[:, self.nt :] * self.weight) @ self.info_design  # n phi^2 / (Phi (1 - Phi))
        deviance = -2.0 * np.vecdot(log_cdf, self.events)
        return ProbitTerms(score, info, deviance, (eta, r))

    def observed(self, terms: ProbitTerms) -> np.ndarray:
        """Observed information ``(J00, J01, J11)`` per row at the theta where ``terms`` were evaluated.

        ``-d2 loglike / d eta2 = k r1 (eta + r1) + (n - k) r0 (r0 - eta)``: nonnegative (Phi is log-concave).
        """
        eta, r = terms.state
        m = r * _INV_SQRT_2PI
        return (self.events * m * (eta + m)) @ self.info_design2


class Iteration(NamedTuple):
    """Outcome of :func:`iterate_to_mle` (arrays with one entry per row)."""

    theta: np.ndarray
    iterations: np.ndarray
    deviance_rule: np.ndarray  # R's deviance rule met
    converged: np.ndarray  # deviance rule met and the last step below xtol (relative), or xtol = 0
    trace: list  # deviance per evaluation, (B,) arrays
    info: np.ndarray  # expected information at the estimate, (B, 3)
    deviance: np.ndarray
    last_step: np.ndarray  # size of the last step taken, relative to the parameters


def iterate_to_mle(evaluate: Callable[[np.ndarray], ProbitTerms], theta0: np.ndarray, *, tol: float, xtol: float,
                   max_iter: int, observed: Callable[[ProbitTerms], np.ndarray] | None = None) -> Iteration:
    """Fisher scoring to R's deviance rule, then on to the maximum-likelihood estimate.

    ``theta <- theta + I(theta)^-1 V(theta)`` with the expected information ``I``, until
    ``|dev_m - dev_{m-1}| / (|dev_m| + 0.1) < tol`` (R's ``glm`` rule, so that ``xtol = 0`` reproduces
    R's estimate); then further steps until the step is below ``xtol`` relative to the parameters,
    ``max|step| <= xtol * max(max|theta|, 1)``. With ``observed`` (the counts are local, so the observed
    information can be evaluated: a :class:`ProbitCounts`) those further steps are Newton steps, which
    converge quadratically; otherwise Fisher steps (linear convergence, a few more evaluations). A row
    whose step is not finite stops where it is.

    ``evaluate(theta[B, 2]) -> ProbitTerms``; rows are independent. One row takes a scalar loop (same
    rule, no per-step array bookkeeping: a 28-point fit is dominated by its evaluations).
    """
    if theta0.shape[0] == 1:
        return _iterate_one(evaluate, theta0, tol=tol, xtol=xtol, max_iter=max_iter, observed=observed)
    theta = theta0.copy()
    terms = evaluate(theta)
    trace = [terms.deviance.copy()]
    rows = theta.shape[0]
    iterations = np.zeros(rows, dtype=np.int64)
    rule = np.zeros(rows, dtype=bool)
    converged = np.zeros(rows, dtype=bool)
    last_step = np.full(rows, np.inf)
    info = terms.info
    for _ in range(max_iter):
        active = ~converged
        curvature = np.where(rule[:, None], observed(terms), info) if observed is not None and rule.any() else info
        step = _solve(curvature, terms.score)
        active &= np.isfinite(step).all(1)
        if not active.any():
            break
        step[~active] = 0.0
        theta = theta + step
        new = evaluate(theta)
        iterations += active
        rel = np.abs(new.deviance - terms.deviance) / (np.abs(new.deviance) + 0.1)
        size = np.abs(step).max(1) / np.maximum(np.abs(theta).max(1), 1.0)
        last_step = np.where(active, size, last_step)
        rule = rule | (active & (rel < tol))
        # Once the deviance rule holds, a step below xtol leaves the estimate at the MLE to ~xtol.
        converged |= active & rule & (size <= xtol) if xtol > 0 else active & rule
        terms = new if active.all() else _keep(new, terms, active)
        info = terms.info
        trace.append(terms.deviance.copy())
    return Iteration(theta, iterations, rule, converged, trace, info, terms.deviance, last_step)


def _solve(info: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Solve the symmetric 2 x 2 systems ``[[a, b], [b, d]] step = score`` row by row, in closed form."""
    a, b, d = info[:, 0], info[:, 1], info[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        det = a * d - b * b
        return np.stack([d * score[:, 0] - b * score[:, 1], a * score[:, 1] - b * score[:, 0]], axis=1) / det[:, None]


def _keep(new: ProbitTerms, old: ProbitTerms, active: np.ndarray) -> ProbitTerms:
    """The new terms for active rows, the old ones for the others."""
    def pick(a, b):
        return np.where(active.reshape((-1,) + (1,) * (a.ndim - 1)), a, b)

    state = tuple(pick(a, b) for a, b in zip(new.state, old.state)) if new.state is not None else None
    return ProbitTerms(pick(new.score, old.score), pick(new.info, old.info), pick(new.deviance, old.deviance), state)


def _iterate_one(evaluate, theta0, *, tol, xtol, max_iter, observed) -> Iteration:
    """:func:`iterate_to_mle` for a single row, in Python floats."""
    g1, g2 = theta0[0].tolist()
    terms = evaluate(theta0)
    dev = float(terms.deviance[0])
    trace = [dev]
    iterations, rule, converged, size = 0, False, False, math.inf
    for _ in range(max_iter):
        v0, v1 = terms.score[0].tolist()
        a, b, d = (observed(terms) if rule and observed is not None else terms.info)[0].tolist()
        det = a * d - b * b
        s0, s1 = (d * v0 - b * v1) / det if det else math.nan, (a * v1 - b * v0) / det if det else math.nan
        if not (math.isfinite(s0) and math.isfinite(s1)):
            break
        g1, g2 = g1 + s0, g2 + s1
        new = evaluate(np.array([[g1, g2]]))
        new_dev = float(new.deviance[0])
        iterations += 1
        size = max(abs(s0), abs(s1)) / max(abs(g1), abs(g2), 1.0)
        rule = rule or abs(new_dev - dev) / (abs(new_dev) + 0.1) < tol
        terms, dev = new, new_dev
        trace.append(dev)
        if rule and (size <= xtol or xtol == 0):
            converged = True
            break
    return Iteration(np.array([[g1, g2]]), np.array([iterations]), np.array([rule]), np.array([converged]),
                     [np.array([d]) for d in trace], terms.info, terms.deviance, np.array([size]))
