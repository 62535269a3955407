"""Random-effects meta-analysis of per-site estimates: tau^2 (REML or DerSimonian-Laird), Hartung-Knapp CI, I^2, PI.

The way ``metamisc::valmeta`` pools per-centre c-statistics and O/E ratios (Debray et al. 2017, 2019):
each site's estimate on a scale where it is close to normal (logit AUC, log O/E), its variance (here
including the site's own privacy noise), a between-site variance tau^2, the pooled mean with the
Hartung-Knapp-Sidik-Jonkman interval (t with k - 1 degrees of freedom), and the 95 % prediction interval
for a new site, ``mu +- t_{k-2} sqrt(tau^2 + SE(mu)^2)`` (Higgins, Thompson and Spiegelhalter 2009;
Riley, Higgins and Deeks 2011).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.special import expit

__all__ = ["MetaAnalysis", "random_effects", "logit_auc", "log_oe", "PooledEstimate", "pool_estimates", "pooled_weights"]

_METHODS = ("reml", "dl")


@dataclass(frozen=True)
class MetaAnalysis:
    """Pooled estimate of a random-effects meta-analysis, on the scale of the effects given.

    Attributes
    ----------
    estimate, se : float
        Pooled mean ``mu`` and its standard error (Hartung-Knapp when ``hartung_knapp``).
    ci, prediction_interval : tuple of float
        Confidence interval of ``mu``; interval for the effect of a new site (NaN with fewer than 3 sites).
    tau2, i2, q : float
        Between-site variance, Higgins' I^2 ``tau2 / (tau2 + s^2)`` with the typical within-site variance ``s^2``
        (share of the variation due to heterogeneity, from the same tau^2 estimator), Cochran's Q.
    weights : ndarray
        Relative random-effects weights ``(v_i + tau^2)^-1``, summing to one.
    k : int
        Number of sites.
    method : str
        ``"reml"`` or ``"dl"``, and whether the Hartung-Knapp interval was used.
    """

    estimate: float
    se: float
    ci: tuple[float, float]
    prediction_interval: tuple[float, float]
    tau2: float
    i2: float
    q: float
    weights: np.ndarray
    k: int
    method: str
    hartung_knapp: bool


def random_effects(effects, variances, *, method: str = "reml", hartung_knapp: bool = True,
                   level: float = 0.95, tol: float = 1e-10, max_iter: int = 100) -> MetaAnalysis:
    """Pool per-site effects under a normal random-effects model ``y_i ~ N(mu, v_i + tau^2)``.

    Parameters
    ----------
    effects, variances : array_like
        One estimate per site and its (within-site) variance, > 0.
    method : {"reml", "dl"}, keyword-only
        Estimator of tau^2: restricted maximum likelihood (Fisher scoring, Viechtbauer 2005; the default
        of ``valmeta``) or DerSimonian and Laird's moment estimator.
    hartung_knapp : bool, keyword-only
        Interval of ``mu`` from the Hartung-Knapp-Sidik-Jonkman variance with ``t_{k-1}`` (default), or
        the normal interval with the usual variance ``1 / sum(w)``.
    level : float, keyword-only
        Coverage of both intervals.
    """
    y = np.asarray(effects, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    if y.ndim != 1 or y.shape != v.shape:
        raise ValueError(f"effects and variances must be 1-D of equal length, got {y.shape} and {v.shape}")
    if y.size < 2:
        raise ValueError(f"a meta-analysis needs at least 2 sites, got {y.size}")
    if not (np.isfinite(y).all() and np.isfinite(v).all() and (v > 0).all()):
        raise ValueError("effects must be finite and variances finite and > 0")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    k = y.size
    w_fe = 1.0 / v
    mu_fe = np.sum(w_fe * y) / w_fe.sum()
    q = float(np.sum(w_fe * (y - mu_fe) ** 2))
    tau2 = _tau2_dl(q, w_fe) if method == "dl" else _tau2_reml(y, v, _tau2_dl(q, w_fe), tol, max_iter)
    w = 1.0 / (v + tau2)
    mu = float(np.sum(w * y) / w.sum())
    if hartung_knapp:
        se = float(np.sqrt(np.sum(w * (y - mu) ** 2) / ((k - 1) * w.sum())))
        crit = stats.t.ppf(0.5 + level / 2, k - 1)
    else:
        se = float(np.sqrt(1.0 / w.sum()))
        crit = stats.norm.ppf(0.5 + level / 2)
    # I^2 from this tau^2 and the typical within-site variance s^2 (Higgins and Thompson 2002), as metafor's rma
    # reports it for every estimator: tau^2 = 0 gives I^2 = 0; for DerSimonian-Laird it equals (Q - (k - 1)) / Q
    typical = (k - 1) * w_fe.sum() / (w_fe.sum() ** 2 - np.sum(w_fe**2))
    i2 = float(tau2 / (tau2 + typical))
    if k >= 3:
        half = stats.t.ppf(0.5 + level / 2, k - 2) * np.sqrt(tau2 + se**2)
        pi = (mu - half, mu + half)
    else:
        pi = (np.nan, np.nan)
    return MetaAnalysis(mu, se, (mu - crit * se, mu + crit * se), (float(pi[0]), float(pi[1])), float(tau2),
                        float(i2), q, w / w.sum(), k, method, hartung_knapp)


def _tau2_dl(q: float, w: np.ndarray) -> float:
    """DerSimonian and Laird's moment estimator, truncated at 0."""
    c = w.sum() - np.sum(w**2) / w.sum()
    return max(0.0, (q - (w.size - 1)) / c)


def _tau2_reml(y, v, start: float, tol: float, max_iter: int) -> float:
    """REML tau^2 by Fisher scoring, ``tau2 += (y'PPy - tr P) / tr(PP)``, kept >= 0 (metafor's algorithm)."""
    tau2 = start
    for _ in range(max_iter):
        w = 1.0 / (v + tau2)
        # P = W - W 1 1' W / sum(w); P y and the traces in O(k)
        py = w * (y - np.sum(w * y) / w.sum())
        tr_p = w.sum() - np.sum(w**2) / w.sum()
        tr_pp = np.sum(w**2) - 2 * np.sum(w**3) / w.sum() + (np.sum(w**2) / w.sum()) ** 2
        new = max(0.0, tau2 + (py @ py - tr_p) / tr_pp)
        if abs(new - tau2) <= tol * max(1.0, tau2):
            return new
        tau2 = new
    raise ValueError(f"REML estimate of tau^2 did not converge in {max_iter} iterations; use method='dl'")


def logit_auc(auc, variance):
    """Per-site AUCs and variances on the logit scale (delta method), where ``valmeta`` pools c-statistics.

    Returns ``(logit(auc), variance / (auc (1 - auc))^2)``; back-transform a pooled value with ``expit``.
    """
    a = np.asarray(auc, dtype=np.float64)
    if not ((a > 0) & (a < 1)).all():
        raise ValueError("auc must lie strictly between 0 and 1 to be pooled on the logit scale")
    return np.log(a / (1 - a)), np.asarray(variance, dtype=np.float64) / (a * (1 - a)) ** 2


def log_oe(oe, variance):
    """Per-site O/E ratios and variances on the log scale (delta method): ``(log oe, variance / oe^2)``."""
    r = np.asarray(oe, dtype=np.float64)
    if not (r > 0).all():
        raise ValueError("oe must be > 0 to be pooled on the log scale")
    return np.log(r), np.asarray(variance, dtype=np.float64) / r**2


# the scale each pooled statistic is normal on: its transform of (estimates, variances) and the way back
_SCALES = {"logit": (logit_auc, expit), "log": (log_oe, np.exp)}


@dataclass(frozen=True)
class PooledEstimate:
    """A random-effects pooled statistic back-transformed to its natural scale, with tau^2 (on the pooling scale),
    I^2, Q and a prediction interval for a new site (NaN with fewer than three sites)."""

    statistic: str
    scale: str
    estimate: float
    lower: float
    upper: float
    prediction_lower: float
    prediction_upper: float
    tau2: float
    i2: float
    q: float
    sites: int
    method: str


def pool_estimates(statistic: str, estimates, variances, *, scale: str, level: float = 0.95) -> PooledEstimate:
    """Per-site ``estimates`` with their ``variances`` pooled by :func:`random_effects` (REML, Hartung-Knapp) on
    ``scale`` (``"logit"`` for an AUC or C-index, ``"log"`` for an O/E ratio) and back-transformed."""
    if scale not in _SCALES:
        raise ValueError(f"scale must be one of {sorted(_SCALES)}, got {scale!r}")
    forward, back = _SCALES[scale]
    m = random_effects(*forward(estimates, variances), level=level)
    method = m.method.upper() + (", Hartung-Knapp" if m.hartung_knapp else "")
    return PooledEstimate(statistic, scale, float(back(m.estimate)), float(back(m.ci[0])), float(back(m.ci[1])),
                          float(back(m.prediction_interval[0])), float(back(m.prediction_interval[1])), m.tau2, m.i2,
                          m.q, int(m.k), method)


def pooled_weights(estimates, variances, *, scale: str, tau2: float) -> np.ndarray:
    """Each site's share of a random-effects pooling (:func:`pool_estimates` of the same sites): ``1 / (v_i + tau^2)``
    on the pooling ``scale`` (``"logit"`` or ``"log"``), normalised to sum to one, as metafor's forest plot lists."""
    if scale not in _SCALES:
        raise ValueError(f"scale must be one of {sorted(_SCALES)}, got {scale!r}")
    _, v = _SCALES[scale][0](estimates, variances)
    w = 1.0 / (np.asarray(v, dtype=np.float64) + float(tau2))
    return w / w.sum()
