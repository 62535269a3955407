"""The mechanisms study: every private AUC mechanism of the seed papers on the same replications, and their headline checks."""

__all__: list[str] = []
