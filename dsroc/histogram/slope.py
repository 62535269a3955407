"""Calibration intercept and slope of the unbinned scores from histograms with score sums: a reconstruction and its range.

The logistic recalibration of ``y`` on ``x = logit p`` over the patients is the maximum-likelihood fit whose score
equations are ``sum_i (1, x_i) expit(a + s x_i) = (n1, T)`` with ``T = sum_{y_i = 1} x_i``. Given every patient's
covariate ``x_i``, the fit depends on the labels only through ``(n1, T)`` (its sufficient statistics), and the
slope increases with ``T`` (``d(a, s)/dT`` is the second column of the inverse information, whose ``(2, 2)`` entry
is positive). The histogram release gives ``n1`` (the counts) and, with the quantile grid's first release (a
histogram of all scores on a finer grid), the covariates' distribution within each bin: the finer histogram's
shape (:func:`dsroc.histogram.resolved.fine_base`, piecewise uniform in the score within each fine bin, the outer
fine bins reaching 0 and 1) tilted exponentially so that its mean offset is the bin's released one. It does not
give ``T``: within bin ``b`` the positives are some ``h1_b`` of the bin's patients whose mean offset is ``u1_b``
(the score sums), and the negatives the rest, with mean offset ``u0_b``. The sums of logits consistent with that
form an interval per bin (a linear programme: :func:`logit_sum_range`), so the unbinned slope is partially
identified: it lies in ``[s(T_lo), s(T_hi)]``, exactly so for the reconstructed covariates. Inside the range, the
reconstruction's own ``T`` comes from a calibration curve that is logistic in ``x`` within each bin
(:func:`dsroc.histogram.resolved.logistic_classes`, matched to each bin's share of positives and the classes' mean
offsets); its bootstrap over the release's noise gives the range's noise.

What is reported (:func:`with_range`): the grouped fit on the bins' mean scores
(:func:`dsroc.histogram.calibration.histogram_recalibration`, its point and its sampling-plus-noise covariance),
with an interval that is the hull of its own and the range widened by ``z`` of the reconstruction's standard
errors (sampling: its inverse information; noise: parametric bootstrap of counts, score sums and the finer
histogram). It covers the unbinned fit where either the calibration curve is logistic across the bins or the
covariates' reconstruction holds. What it does not bound: the covariates' spread inside a fine bin and beyond the
finer grid's outer edges; without the finer histogram (one-release grids, secagg) the within-bin distribution of
the covariates is unknown and the grouped fit's interval alone is reported, with a note that says so.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .auc import check_sigma
from .calibration import MAX_SLOPE, Recalibration
from .grid import consistent_counts
from .resolved import SUBPOINT_POSITIONS, fine_base, logistic_classes, shape_offsets
from .sums import within_offsets

__all__ = ["BINNING_INCLUDED", "logit_sum_range", "reconstructed_recalibration", "recalibration_with_sums",
           "with_range"]

BINNING_INCLUDED = ("sampling and the privacy noise, and (its hull with) the range of the unbinned fit over the "
                    "within-bin splits of the classes consistent with the score sums, widened by its sampling and "
                    "noise")
_BISECTIONS = 60
_TILT = 60.0  # the largest tilt rate |lam| of a bin's shape
_NEWTON = 100


def _largest_sum(z, mass, t, count, mean):
    """``max sum_j n_j z_j`` over ``0 <= n_j <= mass_j``, ``sum n = count``, ``sum n t = count mean`` per row (R, J),
    for ``z`` increasing in ``t``: the Lagrangian's greedy fill by ``z - lam t``, ``lam`` bisected until the
    selection's mean offset is ``mean``, then the two fills around it mixed to hit it exactly (an LP vertex pair)."""

    def fill(lam):
        order = np.argsort(-(z - lam[:, None] * t), axis=1, kind="stable")
        m = np.take_along_axis(mass, order, 1)
        n = np.clip(count[:, None] - (np.cumsum(m, 1) - m), 0.0, m)
        out = np.empty_like(n)
        np.put_along_axis(out, order, n, 1)
        return out

    def offset(n):
        return (n * t).sum(1) / np.maximum(count, 1e-300)

    lo, hi = np.full(count.shape, -1e4), np.full(count.shape, 1e4)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        above = offset(fill(mid)) > mean  # the fill's mean offset falls as lam grows
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    a, b = fill(lo), fill(hi)
    oa, ob = offset(a), offset(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(oa - ob > 1e-12, np.clip((mean - ob) / (oa - ob), 0.0, 1.0), 0.5)
    return ((share[:, None] * a + (1 - share[:, None]) * b) * z).sum(1)


def logit_sum_range(z, mass, counts, offsets):
    """Range of the positives' sum of logits ``T_b`` in every bin over the splits of its patients consistent with the
    release.

    Parameters
    ----------
    z : ndarray, shape (B, J)
        The covariate (logit score) at ``J`` sub-points of each bin, increasing, at the offsets of
        :data:`dsroc.histogram.resolved.SUBPOINTS` equal steps.
    mass : ndarray, shape (B, J)
        The bin's patients at each sub-point (summing to the bin's count).
    counts, offsets : ndarray, shape (2, B)
        Each class's count and mean offset within each bin.

    Returns
    -------
    (lo, hi) : ndarrays, shape (B,)
        ``T_b`` lies in the positives' range (``counts[1]`` patients among ``mass`` with mean offset ``offsets[1]``:
        a linear programme in the patients taken at each sub-point) and in ``Z_b`` minus the negatives' range
        (``Z_b = sum_j mass z``); their intersection, or their hull where noise makes them disjoint.
    """
    total = (mass * z).sum(1)
    c, u = np.asarray(counts, dtype=np.float64), np.asarray(offsets, dtype=np.float64)
    # The four programmes (largest and smallest sum of each class) as the rows of one batch.
    four = _largest_sum(np.concatenate([z, -z, z, -z]), np.concatenate([mass] * 4),
                        np.broadcast_to(SUBPOINT_POSITIONS, (4 * z.shape[0], z.shape[1])), np.repeat(c[::-1], 2, axis=0).ravel(),
                        np.repeat(u[::-1], 2, axis=0).ravel())
    hi1, lo1, hi0, lo0 = four.reshape(4, -1) * np.array([1.0, -1.0, 1.0, -1.0])[:, None]
    lo, hi = np.maximum(lo1, total - hi0), np.minimum(hi1, total - lo0)
    apart = lo > hi
    return np.where(apart, np.minimum(lo1, total - hi0), lo), np.where(apart, np.maximum(hi1, total - lo0), hi)


def _information(v, powers):
    """``sum_j v_j (1, z_j)' (1, z_j)`` per row (R, 2, 2) from the weights ``v`` (R, N) and ``powers = (1, z, z^2)``."""
    m = v @ powers  # (R, 3)
    return np.stack([m[:, :2], m[:, 1:]], axis=1)


def _solve2(a, b):
    """``a^-1 b`` for stacks of 2 x 2 matrices ``a`` (R, 2, 2) and vectors ``b`` (R, 2) by the adjugate: NaN where ``a``
    is singular (a saturated fit's information can be exactly so, where :func:`numpy.linalg.solve` raises)."""
    det = a[:, 0, 0] * a[:, 1, 1] - a[:, 0, 1] * a[:, 1, 0]
    with np.errstate(all="ignore"):
        return np.stack([a[:, 1, 1] * b[:, 0] - a[:, 0, 1] * b[:, 1], a[:, 0, 0] * b[:, 1] - a[:, 1, 0] * b[:, 0]],
                        -1) / det[:, None]


def _fit(z, w, n1, T):
    """Logistic fit solving ``sum_j w_j (1, z_j) expit(a + s z_j) = (n1, T)`` per row (Newton, steps clipped):
    ``theta`` (R, 2) and the inverse information (R, 2, 2); NaN where it does not converge (no finite fit)."""
    x = np.stack([np.ones_like(z), z], -1)  # (N, 2)
    powers = np.stack([np.ones_like(z), z, z * z], -1)  # (N, 3)
    target = np.stack([n1, T], -1)
    n = w.sum(-1)
    theta = np.stack([np.log(np.clip(n1, 0.5, None) / np.clip(n - n1, 0.5, None)), np.zeros(n1.shape)], -1)
    done = np.zeros(n1.shape, dtype=bool)
    rows = np.arange(n1.size)  # the rows still iterating (a row stops once its step is below 1e-10)
    for _ in range(_NEWTON):
        wr = w[rows]
        mu = expit(theta[rows] @ x.T)  # (R, N)
        wmu = wr * mu
        info = _information(wmu * (1 - mu), powers)
        score = target[rows] - wmu @ x
        step = np.clip(_solve2(info, score), -5.0, 5.0)
        step = np.where(np.isfinite(step), step, 0.0)
        theta[rows] += step
        small = np.abs(step).max(-1) < 1e-10
        done[rows[small]] = True
        rows = rows[~small]
        if rows.size == 0:
            break
    mu = expit(theta @ x.T)
    info = _information(w * mu * (1 - mu), powers)
    with np.errstate(all="ignore"):
        inv = np.linalg.pinv(info)
    ok = done & (np.abs(theta[:, 1]) <= MAX_SLOPE)
    return np.where(ok[:, None], theta, np.nan), np.where(ok[:, None, None], inv, np.nan)


def _tilted(base, mean):
    """Each bin's shape ``base`` (..., B, J) times ``exp(lam (t - 1/2))``, ``lam`` in [-60, 60] solved so that its mean
    offset is ``mean`` (..., B) (Newton steps kept inside the bracket the signs so far leave, else its midpoint; the end
    of the bracket where the mean lies beyond it), normalised: the finer histogram's shape made to agree with the
    bin's released mean."""
    t = SUBPOINT_POSITIONS - 0.5
    shape = np.broadcast_shapes(base.shape[:-1], np.shape(mean))
    b = np.broadcast_to(base, shape + base.shape[-1:]).reshape(-1, base.shape[-1])
    target = np.broadcast_to(mean, shape).reshape(-1)

    def moments(rows, lam):
        """Mean offset and its derivative in ``lam`` (the offsets' variance) of the tilted shapes of ``rows``."""
        w = (b if rows.size == target.size else b[rows]) * np.exp(lam[:, None] * t)  # no copy of every row
        w /= w.sum(-1, keepdims=True)
        mu = (w * SUBPOINT_POSITIONS).sum(-1)
        return mu, (w * (SUBPOINT_POSITIONS - mu[:, None]) ** 2).sum(-1)

    every = np.arange(target.size)
    lo, hi = np.full(target.size, -_TILT), np.full(target.size, _TILT)
    top, bottom = moments(every, hi)[0] < target, ~(moments(every, lo)[0] < target)
    lam = np.where(top, _TILT, np.where(bottom, -_TILT, 0.0))
    rows = every[~top & ~bottom]
    for _ in range(_BISECTIONS):
        mu, slope = moments(rows, lam[rows])
        below = mu < target[rows]
        lo[rows], hi[rows] = np.where(below, lam[rows], lo[rows]), np.where(below, hi[rows], lam[rows])
        with np.errstate(invalid="ignore", divide="ignore"):
            step = lam[rows] - (mu - target[rows]) / slope
        inside = np.isfinite(step) & (step >= lo[rows]) & (step <= hi[rows])
        step = np.where(inside, step, 0.5 * (lo[rows] + hi[rows]))
        moved = (np.abs(step - lam[rows]) > 1e-11) & (hi[rows] - lo[rows] > 1e-12)  # Newton's next step: ~1e-22
        lam[rows] = step
        rows = rows[moved]
        if rows.size == 0:
            break
    w = b * np.exp(lam[:, None] * t)
    return (w / w.sum(-1, keepdims=True)).reshape(shape + base.shape[-1:])


def _population(h0, h1, u0, u1, z, base):
    """Rows (R, B) of counts and offsets and the bins' shapes ``base`` (R, B, J): the covariates' weights (R, B*J)
    (the shape tilted to the bin's mean offset), ``n1`` and the local-logistic ``T`` (R,)."""
    m = h0 + h1
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(m > 0, h1 / np.where(m > 0, m, 1.0), 0.5)
        w = _tilted(base, np.where(m > 0, (h0 * u0 + h1 * u1) / np.where(m > 0, m, 1.0), 0.5))
    _, f1 = logistic_classes(z, w, share, u1 - u0)
    T = (h1[..., None] * f1 * z).sum((-2, -1))
    return (m[..., None] * w).reshape(m.shape[0], -1), h1.sum(-1), T


def reconstructed_recalibration(h0, h1, u0, u1, z, base):
    """Intercept and slope ``theta`` (R, 2) and inverse information (R, 2, 2) of the logistic fit on the reconstructed
    patients: rows of consistent counts and mean offsets (R, B), sub-point covariates ``z`` (B, J) and each bin's
    shape ``base`` (R, B, J) (:func:`dsroc.histogram.resolved.fine_base`); NaN rows where no finite fit exists."""
    w, n1, T = _population(*(np.atleast_2d(np.asarray(a, dtype=np.float64)) for a in (h0, h1, u0, u1)),
                           z, np.asarray(base, dtype=np.float64).reshape((-1,) + np.shape(z)))
    return _fit(z.ravel(), w, n1, T)


def recalibration_with_sums(c0, c1, u0, u1, edges, grid, *, sigma: float, sums_sigma: float, draws: int = 100,
                            seed=0) -> Recalibration:
    """Calibration intercept and slope of the unbinned scores (module docstring) with an interval that includes
    sampling, the privacy noise and the range over the within-bin splits of the classes.

    ``c0, c1``: consistent counts (B,); ``u0, u1``: the classes' mean offsets (B,)
    (:func:`dsroc.histogram.sums.within_offsets`, shrunk towards the finer histogram's mean offsets);
    ``grid = (fine_edges, fine_counts, fine_sigma)``: the finer histogram of all scores and its noise SD per cell;
    ``sigma`` and ``sums_sigma``: the noise SDs of a summed count
    and a summed score sum (bin widths). ``cov`` is the inverse information plus the covariance of ``draws``
    parametric-bootstrap fits (counts, sums and finer histogram drawn again with their noise, seeded by ``seed``);
    ``slope_range`` and ``intercept_range`` are the fits at the ends of the range of ``T``
    (:func:`logit_sum_range`) and the point. Not converged (NaN) where the reconstructed fit has no finite
    estimate.
    """
    sigma, k = check_sigma(sigma), check_sigma(sums_sigma, name="sums_sigma")
    fine_edges, fine_counts, fine_sigma = grid
    g = consistent_counts(np.asarray(fine_counts, dtype=np.float64).reshape(-1))
    z, base = fine_base(edges, fine_edges, g)
    c = np.stack([c0, c1]).astype(np.float64)
    u = np.stack([u0, u1]).astype(np.float64)
    w, n1, T = _population(c[0][None], c[1][None], u[0][None], u[1][None], z, base[None])
    lo, hi = logit_sum_range(z, w.reshape(z.shape), c, u)
    ends = np.array([lo.sum(), T[0], hi.sum()])
    theta, inv = _fit(z.ravel(), np.repeat(w, 3, axis=0), np.full(3, n1[0]), ends)
    if not np.isfinite(theta[1]).all():
        return Recalibration(float("nan"), float("nan"), np.full((2, 2), np.nan), False)
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
    b = consistent_counts(c[:, None, :] + sigma * rng.standard_normal((2, draws, c.shape[1])))
    t = u[:, None, :] * c[:, None, :] + k * rng.standard_normal((2, draws, c.shape[1]))
    gb = consistent_counts(g + check_sigma(fine_sigma, name="grid_sigma") * rng.standard_normal((draws, g.size)))
    base_b = fine_base(edges, fine_edges, gb)[1]
    prior = shape_offsets(edges, fine_edges, gb)
    ub = np.stack([within_offsets(b[i], t[i], sums_sigma=k, prior=prior) for i in (0, 1)])
    replicates = reconstructed_recalibration(b[0], b[1], ub[0], ub[1], z, base_b)[0]
    replicates = replicates[np.isfinite(replicates).all(1)]
    noise = np.cov(replicates.T) if replicates.shape[0] > 2 else np.full((2, 2), np.nan)
    return Recalibration(float(theta[1, 0]), float(theta[1, 1]), inv[1] + noise, True,
                         intercept_range=(float(theta[:, 0].min()), float(theta[:, 0].max())),
                         slope_range=(float(theta[:, 1].min()), float(theta[:, 1].max())), includes=BINNING_INCLUDED)


def with_range(grouped: Recalibration, unbinned: Recalibration) -> Recalibration:
    """The grouped fit (:func:`dsroc.histogram.calibration.histogram_recalibration`) with the unbinned fit's range
    (:func:`recalibration_with_sums`): its point and covariance, and an interval that is the hull of its own and
    the range widened by the range's standard errors, so that it covers the unbinned fit where either holds: the
    calibration curve is logistic across the bins (the grouped fit is then the unbinned one), or the covariates'
    reconstruction is right (the unbinned fit then lies in the range). One of them alone where the other has no
    finite fit."""
    if not unbinned.converged or not grouped.converged:
        return grouped if grouped.converged else unbinned
    return Recalibration(grouped.intercept, grouped.slope, grouped.cov, True, unbinned.intercept_range,
                         unbinned.slope_range, unbinned.includes, range_cov=unbinned.cov)
