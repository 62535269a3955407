"""Each site's survival estimates from its own release, and their random-effects pooling across sites.

A site's release is DP on its own, so its estimates (intervals from its own noise) cost nothing more. They are
pooled as the binary validation pools per-site AUCs and O/E ratios (``metamisc::valmeta``): REML tau^2,
Hartung-Knapp interval and a prediction interval for a new site (:func:`dsroc.multicentre.random_effects`), the
AUC(t) and the C-indices on the logit scale, O/E(t) on the log scale, back-transformed. A site's variance is its
bootstrap SE squared (sampling and that site's privacy noise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..multicentre.meta_analysis import PooledEstimate, pool_estimates
from .bootstrap import bootstrap, interval_from
from .counts import SurvivalHistogram
from .intervals import SurvivalInterval

__all__ = ["SiteRelease", "SiteSurvival", "POOLED", "site_estimates", "pool_sites"]

#: statistic -> scale of its pooling
POOLED = {"auc": "logit", "harrell_c": "logit", "uno_c": "logit", "oe": "log"}


@dataclass(frozen=True)
class SiteRelease:
    """One site's own release as a histogram, and the SDs of its noise per count and per offset sum."""

    histogram: SurvivalHistogram
    count_sd: float
    sums_sd: float = 0.0
    min_censoring: float = 0.0  # the site's policy.survival_min_censoring_survival: its own Uno's C needs G >= this


@dataclass(frozen=True)
class SiteSurvival:
    """One site's AUC(t), Harrell's and Uno's C, Brier(t) and O/E(t), intervals with that site's noise."""

    site: str
    patients: float
    auc: SurvivalInterval
    harrell_c: SurvivalInterval
    uno_c: SurvivalInterval
    brier: SurvivalInterval
    oe: SurvivalInterval


def site_estimates(name: str, release: SiteRelease, horizon: float, tau: float, *, level: float, draws: int,
                   seed) -> SiteSurvival:
    """The site's estimates at ``horizon`` (Uno's C truncated at ``tau``; NaN for a NaN ``tau``) from its own
    release."""
    h = release.histogram
    kh = h.horizon_index(horizon)

    def estimates(x):
        uno = x.uno_c(tau) if np.isfinite(tau) else np.full(x.counts.shape[0], np.nan)
        return np.column_stack([x.auc(kh), x.harrell_c(), uno, x.brier(kh),
                                x.observed_expected(kh, 0, h.shape[2])[2]])

    value, reps = bootstrap(h, estimates, count_sd=release.count_sd, sums_sd=release.sums_sd, draws=draws, seed=seed)
    unit, positive = (0.0, 1.0), (0.0, np.inf)
    parts = [interval_from(v, reps[:, i], level, bounds=b)
             for i, (v, b) in enumerate(zip(value, (unit, unit, unit, unit, positive)))]
    return SiteSurvival(name, float(h.counts.sum()), *parts)


def _pool(statistic: str, values: Sequence[SurvivalInterval], level: float) -> PooledEstimate | None:
    scale = POOLED[statistic]
    v = np.array([x.value for x in values])
    var = np.array([x.se**2 for x in values])
    inside = (v > 0) & (v < 1) if scale == "logit" else v > 0
    use = np.isfinite(v) & np.isfinite(var) & (var > 0) & inside
    if use.sum() < 2:
        return None
    return pool_estimates(statistic, v[use], var[use], scale=scale, level=level)


def pool_sites(sites: Sequence[SiteSurvival], *, level: float) -> Mapping[str, PooledEstimate]:
    """The random-effects pooling of every statistic in :data:`POOLED` that at least two sites estimate."""
    pooled = {name: _pool(name, [getattr(s, name) for s in sites], level) for name in POOLED} if len(sites) >= 2 else {}
    return {k: v for k, v in pooled.items() if v is not None}
