"""The histogram protocol at the analyst, secagg, which sums its releases securely, and the survival release."""

from analyst.protocols.histogram.protocol import (HISTOGRAM_GUARANTEE, HistogramOptions, HistogramProtocol,
                                                  histogram_result)
from analyst.protocols.histogram.release import HistogramSite, allowed_n_bins
from analyst.protocols.histogram.secagg import SecAggOptions, SecAggProtocol
from analyst.protocols.histogram.survival import SurvivalOptions, SurvivalProtocol

__all__ = ["HISTOGRAM_GUARANTEE", "HistogramOptions", "HistogramProtocol", "HistogramSite", "SecAggOptions",
           "SecAggProtocol", "SurvivalOptions", "SurvivalProtocol", "allowed_n_bins", "histogram_result"]
