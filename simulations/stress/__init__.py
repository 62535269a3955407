"""The stress study: the histogram protocol (and the paper protocol) on an independent generator, per design cell."""

__all__: list[str] = []
