"""The paper protocol at the site: noisy score releases (sealed in the ledger, opened via a cache), exact aggregates."""

from .protocol import NEGATIVES, POSITIVES, PaperProtocol, PlacementMoments, ScoreRelease
from .release_cache import ReleaseCache
from .sealed import open_points, seal_points

__all__ = ["NEGATIVES", "POSITIVES", "PaperProtocol", "PlacementMoments", "ScoreRelease", "ReleaseCache",
           "open_points", "seal_points"]
