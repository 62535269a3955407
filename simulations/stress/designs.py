"""The stress study's data generator: four score shapes at any prevalence and AUC, with their population truth.

An independent generator (not the binormal design the histogram protocol was tuned on). Every design
has a latent score ``x`` per class and a public score ``p = T(x)`` in [0, 1]:

- ``binormal``: ``x | y ~ N(mu_y, s^2)`` with ``s = sqrt(2) Phi^-1(AUC)``, ``mu1 - mu0 = s^2`` and
  ``mu0 + mu1 = 2 logit(prevalence)``, ``p = expit(x)``: the log-likelihood ratio is ``x - logit(prevalence)``,
  so ``P(y = 1 | p) = p`` (calibrated: calibration slope 1, intercept 0, O/E 1);
- ``skewed``: ``x0`` type-I generalised logistic (CDF ``(1 + e^-x)^-a``, ``a = SKEW``: long left tail),
  ``x1 = x0 + d``; ``p = expit(a + b x)``;
- ``bimodal``: ``x0 ~ 0.5 N(-MODE, SPREAD^2) + 0.5 N(MODE, SPREAD^2)``, ``x1 = x0 + d``; ``p = expit(a + b x)``;
- ``uniform`` (piecewise uniform, like the paper's design): densities ``2 (u 1(x < 1/2) + v)`` (negatives)
  and ``2 (u 1(x > 1/2) + v)`` (positives) on [0, 1], ``v = (1 - u) / 2``; ``p = h x``.

``d`` (or ``u``) is solved so that the population AUC is the design's. For the two location families
``(a, b)`` is the population logistic regression of ``y`` on ``x``, so the scores are calibrated in the
weak sense (calibration intercept 0, slope 1, O/E 1) but not in the strong one (the calibration curve
is not the diagonal); ``h`` makes the mean score equal the prevalence (O/E = 1). The population truth (AUC, Brier score, O/E,
logistic calibration intercept and slope) is computed numerically once per design: every class
expectation is a midpoint rule over the class's quantile function (:data:`QUADRATURE` nodes), and the
calibration fit is the logistic regression of ``y`` on ``logit p`` over those nodes, weighted by the
prevalence (the population's maximum-likelihood fit).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, logit, ndtr, ndtri

__all__ = ["SHAPES", "SKEW", "MODE", "SPREAD", "QUADRATURE", "Design", "PopulationTruth", "population_truth",
           "sample_design", "weighted_logistic"]

SHAPES = ("binormal", "skewed", "bimodal", "uniform")
SKEW = 0.25  # shape of the generalised logistic: a < 1 gives a long left tail
MODE, SPREAD = 1.5, 0.5  # the bimodal components' centres (+-) and SD
QUADRATURE = 50_000  # midpoint nodes per class for the population expectations
_BISECTIONS = 60


@dataclass(frozen=True)
class Design:
    """One data-generating design: score ``shape``, ``prevalence`` and population ``auc``."""

    shape: str
    prevalence: float
    auc: float

    def __post_init__(self):
        if self.shape not in SHAPES:
            raise ValueError(f"shape must be one of {SHAPES}, got {self.shape!r}")
        if not 0.0 < self.prevalence < 1.0:
            raise ValueError(f"prevalence must lie strictly between 0 and 1, got {self.prevalence}")
        if not 0.5 < self.auc < 1.0:
            raise ValueError(f"auc must lie strictly between 0.5 and 1, got {self.auc}")

    @property
    def name(self) -> str:
        """Stable identifier, e.g. ``binormal_prev=0.3_auc=0.76``."""
        return f"{self.shape}_prev={self.prevalence:g}_auc={self.auc:g}"


def _gl_cdf(x):
    return np.exp(-SKEW * np.log1p(np.exp(-x)))


def _gl_ppf(u):
    return -np.log(np.expm1(-np.log(u) / SKEW))


def _bimodal_cdf(x):
    return 0.5 * (ndtr((x + MODE) / SPREAD) + ndtr((x - MODE) / SPREAD))


def _bimodal_ppf(u):
    """Quantiles of the bimodal mixture by bisection of its CDF (vectorised)."""
    lo, hi = np.full_like(u, -MODE - 40 * SPREAD), np.full_like(u, MODE + 40 * SPREAD)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        below = _bimodal_cdf(mid) < u
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def _uniform_cdf(x, u, positive):
    """CDF of the piecewise-uniform class densities on [0, 1] (``positive`` selects the class)."""
    x = np.clip(x, 0.0, 1.0)
    v = (1.0 - u) / 2.0
    low, high = (2 * v, 2 * (u + v)) if positive else (2 * (u + v), 2 * v)
    return np.where(x < 0.5, low * x, 0.5 * low + high * (x - 0.5))


def _uniform_ppf(q, u, positive):
    v = (1.0 - u) / 2.0
    low, high = (2 * v, 2 * (u + v)) if positive else (2 * (u + v), 2 * v)
    knee = 0.5 * low
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(q < knee, q / low, 0.5 + (q - knee) / high)


_NODES = (np.arange(QUADRATURE) + 0.5) / QUADRATURE


def _auc_location(shape: str, d: float) -> float:
    """P(X0 < X0' + d) for the location families, by the midpoint rule over the positives' quantiles."""
    if shape == "skewed":
        return float(_gl_cdf(_gl_ppf(_NODES) + d).mean())
    return float(_bimodal_cdf(_bimodal_nodes() + d).mean())


@lru_cache(maxsize=1)
def _bimodal_nodes() -> np.ndarray:
    return _bimodal_ppf(_NODES)


def _uniform_auc(u: float) -> float:
    v = (1.0 - u) / 2.0
    return u * u + 3 * u * v + 2 * v * v


@lru_cache(maxsize=None)
def _parameters(design: Design) -> tuple:
    """The design's solved parameters: ``(s, mu0, mu1)``, ``(d, a, b)`` or ``(u, h)``."""
    a, pi = design.auc, design.prevalence
    if design.shape == "binormal":
        s = float(np.sqrt(2.0) * ndtri(a))
        centre = float(logit(pi))
        return s, centre - s * s / 2, centre + s * s / 2
    if design.shape == "uniform":
        u = brentq(lambda t: _uniform_auc(t) - a, 0.0, 1.0, xtol=1e-14)
        mean_x = 0.5 - u / 4 + pi * u / 2  # E x = (1 - pi)(u/4 + v) + pi (3u/4 + v)
        return u, pi / mean_x
    d = brentq(lambda t: _auc_location(design.shape, t) - a, 0.0, 60.0, xtol=1e-12)
    x0 = _gl_ppf(_NODES) if design.shape == "skewed" else _bimodal_nodes()
    w = np.concatenate([np.full(QUADRATURE, (1 - pi) / QUADRATURE), np.full(QUADRATURE, pi / QUADRATURE)])
    y = np.concatenate([np.zeros(QUADRATURE), np.ones(QUADRATURE)])
    intercept, slope = weighted_logistic(np.concatenate([x0, x0 + d]), y, w)
    return d, float(intercept), float(slope)


def _class_latent(design: Design, q, positive: bool):
    """Latent scores at quantile levels ``q`` of one class."""
    par = _parameters(design)
    if design.shape == "binormal":
        s, mu0, mu1 = par
        return (mu1 if positive else mu0) + s * ndtri(q)
    if design.shape == "uniform":
        return _uniform_ppf(q, par[0], positive)
    if design.shape == "skewed":
        x0 = _gl_ppf(q)
    else:
        x0 = _bimodal_nodes() if q is _NODES else _bimodal_ppf(q)
    return x0 + (par[0] if positive else 0.0)


def _score_logit(design: Design, x):
    """``logit p`` of latent scores (exact, also where ``p`` rounds to 0 or 1)."""
    par = _parameters(design)
    if design.shape == "binormal":
        return x
    if design.shape == "uniform":
        return logit(par[1] * x)
    return par[1] + par[2] * x


def sample_design(design: Design, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` patients of ``design``: scores ``p``, labels ``y`` (int8) and ``logit p`` (exact); inverse CDF except bimodal."""
    y = (rng.random(n) < design.prevalence).astype(np.int8)
    if design.shape == "bimodal":  # direct draws (the mixture has no closed-form quantile function)
        x = np.where(rng.random(n) < 0.5, -MODE, MODE) + SPREAD * rng.standard_normal(n) + _parameters(design)[0] * y
    else:
        q = rng.random(n)
        x = np.where(y == 1, _class_latent(design, q, True), _class_latent(design, q, False))
    lp = _score_logit(design, x)
    return expit(lp), y, lp


def weighted_logistic(x, y, w, *, tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
    """Intercept and slope of the logistic regression of ``y`` on ``x`` with case weights ``w`` (Newton)."""
    X = np.column_stack([np.ones_like(x), x])
    beta = np.zeros(2)
    for _ in range(max_iter):
        p = expit(X @ beta)
        step = np.linalg.solve((X * (w * p * (1 - p))[:, None]).T @ X, X.T @ (w * (y - p)))
        beta = beta + step
        if np.abs(step).max() < tol:
            return beta
    raise RuntimeError("the population calibration fit did not converge")


@dataclass(frozen=True)
class PopulationTruth:
    """The population values of a design."""

    auc: float
    brier: float
    oe: float
    intercept: float
    slope: float


@lru_cache(maxsize=None)
def population_truth(design: Design) -> PopulationTruth:
    """AUC, Brier score, O/E and logistic calibration intercept and slope of the design's population."""
    pi = design.prevalence
    x0, x1 = _class_latent(design, _NODES, False), _class_latent(design, _NODES, True)
    l0, l1 = _score_logit(design, x0), _score_logit(design, x1)
    p0, p1 = expit(l0), expit(l1)
    if design.shape == "binormal":
        s, mu0, _ = _parameters(design)
        auc = float(ndtr((x1 - mu0) / s).mean())
    elif design.shape == "uniform":
        auc = float(_uniform_cdf(x1, _parameters(design)[0], False).mean())
    else:
        auc = _auc_location(design.shape, _parameters(design)[0])
    brier = float((1 - pi) * (p0**2).mean() + pi * ((1 - p1) ** 2).mean())
    oe = float(pi / ((1 - pi) * p0.mean() + pi * p1.mean()))
    w = np.concatenate([np.full(QUADRATURE, (1 - pi) / QUADRATURE), np.full(QUADRATURE, pi / QUADRATURE)])
    y = np.concatenate([np.zeros(QUADRATURE), np.ones(QUADRATURE)])
    intercept, slope = weighted_logistic(np.concatenate([l0, l1]), y, w)
    return PopulationTruth(auc, brier, oe, float(intercept), float(slope))
