"""The resolved AUC: within-bin pairs ordered by the classes' mean score offsets under an exponential tilt.

Pairs of a negative and a positive in different bins are ordered by their bins. Within bin ``b`` the
per-bin score sums give each class's mean offset ``u_cb`` in [0, 1] (:func:`dsroc.histogram.sums.within_offsets`);
each class's offsets are modelled by the maximum-entropy density on [0, 1] with that mean, the truncated
exponential ``f_c(t) = lam_c exp(lam_c t) / (exp(lam_c) - 1)``. Its likelihood ratio ``f_1 / f_0`` is
log-linear in the offset (the two classes differ by an exponential tilt), it reduces to the uniform
density (ties one half) at ``u = 1/2``, and unlike linear densities it reaches every mean in (0, 1), so
it follows bins whose scores crowd against one edge (the first and last bins of a quantile grid). The
within-bin concordance ``P(X0 < X1)`` then has a closed form, evaluated here by Gauss-Legendre quadrature.

With a histogram of all scores on a finer grid (the first release of the quantile grid) the bin's shape is known:
the classes are modelled as that shape times ``P(positive | score) = expit(a + b logit(score))`` and ``1 - ``
that, with ``(a, b)`` matching the bin's share of positives and the difference of the classes' mean offsets
(:func:`logistic_concordance`): exact for a calibrated model up to the fine grid's resolution.
"""

from __future__ import annotations

import numpy as np

from .grid import check_counts, check_edges

__all__ = ["SUBPOINTS", "tilt_rate", "tilt_concordance", "concordance_auc", "concordance_placements", "fine_base",
           "shape_offsets", "logistic_classes", "logistic_concordance"]

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(96)
_NODES, _WEIGHTS = 0.5 * (_NODES + 1.0), 0.5 * _WEIGHTS
# Mean offsets are kept inside [U_MIN, 1 - U_MIN] (rates |lam| <= ~1/U_MIN), where the quadrature is exact to 1e-10.
U_MIN = 0.01
_BISECTIONS = 50


def _tilt_mean(lam):
    """Mean of the truncated exponential on [0, 1] with rate ``lam`` (1/2 at 0), stable for every sign and size."""
    a = np.abs(lam)
    with np.errstate(invalid="ignore", divide="ignore"):
        upper = np.where(a < 1e-6, 0.5 + a / 12.0, 1.0 / -np.expm1(-a) - 1.0 / np.where(a < 1e-6, 1.0, a))
    return np.where(lam >= 0, upper, 1.0 - upper)


def tilt_rate(u) -> np.ndarray:
    """The rate ``lam`` whose truncated exponential on [0, 1] has mean ``u`` (clipped to [U_MIN, 1 - U_MIN])."""
    u = np.clip(np.asarray(u, dtype=np.float64), U_MIN, 1.0 - U_MIN)
    lo, hi = np.full(u.shape, -6.0), np.full(u.shape, 6.0)  # asinh(lam): |lam| up to 200
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        below = _tilt_mean(np.sinh(mid)) < u
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return np.sinh(0.5 * (lo + hi))


def _density_cdf(lam, t):
    """Density and CDF of the truncated exponential with rates ``lam`` (...,) at points ``t`` (Q,): (..., Q) each."""
    lam = lam[..., None]
    a = np.abs(lam)
    small = a < 1e-8
    safe = np.where(small, 1.0, lam)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        # density lam e^{lam t} / (e^lam - 1) = |lam| e^{lam t - max(lam, 0)} / (1 - e^{-|lam|})
        dens = np.where(small, 1.0, a * np.exp(lam * t - np.maximum(lam, 0.0)) / -np.expm1(-np.where(small, 1.0, a)))
        # CDF (e^{lam t} - 1) / (e^lam - 1); for lam > 0 as e^{lam (t - 1)} (1 - e^{-lam t}) / (1 - e^{-lam})
        pos = np.exp(safe * (t - 1.0)) * -np.expm1(-safe * t) / -np.expm1(-safe)
        neg = np.expm1(safe * t) / np.expm1(safe)
        cdf = np.where(small, t, np.where(lam > 0, pos, neg))
    return dens, cdf


def tilt_concordance(u0, u1) -> np.ndarray:
    """``P(X0 < X1)`` for independent truncated exponentials on [0, 1] with means ``u0`` and ``u1`` (arrays of
    one shape): ``int f_1(t) F_0(t) dt``. 1/2 when ``u0 = u1``; increasing in ``u1``, decreasing in ``u0``."""
    u0, u1 = np.broadcast_arrays(np.asarray(u0, dtype=np.float64), np.asarray(u1, dtype=np.float64))
    _, cdf0 = _density_cdf(tilt_rate(u0), _NODES)
    dens1, _ = _density_cdf(tilt_rate(u1), _NODES)
    return np.clip((_WEIGHTS * dens1 * cdf0).sum(-1), 0.0, 1.0)


def concordance_placements(h0, h1, concordance) -> tuple[np.ndarray, np.ndarray]:
    """Mean placement values per bin when the within-bin pairs of bin ``b`` are ordered with probability
    ``concordance[b]`` (1/2: the binned mid-ranks): ``pv1[b]``, the share of positives above a negative of
    bin ``b``, and ``pv0[b]``, the share of negatives above a positive of bin ``b``; each ``(..., B)``."""
    c0, c1 = check_counts(h0, name="h0"), check_counts(h1, name="h1", n_bins=np.shape(h0)[-1])
    c = np.asarray(concordance, dtype=np.float64)
    above0 = np.cumsum(c0[..., ::-1], axis=-1)[..., ::-1] - c0  # negatives in higher bins
    above1 = np.cumsum(c1[..., ::-1], axis=-1)[..., ::-1] - c1
    n0, n1 = c0.sum(-1, keepdims=True), c1.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (above0 + (1.0 - c) * c0) / n0, (above1 + c * c1) / n1


def concordance_auc(h0, h1, concordance) -> np.ndarray | float:
    """AUC of binned scores whose within-bin pairs of bin ``b`` are ordered with probability ``concordance[b]``:
    ``sum_b h0_b (#positives above bin b + c_b h1_b) / (n0 n1)``; the binned AUC at ``c = 1/2``."""
    c0 = check_counts(h0, name="h0")
    _, pv1 = concordance_placements(h0, h1, concordance)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (c0 * pv1).sum(-1) / c0.sum(-1)
    return float(value) if np.ndim(value) == 0 else value
# Sub-points per bin at which a first-stage histogram's shape is evaluated (midpoints of equal steps in the offset).
SUBPOINTS = 128
SUBPOINT_POSITIONS = (np.arange(SUBPOINTS) + 0.5) / SUBPOINTS
_NEWTON = 40


def _fine_grid(edges, fine_edges, fine_counts):
    """Checked ``edges``, the fine edges with their ends stretched to the grid's (scores outside a grid are clipped
    to its ends) and the fine counts, negatives as 0."""
    e = check_edges(edges)
    fe = check_edges(fine_edges).copy()
    fe[0], fe[-1] = min(fe[0], e[0]), max(fe[-1], e[-1])
    return e, fe, np.maximum(check_counts(fine_counts, name="fine_counts", n_bins=fe.size - 1), 0.0)


def fine_base(edges, fine_edges, fine_counts) -> tuple[np.ndarray, np.ndarray]:
    """The shape of all scores inside each bin of ``edges`` from a histogram of them on a finer grid.

    ``fine_counts`` (..., F) are consistent counts on ``fine_edges`` (F + 1; its ends stretched to the grid's,
    as scores outside a grid are clipped to its ends). Returns ``(z, base)``: at ``SUBPOINTS`` equal steps of the
    offset in every bin, the model's covariate ``z`` (B, SUBPOINTS) -- the logit of the score for probabilities,
    else the score -- and the fine histogram's density there (..., B, SUBPOINTS), piecewise constant.
    """
    e, fe, g = _fine_grid(edges, fine_edges, fine_counts)
    points = e[:-1, None] + np.diff(e)[:, None] * SUBPOINT_POSITIONS
    j = np.clip(np.searchsorted(fe, points, side="right") - 1, 0, fe.size - 2)
    dens = g / np.diff(fe)
    base = dens[..., j] + 1e-9 * (dens.max(-1)[..., None, None] + 1e-300)
    z = np.clip(np.log(points / (1 - points)), -12.0, 12.0) if e[0] >= 0.0 and e[-1] <= 1.0 else points
    return z, base


def shape_offsets(edges, fine_edges, fine_counts) -> np.ndarray:
    """Mean offset within each bin of ``edges`` of the scores of a histogram on a finer grid (``fine_counts``
    (..., F), consistent, uniform within each fine bin, its ends stretched to the grid's as in :func:`fine_base`):
    the mass-weighted mid-offsets of the bins' overlaps with the fine bins, exactly; 1/2 where a bin holds none."""
    e, fe, g = _fine_grid(edges, fine_edges, fine_counts)
    lo, hi = np.maximum(fe[None, :-1], e[:-1, None]), np.minimum(fe[None, 1:], e[1:, None])  # (B, F) overlaps
    share = np.clip(hi - lo, 0.0, None) / np.diff(fe)  # of each fine bin's patients
    mid = ((lo + hi) / 2 - e[:-1, None]) / np.diff(e)[:, None]
    mass = g[..., None, :] * share
    total = mass.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (mass * mid).sum(-1) / np.where(total > 0, total, 1.0), 0.5)


def logistic_classes(z, base, share, du) -> tuple[np.ndarray, np.ndarray]:
    """The classes' densities within each bin when the bin's scores have density ``base`` and a patient's chance of
    being positive is ``expit(a + b z)``: ``f1 ~ base pi``, ``f0 ~ base (1 - pi)``, with ``(a, b)`` solved (Newton)
    so that the positives' share is ``share`` and their mean offset exceeds the negatives' by ``du`` (arrays
    (..., B); ``z`` (B, SUBPOINTS), ``base`` (..., B, SUBPOINTS)). Returns ``(f0, f1)``, each summing to 1 over the
    sub-points. A bin stops once its Newton step is below 1e-10 (the others go on, up to ``_NEWTON`` steps)."""
    zs = (z - z.mean(-1, keepdims=True)) / (z.std(-1, keepdims=True) + 1e-12)
    w = base / base.sum(-1, keepdims=True)
    shape = np.broadcast_shapes(np.shape(share), np.shape(du), w.shape[:-1])
    w = np.broadcast_to(w, shape + w.shape[-1:]).reshape(-1, w.shape[-1])
    share = np.clip(np.broadcast_to(share, shape), 1e-6, 1 - 1e-6).reshape(-1)
    du = np.broadcast_to(du, shape).reshape(-1)
    a, b = np.log(share / (1 - share)), np.zeros(share.shape)
    n, t = share.size, SUBPOINT_POSITIONS
    rows, zb = np.arange(n), zs[np.arange(n) % zs.shape[0]]  # each row's bin's covariate
    # every step's arrays in buffers made once (the same operations as fresh arrays, in the same order)
    buffers = np.empty((9,) + zb.shape)
    for _ in range(_NEWTON):
        k = rows.size
        p, one_p, wp, wq, q, qz, tmp, wr, zr = (x[:k] for x in buffers)
        if k == n:  # no copies of the rows while none has stopped
            wr, zr, sr, dr, ar, br = w, zb, share, du, a, b
        else:
            np.take(w, rows, axis=0, out=wr)
            np.take(zb, rows, axis=0, out=zr)
            sr, dr, ar, br = share[rows], du[rows], a[rows], b[rows]
        np.multiply(br[:, None], zr, out=p)  # p = 1 / (1 + exp(-(a + b z)))
        np.add(ar[:, None], p, out=p)
        np.negative(p, out=p)
        np.exp(p, out=p)
        np.add(1.0, p, out=p)
        np.divide(1.0, p, out=p)
        np.subtract(1, p, out=one_p)
        np.multiply(wr, p, out=wp)
        np.multiply(wr, one_p, out=wq)
        np.multiply(wp, one_p, out=q)
        np.multiply(q, zr, out=qz)
        s = wp.sum(-1)
        m1 = np.multiply(wp, t, out=tmp).sum(-1) / s
        m0 = np.multiply(wq, t, out=tmp).sum(-1) / (1 - s)
        sa, sb = q.sum(-1), qz.sum(-1)
        qt, qzt = np.multiply(q, t, out=tmp).sum(-1), np.multiply(qz, t, out=tmp).sum(-1)
        da_ = (qt - m1 * sa) / s + (qt - m0 * sa) / (1 - s)
        db_ = (qzt - m1 * sb) / s + (qzt - m0 * sb) / (1 - s)
        r1, r2 = sr - s, dr - (m1 - m0)
        det = sa * db_ - sb * da_
        ok = np.abs(det) > 1e-14
        det = np.where(ok, det, 1.0)
        step_a = np.where(ok, np.clip((db_ * r1 - sb * r2) / det, -2, 2), 0.0)
        step_b = np.where(ok, np.clip((-da_ * r1 + sa * r2) / det, -2, 2), 0.0)
        a[rows], b[rows] = ar + step_a, np.clip(br + step_b, -30.0, 30.0)
        rows = rows[np.maximum(np.abs(step_a), np.abs(step_b)) >= 1e-10]
        if rows.size == 0:
            break
    p = buffers[0]
    np.multiply(b[:, None], zb, out=p)
    np.add(a[:, None], p, out=p)
    np.negative(p, out=p)
    np.exp(p, out=p)
    np.add(1.0, p, out=p)
    np.divide(1.0, p, out=p)
    f1, f0 = w * p, w * np.subtract(1, p, out=buffers[1])
    full = shape + zs.shape[-1:]
    return (f0 / f0.sum(-1, keepdims=True)).reshape(full), (f1 / f1.sum(-1, keepdims=True)).reshape(full)


def logistic_concordance(z, base, share, du) -> np.ndarray:
    """Within-bin concordance ``P(X0 < X1)`` of the classes of :func:`logistic_classes` (same arguments)."""
    f0, f1 = logistic_classes(z, base, share, du)
    below = np.cumsum(f0, -1) - f0
    return np.clip((f1 * (below + 0.5 * f0)).sum(-1), 0.0, 1.0)
