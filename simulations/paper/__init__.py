"""The published study (paper mode) and the run report: Table 1, per-setting accuracy, recommended settings, Figures 5 and 6."""

__all__: list[str] = []
