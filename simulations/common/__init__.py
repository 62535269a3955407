"""What the studies share: the paper's data-generating process, the binormal design, settings, the pooled truth, result records and saved results."""

__all__: list[str] = []
