"""The AUC of the histogram protocol: the ROC-GLM through the edges where it fits, else a nonparametric AUC, with noise.

The rule (``estimator="rocglm"``, the default): the ROC-GLM is reported where it converged, increases, the
chi-square of its residuals at the noisy ROC points (:mod:`dsroc.histogram.fit_test`) does not reject it at
``FIT_LEVEL`` (``SHAPE_FIT_LEVEL`` where the shape AUC is the fallback; with the score sums it must be testable:
three ROC points with enough patients, else a binormal line through two points is taken on trust), its AUC lies in
the set the binned counts identify (the binned AUC plus or minus half the share of within-bin pairs; without sums
``PLAUSIBLE_SDS`` SDs more), and (with the per-bin score sums) it agrees with the resolved AUC (within-bin pairs
ordered by the classes' mean offsets, :mod:`dsroc.histogram.resolved`) within
``AGREEMENT_SHARE`` of the shift that ordering gives plus ``AGREEMENT_Z`` SDs of their difference under the
noise, and likewise with the shape AUC where the quantile grid's first stage is known (as precise as the counts, it
rejects the binormal curve on bimodal scores at 200 events, where the resolved AUC's noise hid a bias of -0.05).
Elsewhere a nonparametric AUC is
reported: with the sums the shape AUC (with the first stage; the classes inside each bin from the first stage's
shape of all scores, :mod:`dsroc.histogram.shape`), else the monotone
(PCHIP) curve through the ROC points (:mod:`dsroc.histogram.monotone`), where it agrees with the resolved AUC
within ``AGREEMENT_Z`` SDs of their difference under the noise or (the shape AUC) where a testable, plausible
ROC-GLM agrees with it and neither with the resolved AUC (outvoted: its sums' noise is the likelier cause), else
the resolved AUC; without sums the binned one. (On the stress study's target cells the monotone curve cut the
skewed design's MAE from 0.0027 to 0.0014 and the piecewise-uniform one's from 0.0047 to 0.0016; allowing it a
share of the shift too left bimodal scores biased by -0.0035. The shape AUC matches it on smooth scores and
follows bimodal ones, whose ROC curve is wavy between the edges.) The constants are tuned
by the stress study (``docs/simulations.md``): a chi-square at 0.01 rejected the skewed design's curve although
its AUC was the more accurate, so the test only guards against gross misfit, and the AUC-level checks decide.
Every interval covers sampling, the privacy noise and what the binning or the model can hide: the ROC-GLM's is
widened by its disagreement with the resolved AUC or the shape AUC beyond one SD of it, the larger (misfit), the
monotone curve's by its own such misfit plus the resolved AUC's widening (the shape AUC's likewise), the resolved
AUC's by ``RESOLUTION_SHARE`` of the shift it gives the within-bin pairs (the binned AUC lies inside), the binned AUC's
by half the share of within-bin pairs (partial identification).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..roc.auc import auc_ci_batch
from .auc import (
    check_sigma,
    histogram_auc,
    histogram_auc_noise_variance,
    histogram_delong_variance,
    histogram_rocglm,
    noise_replicates,
    replicate_rocglm_auc,
    replicate_variance,
)
from .estimate_notes import RuleTrace, auc_reason
from .fit_test import rocglm_fit_pvalue
from .grid import check_counts, consistent_counts
from .monotone import monotone_auc
from .rule_levels import AGREEMENT_SHARE, AGREEMENT_Z, FIT_LEVEL, RESOLUTION_SHARE, SHAPE_FIT_LEVEL
from .resolved import concordance_auc, fine_base, logistic_concordance, tilt_concordance
from .shape import shape_auc, shape_concordance
from .sums import within_offsets

__all__ = [
    "PLAUSIBLE_SDS",
    "AGREEMENT_SHARE",
    "AGREEMENT_Z",
    "FIT_LEVEL",
    "SHAPE_FIT_LEVEL",
    "RESOLUTION_SHARE",
    "ESTIMATORS",
    "DEFAULT_ESTIMATOR",
    "DEFAULT_TAIL_SIGMAS",
    "AucEstimates",
    "histogram_point_auc",
    "histogram_auc_estimates",
]

ESTIMATORS = ("rocglm", "shape", "monotone", "resolved", "empirical")
DEFAULT_ESTIMATOR = "rocglm"
# ROC points with fewer than this many noise SDs of estimated patients on either side are not fitted (5 left no fit
# in half the data sets at prevalence 0.02, n = 10 000 on the quantile grid; 2 fits nearly all, as accurately).
DEFAULT_TAIL_SIGMAS = 2.0
# Without score sums: a ROC-GLM fit further than the binning bound plus this many SDs (sampling + noise) from
# the binned empirical AUC is not used. With sums the bound itself (0 SDs): the ROC-GLM and the binned AUC share
# the counts' noise, and on bimodal scores at n = 1 000 or prevalence 0.02 fits outside it were off by 0.07-0.1.
PLAUSIBLE_SDS = 3.0


class AucEstimates(NamedTuple):
    """The AUC part of a histogram validation for one or many histograms (arrays with one entry per row).

    ``estimator`` says per row which estimate ``auc`` is (``"rocglm"``, ``"monotone"``, ``"resolved"`` or
    ``"empirical"``) and
    ``reason`` why; ``variance`` is sampling plus noise and ``lower, upper`` the interval, widened by
    ``widening`` on each side for what the binning or the model can hide. ``binning_bound`` is half the
    share of within-bin pairs; ``resolution_bound`` the resolved AUC's widening (``RESOLUTION_SHARE`` of its shift); ``disagreement`` the ROC-GLM's
    AUC minus the resolved one and ``disagreement_sd`` its noise SD (NaN without sums or fit);
    ``rocglm_fit_pvalue`` the goodness of fit of the binormal curve to the ROC points (NaN: not testable);
    ``auc_monotone`` the area under the monotone curve through the ROC points and ``variance_monotone`` its
    sampling plus noise variance (NaN without sums); ``auc_shape``, ``variance_shape`` the same of the shape AUC and
    ``shape_disagreement``, ``shape_disagreement_sd`` the ROC-GLM's AUC minus it and their difference's noise SD
    (NaN without the first stage or fit).
    """

    counts0: np.ndarray
    counts1: np.ndarray
    auc: np.ndarray
    variance: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    defined: np.ndarray
    estimator: np.ndarray
    auc_empirical: np.ndarray
    variance_empirical: np.ndarray
    sampling_variance: np.ndarray
    rocglm_params: np.ndarray
    rocglm_auc: np.ndarray
    rocglm_noise_variance: np.ndarray
    rocglm_points: np.ndarray
    binning_bound: np.ndarray
    auc_resolved: np.ndarray
    variance_resolved: np.ndarray
    resolution_bound: np.ndarray
    disagreement: np.ndarray
    disagreement_sd: np.ndarray
    widening: np.ndarray
    reason: np.ndarray
    rocglm_fit_pvalue: np.ndarray
    auc_monotone: np.ndarray
    variance_monotone: np.ndarray
    auc_shape: np.ndarray
    variance_shape: np.ndarray
    shape_disagreement: np.ndarray
    shape_disagreement_sd: np.ndarray


def _rocglm_candidates(c0, c1, tail, sigma):
    """The ROC-GLM through the edges, its AUC NaN where not converged or not increasing (``gamma2 <= 0``), and the
    p-value of its goodness of fit (:func:`dsroc.histogram.fit_test.rocglm_fit_pvalue`)."""
    glm = histogram_rocglm(c0, c1, tail_count=tail)
    auc = glm.auc.copy()
    with np.errstate(invalid="ignore"):
        auc[~(glm.converged & (glm.params[:, 1] > 0))] = np.nan
    return glm.params, auc, glm.points, rocglm_fit_pvalue(c0, c1, glm.params, sigma=sigma)


def _fits(auc_glm, pvalue, level=FIT_LEVEL):
    """A usable ROC-GLM: a converged increasing fit that its goodness-of-fit test does not reject at ``level`` (or
    cannot test)."""
    return np.isfinite(auc_glm) & ~(pvalue < level)


def _plausible(auc_glm, auc_emp, var_emp, within):
    """A ROC-GLM AUC within the binning bound (half the share of within-bin pairs) plus ``PLAUSIBLE_SDS`` SDs
    (variance ``var_emp``; 0 with sums) of the binned AUC (few, noisy edges can give a wild binormal line)."""
    with np.errstate(invalid="ignore"):
        return np.abs(auc_glm - auc_emp) <= within + PLAUSIBLE_SDS * np.sqrt(var_emp)


def _concordances(c0, c1, sums0, sums1, k, shape=None):
    """Each bin's within-bin concordance from consistent counts and noisy sums (..., B), and the mean offsets: the
    tilt model, or with ``shape = (z, base)`` of a finer histogram the logistic model on that shape."""
    u0, u1 = within_offsets(c0, sums0, sums_sigma=k), within_offsets(c1, sums1, sums_sigma=k)
    if shape is None:
        return tilt_concordance(u0, u1), u0, u1
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(c0 + c1 > 0, c1 / np.where(c0 + c1 > 0, c0 + c1, 1.0), 0.5)
    return logistic_concordance(shape[0], shape[1], share, u1 - u0), u0, u1


def _resolved_parts(c0, c1, sums0, sums1, k, b0, b1, more, shape=None, shape_draws=None):
    """The resolved AUC of rows (R, B), its concordances, shift (the share of pairs within bins weighted by how far
    their concordance is from 1/2: its largest distance from the binned AUC) and noise replicates (R, D) from the
    replicate counts ``b0, b1``, the sums' draws ``more`` and (with a finer histogram's ``shape``) its replicates
    ``shape_draws``."""
    conc, u0, u1 = _concordances(c0, c1, sums0, sums1, k, shape)
    t0 = (u0 * c0)[:, None, :] + k * more[:, 0]
    t1 = (u1 * c1)[:, None, :] + k * more[:, 1]
    draws = concordance_auc(b0, b1, _concordances(b0, b1, t0, t1, k, shape_draws)[0])
    shift = (c0 * c1 * np.abs(conc - 0.5)).sum(-1) / (c0.sum(-1) * c1.sum(-1))
    return concordance_auc(c0, c1, conc), conc, shift, draws


def _fine_shapes(edges, grid, rows, seeds, draws):
    """``(z, base)`` of the finer histogram ``grid = (edges, counts (R, F), sigma)`` for ``rows``, and the same of
    ``draws`` replicates with its noise drawn again (seeded by each row's seed, spawned apart from the counts')."""
    fine_edges, counts, sigma = grid
    g = consistent_counts(check_counts(counts, name="grid_counts"))[rows]
    z, base = fine_base(edges, fine_edges, g)
    noise = np.stack([np.random.default_rng(np.random.SeedSequence(seeds[i]).spawn(1)[0]).standard_normal(
        (draws, g.shape[-1])) for i in rows]) if rows.size else np.zeros((0, draws, g.shape[-1]))
    return (z, base), (z, fine_base(edges, fine_edges, consistent_counts(g[:, None, :] + sigma * noise))[1])


def histogram_point_auc(counts0, counts1, *, sigma: float, estimator: str = DEFAULT_ESTIMATOR,
                        tail_sigmas: float = DEFAULT_TAIL_SIGMAS) -> np.ndarray:
    """The AUC :func:`histogram_validation` reports from counts without score sums, without its variance (no
    bootstrap), for consistent counts ``(R, B)`` with patients of both classes: the plausible ROC-GLM through the
    edges, else (and where a class holds fewer than two) the binned empirical AUC. For studies that need point
    estimates only."""
    sigma = check_sigma(sigma)
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    c0, c1 = check_counts(counts0, name="counts0"), check_counts(counts1, name="counts1", n_bins=np.shape(counts0)[-1])
    if c0.ndim != 2 or c0.shape != c1.shape:
        raise ValueError(f"counts0 and counts1 must both have shape (rows, bins), got {c0.shape} and {c1.shape}")
    auc_emp = np.asarray(histogram_auc(c0, c1))
    if estimator == "empirical":
        return auc_emp
    ok = (c0.sum(-1) >= 2) & (c1.sum(-1) >= 2)
    out = auc_emp.copy()
    if ok.any():
        var_emp = histogram_delong_variance(c0[ok], c1[ok]) + histogram_auc_noise_variance(c0[ok], c1[ok], sigma=sigma)
        _, auc_glm, _, pvalue = _rocglm_candidates(c0[ok], c1[ok], check_sigma(tail_sigmas, name="tail_sigmas") * sigma,
                                                   sigma)
        use = _fits(auc_glm, pvalue) & _plausible(auc_glm, auc_emp[ok], var_emp, 0.5 * _within_share(c0[ok], c1[ok]))
        out[ok] = np.where(use, auc_glm, auc_emp[ok])
    return out


def histogram_auc_estimates(h0, h1, *, sigma: float, estimator: str = DEFAULT_ESTIMATOR,
                            tail_sigmas: float = DEFAULT_TAIL_SIGMAS, level: float = 0.95, noise_draws: int = 100,
                            seeds=None, sums0=None, sums1=None, sums_sigma: float | None = None, edges=None,
                            grid=None) -> AucEstimates:
    """AUC, variance and interval from summed noisy histograms (and score sums), batched over rows ``(R, B)``.

    What :func:`histogram_validation` reports for one histogram, for many at once (the simulation study).
    Each row: counts made consistent; the binned empirical AUC with DeLong (binned placement values) plus
    delta-method noise variance; with the score sums (``sums0, sums1``, noise SD ``sums_sigma`` per cell) the
    resolved AUC (:func:`dsroc.histogram.resolved.tilt_concordance` per bin) with DeLong on its placement values;
    the ROC-GLM through the edges with at least ``tail_sigmas * sigma`` estimated patients of each class on
    either side. The noise variances of the ROC-GLM and resolved AUCs, and of their difference, come from one
    parametric bootstrap of the known noise (``noise_draws`` replicates of counts and sums seeded by
    ``seeds[r]``, default ``r``; :func:`dsroc.histogram.auc.noise_replicates`). With ``grid = (fine_edges,
    counts, sigma)``, a histogram of all scores on a finer grid (``counts`` (R, F), noise SD ``sigma`` per cell; the
    quantile grid's first release) and the rows' common ``edges``, the resolved AUC uses its shape within each bin
    (:func:`dsroc.histogram.resolved.logistic_concordance`), its noise drawn again in the bootstrap.

    ``estimator``: ``"rocglm"`` (default) applies the module's rule; ``"resolved"`` reports the resolved AUC
    (the binned one without sums); ``"empirical"`` the binned one. Rows with fewer than two estimated patients
    of a class give NaN.
    """
    sigma = check_sigma(sigma)
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    tail_sigmas = check_sigma(tail_sigmas, name="tail_sigmas")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    raw0, raw1 = check_counts(h0, name="h0"), check_counts(h1, name="h1", n_bins=np.shape(h0)[-1])
    if raw0.ndim != 2 or raw0.shape != raw1.shape:
        raise ValueError(f"h0 and h1 must both have shape (rows, bins), got {raw0.shape} and {raw1.shape}")
    with_sums = sums0 is not None
    if with_sums:
        sums = [check_counts(t, name=name, n_bins=raw0.shape[-1]) for t, name in ((sums0, "sums0"), (sums1, "sums1"))]
        if any(t.shape != raw0.shape for t in sums):
            raise ValueError(f"sums0 and sums1 must have the counts' shape {raw0.shape}")
        k = check_sigma(sums_sigma, name="sums_sigma")
    if grid is not None and (edges is None or not with_sums):
        raise ValueError("a finer histogram (grid) refines the resolved AUC: it needs the score sums and the edges")
    rows = raw0.shape[0]
    seeds = list(range(rows)) if seeds is None else list(seeds)
    if len(seeds) != rows:
        raise ValueError(f"seeds must give one seed per row ({rows}), got {len(seeds)}")
    c0, c1 = consistent_counts(raw0), consistent_counts(raw1)
    ok = (c0.sum(-1) >= 2) & (c1.sum(-1) >= 2)
    nan = np.full(rows, np.nan)
    auc_emp, sampling, var_emp = nan.copy(), nan.copy(), nan.copy()
    auc_emp[ok] = histogram_auc(c0[ok], c1[ok])
    sampling[ok] = histogram_delong_variance(c0[ok], c1[ok])
    var_emp[ok] = sampling[ok] + histogram_auc_noise_variance(c0[ok], c1[ok], sigma=sigma)
    bound = np.where(ok, 0.5 * _within_share(c0, c1), np.nan)
    params, auc_glm, points = np.full((rows, 2), np.nan), nan.copy(), np.zeros(rows, dtype=np.int64)
    var_glm, res, var_res, resolution, diff, diff_sd, pvalue = (nan.copy() for _ in range(7))
    mono, var_mono, curve_diff, curve_sd, shp, var_shp, glm_shape, glm_shape_sd = (nan.copy() for _ in range(8))
    agrees, shape_rejects = np.zeros(rows, dtype=bool), np.zeros(rows, dtype=bool)  # the ROC-GLM's two checks
    outvoted = np.zeros(rows, dtype=bool)
    if estimator == "shape" and grid is None:
        raise ValueError("estimator 'shape' needs the first stage's histogram of all scores (grid)")
    # The nonparametric curve of the rule: the shape AUC's where the first stage is known, else the PCHIP curve's.
    shaped = grid is not None and estimator != "monotone"
    level_fit = SHAPE_FIT_LEVEL if shaped else FIT_LEVEL
    tail = tail_sigmas * sigma
    if estimator == "rocglm" and ok.any():
        params[ok], auc_glm[ok], points[ok], pvalue[ok] = _rocglm_candidates(c0[ok], c1[ok], tail, sigma)
    idx = np.flatnonzero(ok)
    if with_sums and estimator != "empirical" and idx.size:
        b0, b1, more = noise_replicates(c0[idx], c1[idx], sigma=sigma, draws=noise_draws,
                                        seeds=[seeds[i] for i in idx], extra=2)
        shapes = (None, None) if grid is None else _fine_shapes(edges, grid, idx, seeds, int(noise_draws))
        res[idx], conc, shift, res_draws = _resolved_parts(c0[idx], c1[idx], sums[0][idx], sums[1][idx], k,
                                                                     b0, b1, more, *shapes)
        sampling_res = histogram_delong_variance(c0[idx], c1[idx], conc)
        var_res[idx] = sampling_res + replicate_variance(res_draws)
        mono_draws = monotone_auc(b0, b1)
        mono[idx] = monotone_auc(c0[idx], c1[idx])
        var_mono[idx] = sampling_res + replicate_variance(mono_draws)
        curve, curve_draws = mono[idx], mono_draws
        if shaped:
            (z, base), (_, base_draws) = shapes
            conc_shape = shape_concordance(c0[idx], c1[idx], z, base)
            shp[idx] = curve = concordance_auc(c0[idx], c1[idx], conc_shape)
            curve_draws = shape_auc(b0, b1, z, base_draws)
            var_shp[idx] = histogram_delong_variance(c0[idx], c1[idx], conc_shape) + replicate_variance(curve_draws)
        curve_diff[idx] = curve - res[idx]
        curve_sd[idx] = np.sqrt(replicate_variance(curve_draws - res_draws))
        fit = _fits(auc_glm[idx], pvalue[idx], level_fit)
        if fit.any():
            glm_draws = replicate_rocglm_auc(b0[fit], b1[fit], tail_count=tail)
            var_glm[idx[fit]] = replicate_variance(glm_draws)
            diff[idx[fit]] = auc_glm[idx[fit]] - res[idx[fit]]
            diff_sd[idx[fit]] = np.sqrt(replicate_variance(glm_draws - res_draws[fit]))
            if shaped:  # and against the shape AUC: as precise as the counts, it has power where the sums have not
                glm_shape[idx[fit]] = auc_glm[idx[fit]] - curve[fit]
                glm_shape_sd[idx[fit]] = np.sqrt(replicate_variance(glm_draws - curve_draws[fit]))
        resolution[idx] = RESOLUTION_SHARE * shift
        agree = np.full(rows, np.nan)
        agree[idx] = AGREEMENT_SHARE * shift
        with np.errstate(invalid="ignore"):
            agrees = np.abs(diff) <= agree + AGREEMENT_Z * diff_sd
            shape_rejects = np.abs(glm_shape) > agree + AGREEMENT_Z * glm_shape_sd
            credible = _plausible(auc_glm, auc_emp, 0.0, bound) & np.isfinite(pvalue) & ~shape_rejects
            use_glm = agrees & credible
            use_curve = np.abs(curve_diff) <= AGREEMENT_Z * curve_sd
            # The resolved AUC outvoted: a testable, plausible ROC-GLM agrees with the shape AUC, and neither with
            # the resolved AUC. Two models this different rarely err alike; the score sums' noise is the likelier
            # cause (through real daemons, at n = 1 000: the resolved AUC -0.09 off, the two others within 0.004).
            outvoted = shaped & credible & np.isfinite(glm_shape) & ~agrees & ~use_curve
            use_curve |= outvoted
    elif estimator == "rocglm" and idx.size:
        fit = idx[_fits(auc_glm[idx], pvalue[idx]) & _plausible(auc_glm[idx], auc_emp[idx], var_emp[idx], bound[idx])]
        if fit.size:
            b0, b1, _ = noise_replicates(c0[fit], c1[fit], sigma=sigma, draws=noise_draws, seeds=[seeds[i] for i in fit])
            var_glm[fit] = 0.0 if sigma == 0.0 else replicate_variance(replicate_rocglm_auc(b0, b1, tail_count=tail))
        use_glm = np.isin(np.arange(rows), fit)
    else:
        use_glm = np.zeros(rows, dtype=bool)
    use_glm &= _fits(auc_glm, pvalue, level_fit) & np.isfinite(var_glm) & (estimator == "rocglm")
    if not (with_sums and estimator != "empirical" and idx.size):
        use_curve = np.zeros(rows, dtype=bool)
    curve, var_curve = (shp, var_shp) if shaped else (mono, var_mono)
    use_curve = ~use_glm & np.isfinite(var_curve) & np.where(np.isin(estimator, ("monotone", "shape")), True,
                                                             use_curve & (estimator == "rocglm"))
    use_res = ~use_glm & ~use_curve & np.isfinite(res) & np.isfinite(var_res)
    auc = np.where(use_glm, auc_glm, np.where(use_curve, curve, np.where(use_res, res, auc_emp)))
    variance = np.where(use_glm, sampling + var_glm,
                        np.where(use_curve, var_curve, np.where(use_res, var_res, var_emp)))
    # What the binning or the model can hide, added to each side of the interval: the ROC-GLM's disagreement with
    # the resolved AUC or (with the first stage) the shape AUC beyond one SD of its noise, the larger (misfit; 0
    # without sums, where the plausibility check bounds it; on bimodal scores at AUC 0.99 the ROC-GLM agreed with
    # the noisier resolved AUC and erred by -0.0009, covering the population AUC 0.90 with that misfit alone),
    # the resolved AUC's resolution bound, the monotone curve's the same plus its misfit (it interpolates within
    # the bins: on bimodal scores at AUC 0.6 it agreed with the resolved AUC within the noise and erred by -0.013,
    # covering 0.78 with its misfit alone), the binned AUC's partial-identification bound.
    misfit, shape_misfit, curve_misfit = (_beyond(d, sd) for d, sd in
                                          ((diff, diff_sd), (glm_shape, glm_shape_sd), (curve_diff, curve_sd)))
    widening = np.where(use_glm, np.maximum(misfit, shape_misfit),
                        np.where(use_curve, resolution + curve_misfit, np.where(use_res, resolution, bound)))
    ci = auc_ci_batch(auc, np.where(np.isfinite(variance), variance, -1.0), level=level)
    lower, upper = np.clip(ci.lower - widening, 0.0, 1.0), np.clip(ci.upper + widening, 0.0, 1.0)
    used = np.where(use_glm, "rocglm", np.where(use_curve, "shape" if shaped else "monotone",
                                                np.where(use_res, "resolved", "empirical")))
    used = used.astype(object)

    traces = [RuleTrace(estimator, used[i], with_sums, shaped, points[i], auc_glm[i], pvalue[i], diff[i], diff_sd[i],
                        resolution[i], widening[i], bound[i], auc_emp[i], curve_diff[i], curve_sd[i], glm_shape[i],
                        glm_shape_sd[i], bool(shape_rejects[i] and agrees[i]), bool(outvoted[i])) for i in range(rows)]
    reason = np.array([auc_reason(t) for t in traces], dtype=object)
    return AucEstimates(c0, c1, auc, variance, lower, upper, ci.defined, used, auc_emp, var_emp, sampling, params,
                        auc_glm, var_glm, points, bound, res, var_res, resolution, diff, diff_sd, widening, reason, pvalue,
                        mono, var_mono, shp, var_shp, glm_shape, glm_shape_sd)


def _beyond(diff, sd):
    """How far a disagreement lies beyond one SD of its noise (0 where it is NaN: no such check)."""
    return np.where(np.isfinite(diff), np.maximum(np.abs(diff) - np.nan_to_num(sd), 0.0), 0.0)


def _within_share(c0, c1):
    """Share of (negative, positive) pairs in the same bin, per row (0 where a class is empty)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        share = (c0 * c1).sum(-1) / (c0.sum(-1) * c1.sum(-1))
    return np.where(np.isfinite(share), share, 0.0)
