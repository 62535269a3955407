"""One entry point for the histogram protocol: every estimate, with intervals that include the privacy noise."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .auc import check_sigma
from .calibration import (
    Estimate,
    HistogramCalibrationCurve,
    Recalibration,
    calibration_in_the_large,
    histogram_brier,
    histogram_calibration_curve,
    histogram_recalibration,
    scalar_brier,
)
from .intercept import histogram_citl
from .resolved import shape_offsets
from .slope import recalibration_with_sums, with_range
from .sums import bin_means, logit_mean_variance, within_offsets, within_variance
from .estimates import DEFAULT_ESTIMATOR, DEFAULT_TAIL_SIGMAS, histogram_auc_estimates
from .grid import (
    bin_representatives,
    check_counts,
    consistent_counts,
    check_edges,
    histogram_confusion,
    histogram_pr,
    histogram_roc,
)

__all__ = [
    "HistogramValidation",
    "histogram_validation",
]


@dataclass
class HistogramValidation:
    """Everything the analyst reports from the summed noisy histograms (all post-processing).

    Attributes
    ----------
    edges : ndarray
        The public grid.
    sigma : float
        Noise SD of each summed cell.
    counts0, counts1 : ndarray
        Consistent counts (non-negative, monotone cumulative sums) of negatives and positives.
    n0, n1 : float
        Estimated class sizes.
    fpr, tpr : ndarray
        ROC points at the edges.
    recall, precision : ndarray
        PR points at the edges ``e_0 .. e_{B-1}``.
    estimator : str
        Which AUC ``auc`` is: ``"rocglm"`` (binormal curve through the edges), ``"shape"`` (the classes inside each
        bin from the first stage's shape of all scores, :mod:`dsroc.histogram.shape`), ``"monotone"`` (the monotone
        PCHIP curve through the ROC points at the edges), ``"resolved"`` (within-bin pairs
        ordered by the score sums), ``"empirical"`` (binned), or ``"none"`` (too few patients of a class: ``auc``
        is NaN and ``unavailable["auc"]`` says why); the first note says why (the rule of
        :mod:`dsroc.histogram.estimates`).
    auc, auc_variance, auc_ci, auc_ci_defined
        The reported AUC, its variance (sampling + noise) and logit interval, widened on each side by
        ``auc_widening`` for what the binning or the model can hide.
    auc_empirical, auc_empirical_variance
        Binned empirical AUC (ties one half) and its variance (DeLong on the binned placement values plus
        the noise's by the delta method).
    rocglm_params, rocglm_auc, rocglm_noise_variance
        The ROC-GLM through the edges and its noise variance (parametric bootstrap); ``rocglm_auc`` is NaN
        where no plausible fit exists (see :func:`histogram_auc_estimates`).
    sampling_variance : float
        DeLong variance of the binned AUC (the sampling part of both AUC variances).
    brier, brier_scalar : Estimate
        Binned Brier score; unbinned one from the scalar release (None without it).
    calibration : HistogramCalibrationCurve
    oe : Estimate
        Calibration-in-the-large O/E (from the scalar releases when given, else binned).
    citl : Estimate or None
        Calibration-in-the-large ``a`` of ``logit P(y=1) = a + logit(r)`` on the calibration curve's merged bins, its
        variance with the noise of the counts and of the score sums (:func:`dsroc.histogram.intercept.histogram_citl`).
    recalibration : Recalibration or None
        Calibration intercept and slope (None when the representatives are not probabilities): with the score sums
        and a finer histogram the unbinned fit's reconstruction and the range the binning leaves open
        (:func:`dsroc.histogram.slope.recalibration_with_sums`), else the grouped fit on the bins' representative
        scores; a note says which and what its interval includes. The grouped fit leaves out bins whose mean score
        is 0 or 1 (the sums' noise can push a bin's at the grid's end there: no logit); a note counts their patients.
    auc_resolved : float
        With the score sums: the binned AUC with within-bin pairs resolved by the classes' mean offsets
        (:func:`dsroc.histogram.sums.resolved_auc`); NaN without them.
    auc_resolved_variance : float
        Its variance: DeLong on its placement values plus the noise of counts and sums (parametric bootstrap).
    auc_widening : float
        What the reported AUC's interval adds on each side beyond sampling and noise.
    auc_monotone, auc_shape : float
        With the score sums: the area under the monotone (PCHIP) curve through the ROC points, and (with the first
        stage's histogram) the shape AUC; NaN otherwise.
    notes : list of str
    unavailable : dict of str to str
        What could not be estimated from this release and why (keys ``"auc"``, ``"roc"``, ``"brier"``,
        ``"calibration"``, ``"oe"``, ``"citl"``, ``"recalibration"``); those fields are NaN or None. A valid release never
        raises: a single occupied bin, one class, or no patients left after the noise give a result that says so.
    """

    edges: np.ndarray
    sigma: float
    counts0: np.ndarray
    counts1: np.ndarray
    n0: float
    n1: float
    fpr: np.ndarray
    tpr: np.ndarray
    recall: np.ndarray
    precision: np.ndarray
    estimator: str
    auc: float
    auc_variance: float
    auc_ci: tuple
    auc_ci_defined: bool
    auc_empirical: float
    auc_empirical_variance: float
    rocglm_params: np.ndarray
    rocglm_auc: float
    rocglm_noise_variance: float
    sampling_variance: float
    brier: Estimate | None
    brier_scalar: Estimate | None
    calibration: HistogramCalibrationCurve | None
    oe: Estimate | None
    recalibration: Recalibration | None
    notes: list = field(default_factory=list)
    unavailable: dict = field(default_factory=dict)
    auc_resolved: float = float("nan")
    auc_resolved_variance: float = float("nan")
    auc_widening: float = 0.0
    auc_monotone: float = float("nan")
    auc_shape: float = float("nan")
    citl: Estimate | None = None

    def confusion(self, edge: int) -> dict:
        """Confusion matrix at threshold ``edges[edge]`` with rates and each cell's noise SD.

        Returns ``tp, fp, fn, tn`` (estimated counts), ``sensitivity``, ``specificity``, ``ppv``, ``npv``
        and ``noise_sd_above`` / ``noise_sd_below`` (noise SD of a predicted-positive / -negative cell).
        """
        cells = histogram_confusion(self.counts0, self.counts1, edge)
        above = cells.pop("bins_above")
        below = self.edges.size - 1 - above

        def ratio(a, b):
            return a / (a + b) if a + b > 0 else float("nan")

        cells.update(
            sensitivity=ratio(cells["tp"], cells["fn"]), specificity=ratio(cells["tn"], cells["fp"]),
            ppv=ratio(cells["tp"], cells["fp"]), npv=ratio(cells["tn"], cells["fn"]),
            noise_sd_above=float(self.sigma * np.sqrt(above)), noise_sd_below=float(self.sigma * np.sqrt(below)),
        )
        return cells


_NAMES = {"auc": "AUC", "roc": "ROC or PR curve", "brier": "Brier score", "calibration": "calibration curve",
          "oe": "O/E", "citl": "calibration-in-the-large", "recalibration": "calibration intercept and slope"}


_RECALIBRATION = {True: "the grouped logistic fit on the bins' mean scores, its interval extended over the range of "
                        "the unbinned fit reconstructed from the score sums and the finer histogram of all scores "
                        "(dsroc.histogram.slope)",
                  False: "the grouped logistic fit on the bins' representative scores (without the score sums and "
                         "a finer histogram the binning's effect on the unbinned fit is not bounded)"}


def _curves(c0, c1):
    """ROC and PR points of consistent counts; NaN where a class holds nobody (no rate has a denominator)."""
    m = c0.size
    fpr = tpr = np.full(m + 1, np.nan)
    recall = precision = np.full(m, np.nan)
    if c0.sum() > 0 and c1.sum() > 0:
        fpr, tpr = histogram_roc(c0, c1)
        recall, precision = histogram_pr(c0, c1)
    return fpr, tpr, recall, precision


def _score_means(e, c0, c1, sums0, sums1, sums_sigma, representatives, prior=0.5):
    """Within-bin mean scores from the score sums (None without them): overall ``r``, per class ``by_class``
    (2, B), the within-bin variance and the class offsets ``u`` (2, B), each shrunk towards ``prior``
    (:func:`dsroc.histogram.sums.within_offsets`); ``linear``: ``r`` not clipped to its bin (the CITL's)."""
    if sums0 is None and sums1 is None:
        return None
    if sums0 is None or sums1 is None or sums_sigma is None:
        raise ValueError("sums0, sums1 and sums_sigma (the noise SD of each summed cell) go together")
    if representatives is not None:
        raise ValueError("representatives and the score sums are alternatives: give one")
    m = e.size - 1
    t0, t1 = check_counts(sums0, name="sums0", n_bins=m), check_counts(sums1, name="sums1", n_bins=m)
    if t0.ndim != 1 or t1.ndim != 1:
        raise ValueError("sums0 and sums1 must be one-dimensional (one sum per bin)")
    k = check_sigma(sums_sigma, name="sums_sigma")
    u = np.stack([within_offsets(c0, t0, sums_sigma=k, prior=prior), within_offsets(c1, t1, sums_sigma=k, prior=prior)])
    both = within_offsets(c0 + c1, t0 + t1, sums_sigma=k * np.sqrt(2.0), prior=prior)
    linear = within_offsets(c0 + c1, t0 + t1, sums_sigma=k * np.sqrt(2.0), prior=prior, clip=False)
    return {"r": bin_means(e, both), "by_class": bin_means(e, u), "within": within_variance(e, both), "u": u,
            "linear": bin_means(e, linear), "sigma": k, "edges": e}


def _brier_with_sums(c0, c1, means, *, sigma, level):
    """Brier score from the classes' within-bin mean scores plus the estimated within-bin variance, its interval
    widened by what that variance can hide: between 0 and ``w^2 u (1 - u)`` (the largest of a bin's scores
    with mean offset ``u``) per patient, so the unbinned Brier lies between the bounds' Brier scores."""
    brier = histogram_brier(c0, c1, means["by_class"], sigma=sigma, level=level, within=means["within"])
    n = c0.sum() + c1.sum()
    # The sums' noise moves each class mean m_cb by w_b / h_cb per unit of T_cb, so the Brier score by
    # 2 w_b (1 - m1_b) / n (positives) or 2 w_b m0_b / n (negatives): delta method.
    w = np.diff(means["edges"])
    m0, m1 = means["by_class"]
    variance = brier.variance + means["sigma"] ** 2 * float((4 * w**2 * ((1 - m1) ** 2 + m0**2)).sum()) / n**2
    brier = Estimate.normal(brier.value, variance, level=level)
    spread = float(((c0 + c1) * means["within"]).sum() / n)  # the estimated within-bin part of the Brier score
    most = 3.0 * spread  # w^2 u (1 - u) is three times the estimate w^2 u (1 - u) / 3
    return Estimate(brier.value, brier.variance, brier.lower - spread, brier.upper + most - spread)


def _optional_scalar(name, value):
    if value is None:
        return None
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def histogram_validation(h0, h1, edges, *, sigma: float, estimator: str = DEFAULT_ESTIMATOR,
                         tail_sigmas: float = DEFAULT_TAIL_SIGMAS, level: float = 0.95, representatives=None,
                         sum_sq=None, sum_p=None, sum_y=None, scalar_sigma=None, sums0=None, sums1=None,
                         sums_sigma=None, noise_draws: int = 100, seed=0, grid_edges=None, grid_counts=None,
                         grid_sigma=None) -> HistogramValidation:
    """Validate a model from the summed noisy per-class histograms of its scores.

    Parameters
    ----------
    h0, h1 : array_like, shape (B,)
        Summed noisy counts of negatives and positives on the grid (integers or floats; may be negative).
    edges : array_like, shape (B + 1,)
        The public grid.
    sigma : float
        Noise SD of each summed cell, ``sqrt(sum of the sites' sigma^2)`` (0: exact counts).
    estimator : {"rocglm", "shape", "monotone", "resolved", "empirical"}, default "rocglm"
        The reported AUC: ``"rocglm"`` the rule of :mod:`dsroc.histogram.estimates` (the ROC-GLM through the
        ROC points at the edges where it agrees with the nonparametric AUC, else with the score sums the
        shape AUC (with the first stage, ``grid_counts``) or the monotone curve through the ROC points where it
        agrees with the resolved AUC, else the resolved AUC; the binned one without sums); ``"shape"`` (needs the
        sums and the first stage), ``"monotone"`` (needs the sums), ``"resolved"`` or ``"empirical"`` that AUC.
    tail_sigmas : float, default 2
        The ROC-GLM uses only edges with at least ``tail_sigmas * sigma`` estimated patients of each
        class on either side.
    level : float, default 0.95
        Confidence level.
    representatives : array_like, optional
        Score of each bin for Brier and calibration; the midpoints by default. Brier and calibration are
        computed only when they are probabilities.
    sum_sq, sum_p, sum_y : float, optional
        Summed noisy scalar releases ``sum (y - p)^2``, ``sum p``, ``sum y`` (each of noise SD
        ``scalar_sigma``) for the unbinned Brier score and O/E.
    sums0, sums1 : array_like, shape (B,), optional
        Summed noisy per-bin sums of the negatives' and positives' score offsets within their bin (in bin
        widths; each cell of noise SD ``sums_sigma``). Brier, calibration, O/E and the slope then use each
        bin's mean score (per class for Brier) instead of its midpoint, and ``auc_resolved`` is reported.
    grid_edges, grid_counts, grid_sigma : optional
        A noisy histogram of all scores on a finer grid (the quantile grid's first release summed over sites and
        classes: its edges, counts, and noise SD per cell). With the score sums the resolved AUC then uses its
        shape within each bin (:func:`dsroc.histogram.resolved.logistic_concordance`).
    noise_draws : int, default 100
        Parametric-bootstrap draws for the noise variances of the ROC-GLM and resolved AUCs.
    seed : int, default 0
        Seed of that bootstrap (the result is deterministic).
    """
    e = check_edges(edges)
    m = e.size - 1
    raw0, raw1 = check_counts(h0, name="h0", n_bins=m), check_counts(h1, name="h1", n_bins=m)
    if raw0.ndim != 1 or raw1.ndim != 1:
        raise ValueError("h0 and h1 must be one-dimensional (one count per bin)")
    sigma = check_sigma(sigma)
    scalars = {k: _optional_scalar(k, v) for k, v in (("sum_sq", sum_sq), ("sum_p", sum_p), ("sum_y", sum_y))}
    if any(v is not None for v in scalars.values()) and scalar_sigma is None:
        raise ValueError("scalar_sigma (the noise SD of the scalar releases) is required with sum_sq, sum_p or sum_y")
    r = bin_representatives(e) if representatives is None else check_counts(representatives, name="representatives", n_bins=m)
    given = [v is not None for v in (grid_edges, grid_counts, grid_sigma)]
    if any(given) and not all(given):
        raise ValueError("grid_edges, grid_counts and grid_sigma (the finer histogram's noise SD per cell) go together")
    prior, grid = 0.5, None
    if all(given) and sums0 is not None:
        fine = check_edges(grid_edges)
        counts = check_counts(grid_counts, name="grid_counts", n_bins=fine.size - 1)
        if counts.ndim != 1:
            raise ValueError("grid_counts must be one-dimensional (one count per fine bin)")
        grid = (fine, counts[None, :], check_sigma(grid_sigma, name="grid_sigma"))
        # the noisy bin means shrink towards the finer histogram's mean offset, not the bin's middle: on a wide
        # bin the middle is far from the scores (prevalence 0.02: O/E bias -0.085, calibration slope -0.074)
        prior = shape_offsets(e, fine, consistent_counts(counts))
    means = _score_means(e, consistent_counts(raw0), consistent_counts(raw1), sums0, sums1, sums_sigma, representatives,
                         prior)
    with_sums = {} if means is None else {"sums0": np.asarray(sums0, dtype=np.float64)[None, :],
                                          "sums1": np.asarray(sums1, dtype=np.float64)[None, :],
                                          "sums_sigma": means["sigma"]}
    if grid is not None:
        with_sums.update(edges=e, grid=grid)
    est = histogram_auc_estimates(raw0[None, :], raw1[None, :], sigma=sigma, estimator=estimator,
                                  tail_sigmas=tail_sigmas, level=level, noise_draws=noise_draws, seeds=[seed],
                                  **with_sums)
    c0, c1 = est.counts0[0], est.counts1[0]
    n0, n1 = float(c0.sum()), float(c1.sum())
    notes, missing = [], {}
    fpr, tpr, recall, precision = _curves(c0, c1)
    used, auc, variance = str(est.estimator[0]), float(est.auc[0]), float(est.variance[0])
    if n0 < 2 or n1 < 2:
        used = "none"
        missing["auc"] = (f"too few patients of a class after the noise (estimated n0 = {n0:.1f}, n1 = {n1:.1f}; "
                          "at least 2 each are needed)")
        if n0 <= 0 or n1 <= 0:
            missing["roc"] = missing["auc"]
    else:
        notes.append(f"AUC: {est.reason[0]}")
    if "auc" not in missing and not bool(est.defined[0]):
        notes.append(f"the logit CI is undefined at AUC = {auc:g}")
    if means is not None:
        r = means["r"]
    brier = brier_s = calibration = oe = recal = citl = None
    if r.min() < 0.0 or r.max() > 1.0:
        notes.append("scores are not probabilities (grid outside [0, 1]): no Brier score or calibration")
    elif n0 + n1 < 2:
        for name in ("brier", "calibration", "oe", "citl", "recalibration"):
            missing[name] = f"fewer than two patients in the histograms after the noise (estimated n = {n0 + n1:.1f})"
    else:
        if means is None:
            brier = histogram_brier(c0, c1, r, sigma=sigma, level=level)
        else:
            brier = _brier_with_sums(c0, c1, means, sigma=sigma, level=level)
        calibration = histogram_calibration_curve(c0, c1, r, sigma=sigma, level=level)
        citl = histogram_citl(c0, c1, e, calibration.groups, r if means is None else means["linear"], sigma=sigma,
                              level=level, sums_sd=None if means is None else means["sigma"] * np.sqrt(2.0))
        if citl is None:
            missing["citl"] = "no events or no non-events in the merged bins with a mean score inside (0, 1)"
        # no logit at a noisy mean clipped to 0 or 1: the grouped fit leaves those bins out, the reconstruction not
        inside = (r > 0.0) & (r < 1.0)
        held, out = r[(c0 + c1 > 0) & inside], float((c0 + c1)[~inside].sum())
        if np.unique(held).size < 2:  # one occupied bin, or two whose noisy means meet at their common edge
            missing["recalibration"] = ("every patient falls in one bin after the noise, or the occupied bins' mean "
                                        "scores coincide or lie at 0 or 1 (no logit): a slope needs patients at two "
                                        "distinct scores inside (0, 1)")
        else:
            recal = histogram_recalibration(c0 * inside, c1 * inside, r, sigma=sigma, regressor_variance=(
                None if means is None else logit_mean_variance(c0 + c1, r, e, sums_sigma=means["sigma"])))
            if out > 0:
                notes.append(f"calibration intercept and slope: the grouped fit leaves out an estimated {out:.0f} "
                             "patients of the bins whose noisy mean score is 0 or 1 (no logit)")
            if means is not None and "grid" in with_sums:  # the unbinned fit's reconstruction and range
                recal = with_range(recal, recalibration_with_sums(c0, c1, *means["u"], e, with_sums["grid"],
                                                                  sigma=sigma, sums_sigma=means["sigma"],
                                                                  draws=noise_draws, seed=seed))
            if recal.converged:
                notes.append(f"calibration intercept and slope: {_RECALIBRATION[recal.slope_range is not None]}; "
                             f"the interval includes {recal.includes}")
            if not recal.converged:
                missing["recalibration"] = "the bins' event rates separate (no finite logistic fit)"
        n_hat, var_n = n0 + n1, 2 * m * sigma**2
        if scalars["sum_sq"] is not None:
            brier_s = scalar_brier(scalars["sum_sq"], n_hat, sigma_scalar=scalar_sigma, var_n=var_n, level=level,
                                   sampling_variance=histogram_brier(c0, c1, r, sigma=0.0).variance)
        # Sampling: O varies about E by sum p (1 - p) (binned: sum_b m_b r_b (1 - r_b)); noise: O and E each
        # carry their release's noise (binned: n1 sums B cells, E sums both classes' cells weighted by r_b).
        binomial = float(((c0 + c1) * r * (1 - r)).sum())
        if scalars["sum_p"] is not None and scalars["sum_y"] is not None:
            o, e_events = scalars["sum_y"], scalars["sum_p"]
            var_o, var_e = binomial + scalar_sigma**2, scalar_sigma**2
        else:
            o, e_events = n1, float(((c0 + c1) * r).sum())
            var_o, var_e = binomial + m * sigma**2, 2 * sigma**2 * float((r**2).sum())
            if means is not None:  # E = sum_b e_b h_b + w_b T_b: both classes' sums carry noise
                var_e += 2 * means["sigma"] ** 2 * float((np.diff(e) ** 2).sum())
        if o > 0 and e_events > 0:
            oe = calibration_in_the_large(o, e_events, var_observed=max(var_o, 0.0), var_expected=max(var_e, 0.0), level=level)
        else:
            missing["oe"] = f"no observed or expected events after the noise (O = {o:.1f}, E = {e_events:.1f})"
    notes += [f"no {_NAMES[k]}: {why}" for k, why in missing.items()]
    return HistogramValidation(
        edges=e, sigma=sigma, counts0=c0, counts1=c1, n0=n0, n1=n1, fpr=fpr, tpr=tpr, recall=recall,
        precision=precision, estimator=used, auc=auc, auc_variance=variance,
        auc_ci=(float(est.lower[0]), float(est.upper[0])), auc_ci_defined=bool(est.defined[0]),
        auc_empirical=float(est.auc_empirical[0]), auc_empirical_variance=float(est.variance_empirical[0]),
        rocglm_params=est.rocglm_params[0], rocglm_auc=float(est.rocglm_auc[0]),
        rocglm_noise_variance=float(est.rocglm_noise_variance[0]), sampling_variance=float(est.sampling_variance[0]), brier=brier, brier_scalar=brier_s, calibration=calibration, oe=oe,
        recalibration=recal, notes=notes, unavailable=missing,
        auc_resolved=float(est.auc_resolved[0]), auc_resolved_variance=float(est.variance_resolved[0]),
        auc_widening=float(est.widening[0]), auc_monotone=float(est.auc_monotone[0]),
        auc_shape=float(est.auc_shape[0]), citl=citl,
    )

