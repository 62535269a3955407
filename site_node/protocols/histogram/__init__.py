"""The histogram protocol at the site: its grid and noisy release, finer partitions, secure aggregation, survival."""

from .protocol import HistogramProtocol, HistogramRelease
from .release import PRIVACY_UNIT, SCALAR_RESOLUTION, SUMS_RESOLUTION, histogram_grid, plan_histogram
from .secagg import Advertisement, Receipt, SecAggProtocol
from .survival import SiteSurvivalRelease, SurvivalProtocol

__all__ = ["HistogramProtocol", "HistogramRelease", "PRIVACY_UNIT", "SCALAR_RESOLUTION", "SUMS_RESOLUTION",
           "histogram_grid", "plan_histogram", "Advertisement", "Receipt", "SecAggProtocol", "SurvivalProtocol",
           "SiteSurvivalRelease"]
