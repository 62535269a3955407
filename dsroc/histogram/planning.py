"""Planning a histogram validation before anything is charged: the AUC interval its default protocol would give.

The width of the AUC interval depends on the patients (how many, how many events, how well the model separates
them) and on the noise (epsilon, the sites, the two stages' split). Before any release the analyst knows only what
the request states; :func:`planned_auc_widths` runs the default protocol on synthetic patients of the stated sizes
(binormal logits of the stated AUC): the sites' own draw (:func:`dsroc.histogram.release.draw_release`, discrete
Laplace at the scales a site calibrates for each stage), the analyst's quantile grid
(:func:`dsroc.histogram.stages.second_stage_grid`) and :func:`dsroc.histogram_validation`, as the stress study runs them.
Pure maths: the synthetic patients are no one's.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = ["DEFAULT_POLICY_BINS", "DEFAULT_LOGIT_RANGE", "planned_auc_widths", "simulated_validation"]

# A site's default policy (site_node.config.Policy): the bin counts it allows and the range of its logit grids.
DEFAULT_POLICY_BINS = (5, 8, 10, 12, 20, 50, 100, 200)
DEFAULT_LOGIT_RANGE = (0.0001, 0.9999)


def simulated_validation(p, y, site, sites: int, epsilon: float, rng: np.random.Generator, *,
                         allowed_bins=DEFAULT_POLICY_BINS, logit_range=DEFAULT_LOGIT_RANGE, level: float = 0.95,
                         noise_draws: int = 20, seed: int = 0, thresholds=(), n_bins: int | None = None):
    """One validation of the scores ``p`` and labels ``y`` of patients at sites ``site`` (``range(sites)``) through the
    default histogram protocol at ``epsilon`` per site: both stages drawn as the sites draw them (noise from ``rng``),
    the analyst's quantile grid and :func:`dsroc.histogram_validation` as the analyst calls it."""
    from dsroc.privacy.accounting import VALUE_DISCRETIZATION
    from dsroc.privacy.laplace import discrete_laplace_noise, discrete_laplace_variance

    from .release import draw_release
    from .stages import (STAGE2_BINS, SUMS_RESOLUTION, first_stage_grid, laplace_release_scales, laplace_two_stage_plan,
                         policy_candidates, second_stage_grid)
    from .validation import histogram_validation

    k = int(sites)
    stages = laplace_two_stage_plan(float(epsilon), 1e-5)
    sigma1 = laplace_release_scales(stages.epsilon1, score_sums=False, interval=VALUE_DISCRETIZATION)[0]
    sigma2, sums_sigma, _ = laplace_release_scales(stages.epsilon2, score_sums=True, interval=VALUE_DISCRETIZATION)
    fine = first_stage_grid([allowed_bins], *logit_range)
    candidates = policy_candidates([allowed_bins], fine, "logit", lo=logit_range[0], hi=logit_range[1])
    v1, v2 = discrete_laplace_variance(sigma1), discrete_laplace_variance(sigma2)

    def noise(scale, shape):
        return discrete_laplace_noise(scale, shape, rng)

    first, _ = draw_release(p, y, fine, noise=noise, rng=rng, sigma=sigma1, groups=site, n_groups=k).total()
    first = np.asarray(first, dtype=np.float64)
    interior = second_stage_grid(first[0], first[1], fine, stages.sigma2 * math.sqrt(k),
                                 most=min(STAGE2_BINS[-1][1], max(allowed_bins)), candidates=candidates,
                                 first_sigma=math.sqrt(k * v1), thresholds=thresholds, grid_most=max(allowed_bins),
                                 n_bins=n_bins, small_noise=True)
    edges = np.concatenate([[0.0], interior, [1.0]])
    counts, sums = draw_release(p, y, edges, noise=noise, rng=rng, sigma=sigma2, score_sums=True,
                                sums_sigma=sums_sigma, groups=site, n_groups=k).total()
    return histogram_validation(counts[0], counts[1], edges, sigma=math.sqrt(k * v2), level=level, sums0=sums[0],
                                sums1=sums[1], sums_sigma=math.sqrt(k * discrete_laplace_variance(sums_sigma))
                                / SUMS_RESOLUTION, grid_edges=fine, grid_counts=first.sum(axis=0),
                                grid_sigma=math.sqrt(2 * k * v1), noise_draws=noise_draws, seed=seed)


def planned_auc_widths(patients: int, events: int, sites: int, epsilon: float, *, auc: float = 0.75,
                       allowed_bins=DEFAULT_POLICY_BINS, logit_range=DEFAULT_LOGIT_RANGE, reps: int = 20,
                       seed: int = 0, level: float = 0.95, noise_draws: int = 20,
                       n_bins: int | None = None) -> np.ndarray:
    """Widths of the default histogram protocol's AUC interval in ``reps`` simulated validations of ``patients``
    patients (``events`` of them positives) spread evenly over ``sites`` sites, each site's releases at ``epsilon``
    (the two stages of :func:`dsroc.histogram.stages.laplace_two_stage_plan`, score sums on;
    :func:`simulated_validation`), on sites whose policies allow ``allowed_bins`` on the logit range ``logit_range``.
    The model: logits normal with unit variance in each class, their means ``sqrt(2) Phi^-1(auc)`` apart. ``seed``:
    the same seed gives the same patients and noise streams at every epsilon (widths comparable across epsilon).
    ``n_bins``: the second stage's quantile bins (default the protocol's rule)."""
    n, n1, k = int(patients), int(events), int(sites)
    if not (0 < n1 < n and k >= 1 and n >= k):
        raise ValueError(f"patients and events must satisfy 0 < events < patients and sites <= patients, got "
                         f"{patients}, {events}, {sites}")
    if not (math.isfinite(epsilon) and epsilon > 0 and 0.5 <= auc < 1):
        raise ValueError(f"epsilon must be > 0 and auc in [0.5, 1), got {epsilon}, {auc}")
    d = math.sqrt(2.0) * float(stats.norm.ppf(auc))
    prevalence = n1 / n
    y = np.r_[np.zeros(n - n1, dtype=np.int64), np.ones(n1, dtype=np.int64)]
    site = np.arange(n) % k
    widths = []
    for rep in range(int(reps)):
        rng = np.random.default_rng([int(seed), rep])
        lp = math.log(prevalence / (1 - prevalence)) - d * prevalence + d * y + rng.normal(size=n)
        v = simulated_validation(1.0 / (1.0 + np.exp(-lp)), y, site, k, epsilon, rng, allowed_bins=allowed_bins,
                                 logit_range=logit_range, level=level, noise_draws=noise_draws, seed=rep,
                                 n_bins=n_bins)
        lo, hi = v.auc_ci
        widths.append(hi - lo if v.auc_ci_defined else 1.0)
    return np.asarray(widths)
