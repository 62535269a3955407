"""The stress study's target cells through real site daemons, beside the in-process study on the same patients."""

__all__: list[str] = []
