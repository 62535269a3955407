"""The noisy histogram release: the one draw a site makes and the study simulates, and its wire encoding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .stages import SCALAR_RESOLUTION, SUMS_RESOLUTION

__all__ = ["SCALAR_TERMS", "Noise", "NoisyRelease", "randomly_rounded", "draw_release", "encode_release", "decode_release"]

# An integer noise sampler: ``noise(scale, shape)`` returns int64 draws of that shape (the site passes an exact
# sampler, a study a seeded vectorised one). A scale of 0 is never passed: the release adds nothing then.
Noise = Callable[[float, tuple], np.ndarray]
SCALAR_TERMS = ("sum_sq", "sum_p", "sum_y")


@dataclass(frozen=True)
class NoisyRelease:
    """One release per group (a site; in a study, a site of a replication) on the integer scales it is sent on.

    ``counts`` and ``sums`` have shape ``(groups, 2, cells)``: class 0 then class 1, cell ``b * parts + k`` for
    score bin ``b`` and part ``k``; ``sums`` (None when not asked for) are the cells' score offsets within their
    bins in units of ``1 / SUMS_RESOLUTION`` bin widths; ``scalars`` has shape ``(groups, len(names))`` in units
    of ``1 / SCALAR_RESOLUTION``.
    """

    counts: np.ndarray
    sums: np.ndarray | None
    scalars: np.ndarray

    def total(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Counts ``(2, cells)`` summed over the groups, and the sums in bin widths (None without them)."""
        sums = None if self.sums is None else self.sums.sum(axis=0) / SUMS_RESOLUTION
        return self.counts.sum(axis=0), sums


def randomly_rounded(terms: np.ndarray, rng: np.random.Generator, resolution: int) -> np.ndarray:
    """Each term in [0, 1] randomly rounded (unbiased) to a multiple of ``1 / resolution``, on the integer scale:
    one patient moves a sum by at most ``resolution``, whatever the rounding (so the sensitivity holds)."""
    scaled = terms * resolution
    low = np.floor(scaled)
    return (low + (rng.random(scaled.size) < scaled - low)).astype(np.int64)


def _noisy(exact: np.ndarray, noise: Noise, scale: float) -> np.ndarray:
    return exact if scale == 0.0 else exact + np.asarray(noise(scale, exact.shape), dtype=np.int64)


def draw_release(scores, labels, edges, *, noise: Noise, rng: np.random.Generator, sigma: float,
                 score_sums: bool = False, sums_sigma: float = 0.0, scalars: Sequence[str] = (),
                 scalar_sigma: float = 0.0, parts=None, n_parts: int = 1, groups=None,
                 n_groups: int = 1) -> NoisyRelease:
    """Count, sum and perturb: the histogram release of every group of patients.

    Scores are clipped to the grid ``edges`` and binned (:func:`dsroc.histogram.grid.bin_index`); each patient is
    one count in the cell of her class, bin and part (``parts``, each patient's part in ``range(n_parts)``). With
    ``score_sums``, a score in bin ``b`` enters its cell's sum as its offset within the bin, ``(s - e_b) / (e_{b+1}
    - e_b)`` in [0, 1], randomly rounded to ``1 / SUMS_RESOLUTION``: the bin's sum of scores is ``e_b h_b +
    (e_{b+1} - e_b) T_b``, and a narrow bin's mean is as precise as a wide one's. Each scalar of ``scalars``
    (:data:`SCALAR_TERMS`) sums one term in [0, 1] per patient, rounded to ``1 / SCALAR_RESOLUTION``.

    One patient changes one count by one, one cell's sum by at most ``SUMS_RESOLUTION`` and each scalar by at
    most ``SCALAR_RESOLUTION``; ``noise`` of scale ``sigma``, ``sums_sigma`` and ``scalar_sigma`` is added to
    each (none at scale 0). Random draws, in this order: the counts' noise, the sums' rounding (``rng``) and
    noise, the scalars' noise, then each scalar's rounding (``rng``). ``groups``: each patient's group in
    ``range(n_groups)`` (None: one group).
    """
    from .grid import bin_index  # at first use: grid imports scipy.optimize, which a daemon's start need not pay

    edges = np.asarray(edges, dtype=np.float64)
    m = (edges.size - 1) * n_parts
    p = np.clip(np.asarray(scores, dtype=np.float64), edges[0], edges[-1])
    y = np.asarray(labels, dtype=np.int64)
    idx = bin_index(p, edges)
    cell = idx if parts is None else idx * n_parts + np.asarray(parts, dtype=np.int64)
    group = 0 if groups is None else np.asarray(groups, dtype=np.int64)
    at = (group * 2 + y) * m + cell
    shape = (n_groups, 2, m)
    counts = _noisy(np.bincount(at, minlength=n_groups * 2 * m).reshape(shape), noise, sigma)
    sums = None
    if score_sums:
        offset = np.clip((p - edges[idx]) / np.diff(edges)[idx], 0.0, 1.0)
        rounded = randomly_rounded(offset, rng, SUMS_RESOLUTION)
        exact = np.bincount(at, weights=rounded, minlength=n_groups * 2 * m).astype(np.int64).reshape(shape)
        sums = _noisy(exact, noise, sums_sigma)
    values = np.zeros((n_groups, len(scalars)), dtype=np.int64)
    if len(scalars):
        q = np.clip(np.asarray(scores, dtype=np.float64), 0.0, 1.0)
        terms = {"sum_sq": (y - q) ** 2, "sum_p": q, "sum_y": y.astype(np.float64)}
        extra = _noisy(values, noise, scalar_sigma)
        gid = np.zeros(y.size, dtype=np.int64) if groups is None else group
        for k, name in enumerate(scalars):
            rounded = randomly_rounded(terms[name], rng, SCALAR_RESOLUTION)
            values[:, k] = np.bincount(gid, weights=rounded, minlength=n_groups).astype(np.int64)
        values = values + extra
    return NoisyRelease(counts, sums, values)


def encode_release(release: NoisyRelease) -> bytes:
    """A one-group release as the bytes a site sends: both classes' counts, then (when drawn) both classes' sums,
    then the scalars, each an int64."""
    if release.counts.shape[0] != 1:
        raise ValueError(f"release: encode_release sends one group's release, got {release.counts.shape[0]} groups")
    parts = [release.counts.ravel()] + ([] if release.sums is None else [release.sums.ravel()])
    return np.concatenate([*parts, release.scalars.ravel()]).astype(np.int64).tobytes()


def decode_release(payload: bytes, *, cells: int, score_sums: bool, scalars: Sequence[str]
                   ) -> tuple[np.ndarray, np.ndarray, dict, tuple | None]:
    """The noisy counts of negatives and positives (``cells`` each), the scalars on their own scale, and the sums
    ``(T0, T1)`` in bin widths (None when not drawn) of an :func:`encode_release` payload."""
    values = np.frombuffer(payload, dtype=np.int64)
    at = 2 * cells
    sums = None
    if score_sums:
        sums = (values[at:at + cells] / SUMS_RESOLUTION, values[at + cells:at + 2 * cells] / SUMS_RESOLUTION)
        at += 2 * cells
    named = {name: float(v) / SCALAR_RESOLUTION for name, v in zip(scalars, values[at:])}
    return values[:cells].copy(), values[cells:2 * cells].copy(), named, sums
