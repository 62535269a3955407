"""The survival study: DP survival releases of simulated prognostic data against pooled and population values."""

__all__: list[str] = []
