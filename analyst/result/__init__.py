"""One result for every protocol: its parts, the readable summary, tables, precision-recall and the report folder."""

from dsroc._lazy import export_lazily

# Each name's module is imported at its first use (PEP 562): the report's file names (the command line's help)
# do not import the precision-recall estimators (scipy.stats).
_EXPORTS = {
    "Calibration": "parts", "ConfusionResult": "parts", "Estimate": "parts", "RocCurve": "parts",
    "SitePrivacy": "parts", "TestResult": "parts",
    "PrecisionRecallPlot": "pr", "PRSummary": "pr",
    "OPTIONAL_REPORT_FILES": "report", "REPORT_FILES": "report", "write_report": "report",
    "SCHEMA_ID": "result", "SCHEMA_VERSION": "result", "ValidationResult": "result", "schema_path": "result",
}

__all__ = ["Calibration", "ConfusionResult", "Estimate", "OPTIONAL_REPORT_FILES", "PRSummary", "PrecisionRecallPlot",
           "REPORT_FILES", "RocCurve", "SCHEMA_ID", "SCHEMA_VERSION", "SitePrivacy", "TestResult", "ValidationResult",
           "schema_path", "write_report"]

export_lazily(__name__, _EXPORTS)
