"""Histogram mode: five sites release noisy per-class histograms of the paper's data; the analyst's estimates."""

__all__: list[str] = []
