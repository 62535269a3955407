"""One result for every protocol: its parts, the readable summary, tables, precision-recall and the report folder."""

from analyst.result.parts import Calibration, ConfusionResult, Estimate, RocCurve, SitePrivacy, TestResult
from analyst.result.pr import PrecisionRecallPlot, PRSummary
from analyst.result.report import OPTIONAL_REPORT_FILES, REPORT_FILES, write_report
from analyst.result.result import SCHEMA_ID, SCHEMA_VERSION, ValidationResult, schema_path

__all__ = ["Calibration", "ConfusionResult", "Estimate", "OPTIONAL_REPORT_FILES", "PRSummary", "PrecisionRecallPlot",
           "REPORT_FILES", "RocCurve", "SCHEMA_ID", "SCHEMA_VERSION", "SitePrivacy", "TestResult", "ValidationResult",
           "schema_path", "write_report"]
