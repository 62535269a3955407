"""dsroc core: the statistics and privacy maths of distributed ROC-GLM validation, pure functions, no I/O.

The site daemon, the analyst library and the simulation study all import these functions, so every
number the system reports is computed by exactly one implementation. (``dsroc.v1`` holds generated
gRPC wire types; nothing here imports it.)
"""

from .auc import (
    BatchCI,
    SurvivorFunction,
    auc_ci,
    auc_ci_batch,
    auc_test,
    delong_variance,
    delong_variance_from_moments,
    empirical_auc,
    placement_values,
)
from .brier import BrierParts, aggregate_brier, brier_parts, brier_score
from .calibration import (
    CalibrationCurve,
    CalibrationParts,
    SiteCalibration,
    aggregate_calibration,
    calibration_edges,
    calibration_parts,
)
from ._checks import check_scores_labels
from .confusion import ConfusionParts, ConfusionSummary, aggregate_confusion, confusion_parts
from .errors import DisclosureError
from .glm_model import GlmModel
from .histogram import bin_scores, consistent_counts, histogram_edges
from .rocglm_band import rocglm_band, rocglm_improper_range
from .calibration_hierarchy import CalibrationHierarchy, calibration_hierarchy, calibration_intercept
from .histogram_validation import HistogramValidation, histogram_validation
from .moments import MeanParts, mean_parts, pooled_mean, pooled_variance, sq_dev_parts
from .privacy import (
    add_gaussian_noise,
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    gdp_release_mu,
)
from .noise_correction import NoiseCorrectedAUC, noise_corrected_auc, noise_variance, released_auc
from .rocglm import (
    PartsAtTheta,
    RocGlmBatchResult,
    RocGlmParts,
    RocGlmResult,
    fit_rocglm,
    fit_rocglm_batch,
    rocglm_auc,
    rocglm_counts,
    rocglm_curve,
    rocglm_grid,
    rocglm_intercept_for_auc,
)
from .sensitivity import SensitivityEstimate, model_sensitivity
from .prspace import (
    PRPoints,
    ap_min,
    aucnpr,
    aucpr_min,
    average_precision,
    pr_min_curve,
    pr_min_precision,
    pr_points,
    pr_points_from_counts,
)
from .pr_estimators import AUCPRInterval, aucpr, aucpr_from_distributions, aucpr_interval
from . import mechanisms

__all__ = [
    "SurvivorFunction", "placement_values", "empirical_auc", "delong_variance", "delong_variance_from_moments",
    "auc_ci", "auc_ci_batch", "BatchCI", "auc_test",
    "MeanParts", "mean_parts", "sq_dev_parts", "pooled_mean", "pooled_variance",
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
    "PRPoints", "pr_points", "pr_points_from_counts", "average_precision", "pr_min_precision", "pr_min_curve",
    "aucpr_min", "ap_min", "aucnpr", "AUCPRInterval", "aucpr", "aucpr_interval", "aucpr_from_distributions",
    "mechanisms",
    "histogram_edges", "bin_scores", "consistent_counts", "HistogramValidation", "histogram_validation",
]
