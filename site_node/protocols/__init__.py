"""The site's answers, one package (or module) per protocol, on the site's shared services (policy, ledger)."""

from .base import SiteProtocol, require_protocol
from .boyd import BoydProtocol, BoydRelease
from .budget import ReleaseQuery, releases_left
from .histogram import HistogramProtocol, HistogramRelease, SecAggProtocol, SiteSurvivalRelease, SurvivalProtocol
from .paper import NEGATIVES, POSITIVES, PaperProtocol, PlacementMoments, ScoreRelease

__all__ = [
    "SiteProtocol", "require_protocol",
    "PaperProtocol", "NEGATIVES", "POSITIVES", "ScoreRelease", "PlacementMoments",
    "HistogramProtocol", "HistogramRelease",
    "BoydProtocol", "BoydRelease",
    "SecAggProtocol",
    "SurvivalProtocol", "SiteSurvivalRelease",
    "ReleaseQuery", "releases_left",
]
