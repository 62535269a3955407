"""The histogram protocol at the site: its grid and noisy release, finer partitions, and secure aggregation."""

from .protocol import HistogramProtocol, HistogramRelease
from .release import PRIVACY_UNIT, SCALAR_RESOLUTION, SUMS_RESOLUTION, histogram_grid, plan_histogram
from .secagg import Advertisement, Receipt, SecAggProtocol

__all__ = ["HistogramProtocol", "HistogramRelease", "PRIVACY_UNIT", "SCALAR_RESOLUTION", "SUMS_RESOLUTION",
           "histogram_grid", "plan_histogram", "Advertisement", "Receipt", "SecAggProtocol"]
