"""The noisy survival release: one count per patient in a (time bin, status, score bin) cell, and its privacy cost.

Neighbouring datasets differ by adding or removing one patient. She is one count in exactly one cell of the
``(K, 2, J)`` histogram (l1-sensitivity 1) and, with the risk sums, moves one cell's sum of score offsets and one
cell's sum of squared offsets by at most ``SUMS_RESOLUTION`` each (offsets lie in [0, 1] and are randomly rounded
to ``1 / SUMS_RESOLUTION``). Each part gets discrete Laplace noise of scale ``sensitivity / epsilon_part``, so the
release is ``sum_part epsilon_part = epsilon``-DP (pure; Ghosh, Roughgarden and Sundararajan 2009, composed
sequentially): :func:`survival_release_scales`. Every horizon, C-index and Brier score is post-processing of the
one release, so asking for several costs nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..histogram.release import randomly_rounded
from ..histogram.stages import SUMS_RESOLUTION
from .counts import SurvivalHistogram, check_score_edges, check_time_edges, survival_cells

__all__ = ["SURVIVAL_COUNTS_SHARE", "SURVIVAL_SUMS_SHARE", "survival_release_parts", "survival_release_scales",
           "SurvivalRelease", "draw_survival_release", "encode_survival_release",
           "decode_survival_release"]

# The release's epsilon shared between the counts and (when asked for) each of the two sums of score offsets.
SURVIVAL_COUNTS_SHARE = 0.8
SURVIVAL_SUMS_SHARE = 0.1


def survival_release_parts(*, risk_sums: bool) -> list:
    """``(sensitivity, ratio)`` of each discrete-Laplace part (counts, then the offsets' sum and squared sum) for
    :func:`dsroc.privacy.laplace.discrete_laplace_scales`: part ``i`` is charged ``epsilon share_i / sum share``."""
    return [(1, 1.0 / SURVIVAL_COUNTS_SHARE)] + [(SUMS_RESOLUTION, 1.0 / SURVIVAL_SUMS_SHARE)] * (2 * bool(risk_sums))


def survival_release_scales(epsilon: float, *, risk_sums: bool, interval: float | None = None) -> tuple[float, float]:
    """Discrete-Laplace scales ``(counts, each offset sum)`` of a survival release at ``epsilon`` (sums 0 when not
    asked for), each part's epsilon on the ledger's grid ``interval`` (:func:`~dsroc.privacy.laplace.
    discrete_laplace_scales`)."""
    from ..privacy.laplace import discrete_laplace_scales

    scales = discrete_laplace_scales(epsilon, survival_release_parts(risk_sums=risk_sums), interval=interval)
    return scales[0], scales[1] if risk_sums else 0.0


@dataclass(frozen=True)
class SurvivalRelease:
    """One release per group (a site; in a study, a site of a replication), on the integer scales it is sent on.

    ``counts`` has shape ``(groups, K, 2, J)``; ``offsets`` and ``squares`` (None without the risk sums) the same,
    the cells' sums of score offsets within their score bins and of their squares, in ``1 / SUMS_RESOLUTION``.
    """

    counts: np.ndarray
    offsets: np.ndarray | None
    squares: np.ndarray | None

    def histogram(self, time_edges, score_edges) -> SurvivalHistogram:
        """The release summed over its groups as a :class:`SurvivalHistogram`, the offsets turned into the risk
        sums ``sum r = s_j N + w_j U`` and ``sum r^2 = s_j^2 N + 2 s_j w_j U + w_j^2 V`` of score bin ``[s_j,
        s_j + w_j]``."""
        s = check_score_edges(score_edges)
        n = self.counts.sum(axis=0).astype(np.float64)
        if self.offsets is None:
            return SurvivalHistogram(n, time_edges, s)
        u = self.offsets.sum(axis=0) / SUMS_RESOLUTION
        v = self.squares.sum(axis=0) / SUMS_RESOLUTION
        a, w = s[:-1], np.diff(s)
        return SurvivalHistogram(n, time_edges, s, score_sum=a * n + w * u, score_sq_sum=a * a * n + 2 * a * w * u
                                 + w * w * v)


def draw_survival_release(time, event, risk, *, time_edges, score_edges, noise, rng: np.random.Generator,
                          sigma: float, risk_sums: bool = False, sums_sigma: float = 0.0, groups=None,
                          n_groups: int = 1) -> SurvivalRelease:
    """Count, sum and perturb: the survival release of every group of patients.

    ``time``, ``event`` (1 event, 0 censored) and ``risk`` (in [0, 1]) must already be validated, every time at
    most the last time edge. ``noise(scale, shape)`` returns int64 noise (an exact sampler at a site, a seeded one
    in a study); scale 0 adds none. Random draws in this order: the counts' noise, then with ``risk_sums`` the
    offsets' rounding (``rng``) and noise, the squares' rounding and noise. ``groups``: each patient's group in
    ``range(n_groups)``.
    """
    e, s = check_time_edges(time_edges), check_score_edges(score_edges)
    r = np.asarray(risk, dtype=np.float64)
    k, d, j = survival_cells(time, event, r, e, s)
    n_k, n_j = e.size - 1, s.size - 1
    group = 0 if groups is None else np.asarray(groups, dtype=np.int64)
    at = ((group * n_k + k) * 2 + d) * n_j + j
    shape, size = (n_groups, n_k, 2, n_j), n_groups * n_k * 2 * n_j

    def perturbed(weights, scale):
        exact = np.bincount(at, weights=weights, minlength=size).astype(np.int64).reshape(shape)
        return exact if scale == 0.0 else exact + np.asarray(noise(scale, shape), dtype=np.int64)

    counts = perturbed(None, sigma)
    if not risk_sums:
        return SurvivalRelease(counts, None, None)
    offset = np.clip((r - s[j]) / np.diff(s)[j], 0.0, 1.0)
    offsets = perturbed(randomly_rounded(offset, rng, SUMS_RESOLUTION), sums_sigma)
    squares = perturbed(randomly_rounded(offset * offset, rng, SUMS_RESOLUTION), sums_sigma)
    return SurvivalRelease(counts, offsets, squares)


def encode_survival_release(release: SurvivalRelease) -> bytes:
    """A one-group release as the bytes a site sends: the counts, then (when drawn) the offsets and squares."""
    if release.counts.shape[0] != 1:
        raise ValueError(f"release: a site sends one group's release, got {release.counts.shape[0]} groups")
    parts = [release.counts] + ([] if release.offsets is None else [release.offsets, release.squares])
    return np.concatenate([p.ravel() for p in parts]).astype(np.int64).tobytes()


def decode_survival_release(payload: bytes, *, time_bins: int, score_bins: int, risk_sums: bool) -> SurvivalRelease:
    """The :class:`SurvivalRelease` (one group) of an :func:`encode_survival_release` payload; ``ValueError`` if
    its length does not fit the grids."""
    values = np.frombuffer(payload, dtype=np.int64)
    cells = time_bins * 2 * score_bins
    if values.size != cells * (3 if risk_sums else 1):
        raise ValueError(f"payload: {values.size} values do not fit {time_bins} time bins x 2 x {score_bins} score "
                         f"bins{' with the risk sums' if risk_sums else ''}")
    shape = (1, time_bins, 2, score_bins)
    parts = [values[i * cells:(i + 1) * cells].reshape(shape).copy() for i in range(values.size // cells)]
    return SurvivalRelease(parts[0], *(parts[1:] if risk_sums else (None, None)))
