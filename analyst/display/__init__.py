"""Plots of a validation result: they draw what the result holds, never compute it; matplotlib only when drawing."""

from analyst.display.multicentre import comparison_figure, decision_curve_figure, forest_figure, subgroups_figure
from analyst.display.plots import CalibrationPlot, RocPlot, plot_title, pyplot, statistics_text, validation_figure

__all__ = ["CalibrationPlot", "RocPlot", "comparison_figure", "decision_curve_figure", "forest_figure", "plot_title",
           "pyplot", "statistics_text", "subgroups_figure", "validation_figure"]
