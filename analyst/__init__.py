"""The analyst's side of dsroc: connect to the sites, run the distributed validation, report and plot."""

import os

# gRPC's documented default log level; without it gRPC 1.85 also logs INFO lines (e.g. each failed TLS
# handshake) on stderr, which a SiteError already reports in one line. Read when grpc is first imported.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


from analyst.config import SiteConfig, load_federation_file
from analyst.connection import SiteError
from analyst.display import CalibrationPlot, RocPlot
from analyst.federation import Federation
from analyst.protocols import HistogramOptions, PaperOptions, SecAggOptions, SurvivalOptions
from analyst.recommend import RecommendedSetting, recommend_settings
from analyst.result import ValidationResult
from analyst.result.parts import Calibration, ConfusionResult, Estimate, RocCurve, SitePrivacy, TestResult
from analyst.session import ValidationSession

__all__ = [
    "Calibration",
    "CalibrationPlot",
    "ConfusionResult",
    "Estimate",
    "Federation",
    "HistogramOptions",
    "PaperOptions",
    "SecAggOptions",
    "SurvivalOptions",
    "RecommendedSetting",
    "RocCurve",
    "RocPlot",
    "SiteConfig",
    "SiteError",
    "SitePrivacy",
    "TestResult",
    "ValidationResult",
    "ValidationSession",
    "load_federation_file",
    "recommend_settings",
]
