"""Calibration: curves from per-site bin sums, the calibration hierarchy and the Brier score."""

from .._lazy import export_lazily

_EXPORTS = {
    # .brier
    "BrierParts": "brier", "brier_parts": "brier", "aggregate_brier": "brier", "brier_score": "brier",
    # .curve
    "calibration_edges": "curve", "CalibrationParts": "curve", "calibration_parts": "curve",
    "SiteCalibration": "curve", "CalibrationCurve": "curve", "aggregate_calibration": "curve",
    # .hierarchy
    "CalibrationHierarchy": "hierarchy", "calibration_hierarchy": "hierarchy",
    "calibration_intercept": "hierarchy",  # defined in dsroc.histogram.intercept, beside the histograms' CITL
}

__all__ = [
    "BrierParts", "brier_parts", "aggregate_brier", "brier_score",
    "calibration_edges", "CalibrationParts", "calibration_parts", "SiteCalibration", "CalibrationCurve",
    "aggregate_calibration",
    "CalibrationHierarchy", "calibration_hierarchy", "calibration_intercept",
]

export_lazily(__name__, _EXPORTS)
