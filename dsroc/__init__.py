"""dsroc core: the statistics and privacy maths of distributed ROC-GLM validation, pure functions, no I/O.

The site daemon, the analyst library and the simulation study all import these functions, so every
number the system reports is computed by exactly one implementation. (``dsroc.v1`` holds generated
gRPC wire types; nothing here imports it.)

Names are imported from their submodules on first use (PEP 562), so that a process that needs a few
functions (e.g. the site daemon at start-up) does not pay for importing scipy.stats, scipy.optimize and
the other submodules' dependencies. The subpackages (``roc``, ``calibration``, ``privacy``,
``histogram``, ``pr``, ``mechanisms``) group the modules by idea and re-export their own public names the
same way. Add a name to ``_EXPORTS`` (name -> subpackage or top-level module) and ``__all__``, not an import.
"""

from ._lazy import export_lazily

_EXPORTS = {
    # .roc.auc
    "BatchCI": "roc", "SurvivorFunction": "roc", "auc_ci": "roc", "auc_ci_batch": "roc", "auc_test": "roc",
    "delong_variance": "roc", "delong_variance_from_moments": "roc", "empirical_auc": "roc",
    "placement_values": "roc",
    # .calibration.brier
    "BrierParts": "calibration", "aggregate_brier": "calibration", "brier_parts": "calibration", "brier_score": "calibration",
    # .calibration.curve
    "CalibrationCurve": "calibration", "CalibrationParts": "calibration", "SiteCalibration": "calibration",
    "aggregate_calibration": "calibration", "calibration_edges": "calibration", "calibration_parts": "calibration",
    # ._checks
    "check_scores_labels": "_checks",
    # .roc.confusion
    "ConfusionParts": "roc", "ConfusionSummary": "roc", "aggregate_confusion": "roc",
    "confusion_parts": "roc",
    # .errors
    "DisclosureError": "errors",
    # .glm_model
    "GlmModel": "glm_model",
    # .histogram.grid
    "bin_scores": "histogram", "bin_index": "histogram", "consistent_counts": "histogram",
    "histogram_edges": "histogram",
    # .roc.rocglm_band
    "rocglm_band": "roc", "rocglm_improper_range": "roc",
    # .calibration.hierarchy
    "CalibrationHierarchy": "calibration", "calibration_hierarchy": "calibration",
    "calibration_intercept": "calibration",
    # .histogram.validation
    "HistogramValidation": "histogram", "histogram_validation": "histogram", "histogram_citl": "histogram",
    # .roc.moments
    "MeanParts": "roc", "mean_parts": "roc", "pooled_mean": "roc", "pooled_variance": "roc",
    "sq_dev_parts": "roc", "pooled_sq_dev": "roc",
    # .privacy.gaussian
    "add_gaussian_noise": "privacy", "analytic_gaussian_sigma": "privacy", "classical_gaussian_sigma": "privacy",
    "gdp_delta": "privacy", "gdp_epsilon": "privacy", "gdp_mu": "privacy", "gdp_release_mu": "privacy",
    # .roc.noise_correction
    "NoiseCorrectedAUC": "roc", "noise_corrected_auc": "roc",
    "noise_variance": "roc", "deconvolution_correction": "roc",
    # .roc.rocglm, .roc.rocglm_fit
    "PartsAtTheta": "roc", "RocGlmBatchResult": "roc", "RocGlmParts": "roc", "RocGlmResult": "roc",
    "fit_rocglm": "roc", "fit_rocglm_batch": "roc", "rocglm_auc": "roc", "rocglm_counts": "roc",
    "rocglm_curve": "roc", "rocglm_grid": "roc", "rocglm_intercept_for_auc": "roc",
    # .privacy.sensitivity
    "SensitivityEstimate": "privacy", "model_sensitivity": "privacy",
    # .pr.space
    "PRPoints": "pr", "ap_min": "pr", "aucnpr": "pr", "aucpr_min": "pr",
    "average_precision": "pr", "pr_min_curve": "pr", "pr_min_precision": "pr", "pr_points": "pr",
    "pr_points_from_counts": "pr", "pr_points_by_class": "pr",
    # .pr.estimators
    "AUCPRInterval": "pr", "aucpr": "pr", "aucpr_from_distributions": "pr",
    "aucpr_interval": "pr",
    # .privacy.guard
    "require_privacy_level": "privacy",
}

_SUBPACKAGES = ("roc", "calibration", "privacy", "histogram", "pr", "mechanisms", "multicentre", "secagg", "survival")

__all__ = [
    "SurvivorFunction", "placement_values", "empirical_auc", "delong_variance", "delong_variance_from_moments",
    "auc_ci", "auc_ci_batch", "BatchCI", "auc_test",
    "MeanParts", "mean_parts", "sq_dev_parts", "pooled_mean", "pooled_variance", "pooled_sq_dev",
    "rocglm_grid", "rocglm_counts", "PartsAtTheta", "RocGlmParts", "RocGlmResult", "RocGlmBatchResult",
    "fit_rocglm", "fit_rocglm_batch", "rocglm_auc", "rocglm_intercept_for_auc", "rocglm_curve",
    "analytic_gaussian_sigma", "classical_gaussian_sigma", "gdp_release_mu", "gdp_mu", "gdp_delta",
    "gdp_epsilon", "add_gaussian_noise",
    "SensitivityEstimate", "model_sensitivity", "GlmModel",
    "BrierParts", "brier_parts", "brier_score", "aggregate_brier",
    "calibration_edges", "CalibrationParts", "calibration_parts", "SiteCalibration", "CalibrationCurve",
    "aggregate_calibration", "CalibrationHierarchy", "calibration_hierarchy", "calibration_intercept",
    "rocglm_band", "rocglm_improper_range",
    "ConfusionParts", "confusion_parts", "ConfusionSummary", "aggregate_confusion",
    "DisclosureError", "check_scores_labels",
    "NoiseCorrectedAUC", "noise_corrected_auc", "noise_variance", "deconvolution_correction",
    "PRPoints", "pr_points", "pr_points_by_class", "pr_points_from_counts", "average_precision", "pr_min_precision", "pr_min_curve",
    "aucpr_min", "ap_min", "aucnpr", "AUCPRInterval", "aucpr", "aucpr_interval", "aucpr_from_distributions",
    "require_privacy_level",
    "roc", "calibration", "privacy", "histogram", "pr", "mechanisms", "multicentre", "secagg", "survival",
    "histogram_edges", "bin_scores", "bin_index", "consistent_counts", "HistogramValidation", "histogram_validation",
    "histogram_citl",
]

export_lazily(__name__, _EXPORTS, _SUBPACKAGES)
