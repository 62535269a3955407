"""ROC analysis: placement values, empirical AUC and DeLong, the ROC-GLM's parts, fit and band, moments, confusion."""

from .._lazy import export_lazily

_EXPORTS = {
    # .auc
    "BatchCI": "auc", "SurvivorFunction": "auc", "placement_values": "auc", "empirical_auc": "auc",
    "delong_variance": "auc", "delong_variance_from_moments": "auc", "auc_ci": "auc", "auc_ci_batch": "auc",
    "auc_test": "auc",
    # .batch
    "GroupedPlacements": "batch", "check_groups": "batch", "group_sizes": "batch",
    "grouped_placement_values": "batch", "grouped_class_placements": "batch", "grouped_mean": "batch",
    "grouped_variance": "batch", "grouped_delong_variance": "batch", "grouped_rocglm_counts": "batch",
    # .confusion
    "ConfusionParts": "confusion", "confusion_parts": "confusion", "ConfusionSummary": "confusion",
    "aggregate_confusion": "confusion",
    # .moments
    "MeanParts": "moments", "mean_parts": "moments", "sq_dev_parts": "moments", "pooled_mean": "moments",
    "pooled_sq_dev": "moments", "pooled_variance": "moments",
    # .noise_correction
    "NoiseCorrectedAUC": "noise_correction", "noise_corrected_auc": "noise_correction",
    "deconvolution_correction": "noise_correction", "grouped_deconvolution_correction": "noise_correction",
    "noise_variance": "noise_correction", "grouped_noise_variance": "noise_correction",
    # .probit
    "OneCounts": "probit", "ProbitCounts": "probit", "ProbitTerms": "probit",
    "empirical_probit_start": "probit", "moment_step": "probit",
    # .probit_fit
    "Iteration": "probit_fit", "OneFit": "probit_fit", "iterate_to_mle": "probit_fit",
    "newton_one": "probit_fit", "stop_before_evaluating": "probit_fit",
    # .rocglm
    "rocglm_grid": "rocglm", "rocglm_counts": "rocglm", "PartsAtTheta": "rocglm", "RocGlmParts": "rocglm",
    "rocglm_auc": "rocglm", "rocglm_intercept_for_auc": "rocglm", "rocglm_curve": "rocglm",
    # .rocglm_band
    "rocglm_band": "rocglm_band", "rocglm_improper_range": "rocglm_band",
    # .rocglm_fit
    "RocGlmResult": "rocglm_fit", "RocGlmBatchResult": "rocglm_fit", "fit_rocglm": "rocglm_fit",
    "fit_rocglm_batch": "rocglm_fit",
}

__all__ = [
    "BatchCI", "SurvivorFunction", "placement_values", "empirical_auc", "delong_variance",
    "delong_variance_from_moments", "auc_ci", "auc_ci_batch", "auc_test",
    "GroupedPlacements", "check_groups", "group_sizes", "grouped_placement_values", "grouped_class_placements",
    "grouped_mean", "grouped_variance", "grouped_delong_variance", "grouped_rocglm_counts",
    "ConfusionParts", "confusion_parts", "ConfusionSummary", "aggregate_confusion",
    "MeanParts", "mean_parts", "sq_dev_parts", "pooled_mean", "pooled_sq_dev", "pooled_variance",
    "NoiseCorrectedAUC", "noise_corrected_auc", "deconvolution_correction", "grouped_deconvolution_correction",
    "noise_variance", "grouped_noise_variance",
    "OneCounts", "ProbitCounts", "ProbitTerms", "empirical_probit_start", "moment_step",
    "Iteration", "OneFit", "iterate_to_mle", "newton_one", "stop_before_evaluating",
    "rocglm_grid", "rocglm_counts", "PartsAtTheta", "RocGlmParts", "rocglm_auc", "rocglm_intercept_for_auc",
    "rocglm_curve",
    "rocglm_band", "rocglm_improper_range",
    "RocGlmResult", "RocGlmBatchResult", "fit_rocglm", "fit_rocglm_batch",
]

export_lazily(__name__, _EXPORTS)
