"""The histogram protocol at the site: the public grid a request may use, and the noisy release itself."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

import dsroc  # bin_scores, histogram_edges: looked up at first use (dsroc.histogram.grid imports scipy.optimize)
from dsroc import analytic_gaussian_sigma
from dsroc.histogram.release import SCALAR_TERMS, decode_release, draw_release, encode_release
from dsroc.histogram.stages import (SCALAR_RESOLUTION, SUMS_RATIO, SUMS_RESOLUTION, laplace_release_parts,
                                   laplace_release_scales)
from dsroc.privacy.accounting import DiscreteGaussian, DiscreteLaplace
from dsroc.privacy.laplace import discrete_laplace_scale

from ...config import Policy
from ...errors import InvalidArgument, PermissionDenied
from .partitions import Partition

__all__ = ["PRIVACY_UNIT", "SCALARS", "SCALAR_RESOLUTION", "SUMS_RESOLUTION", "SUMS_RATIO", "HistogramPlan",
           "histogram_grid", "check_noise_size", "plan_histogram", "draw_histogram",
           "decode_histogram", "noise_sd", "LAPLACE", "GAUSSIAN"]

PRIVACY_UNIT = "add or remove one patient"
# The noise of a release: the histogram protocol's discrete Laplace (pure epsilon-DP), or the secure-aggregation
# protocol's discrete Gaussian shares (which build their plans with it).
LAPLACE = "discrete_laplace"
GAUSSIAN = "discrete_gaussian"
SCALARS = SCALAR_TERMS
# Largest noise SD per cell a histogram release may need (smaller epsilon is refused).
MAX_SIGMA = 1000.0


@dataclass(frozen=True)
class HistogramPlan:
    """A checked histogram request: its grid, scalars, noise and accountant events.

    ``sigma``, ``sums_sigma`` and ``scalar_sigma`` are the noise parameters of the counts, the score sums and each
    scalar on their integer scales: the discrete Laplace's scale ``b`` (``mechanism`` :data:`LAPLACE`) or the
    discrete Gaussian's sigma (:data:`GAUSSIAN`).
    """

    edges: np.ndarray
    n_bins: int
    spacing: str
    scalars: tuple[str, ...]
    epsilon: float
    delta: float
    sigma: float
    scalar_sigma: float
    score_sums: bool = False
    sums_sigma: float = 0.0
    partition: Partition | None = None  # strata or a second model's bins: n_bins x parts cells per class
    mechanism: str = GAUSSIAN

    @property
    def n_cells(self) -> int:
        """Cells per class: the bins, times the partition's parts."""
        return self.n_bins * (1 if self.partition is None else self.partition.parts)

    @property
    def events(self) -> tuple:
        """The release's privacy events, composed into the one epsilon (or (epsilon, delta)) of the whole release:
        the pair of histograms (sensitivity 1: one patient is one count), the per-bin score sums
        (``SUMS_RESOLUTION``), then each scalar (``SCALAR_RESOLUTION``)."""
        event = DiscreteLaplace if self.mechanism == LAPLACE else DiscreteGaussian
        sums = [event(self.sums_sigma, SUMS_RESOLUTION)] if self.score_sums else []
        scalars = [event(self.scalar_sigma, SCALAR_RESOLUTION) for _ in self.scalars]
        return (event(self.sigma), *sums, *scalars)

    @property
    def noise_sds(self) -> tuple[float, float, float]:
        """Noise SD of each count, of each score sum (in bin widths) and of each scalar (on its own scale)."""
        return (noise_sd(self.sigma, self.mechanism), noise_sd(self.sums_sigma, self.mechanism) / SUMS_RESOLUTION,
                noise_sd(self.scalar_sigma, self.mechanism) / SCALAR_RESOLUTION)

    @property
    def request(self) -> str:
        """Canonical text of what makes two requests the same release."""
        key = {"epsilon": self.epsilon, "delta": self.delta, "edges": self.edges.tolist(), "scalars": list(self.scalars)}
        if self.score_sums:  # absent otherwise: releases made before the sums existed keep their key
            key["score_sums"] = True
        if self.partition is not None:  # likewise absent for a plain release
            key.update(self.partition.key())
        if self.mechanism != GAUSSIAN:  # likewise: a release of another noise is another release
            key["mechanism"] = self.mechanism
        return json.dumps(key, sort_keys=True)


def histogram_grid(policy: Policy, score_range, *, n_bins: int, spacing: str, scalars=(),
                   interior=None) -> tuple[np.ndarray, str, tuple]:
    """Check a histogram request's grid and scalars against the policy: the public edges, spacing and scalars.

    ``interior``, when not empty, replaces ``n_bins`` and ``spacing``: the grid is the score range's ends around
    these edges, each of which must be an edge of a grid the policy allows (an analyst's grid chosen from an
    earlier release, e.g. at its quantiles); the spacing is then ``"explicit"``.
    """
    if interior is not None and len(interior) > 0:
        scalars = _check_scalars(scalars, score_range)
        lo, hi = (float(v) for v in score_range)
        return _explicit_edges(policy, lo, hi, interior, n_bins, spacing), "explicit", scalars
    if n_bins not in policy.histogram_bins:
        raise PermissionDenied(f"policy: n_bins {n_bins} is not one this site allows (histogram_bins = "
                               f"{list(policy.histogram_bins)})")
    spacing = spacing or "equal"
    if spacing not in ("equal", "logit"):
        raise InvalidArgument(f"spacing must be 'equal' or 'logit', got {spacing!r}")
    if spacing not in policy.histogram_spacings:
        raise PermissionDenied(f"policy: spacing {spacing!r} is not one this site allows (histogram_spacings = "
                               f"{list(policy.histogram_spacings)})")
    scalars = _check_scalars(scalars, score_range)
    lo, hi = (float(v) for v in score_range)
    if spacing == "logit" and (lo < 0.0 or hi > 1.0):
        raise InvalidArgument(f"spacing 'logit' needs probabilities; this score source's range is [{lo}, {hi}]")
    return _grid_edges(policy, lo, hi, n_bins, spacing), spacing, scalars


def _check_scalars(scalars, score_range) -> tuple:
    scalars = tuple(scalars)
    unknown = [s for s in scalars if s not in SCALARS]
    if unknown or len(set(scalars)) != len(scalars):
        raise InvalidArgument(f"scalars must be distinct names from {list(SCALARS)}, got {list(scalars)}")
    lo, hi = (float(v) for v in score_range)
    if scalars and (lo < 0.0 or hi > 1.0):
        raise InvalidArgument(f"scalars need probabilities; this score source's range is [{lo}, {hi}]")
    return tuple(sorted(scalars))


def _grid_edges(policy: Policy, lo: float, hi: float, n_bins: int, spacing: str) -> np.ndarray:
    """Edges of an allowed (n_bins, spacing): equal on the score range, logit on the policy's logit range."""
    if spacing == "logit":
        lo, hi = policy.histogram_logit_range
    return dsroc.histogram_edges(n_bins, lo=lo, hi=hi, spacing=spacing)


def _explicit_edges(policy: Policy, lo: float, hi: float, interior, n_bins: int, spacing: str) -> np.ndarray:
    """The grid of an explicit request: the score range's ends around ``interior``, each interior edge an edge
    of a grid the policy allows (so an explicit grid is never finer than the policy's finest), at most the
    policy's largest bin count of bins."""
    e = np.asarray(list(interior), dtype=np.float64)
    if n_bins not in (0, e.size + 1) or spacing not in ("", "explicit"):
        raise InvalidArgument(f"edges: give either n_bins and spacing or the interior edges (then n_bins 0 or "
                              f"{e.size + 1}, spacing empty), got n_bins {n_bins}, spacing {spacing!r}")
    if not np.isfinite(e).all() or np.any(np.diff(e) <= 0) or e.min() <= lo or e.max() >= hi:
        raise InvalidArgument(f"edges must be finite, strictly increasing and strictly inside the score range "
                              f"({lo}, {hi})")
    if e.size + 1 > max(policy.histogram_bins):
        raise PermissionDenied(f"policy: {e.size + 1} bins is more than this site allows (histogram_bins = "
                               f"{list(policy.histogram_bins)})")
    from dsroc.histogram.grid import EDGE_TOLERANCE, allowed_edges  # at first use, as dsroc above

    spacings = [sp for sp in policy.histogram_spacings if sp != "logit" or (lo >= 0.0 and hi <= 1.0)]
    ranges = {"equal": (lo, hi), "logit": policy.histogram_logit_range}
    grid = np.unique(np.concatenate([allowed_edges(policy.histogram_bins, sp, lo=ranges[sp][0], hi=ranges[sp][1])
                                     for sp in spacings]))
    at = np.searchsorted(grid, e)
    off = np.minimum(np.abs(grid[np.minimum(at, grid.size - 1)] - e), np.abs(grid[np.maximum(at - 1, 0)] - e))
    if np.any(off > EDGE_TOLERANCE):
        raise PermissionDenied("policy: every explicit edge must be an edge of a grid this site allows "
                               f"(histogram_bins {list(policy.histogram_bins)} x histogram_spacings "
                               f"{list(policy.histogram_spacings)}); {float(e[off > EDGE_TOLERANCE][0])!r} is not")
    return np.concatenate([[lo], e, [hi]])


def check_noise_size(epsilon: float, delta: float) -> None:
    """Refuse an (epsilon, delta) whose noise would exceed :data:`MAX_SIGMA` per cell."""
    # The continuous Gaussian's sigma is within a hair of the discrete one's: a cheap bound that keeps
    # the noise's support (and the accountant's arrays) small before anything is built.
    if analytic_gaussian_sigma(epsilon, delta, 1.0) > MAX_SIGMA:
        raise InvalidArgument(f"epsilon {epsilon} with delta {delta} needs noise of SD above {MAX_SIGMA:g} per cell; "
                              "this site makes histogram releases at larger epsilon only")


def plan_histogram(policy: Policy, score_range, *, epsilon: float, delta: float, n_bins: int, spacing: str,
                   scalars, interval: float, score_sums: bool = False, interior=None) -> HistogramPlan:
    """Check a histogram request against the policy and calibrate its discrete Laplace noise.

    ``epsilon`` is that of the whole release: the counts, the per-bin score sums when asked for and each scalar
    share it in the proportions of :func:`dsroc.histogram.stages.laplace_release_parts` (each part's epsilon rounded
    down to the ledger's grid ``interval``, :func:`dsroc.histogram.stages.laplace_release_scales`), so the release is
    pure epsilon-DP. ``delta`` is the request's, checked by the policy and part of the release's key; the release
    itself uses delta 0. Both must already be checked against the per-release caps. ``interior``: explicit interior
    edges instead of ``n_bins`` and ``spacing`` (:func:`histogram_grid`).
    """
    edges, spacing, scalars = histogram_grid(policy, score_range, n_bins=n_bins, spacing=spacing, scalars=scalars,
                                             interior=interior)
    score_sums = bool(score_sums)
    parts = laplace_release_parts(score_sums=score_sums, scalars=len(scalars))
    if noise_sd(parts[0][1] * discrete_laplace_scale(epsilon, parts), LAPLACE) > MAX_SIGMA:
        raise InvalidArgument(f"epsilon {epsilon} needs noise of SD above {MAX_SIGMA:g} per cell; this site makes "
                              "histogram releases at larger epsilon only")
    try:
        sigma, sums_sigma, scalar_sigma = laplace_release_scales(epsilon, score_sums=score_sums, scalars=len(scalars),
                                                                 interval=interval)
    except ValueError as exc:  # a part's epsilon below the ledger's grid (the policy allowed it): the caller's to change
        raise InvalidArgument(f"epsilon: {exc}") from None
    return HistogramPlan(edges, edges.size - 1, spacing, scalars, epsilon, delta, sigma, scalar_sigma, score_sums,
                         sums_sigma, mechanism=LAPLACE)


def draw_histogram(plan: HistogramPlan, scores: np.ndarray, labels: np.ndarray, rng: np.random.Generator,
                   parts: np.ndarray | None = None) -> bytes:
    """The noisy release as bytes (:func:`dsroc.histogram.release.draw_release`, then
    :func:`~dsroc.histogram.release.encode_release`): both classes' counts, then (when asked) both classes' per-bin
    score sums, then the scalars. With a partition, ``parts`` gives each patient's part
    (:func:`site_node.protocols.histogram.partitions.part_index`). The noise comes from an exact sampler
    (:func:`dsroc.privacy.laplace.sample_discrete_laplace`, or :func:`dsroc.privacy.noise.sample_discrete_gaussian`
    for a discrete Gaussian plan); ``rng`` only rounds the terms (any rounding into [0, 1] keeps the sensitivity).
    """
    from dsroc.privacy.laplace import sample_discrete_laplace
    from dsroc.privacy.noise import sample_discrete_gaussian

    sample = sample_discrete_laplace if plan.mechanism == LAPLACE else sample_discrete_gaussian

    def noise(scale: float, shape: tuple) -> np.ndarray:
        return np.asarray(sample(scale, int(np.prod(shape))), dtype=np.int64).reshape(shape)

    release = draw_release(scores, labels, plan.edges, noise=noise, rng=rng, sigma=plan.sigma,
                           score_sums=plan.score_sums, sums_sigma=plan.sums_sigma, scalars=plan.scalars,
                           scalar_sigma=plan.scalar_sigma, parts=parts,
                           n_parts=1 if plan.partition is None else plan.partition.parts)
    return encode_release(release)


def decode_histogram(plan: HistogramPlan, payload: bytes) -> tuple[np.ndarray, np.ndarray, dict, tuple | None]:
    """Noisy counts of negatives and positives (``plan.n_cells`` each), the noisy scalars on their own scale, and
    the noisy per-cell score sums ``(T0, T1)`` in bin widths (None when not asked for)."""
    return decode_release(payload, cells=plan.n_cells, score_sums=plan.score_sums, scalars=plan.scalars)


def noise_sd(sigma: float, mechanism: str = GAUSSIAN) -> float:
    """Standard deviation of ``N_Z(0, sigma^2)`` noise, or of the discrete Laplace of scale ``sigma`` (0 for 0)."""
    from dsroc.privacy.laplace import discrete_laplace_sd
    from dsroc.privacy.noise import discrete_gaussian_variance

    if sigma <= 0:
        return 0.0
    return discrete_laplace_sd(sigma) if mechanism == LAPLACE else math.sqrt(discrete_gaussian_variance(sigma))
