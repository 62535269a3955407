"""Calibration-in-the-large from grouped cells and from noisy histograms, with every noise that moves the estimate."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logit

from .auc import check_sigma
from .calibration import Estimate

__all__ = ["calibration_intercept", "histogram_citl"]


def calibration_intercept(events, counts, mean_predictions, *, level: float = 0.95, max_iter: int = 50,
                          tol: float = 1e-10) -> Estimate:
    """Calibration-in-the-large: the intercept ``a`` of ``logit P(y=1) = a + logit(r)`` (offset, slope 1),
    fitted by Fisher scoring on grouped cells (``events`` of ``counts`` patients at mean prediction ``r``)."""
    k, m, r = (np.asarray(v, dtype=np.float64) for v in (events, counts, mean_predictions))
    if r.min() <= 0.0 or r.max() >= 1.0:
        raise ValueError("mean predictions must lie strictly inside (0, 1) for the logit")
    offset, a = logit(r), 0.0
    for _ in range(max_iter):
        mu = expit(a + offset)
        information = np.sum(m * mu * (1.0 - mu))
        if not information > 0:  # every cell's fitted rate at 0 or 1: the steps ran off (events at one end only)
            raise ValueError("the calibration intercept diverged: no cell keeps a fitted rate inside (0, 1)")
        step = np.sum(k - m * mu) / information
        a += step
        if abs(step) < tol:
            break
    else:
        raise ValueError(f"the calibration intercept did not converge in {max_iter} Fisher-scoring steps")
    mu = expit(a + offset)
    return Estimate.normal(a, 1.0 / np.sum(m * mu * (1.0 - mu)), level=level)


def histogram_citl(counts0, counts1, edges, groups, representatives, *, sigma: float, sums_sd: float | None = None,
                   level: float = 0.95) -> Estimate | None:
    """Calibration-in-the-large ``a`` of ``logit P(y=1) = a + logit(r)`` from consistent noisy histograms.

    Parameters
    ----------
    counts0, counts1 : array_like, shape (B,)
        Consistent counts of negatives and positives, each cell of noise SD ``sigma``.
    edges : array_like, shape (B + 1,)
        The grid.
    groups : sequence of (first, last)
        Merged bins (the calibration curve's): merged bin ``g`` holds ``k_g = sum c1_b`` events of
        ``m_g = sum h_b`` patients (``h = c0 + c1``) at the mean prediction ``r_g = sum h_b r_b / m_g``.
    representatives : array_like, shape (B,)
        Each bin's score ``r_b``: with ``sums_sd`` the bins' mean scores from the score sums,
        ``r_b = e_b + w_b u_b``, ``u_b = (T_b + s p_b) / (h_b + s)`` **not** clipped to the bin
        (:func:`dsroc.histogram.sums.within_offsets` with ``clip=False`` of both classes' summed offsets ``T_b``,
        noise SD ``s = sums_sd``, shrunk by ``s`` pseudo-patients towards ``p_b``): linear in the sums, so a merged
        bin's mean keeps no bias from clipping each bin's noisy mean (at prevalence 0.1 the wide top bin's scores
        sit near its lower edge, and clipping its noisy mean pushed it up: CITL bias -0.14 at epsilon 0.3);
        without ``sums_sd``, fixed (e.g. the midpoints).
    sigma, sums_sd : float
        Noise SD of each summed count and of each bin's summed offsets of both classes (bin widths).

    Returns
    -------
    Estimate or None
        The grouped fit of :func:`calibration_intercept` on the merged bins whose mean prediction lies in (0, 1).
        Its variance is the fit's ``1 / I`` (sampling, ``I = sum_g m_g mu_g (1 - mu_g)``) plus the variance of
        the fitted intercept under both noises by the delta method on its estimating equation
        ``sum_g k_g - m_g expit(a + logit r_g) = 0``: ``a`` moves by ``(dk_g - mu_g dm_g - D_g dr_g) / I`` with
        ``D_g = m_g mu_g (1 - mu_g) / (r_g (1 - r_g))``, where ``r_g`` moves with every count of its bins
        (``dr_g/dh_b = (r_b - r_g + h_b dr_b/dh_b) / m_g``, ``dr_b/dh_b = -w_b u_b / (h_b + s)``) and every sum
        (``dr_g/dT_b = h_b w_b / ((h_b + s) m_g)``); so the variance adds ``sigma^2`` times the squared
        gradients in both classes' counts and ``sums_sd^2`` times those in the sums. (Left out: the noise of the
        shrinkage's target ``p_b``, whose weight ``s / (h_b + s)`` is small where a bin's mean matters.)
        None where no finite estimate exists (no merged bin in (0, 1), no events or no non-events there, or no
        convergence).
    """
    sigma = check_sigma(sigma)
    c0, c1, r = (np.asarray(a, dtype=np.float64) for a in (counts0, counts1, representatives))
    e = np.asarray(edges, dtype=np.float64)
    if not (c0.ndim == 1 and c0.shape == c1.shape == r.shape and e.shape == (c0.size + 1,)):
        raise ValueError(f"counts0, counts1, representatives (B,) and edges (B + 1,) do not match: {c0.shape}, "
                         f"{c1.shape}, {r.shape}, {e.shape}")
    h = c0 + c1
    group = np.empty(h.size, dtype=np.int64)
    for g, (a, b) in enumerate(groups):
        group[a:b + 1] = g
    n_groups = len(groups)
    k, m = np.bincount(group, c1, n_groups), np.bincount(group, h, n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        rg = np.bincount(group, h * r, n_groups) / m
    use = (m > 0) & np.isfinite(rg) & (rg > 0) & (rg < 1)
    if not use.any() or not 0 < k[use].sum() < m[use].sum():
        return None
    try:
        fit = calibration_intercept(k[use], m[use], rg[use], level=level)
    except ValueError:
        return None
    mu = np.zeros(n_groups)
    mu[use] = expit(fit.value + logit(rg[use]))
    info = 1.0 / fit.variance
    d = np.zeros(n_groups)
    d[use] = m[use] * mu[use] * (1 - mu[use]) / (rg[use] * (1 - rg[use]))
    dr_dh, dr_dt = np.zeros(h.size), np.zeros(h.size)
    if sums_sd is not None:
        s, w = check_sigma(sums_sd, name="sums_sd"), np.diff(e)
        u = (r - e[:-1]) / w
        free = h + s > 0
        dr_dt[free] = w[free] / (h[free] + s)
        dr_dh[free] = -w[free] * u[free] / (h[free] + s)
    on = use[group]
    with np.errstate(invalid="ignore", divide="ignore"):
        drg_dh = np.where(on, (r - rg[group] + h * dr_dh) / m[group], 0.0)
        drg_dt = np.where(on, h * dr_dt / m[group], 0.0)
    g1 = np.where(on, 1 - mu[group] - d[group] * drg_dh, 0.0) / info
    g0 = np.where(on, -mu[group] - d[group] * drg_dh, 0.0) / info
    gt = -d[group] * drg_dt / info
    noise = sigma**2 * float((g1**2 + g0**2).sum()) + (sums_sd or 0.0) ** 2 * float((gt**2).sum())
    return Estimate.normal(fit.value, fit.variance + noise, level=level)
