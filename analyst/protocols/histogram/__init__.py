"""The histogram protocol at the analyst, and secagg, which sums its releases securely: releases, partitions, result."""

from analyst.protocols.histogram.protocol import (HISTOGRAM_GUARANTEE, HistogramOptions, HistogramProtocol,
                                                  histogram_result)
from analyst.protocols.histogram.release import HistogramSite, allowed_n_bins
from analyst.protocols.histogram.secagg import SecAggOptions, SecAggProtocol

__all__ = ["HISTOGRAM_GUARANTEE", "HistogramOptions", "HistogramProtocol", "HistogramSite", "SecAggOptions",
           "SecAggProtocol", "allowed_n_bins", "histogram_result"]
