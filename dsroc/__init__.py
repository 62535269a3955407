"""dsroc core: the statistics and privacy maths of distributed ROC-GLM validation, pure functions, no I/O.

The site daemon, the analyst library and the simulation study all import these functions, so every
number the system reports is computed by exactly one implementation. (``dsroc.v1`` holds generated
gRPC wire types; nothing here imports it.)

Names are imported from their submodules on first use (PEP 562), so that a process that needs a few
functions (e.g. the site daemon at start-up) does not pay for importing scipy.stats, scipy.optimize and
the other submodules' dependencies. Add a name to ``_EXPORTS`` (and ``__all__``), not an import.
"""

import sys
import types
from importlib import import_module

_EXPORTS = {
    # .auc
    "BatchCI": "auc", "SurvivorFunction": "auc", "auc_ci": "auc", "auc_ci_batch": "auc", "auc_test": "auc",
    "delong_variance": "auc", "delong_variance_from_moments": "auc", "empirical_auc": "auc",
    "placement_values": "auc",
    # .brier
    "BrierParts": "brier", "aggregate_brier": "brier", "brier_parts": "brier", "brier_score": "brier",
    # .calibration
    "CalibrationCurve": "calibration", "CalibrationParts": "calibration", "SiteCalibration": "calibration",
    "aggregate_calibration": "calibration", "calibration_edges": "calibration", "calibration_parts": "calibration",
    # ._checks
    "check_scores_labels": "_checks",
    # .confusion
    "ConfusionParts": "confusion", "ConfusionSummary": "confusion", "aggregate_confusion": "confusion",
    "confusion_parts": "confusion",
    # .errors
    "DisclosureError": "errors",
    # .glm_model
    "GlmModel": "glm_model",
    # .histogram
    "bin_scores": "histogram", "consistent_counts": "histogram", "histogram_edges": "histogram",
    # .rocglm_band
    "rocglm_band": "rocglm_band", "rocglm_improper_range": "rocglm_band",
    # .calibration_hierarchy
    "CalibrationHierarchy": "calibration_hierarchy", "calibration_hierarchy": "calibration_hierarchy",
    "calibration_intercept": "calibration_hierarchy",
    # .histogram_validation
    "HistogramValidation": "histogram_validation", "histogram_validation": "histogram_validation",
    # .moments
    "MeanParts": "moments", "mean_parts": "moments", "pooled_mean": "moments", "pooled_variance": "moments",
    "sq_dev_parts": "moments", "pooled_sq_dev": "moments",
    # .privacy
    "add_gaussian_noise": "privacy", "analytic_gaussian_sigma": "privacy", "classical_gaussian_sigma": "privacy",
    "gdp_delta": "privacy", "gdp_epsilon": "privacy", "gdp_mu": "privacy", "gdp_release_mu": "privacy",
    # .noise_correction
    "NoiseCorrectedAUC": "noise_correction", "noise_corrected_auc": "noise_correction",
    "noise_variance": "noise_correction", "released_auc": "noise_correction",
    # .rocglm, .rocglm_fit
    "PartsAtTheta": "rocglm", "RocGlmBatchResult": "rocglm_fit", "RocGlmParts": "rocglm", "RocGlmResult": "rocglm_fit",
    "fit_rocglm": "rocglm_fit", "fit_rocglm_batch": "rocglm_fit", "rocglm_auc": "rocglm", "rocglm_counts": "rocglm",
    "rocglm_curve": "rocglm", "rocglm_grid": "rocglm", "rocglm_intercept_for_auc": "rocglm",
    # .sensitivity
    "SensitivityEstimate": "sensitivity", "model_sensitivity": "sensitivity",
    # .prspace
    "PRPoints": "prspace", "ap_min": "prspace", "aucnpr": "prspace", "aucpr_min": "prspace",
    "average_precision": "prspace", "pr_min_curve": "prspace", "pr_min_precision": "prspace", "pr_points": "prspace",
    "pr_points_from_counts": "prspace", "pr_points_by_class": "prspace",
    # .pr_estimators
    "AUCPRInterval": "pr_estimators", "aucpr": "pr_estimators", "aucpr_from_distributions": "pr_estimators",
    "aucpr_interval": "pr_estimators",
}

_SUBMODULES = ("mechanisms", "multicentre")

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
    "NoiseCorrectedAUC", "noise_corrected_auc", "noise_variance", "released_auc",
    "PRPoints", "pr_points", "pr_points_by_class", "pr_points_from_counts", "average_precision", "pr_min_precision", "pr_min_curve",
    "aucpr_min", "ap_min", "aucnpr", "AUCPRInterval", "aucpr", "aucpr_interval", "aucpr_from_distributions",
    "mechanisms", "multicentre",
    "histogram_edges", "bin_scores", "consistent_counts", "HistogramValidation", "histogram_validation",
]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(import_module(f".{module}", __name__), name)
    elif name in _SUBMODULES:
        value = import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """Keep an exported function whose submodule has the same name (``histogram_validation``) from being
    replaced by that submodule when it is first imported (the import system sets it on the package)."""

    def __setattr__(self, name, value):
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
