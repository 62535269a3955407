"""The site's answers, one module per protocol, on the site's shared services (policy, ledger, auditor, sessions)."""

from .base import SiteProtocol
from .boyd import BoydProtocol, BoydRelease
from .histogram import HistogramProtocol, HistogramRelease
from .paper import NEGATIVES, POSITIVES, PaperProtocol, PlacementMoments, ScoreRelease
from .secagg import SecAggProtocol

__all__ = [
    "SiteProtocol",
    "PaperProtocol", "NEGATIVES", "POSITIVES", "ScoreRelease", "PlacementMoments",
    "HistogramProtocol", "HistogramRelease",
    "BoydProtocol", "BoydRelease",
    "SecAggProtocol",
]
