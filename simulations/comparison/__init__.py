"""The protocol comparison: every protocol at its stated guarantee on a binormal design, against epsilon."""

__all__: list[str] = []
