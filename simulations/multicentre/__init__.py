"""The multicentre study: heterogeneity across sites, subgroups, decision curves and two models compared."""

__all__: list[str] = []
