"""The survival study's data: proportional-hazards event times, a prognostic score, independent censoring; their truth.

Every design is a proportional-hazards model ``S(t | eta) = exp(-c B(t) e^eta)`` with a linear predictor
``eta ~ N(0, SIGMA^2)`` and a baseline shape ``B``:

- ``weibull``: ``B(t) = t^WEIBULL_SHAPE`` (an increasing hazard);
- ``piecewise``: a piecewise-constant baseline hazard, ``PIECEWISE_HAZARDS`` on the intervals cut at
  ``PIECEWISE_KNOTS`` (rising, then falling: not Weibull).

Time is in units of the score's horizon (``HORIZON = 1``) and ``c`` is solved so that the marginal risk of an
event by the horizon is the design's ``risk``. The score is the predicted risk by the horizon,
``r = 1 - exp(-c B(1) e^(a + b eta))``: ``calibrated`` (``a = 0, b = 1``, the true risk) or ``miscalibrated``
(``MISCALIBRATION``: over-predicts and is too flat). Censoring is exponential, independent of everything, its
rate solved so that the population share censored is the design's ``censoring``.

The population values are numerical integrals over ``eta`` (a midpoint rule on :data:`NODES` equal-probability
nodes, pairs on the same node counting one half, as a tie) and, where the censoring enters (Harrell's C), over
time by Gauss-Legendre on :data:`TIME_PANELS` panels. Uno's C at ``tau`` has the closed form
``P(X_i < X_j, X_i < tau) = e^eta_i / (e^eta_i + e^eta_j) (1 - exp(-c B(tau) (e^eta_i + e^eta_j)))`` of a
proportional-hazards model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtri

__all__ = ["MODELS", "CALIBRATIONS", "HORIZON", "SIGMA", "WEIBULL_SHAPE", "PIECEWISE_KNOTS", "PIECEWISE_HAZARDS",
           "MISCALIBRATION", "NODES", "TIME_PANELS", "TAU_QUANTILE", "baseline", "baseline_hazard", "baseline_inverse",
           "Design", "Population", "population", "sample"]

MODELS = ("weibull", "piecewise")
CALIBRATIONS = ("calibrated", "miscalibrated")
HORIZON = 1.0  # the score's horizon: the time unit
SIGMA = 1.0  # SD of the linear predictor (Harrell's C about 0.7)
WEIBULL_SHAPE = 1.5
PIECEWISE_KNOTS = np.array([0.3, 1.0, 2.0])
PIECEWISE_HAZARDS = np.array([0.4, 1.5, 0.8, 0.3])  # relative baseline hazard on [0, .3), [.3, 1), [1, 2), [2, inf)
MISCALIBRATION = (0.3, 0.7)  # (a, b) of the mis-calibrated score
NODES = 1500  # equal-probability nodes of eta
TIME_PANELS = 200  # Gauss-Legendre panels (8 nodes each) of the time integrals
_CUMULATIVE_KNOTS = np.concatenate([[0.0], np.cumsum(PIECEWISE_HAZARDS[:-1] * np.diff(np.r_[0.0, PIECEWISE_KNOTS]))])


def baseline(model: str, t) -> np.ndarray:
    """``B(t)``, the baseline cumulative hazard up to the factor ``c``."""
    t = np.asarray(t, dtype=np.float64)
    if model == "weibull":
        return t**WEIBULL_SHAPE
    knots = np.r_[0.0, PIECEWISE_KNOTS]
    k = np.searchsorted(knots, t, side="right") - 1
    return _CUMULATIVE_KNOTS[k] + PIECEWISE_HAZARDS[k] * (t - knots[k])


def baseline_hazard(model: str, t) -> np.ndarray:
    """``B'(t)``, the baseline hazard up to the factor ``c``."""
    t = np.asarray(t, dtype=np.float64)
    if model == "weibull":
        return WEIBULL_SHAPE * t ** (WEIBULL_SHAPE - 1.0)
    return PIECEWISE_HAZARDS[np.searchsorted(PIECEWISE_KNOTS, t, side="right")]


def baseline_inverse(model: str, u) -> np.ndarray:
    """``B^-1(u)``: the time at which the baseline cumulative hazard reaches ``u``."""
    u = np.asarray(u, dtype=np.float64)
    if model == "weibull":
        return u ** (1.0 / WEIBULL_SHAPE)
    k = np.searchsorted(_CUMULATIVE_KNOTS, u, side="right") - 1
    return np.r_[0.0, PIECEWISE_KNOTS][k] + (u - _CUMULATIVE_KNOTS[k]) / PIECEWISE_HAZARDS[k]


@dataclass(frozen=True)
class Design:
    """One data-generating design: baseline ``model``, marginal ``risk`` by the horizon, share ``censoring``
    censored, and whether the score is ``calibrated``."""

    model: str
    risk: float
    censoring: float
    calibration: str = "calibrated"

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {self.calibration!r}")
        if not 0.0 < self.risk < 1.0:
            raise ValueError(f"risk must lie strictly between 0 and 1, got {self.risk}")
        if not 0.0 < self.censoring < 1.0:
            raise ValueError(f"censoring must lie strictly between 0 and 1, got {self.censoring}")

    @property
    def name(self) -> str:
        return f"{self.model}_risk={self.risk:g}_cens={self.censoring:g}_{self.calibration}"

    @property
    def score_coefficients(self) -> tuple[float, float]:
        return (0.0, 1.0) if self.calibration == "calibrated" else MISCALIBRATION


@dataclass(frozen=True)
class Population:
    """A design's constants (``c``, the censoring rate), its evaluation times and its population values.

    ``median_time`` is the median of the observed follow-up ``min(X, C)`` (where AUC(t) is evaluated), ``tau``
    its :data:`TAU_QUANTILE` quantile (Uno's truncation); ``brier`` and ``oe`` are at the horizon.
    """

    design: Design
    scale: float
    censoring_rate: float
    median_time: float
    tau: float
    auc: float
    uno: float
    harrell: float
    brier: float
    oe: float

    def follow_up_quantiles(self, probabilities) -> np.ndarray:
        """Quantiles of the observed follow-up time ``min(X, C)`` in the population."""
        return np.array([_follow_up_quantile(self.design.model, self.scale, self.censoring_rate, p)
                         for p in np.atleast_1d(probabilities)])

    def values(self) -> dict:
        return {"auc": self.auc, "uno": self.uno, "harrell": self.harrell, "brier": self.brier, "oe": self.oe}


TAU_QUANTILE = 0.8


def _eta_nodes() -> np.ndarray:
    return SIGMA * ndtri((np.arange(NODES) + 0.5) / NODES)


def _marginal_survival(model, scale, t) -> float:
    return float(np.mean(np.exp(-scale * baseline(model, t) * np.exp(_eta_nodes()))))


def _follow_up_survival(model, scale, rate, t) -> float:
    return _marginal_survival(model, scale, t) * np.exp(-rate * t)


def _follow_up_quantile(model, scale, rate, p) -> float:
    target = 1.0 - p
    hi = 1.0
    while _follow_up_survival(model, scale, rate, hi) > target:
        hi *= 2.0
    return brentq(lambda t: _follow_up_survival(model, scale, rate, t) - target, 0.0, hi, xtol=1e-12)


def _time_rule(model, scale, rate) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on ``[0, t_max]`` (``S G`` below 1e-12 beyond), panels at the knots."""
    t_max = 1.0
    while _follow_up_survival(model, scale, rate, t_max) > 1e-12 and t_max < 1e6:
        t_max *= 1.5
    cuts = np.unique(np.r_[np.linspace(0.0, t_max, TIME_PANELS + 1), PIECEWISE_KNOTS[PIECEWISE_KNOTS < t_max]])
    x, w = np.polynomial.legendre.leggauss(8)
    half = 0.5 * np.diff(cuts)[:, None]
    nodes = (0.5 * (cuts[1:] + cuts[:-1]))[:, None] + half * x
    return nodes.ravel(), (half * w).ravel()


def _censored_share(model, scale, rate) -> float:
    """``P(C < X) = 1 - int f(s) G(s) ds``."""
    if rate == 0.0:
        return 0.0
    s, w = _time_rule(model, scale, rate)
    return float(np.sum(w * rate * np.exp(-rate * s) * _marginal_event_free(model, scale, s)))


def _marginal_event_free(model, scale, s) -> np.ndarray:
    e = np.exp(_eta_nodes())
    return np.exp(-scale * baseline(model, s)[:, None] * e[None, :]).mean(axis=1)


def _pairs(weight) -> float:
    """``sum_{i,j} weight_ij [1(eta_i > eta_j) + 1/2 1(eta_i = eta_j)] / sum weight_ij`` on the eta nodes."""
    order = np.tril(np.ones((NODES, NODES)), -1) + 0.5 * np.eye(NODES)  # eta increases with the node index
    return float((weight * order).sum() / weight.sum())


@lru_cache(maxsize=None)
def population(design: Design) -> Population:
    """Solve the design's constants and integrate its population values."""
    model = design.model
    scale = brentq(lambda c: 1.0 - _marginal_survival(model, c, HORIZON) - design.risk, 1e-9, 1e3, xtol=1e-14)
    rate = brentq(lambda m: _censored_share(model, scale, m) - design.censoring, 1e-8, 1e4, xtol=1e-14)
    median, tau = (_follow_up_quantile(model, scale, rate, p) for p in (0.5, TAU_QUANTILE))
    eta = _eta_nodes()
    e = np.exp(eta)
    a, b = design.score_coefficients
    risk = 1.0 - np.exp(-scale * baseline(model, HORIZON) * np.exp(a + b * eta))
    # AUC(t): a case (X_i <= t) outranks a control (X_j > t)
    s_med = np.exp(-scale * baseline(model, median) * e)
    auc = _pairs(np.outer(1.0 - s_med, s_med))
    # Uno: P(X_i < X_j, X_i < tau), closed form
    both = e[:, None] + e[None, :]
    uno = _pairs(e[:, None] / both * -np.expm1(-scale * baseline(model, tau) * both))
    # Harrell: P(X_i < X_j, X_i < C_i, X_i < C_j) = int f_i(s) S_j(s) G(s)^2 ds
    s, w = _time_rule(model, scale, rate)
    hazard = scale * baseline_hazard(model, s)
    surv = np.exp(-scale * baseline(model, s)[:, None] * e[None, :])  # (time, node)
    density = hazard[:, None] * e[None, :] * surv
    harrell = _pairs(density.T @ ((w * np.exp(-2.0 * rate * s))[:, None] * surv))
    s_h = np.exp(-scale * baseline(model, HORIZON) * e)
    brier = float(np.mean((1.0 - s_h) * (1.0 - risk) ** 2 + s_h * risk**2))
    oe = float(np.mean(1.0 - s_h) / np.mean(risk))
    return Population(design, scale, rate, median, tau, auc, uno, harrell, brier, oe)


def sample(design: Design, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` patients of the design: follow-up time ``min(X, C)``, event indicator ``1(X <= C)`` and score."""
    pop = population(design)
    eta = SIGMA * rng.standard_normal(n)
    x = baseline_inverse(design.model, rng.standard_exponential(n) / (pop.scale * np.exp(eta)))
    c = rng.standard_exponential(n) / pop.censoring_rate
    a, b = design.score_coefficients
    risk = -np.expm1(-pop.scale * baseline(design.model, HORIZON) * np.exp(a + b * eta))
    return np.minimum(x, c), (x <= c).astype(np.int64), risk
