"""The analyst's side of dsroc: connect to the sites, run the distributed validation, report and plot."""

import os

# gRPC's documented default log level; without it gRPC 1.85 also logs INFO lines (e.g. each failed TLS
# handshake) on stderr, which a SiteError already reports in one line. Read when grpc is first imported.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


from dsroc._lazy import export_lazily

# Each name's module is imported at its first use (PEP 562): `dsroc --version`, and a module that needs one
# name, do not import every protocol, scipy and the plotting code.
_EXPORTS = {
    "SiteConfig": "config", "load_federation_file": "config",
    "SiteError": "connection",
    "CalibrationPlot": "display", "RocPlot": "display",
    "Federation": "federation",
    "HistogramOptions": "protocols", "PaperOptions": "protocols", "SecAggOptions": "protocols",
    "SurvivalOptions": "protocols",
    "RecommendedSetting": "recommend", "recommend_settings": "recommend",
    "ValidationResult": "result",
    "Calibration": "result.parts", "ConfusionResult": "result.parts", "Estimate": "result.parts",
    "RocCurve": "result.parts", "SitePrivacy": "result.parts", "TestResult": "result.parts",
    "ValidationSession": "session",
}

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

export_lazily(__name__, _EXPORTS)
