"""Precision-recall space: PR points, average precision, the unachievable region and AUCPR estimators."""

from .._lazy import export_lazily

_EXPORTS = {
    # .estimators
    "ESTIMATORS": "estimators", "INTERVALS": "estimators", "AUCPRInterval": "estimators",
    "recall_precision_extremes": "estimators", "aucpr_lower_trapezoid": "estimators",
    "aucpr_upper_trapezoid": "estimators", "aucpr_interpolated": "estimators", "aucpr_binormal": "estimators",
    "aucpr_from_distributions": "estimators", "aucpr": "estimators", "aucpr_interval": "estimators",
    # .space
    "PRPoints": "space", "pr_points": "space", "pr_points_by_class": "space", "pr_points_from_counts": "space",
    "average_precision": "space", "average_precision_from_counts": "space",
    "grouped_average_precision": "space", "pr_min_precision": "space", "pr_min_curve": "space",
    "aucpr_min": "space", "ap_min": "space", "aucnpr": "space",
}

__all__ = [
    "ESTIMATORS", "INTERVALS", "AUCPRInterval", "recall_precision_extremes", "aucpr_lower_trapezoid",
    "aucpr_upper_trapezoid", "aucpr_interpolated", "aucpr_binormal", "aucpr_from_distributions", "aucpr",
    "aucpr_interval",
    "PRPoints", "pr_points", "pr_points_by_class", "pr_points_from_counts", "average_precision",
    "average_precision_from_counts", "grouped_average_precision", "pr_min_precision", "pr_min_curve",
    "aucpr_min", "ap_min", "aucnpr",
]

export_lazily(__name__, _EXPORTS)
