"""The histogram protocol's maths: the public grid and binning, consistent counts, estimators from noisy counts."""

from .._lazy import export_lazily

_EXPORTS = {
    # .auc
    "HistogramRocGlm": "auc", "check_sigma": "auc", "histogram_auc": "auc", "histogram_placements": "auc",
    "histogram_delong_variance": "auc", "histogram_auc_noise_variance": "auc", "histogram_rocglm": "auc",
    "histogram_rocglm_noise_variance": "auc", "noise_replicates": "auc", "replicate_rocglm_auc": "auc",
    "replicate_variance": "auc",
    # .resolved
    "tilt_rate": "resolved", "tilt_concordance": "resolved", "concordance_auc": "resolved",
    "concordance_placements": "resolved",
    # .calibration
    "Estimate": "calibration", "HistogramCalibrationCurve": "calibration", "Recalibration": "calibration",
    "histogram_brier": "calibration", "scalar_brier": "calibration",
    "histogram_calibration_curve": "calibration", "calibration_in_the_large": "calibration",
    "histogram_recalibration": "calibration",
    # .intercept
    "calibration_intercept": "intercept", "histogram_citl": "intercept",
    # .estimates
    "PLAUSIBLE_SDS": "estimates", "AGREEMENT_SHARE": "estimates", "AGREEMENT_Z": "estimates", "RESOLUTION_SHARE": "estimates", "FIT_LEVEL": "estimates", "SHAPE_FIT_LEVEL": "estimates", "ESTIMATORS": "estimates", "DEFAULT_ESTIMATOR": "estimates",
    "DEFAULT_TAIL_SIGMAS": "estimates", "AucEstimates": "estimates", "histogram_point_auc": "estimates",
    "histogram_auc_estimates": "estimates",
    # .fit_test
    "rocglm_fit_pvalue": "fit_test",
    # .grid
    "SPACINGS": "grid", "recommended_n_bins": "grid", "histogram_edges": "grid", "check_edges": "grid",
    "bin_index": "grid", "bin_scores": "grid", "bin_representatives": "grid", "consistent_counts": "grid",
    "check_counts": "grid", "survivor_at_edges": "grid", "histogram_roc": "grid", "histogram_pr": "grid",
    "histogram_confusion": "grid", "quantile_edges": "grid", "balanced_quantile_edges": "grid",
    "allowed_edges": "grid",
    # .sums
    "within_offsets": "sums", "bin_means": "sums", "within_variance": "sums", "resolved_auc": "sums",
    # .validation
    "HistogramValidation": "validation", "histogram_validation": "validation",
}

__all__ = [
    "HistogramRocGlm", "check_sigma", "histogram_auc", "histogram_placements", "histogram_delong_variance",
    "histogram_auc_noise_variance", "histogram_rocglm", "histogram_rocglm_noise_variance", "noise_replicates",
    "replicate_rocglm_auc", "replicate_variance", "tilt_rate", "tilt_concordance", "concordance_auc",
    "concordance_placements",
    "Estimate", "HistogramCalibrationCurve", "Recalibration", "histogram_brier", "scalar_brier",
    "histogram_calibration_curve", "calibration_in_the_large", "histogram_recalibration",
    "calibration_intercept", "histogram_citl", "PLAUSIBLE_SDS", "AGREEMENT_SHARE", "AGREEMENT_Z", "RESOLUTION_SHARE", "FIT_LEVEL", "SHAPE_FIT_LEVEL", "ESTIMATORS", "DEFAULT_ESTIMATOR", "DEFAULT_TAIL_SIGMAS", "AucEstimates",
    "histogram_point_auc", "histogram_auc_estimates",
    "rocglm_fit_pvalue", "SPACINGS", "recommended_n_bins", "histogram_edges", "check_edges", "bin_index", "bin_scores",
    "bin_representatives", "consistent_counts", "check_counts", "survivor_at_edges", "histogram_roc",
    "histogram_pr", "histogram_confusion", "quantile_edges", "balanced_quantile_edges", "allowed_edges",
    "within_offsets", "bin_means", "within_variance", "resolved_auc",
    "HistogramValidation", "histogram_validation",
]

export_lazily(__name__, _EXPORTS)
