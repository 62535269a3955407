"""Exceptions of the core that are not plain bad input."""

__all__ = ["DisclosureError"]


class DisclosureError(Exception):
    """An aggregate would describe fewer than ``q`` patients (privacy level); nothing may be released.

    The message names the rule, never the count that violated it.
    """
