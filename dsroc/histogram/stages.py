"""How a histogram validation's epsilon is shared: the parts of one release and the two-stage grid."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["SUMS_RATIO", "SUMS_RESOLUTION", "SCALAR_RESOLUTION", "STAGE1_BINS", "STAGE1_SHARE", "STAGE2_BINS",
           "LAPLACE_STAGE1_SHARE", "LAPLACE_COUNTS_SHARE", "LAPLACE_SUMS_SHARE", "LAPLACE_SCALAR_SHARE",
           "release_parts", "TwoStage", "two_stage_plan", "laplace_release_parts", "laplace_release_scales",
           "laplace_count_sd", "laplace_two_stage_plan", "first_stage_bins", "second_stage_bins",
           "MODE_Z", "SMALL_NOISE", "STAGE1_CORE", "STAGE1_SPACINGS", "first_stage_edges", "first_stage_grid", "second_mode",
           "balanced_interior", "second_stage_grid", "policy_candidates"]

# Each patient's scalar term in [0, 1] is rounded (randomly, unbiased) to a multiple of 1/16: an integer sum of
# sensitivity 16 that takes exact integer noise.
SCALAR_RESOLUTION = 16
# The per-bin score sums' noise, in bin widths, is SUMS_RATIO times the counts' (a tenth of the release's
# zCDP share: the counts' noise grows by sqrt(1 + 1 / SUMS_RATIO^2) = 1.054 when the sums are asked for).
SUMS_RATIO = 3.0
# Each patient's offset within its bin is rounded (randomly, unbiased) to a multiple of 1/2: an integer sum of
# sensitivity 2 whose accounting stays cheap (a sensitivity-16 part made the calibration 20 times slower), at
# a rounding variance of at most 1/16 per patient (bin widths squared), below the noise's up to ~10^4 patients a bin.
SUMS_RESOLUTION = 2
# Two-stage grid of the secagg protocol (discrete Gaussian): the first release (per class, STAGE1_BINS logit-spaced
# bins) has noise t / sqrt(STAGE1_SHARE), the second (per class on edges at the first's balanced quantiles) noise t: the first takes about a tenth of the
# budget (zCDP share); the study (docs/simulations.md) found 5 to 20 % equally good.
STAGE1_BINS = 50
STAGE1_SHARE = 0.1
# The first release on a logit range wider than most scores (a site's policy may reach 0.0001: at prevalence 0.02 a
# model can put half its negatives below 0.005) is an explicit grid: inside STAGE1_CORE the edges of the coarsest
# allowed logit grid whose spacing is at most the first of STAGE1_SPACINGS (logit units: 50 bins on [0.005, 0.995],
# as fine as before), outside it the second's (about 2: a few bins that only say where the tails' patients are).
# Each extra fine bin adds its noise to the counts' cumulative sums, so the tails get as few as that.
STAGE1_CORE = (0.005, 0.995)
STAGE1_SPACINGS = (0.22, 2.0)
# The histogram protocol's discrete Laplace noise (pure epsilon-DP; the secure-aggregation protocol keeps the discrete
# Gaussian above): a validation's epsilon is shared between its parts in these proportions (renormalised over the parts
# a release has): the quantile grid's first stage (per-class counts on the fine grid), the second stage's (or a one-
# release grid's) counts, its per-bin score sums and each scalar. Stress study's
# target cells (docs/simulations.md): 0.2 / 0.7 / 0.1 beat 0.1 / 0.8 / 0.1 at n = 1 000 (AUC MAE 0.0096 against 0.015) and
# at prevalence 0.02 (0.015 against 0.021): the first stage places the edges, and at small n its noise misplaced them.
LAPLACE_STAGE1_SHARE = 0.2
LAPLACE_COUNTS_SHARE = 0.7
LAPLACE_SUMS_SHARE = 0.1
LAPLACE_SCALAR_SHARE = 0.1
# Second stage: (threshold on n_eff / summed noise SD, bins) of :func:`second_stage_bins` (docs/simulations.md). With
# the discrete Laplace's smaller noise, 10 bins from 400 (n = 10 000 at prevalence 0.3, 5 sites, epsilon 1) cut the
# monotone curve's and the resolved AUC's binning error (bimodal bias -0.0051 -> -0.0020, AUC 0.99 coverage 0.84 -> 1).
STAGE2_BINS = ((0.0, 5), (200.0, 7), (400.0, 10), (1500.0, 12))
# The histogram protocol's second stage takes at least SMALL_NOISE[1] bins where a summed count's noise SD is at most
# SMALL_NOISE[0] (epsilon 3 and more over 5 sites): there a bin's noise is about a patient, and at a few hundred patients
# 5 bins left so many within-bin pairs that the rule fell back to the shape AUC widened by the whole resolved shift.
# 40 replications per cell, 5 sites: interval / pooled DeLong width 1.68 -> 1.14 (binormal, n = 250,
# epsilon 5), 2.16 -> 1.49 (epsilon 3), 1.40 -> 1.17 (skewed), 1.61 -> 1.36 (prevalence 0.1, n = 500), MAE and
# coverage (1.00) unchanged but skewed 0.0074 -> 0.0100; the GBSG2 demo's 249 patients at epsilon 5 (20 runs) 1.30 ->
# 1.10 on average, 7 of 20 runs beyond 1.3 x -> 2. At epsilon 1 (SD 4.4) 7 bins gave no narrower interval and a
# larger MAE (n = 1 000: 0.0084 -> 0.0127), so the floor stops at SD 1.5.
SMALL_NOISE = (1.5, 7)
# A class whose first-release histogram has a valley this many noise SDs deep (:func:`dsroc.histogram.modes.
# valley_depth`: two modes) gets the next bin count of STAGE2_BINS. In the stress study's first releases (20 per
# design at n = 1 000 and 10 000, epsilon 1) no binormal, skewed or piecewise-uniform design crossed 3 in more than 5 %
# of them, bimodal ones at AUC 0.76 and prevalence >= 0.1 in all (docs/simulations.md, modes16); 7 bins instead of 5
# took the bimodal AUC's bias at prevalence 0.3, n = 1 000 from -0.013 to -0.008 and its MAE from 0.019 to 0.013.
MODE_Z = 3.0


def release_parts(*, score_sums: bool, scalars: int = 0, ratio: float = 1.0) -> list:
    """``(sensitivity, noise ratio)`` of each part of one histogram release whose counts have noise ``ratio t``
    (see :func:`dsroc.privacy.noise.joint_discrete_gaussian_sigma`)."""
    return ([(1, ratio)] + [(SUMS_RESOLUTION, SUMS_RATIO * ratio)] * bool(score_sums)
            + [(SCALAR_RESOLUTION, ratio)] * int(scalars))


def laplace_release_parts(*, score_sums: bool, scalars: int = 0) -> list:
    """``(sensitivity, ratio)`` of each discrete-Laplace part of one histogram release (counts, then the per-bin
    score sums, then each scalar) for :func:`dsroc.privacy.laplace.discrete_laplace_scales`: a part's ratio is the
    inverse of its share of the release's epsilon (:data:`LAPLACE_COUNTS_SHARE`, ...), so that part ``i`` is charged
    ``epsilon share_i / sum_j share_j``."""
    return ([(1, 1.0 / LAPLACE_COUNTS_SHARE)] + [(SUMS_RESOLUTION, 1.0 / LAPLACE_SUMS_SHARE)] * bool(score_sums)
            + [(SCALAR_RESOLUTION, 1.0 / LAPLACE_SCALAR_SHARE)] * int(scalars))


def laplace_release_scales(epsilon: float, *, score_sums: bool, scalars: int = 0,
                           interval: float | None = None) -> tuple[float, float, float]:
    """Discrete-Laplace scales ``(counts, score sums, each scalar)`` of one histogram release at ``epsilon`` (0 for a
    part not asked for), on their integer scales (sums in ``1 / SUMS_RESOLUTION`` of a bin width, scalars in
    ``1 / SCALAR_RESOLUTION``): what the site calibrates for a request and the study simulates. ``interval``: the
    ledger's privacy-loss grid (:func:`dsroc.privacy.laplace.discrete_laplace_scales`)."""
    from ..privacy.laplace import discrete_laplace_scales

    scales = discrete_laplace_scales(epsilon, laplace_release_parts(score_sums=score_sums, scalars=scalars),
                                     interval=interval)
    sums = scales[1] if score_sums else 0.0
    return scales[0], sums, scales[-1] if scalars else 0.0


def laplace_count_sd(epsilon: float, *, score_sums: bool, scalars: int = 0) -> float:
    """SD of one count's discrete Laplace noise in a one-stage histogram release at ``epsilon`` (one site)."""
    from ..privacy.laplace import discrete_laplace_sd

    return discrete_laplace_sd(laplace_release_scales(epsilon, score_sums=score_sums, scalars=scalars)[0])


class TwoStage(NamedTuple):
    """The (epsilon, delta) to ask of each stage so that both compose to the validation's, and their noise."""

    epsilon1: float
    delta1: float
    epsilon2: float
    delta2: float
    sigma1: float
    sigma2: float


def two_stage_plan(epsilon: float, delta: float, *, score_sums: bool = True, scalars: int = 0) -> TwoStage:
    """Split one site's (epsilon, delta) between the two stages of the quantile grid.

    One noise scale ``t`` is calibrated for both releases together (the first's counts at ``t /
    sqrt(STAGE1_SHARE)``, the second's parts as in :func:`release_parts`), so that their composition, as the
    site's ledger charges it, is (epsilon, delta); each stage is then asked for the epsilon its own parts
    have at ``delta / 2``, which the site calibrates back to (nearly) the same noise, but never more than
    ``epsilon`` (a site's per-release cap allows the validation's epsilon; at a large delta the second stage's
    epsilon at ``delta / 2`` can exceed it, and asking for less only adds noise).
    """
    from ..privacy.accounting import Accountant, DiscreteGaussian
    from ..privacy.noise import joint_discrete_gaussian_sigma

    r1 = STAGE1_SHARE ** -0.5
    second = release_parts(score_sums=score_sums, scalars=scalars)
    t = joint_discrete_gaussian_sigma(epsilon, delta, [(1, r1), *second])

    def eps(parts):
        return min(Accountant([DiscreteGaussian(sigma=r * k * t, sensitivity=k) for k, r in parts]).epsilon(delta / 2),
                   epsilon)

    return TwoStage(eps([(1, r1)]), delta / 2, eps(second), delta / 2, r1 * t, t)


def laplace_two_stage_plan(epsilon: float, delta: float, *, score_sums: bool = True, scalars: int = 0) -> TwoStage:
    """Split one site's epsilon between the two stages of the histogram protocol's quantile grid (discrete Laplace).

    The first stage is asked for ``epsilon`` times :data:`LAPLACE_STAGE1_SHARE` and the second for the shares of its
    parts (:func:`laplace_release_parts`), renormalised to sum to ``epsilon``: pure epsilon-DP releases compose by
    adding their epsilons, so both stages together are ``epsilon``-DP (the site charges each part rounded down to its
    ledger's grid, never more). The request's ``delta`` is halved between the stages as the policy checks it; the
    releases themselves use delta 0. ``sigma1``, ``sigma2``: the SD of one count's noise in each stage at one site.
    """
    delta = float(delta)
    if not (math.isfinite(delta) and 0.0 < delta < 1.0):
        raise ValueError(f"delta must lie strictly between 0 and 1, got {delta}")
    second = sum(1.0 / r for _, r in laplace_release_parts(score_sums=score_sums, scalars=scalars))
    epsilon1 = float(epsilon) * LAPLACE_STAGE1_SHARE / (LAPLACE_STAGE1_SHARE + second)
    epsilon2 = float(epsilon) * second / (LAPLACE_STAGE1_SHARE + second)
    return TwoStage(epsilon1, delta / 2, epsilon2, delta / 2, laplace_count_sd(epsilon1, score_sums=False),
                    laplace_count_sd(epsilon2, score_sums=score_sums, scalars=scalars))


def first_stage_edges(allowed_per_site, lo: float, hi: float) -> np.ndarray | None:
    """Edges ``lo .. hi`` of the first release's explicit logit grid (see :data:`STAGE1_SPACINGS`) from bin counts
    every site allows (``allowed_per_site``) on the sites' common logit range ``[lo, hi]``: the core's edges from
    the coarsest allowed count at most ``STAGE1_SPACINGS[0]`` apart, the tails' from the coarsest at most
    ``STAGE1_SPACINGS[1]`` apart (the core's count where none is). None where the range has no tails beyond
    :data:`STAGE1_CORE` (the uniform grid of :func:`first_stage_bins` serves, as before the wider range) or no
    allowed count is fine enough."""
    from .grid import EDGE_TOLERANCE, histogram_edges

    lo, hi = float(lo), float(hi)
    if not 0.0 < lo < hi < 1.0:
        raise ValueError(f"the logit range must satisfy 0 < lo < hi < 1, got [{lo}, {hi}]")
    if lo >= STAGE1_CORE[0] and hi <= STAGE1_CORE[1]:
        return None
    span = math.log(hi / (1 - hi)) - math.log(lo / (1 - lo))
    common = sorted(set.intersection(*map(set, allowed_per_site)))

    def coarsest(spacing):
        return next((b for b in common if span / b <= spacing), None)

    core_bins = coarsest(STAGE1_SPACINGS[0])
    if core_bins is None:
        return None
    tail_bins = coarsest(STAGE1_SPACINGS[1]) or core_bins
    core, tails = (histogram_edges(b, lo=lo, hi=hi, spacing="logit") for b in (core_bins, tail_bins))
    inner = (max(lo, STAGE1_CORE[0]) - EDGE_TOLERANCE, min(hi, STAGE1_CORE[1]) + EDGE_TOLERANCE)
    e = np.unique(np.concatenate([core[(core >= inner[0]) & (core <= inner[1])],
                                  tails[(tails < inner[0]) | (tails > inner[1])], [core[0], core[-1]]]))
    return e[np.concatenate([[True], np.diff(e) > EDGE_TOLERANCE])]


def first_stage_grid(allowed_per_site, lo: float, hi: float) -> np.ndarray | None:
    """The first release's fine edges as the sites bin it on the logit range ``[lo, hi]``: the explicit grid of
    :func:`first_stage_edges` inside the score range [0, 1], else the uniform logit grid of :func:`first_stage_bins`
    bins (scores beyond it clipped to its ends); None where neither exists."""
    from .grid import histogram_edges

    explicit = first_stage_edges(allowed_per_site, lo, hi)
    if explicit is not None:
        return np.concatenate([[0.0], explicit, [1.0]])
    fine = first_stage_bins(allowed_per_site)
    return None if fine is None else histogram_edges(fine, lo=lo, hi=hi, spacing="logit")


def first_stage_bins(allowed_per_site) -> int | None:
    """Bins of the first stage's fine release: the largest count up to :data:`STAGE1_BINS` that every site allows
    (each site's policy ``histogram_bins`` in ``allowed_per_site``); None when there is none."""
    return max((b for b in set.intersection(*map(set, allowed_per_site)) if b <= STAGE1_BINS), default=None)


def second_stage_bins(n0: float, n1: float, sigma: float, *, most: int) -> int:
    """Bins of the second stage from the first stage's estimated class sizes ``n0``, ``n1`` (public after it) and the
    noise SD ``sigma`` of a second-stage count summed over the sites: the last count of :data:`STAGE2_BINS` whose
    threshold ``n_eff / sigma`` reaches, with ``n_eff = (n0^-2 + n1^-2)^(-1/2)``, capped at ``most``.

    Each bin's noisy count moves the placement values of the other class: the noise adds about ``sigma^2 / n_eff^2``
    per bin to the AUC's variance, while fewer bins leave more within-bin pairs and ROC-GLM misfit. Through the
    stress study's release and estimator rule (docs/simulations.md, class-balanced quantile bins) 5 bins were best
    or as good as any at ``n_eff / sigma`` of 20 to 300 (4 bins lost at prevalence 0.02, 6 to 7 bins at n = 10 000),
    and the secagg protocol's Monte Carlo found 7 best near 700 and 10 near 7 000. An empty class (``n <= 0`` after
    the noise) gives the smallest count.
    """
    n0, n1, sigma = float(n0), float(n1), float(sigma)
    if not (math.isfinite(sigma) and sigma >= 0.0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma!r}")
    if isinstance(most, bool) or not float(most).is_integer() or most < 2:
        raise ValueError(f"most must be an integer >= 2, got {most!r}")
    if not (n0 > 0 and n1 > 0):
        ratio = 0.0
    else:
        ratio = math.inf if sigma == 0 else (n0**-2 + n1**-2) ** -0.5 / sigma
    bins = max(b for threshold, b in STAGE2_BINS if ratio >= threshold)
    return int(min(bins, most))


def second_mode(counts0, counts1, first_sigma: float, edges=None) -> bool:
    """Whether either class's first-stage counts (noisy, summed over the sites; ``first_sigma`` their noise SD per
    cell) on ``edges`` have a valley deeper than :data:`MODE_Z` SDs between two higher parts
    (:func:`dsroc.histogram.modes.valley_depth` of their consistent counts' densities): two modes."""
    from .grid import consistent_counts
    from .modes import valley_depth

    return any(valley_depth(consistent_counts(np.asarray(c, dtype=np.float64)), first_sigma, edges=edges) > MODE_Z
               for c in (counts0, counts1))


def balanced_interior(counts0, counts1, edges, n_bins: int, *, candidates=None) -> np.ndarray:
    """Interior edges of the second stage from the first stage's per-class noisy counts, summed over the sites:
    :func:`dsroc.histogram.balanced_quantile_edges` for ``n_bins`` bins among ``candidates``, or the middle fine edge
    when the counts hold nobody after the noise (pure post-processing of the first release)."""
    from .grid import balanced_quantile_edges

    return _or_middle(balanced_quantile_edges(counts0, counts1, edges, n_bins, candidates=candidates), edges)


def second_stage_grid(counts0, counts1, edges, sigma: float, *, most: int, n_bins: int | None = None,
                      candidates=None, first_sigma: float | None = None, thresholds=(),
                      grid_most: int | None = None, small_noise: bool = False) -> np.ndarray:
    """Interior edges of the second stage from the first stage's per-class noisy counts on ``edges``, summed over the
    sites: :func:`balanced_interior` for ``n_bins`` bins or, when None, for :func:`second_stage_bins` of the counts'
    estimated class sizes (their consistent totals) and ``sigma``, the second stage's noise SD of a count summed over
    the sites (at most ``most`` bins). ``candidates``: the edges every site's policy allows in an explicit grid
    (:func:`policy_candidates`); between the fine edges the quantiles are interpolated, so that scores crowded into a
    few fine bins still get their bins. ``first_sigma``: the first stage's noise SD of a count summed over the sites;
    with it a class whose counts have a second mode (a valley deeper than :data:`MODE_Z` SDs) raises the chosen bin
    count to the next of :data:`STAGE2_BINS` (at most ``most``). What the analyst does between the stages of the
    histogram and secagg protocols' quantile grid (pure post-processing of the first release).

    ``thresholds``: risk thresholds (public inputs of the request) added to those quantile edges exactly
    (:func:`dsroc.histogram.thresholds.with_thresholds`), the whole grid at most ``grid_most`` bins (default
    ``most``). ``small_noise`` (the histogram protocol's rule): at least :data:`SMALL_NOISE`'s bins where ``sigma`` is at
    most its noise SD and both classes hold patients."""
    from .grid import consistent_counts
    from .thresholds import with_thresholds

    if n_bins is None:
        n0, n1 = (float(consistent_counts(np.asarray(c, dtype=np.float64)).sum()) for c in (counts0, counts1))
        n_bins = second_stage_bins(n0, n1, sigma, most=most)
        if first_sigma is not None and second_mode(counts0, counts1, first_sigma, edges):
            n_bins = min(next((b for _, b in STAGE2_BINS if b > n_bins), n_bins), int(most))
        if small_noise and sigma <= SMALL_NOISE[0] and n0 > 0 and n1 > 0:
            n_bins = max(n_bins, min(SMALL_NOISE[1], int(most)))
    interior = balanced_interior(counts0, counts1, edges, n_bins, candidates=candidates)
    if not len(thresholds):
        return interior
    return with_thresholds(interior, thresholds, most=int(most if grid_most is None else grid_most))


def policy_candidates(allowed_per_site, edges, spacing: str, *, lo: float | None = None,
                      hi: float | None = None) -> np.ndarray:
    """The edges of an explicit second-stage grid that every site's policy allows, on the first release's grid
    ``edges`` of ``spacing``: the edges of every grid of that spacing and an allowed bin count
    (:func:`dsroc.histogram.grid.allowed_edges`; its range the first grid's ends: the score range for equal spacing,
    the policy's logit range for logit spacing), common to all sites (``allowed_per_site``: each site's allowed bin
    counts). Only edges of the first release's own spacing and range are used: a site checks an explicit grid
    against its own score range, which the analyst does not learn, so no refusal after the first stage's charge.
    ``lo, hi``: that range where the first release was itself an explicit grid (:func:`first_stage_edges`, whose
    ends are the score range [0, 1]); default the first grid's ends."""
    from .grid import EDGE_TOLERANCE, allowed_edges, check_edges

    e = check_edges(edges)
    lo, hi = float(e[0]) if lo is None else float(lo), float(e[-1]) if hi is None else float(hi)
    common = None
    for bins in allowed_per_site:
        mine = allowed_edges(bins, spacing, lo=lo, hi=hi)
        if common is None:
            common = mine
            continue
        # kept where this site has the edge too (to the sites' tolerance: two grids' copies may differ in ulps)
        at = np.clip(np.searchsorted(mine, common), 1, mine.size - 1)
        near = np.minimum(np.abs(mine[at] - common), np.abs(mine[at - 1] - common))
        common = common[near <= EDGE_TOLERANCE]
    return e if common is None else common


def _or_middle(interior: np.ndarray, edges) -> np.ndarray:
    """``interior``, or the middle fine edge when the first release's counts held nobody after the noise."""
    return interior if interior.size else np.asarray(edges, dtype=np.float64)[[len(edges) // 2]]
