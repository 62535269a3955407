"""The stress and survival studies' target cells through real site daemons, beside the in-process studies."""

__all__: list[str] = []
