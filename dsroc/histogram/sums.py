"""Per-bin score sums of the histogram protocol: within-bin mean scores and the AUC's within-bin pairs.

A site may release, with its counts, each bin's noisy sum over a class's patients of their score's
offset within the bin, ``(s - e_b) / (e_{b+1} - e_b)`` in [0, 1] (``T0, T1``, in bin widths). The bin's
mean score of class ``c`` is then ``e_b + w_b T_cb / h_cb`` instead of the bin's midpoint. All functions
are post-processing of the summed releases; arrays are ``(..., B)`` like the counts.
"""

from __future__ import annotations

import numpy as np

from .grid import check_counts, check_edges
from .resolved import concordance_auc, tilt_concordance

__all__ = ["within_offsets", "bin_means", "within_variance", "logit_mean_variance", "resolved_auc"]


def within_offsets(counts, sums, *, sums_sigma: float, prior=0.5, clip: bool = True) -> np.ndarray:
    """Mean offset within each bin, ``(T + k prior) / (h + k)`` clipped to [0, 1], from consistent counts ``h``.

    ``k = sums_sigma`` pseudo-patients at offset ``prior`` (default the bin's middle; per bin, e.g. the mean offset
    of a finer histogram's shape, :func:`dsroc.histogram.resolved.shape_offsets`) keep a bin whose count is small
    against the sums' noise near it (``k = 0`` without noise: the exact mean; an empty bin gives ``prior``).
    ``clip=False``: not clipped, linear in ``T`` (a mean over several bins then keeps no bias from the clipping).
    """
    h = check_counts(counts, name="counts")
    t = check_counts(sums, name="sums", n_bins=h.shape[-1])
    if t.shape != h.shape:
        raise ValueError(f"sums must have the counts' shape {h.shape}, got {t.shape}")
    k = float(sums_sigma)
    if not (np.isfinite(k) and k >= 0.0):
        raise ValueError(f"sums_sigma must be a finite number >= 0, got {sums_sigma!r}")
    centre = np.broadcast_to(np.asarray(prior, dtype=np.float64), h.shape)
    num, den = t + k * centre, h + k
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.where(den > 0, num / np.where(den > 0, den, 1.0), centre)
    return np.clip(u, 0.0, 1.0) if clip else u


def bin_means(edges, offsets) -> np.ndarray:
    """Mean score per bin, ``e_b + (e_{b+1} - e_b) u_b``, from mean offsets ``u`` of shape ``(..., B)``."""
    e = check_edges(edges)
    return e[:-1] + np.diff(e) * np.asarray(offsets, dtype=np.float64)


def within_variance(edges, offsets) -> np.ndarray:
    """Estimated variance of the scores within each bin: ``w_b^2 u (1 - u) / 3``.

    A linear density on the bin with mean offset ``u`` has this variance when ``u = 1/2`` (uniform, ``w^2/12``);
    it vanishes as the mean reaches an edge, and never exceeds the largest possible, ``w^2 u (1 - u)``.
    """
    e = check_edges(edges)
    u = np.asarray(offsets, dtype=np.float64)
    return np.diff(e) ** 2 * u * (1.0 - u) / 3.0


def logit_mean_variance(counts, means, edges, *, sums_sigma: float) -> np.ndarray:
    """Noise variance of ``logit r_b`` for the bins' mean scores ``r_b = e_b + w_b u_b`` from the summed score sums
    (``u = (T + k p) / (h + k)``, ``T`` the two classes' sums of noise SD ``k = sqrt(2) sums_sigma``; delta method)."""
    k = sums_sigma * np.sqrt(2.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        var_u = 2.0 * sums_sigma**2 / (counts + k) ** 2
        return np.where(counts + k > 0, np.diff(edges) ** 2 * var_u / (means * (1 - means)) ** 2, 0.0)


def resolved_auc(h0, h1, u0, u1) -> np.ndarray | float:
    """AUC of binned scores with each bin's within-bin pairs resolved by the classes' mean offsets.

    Pairs in different bins are ordered by their bins; a positive and a negative in bin ``b`` are ordered
    with the concordance of two truncated exponentials on the bin with means ``u0_b`` and ``u1_b``
    (:func:`dsroc.histogram.resolved.tilt_concordance`; 1/2, the binned AUC's tie convention, when the
    means agree).
    """
    return concordance_auc(h0, h1, tilt_concordance(u0, u1))
