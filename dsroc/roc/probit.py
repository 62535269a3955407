"""Binomial probit likelihood on threshold counts, batched over rows, and the two starting values of its fit."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import log_ndtr, ndtr, ndtri

__all__ = ["OneCounts", "ProbitCounts", "ProbitTerms", "empirical_probit_start", "moment_step"]

_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


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
    x : ndarray, shape (nT,) or (B, nT)
        The covariate, common to every row or one per row (e.g. each histogram's own thresholds).
    k : ndarray, shape (B, nT)
        Successes (float64 holding integers).
    n : ndarray, shape (B,)
        Trials per row.
    """

    def __init__(self, x: np.ndarray, k: np.ndarray, n: np.ndarray):
        nt = x.shape[-1]
        self.rowwise = x.ndim == 2
        ones = np.ones(nt)
        # Both tails side by side: column j < nT is Phi(eta_j), column nT + j is 1 - Phi(eta_j) = Phi(-eta_j).
        self.events = np.concatenate([k, n[:, None] - k], axis=1)  # k_j successes, n - k_j failures
        # d loglike / d eta_j = k r1 - (n - k) r0 with Mills ratios r = phi / Phi(+-eta); sign and
        # 1/sqrt(2 pi) folded in, and both halves summed by the design (2 nT, 2).
        self.signed = np.concatenate([k, k - n[:, None]], axis=1) * _INV_SQRT_2PI
        self.weight = (n * _INV_SQRT_2PI**2)[:, None]
        self.nt = nt
        self.x, self.k, self.n = x, k, n
        if self.rowwise:  # per-row designs: eta = g1 (1, -1) + g2 (x, -x); sums row by row
            self.design_1, self.design_x = np.r_[ones, -ones], np.concatenate([x, -x], axis=1)
            self.xx = np.concatenate([x, x], axis=1)
            return
        self.design = np.stack([np.r_[ones, -ones], np.r_[x, -x]])  # (2, 2 nT): eta2 = theta @ design
        self.score_design = np.stack([np.r_[ones, ones], np.r_[x, x]], axis=1)
        self.info_design = np.stack([ones, x, x * x], axis=1)  # (nT, 3)
        self.info_design2 = np.concatenate([self.info_design, self.info_design])  # (2 nT, 3)

    def __call__(self, theta: np.ndarray) -> ProbitTerms:
        """Score, expected information and deviance at ``theta`` (B, 2)."""
        if self.rowwise:
            eta = theta[:, :1] * self.design_1 + theta[:, 1:] * self.design_x
        else:
            eta = theta @ self.design  # (B, 2 nT): eta_j, then -eta_j
        log_cdf = log_ndtr(eta)
        r = eta * eta
        r *= -0.5
        r -= log_cdf
        np.exp(r, out=r)  # sqrt(2 pi) times the Mills ratios phi / Phi(eta) and phi / Phi(-eta)
        w = r[:, : self.nt] * r[:, self.nt :] * self.weight  # n phi^2 / (Phi (1 - Phi))
        if self.rowwise:
            rs = r * self.signed
            score = np.stack([rs.sum(1), np.vecdot(rs, self.xx)], axis=1)
            info = np.stack([w.sum(1), np.vecdot(w, self.x), np.vecdot(w, self.x * self.x)], axis=1)
        else:
            score = (r * self.signed) @ self.score_design
            info = w @ self.info_design
        deviance = -2.0 * np.vecdot(log_cdf, self.events)
        return ProbitTerms(score, info, deviance, (eta, r))

    def observed(self, terms: ProbitTerms) -> np.ndarray:
        """Observed information ``(J00, J01, J11)`` per row at the theta where ``terms`` were evaluated.

        ``-d2 loglike / d eta2 = k r1 (eta + r1) + (n - k) r0 (r0 - eta)``: nonnegative (Phi is log-concave).
        """
        eta, r = terms.state
        m = r * _INV_SQRT_2PI
        h = self.events * m * (eta + m)
        if self.rowwise:
            return np.stack([h.sum(1), np.vecdot(h, self.xx), np.vecdot(h, self.xx * self.xx)], axis=1)
        return h @ self.info_design2


class OneCounts:
    """One row of counts laid out for a fit in Python floats: ``model(g1, g2)`` returns the score, the
    observed information and the deviance as floats (and the Mills ratios for :meth:`information`).

    Built once per :class:`~dsroc.RocGlmParts`; an evaluation is 17 numpy calls on 2 nT values (one
    vector of both tails), each sum a dot product with a precomputed weighted design column.

    Parameters
    ----------
    x : ndarray, shape (nT,)
    k : ndarray, shape (nT,)
    n : float
    """

    def __init__(self, x: np.ndarray, k: np.ndarray, n: float):
        nt = x.size
        xx = np.concatenate([x, x])
        self.nt, self.n = nt, float(n)
        # eta2 = (g1, g2) @ design = (eta_j, -eta_j): both tails side by side
        self.design = np.stack([np.concatenate([np.ones(nt), -np.ones(nt)]), np.concatenate([x, -x])])
        self.ones, self.x, self.xx = np.ones(nt), x, x * x
        events = np.concatenate([k, n - k])  # k_j successes, n - k_j failures
        signed = np.concatenate([k, k - n])  # d loglike / d eta_j = k m1 - (n - k) m0
        self.events, self.events_x, self.events_xx = events, events * xx, events * xx * xx
        self.signed, self.signed_x = signed, signed * xx
        self.start = tuple(empirical_probit_start(x, k[None, :], np.array([float(n)]))[0].tolist())
        self.x_ends = (float(x[0]), float(x[-1]))

    def __call__(self, g1: float, g2: float):
        eta = np.dot((g1, g2), self.design)
        log_cdf = log_ndtr(eta)
        m = eta * eta
        m *= -0.5
        m -= log_cdf
        m -= _LOG_SQRT_2PI
        np.exp(m, out=m)  # Mills ratios phi / Phi(eta) and phi / Phi(-eta)
        h = eta + m  # -d2 loglike / d eta2 = k m1 (eta + m1) + (n - k) m0 (m0 - eta): nonnegative
        h *= m
        observed = (float(h @ self.events), float(h @ self.events_x), float(h @ self.events_xx))
        return float(m @ self.signed), float(m @ self.signed_x), observed, -2.0 * float(log_cdf @ self.events), m

    def information(self, m: np.ndarray) -> tuple:
        """Expected information ``(I00, I01, I11) = n sum_j m1 m0 (1, x_j, x_j^2)`` from the Mills ratios."""
        w = m[: self.nt] * m[self.nt :]
        w *= self.n
        return float(w @ self.ones), float(w @ self.x), float(w @ self.xx)


def empirical_probit_start(x: np.ndarray, k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """R's ``glm`` first iterate for binomial counts, one row per model (B, 2): no likelihood evaluation.

    R starts at ``mu_j = (k_j + 1/2) / (n + 1)`` and regresses the working response
    ``eta_j + (k_j / n - mu_j) / phi(eta_j)``, ``eta_j = Phi^-1(mu_j)``, on ``(1, x_j)`` with the IRLS weights
    ``phi(eta_j)^2 / (mu_j (1 - mu_j))``. A row whose regression is singular starts on the diagonal (0, 1).
    """
    mu = (k + 0.5) / (n[:, None] + 1.0)
    eta = ndtri(mu)
    phi = np.exp(-0.5 * eta * eta) * _INV_SQRT_2PI
    z = eta + (k / n[:, None] - mu) / phi
    w = phi * phi / (mu * (1.0 - mu))
    sw, swx, swxx = w.sum(1), np.vecdot(w, x), np.vecdot(w, x * x)  # row by row: results independent of B
    swz, swxz = np.vecdot(w, z), np.vecdot(w * x, z)
    det = sw * swxx - swx * swx
    with np.errstate(divide="ignore", invalid="ignore"):
        start = np.stack([(swxx * swz - swx * swxz) / det, (sw * swxz - swx * swz) / det], axis=1)
    start[~np.isfinite(start).all(1)] = (0.0, 1.0)
    return start


def moment_step(theta: np.ndarray, score: np.ndarray, info: np.ndarray, x: np.ndarray, *, max_inner: int = 60) -> np.ndarray:
    """The binormal curve whose expected score at ``theta`` equals the score observed there (B, 2).

    The score at theta is ``V = sum_j g_j (k_j - n p_j) (1, x_j)`` with ``p_j = Phi(theta . (1, x_j))`` and
    ``g_j = phi / (p_j (1 - p_j))``, all known but the counts; replacing ``k_j`` by its expectation
    ``n Phi(gamma . (1, x_j))`` and solving ``sum_j g_j (Phi(gamma . (1, x_j)) - p_j) (1, x_j) = V / n`` for
    gamma is a Fisher step without linearising Phi: from a far start (the diagonal) it lands within a few
    percent of the MLE where Fisher steps creep. ``n`` follows from the information,
    ``I00 = n sum_j g_j phi_j``. It uses only the score, information and grid, nothing more of the data.
    The equation is the gradient of a convex function of gamma; it is solved by damped Newton steps.
    Rows without a finite solution (counts near separation) get NaN: the caller takes a Fisher step.
    """
    eta = theta[:, :1] + theta[:, 1:] * x  # (B, nT)
    p, q = ndtr(eta), ndtr(-eta)
    phi = np.exp(-0.5 * eta * eta) * _INV_SQRT_2PI
    g = phi / (p * q)
    n = info[:, 0] / np.sum(g * phi, axis=1)
    target = score / n[:, None]
    upper = eta > 0
    gamma = theta.copy()
    rows = np.arange(theta.shape[0])
    for _ in range(max_inner):
        e = gamma[rows, :1] + gamma[rows, 1:] * x
        # Phi(e) - p in the accurate tail: q - Phi(-e) where p is close to 1
        diff = np.where(upper[rows], q[rows] - ndtr(-e), ndtr(e) - p[rows]) * g[rows]
        f = np.stack([diff.sum(1), np.vecdot(diff, x)], axis=1) - target[rows]
        w = g[rows] * np.exp(-0.5 * e * e) * _INV_SQRT_2PI
        a, b, d = w.sum(1), np.vecdot(w, x), np.vecdot(w, x * x)
        with np.errstate(divide="ignore", invalid="ignore"):
            det = a * d - b * b
            step = -np.stack([d * f[:, 0] - b * f[:, 1], a * f[:, 1] - b * f[:, 0]], axis=1) / det[:, None]
            size = np.abs(step).max(1)
            step /= np.maximum(size / 2.0, 1.0)[:, None]  # at most 2 per inner step: Newton on a convex function
        gamma[rows] += step
        bad = ~np.isfinite(size)
        gamma[rows[bad]] = np.nan
        rows = rows[~bad & (size > 1e-13 * np.maximum(np.abs(gamma[rows]).max(1), 1.0))]
        if rows.size == 0:
            return gamma
    gamma[rows] = np.nan
    return gamma
