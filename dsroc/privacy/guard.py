"""The privacy-level rule every release obeys, shared by the site daemon and the simulation study."""

from __future__ import annotations

from ..errors import DisclosureError

__all__ = ["require_privacy_level"]


def require_privacy_level(n: int, q: int, what: str) -> None:
    """Refuse an aggregate over fewer than ``q`` patients, without saying how many there are.

    Parameters
    ----------
    n : int
        Number of patients the aggregate describes.
    q : int
        The privacy level: the fewest patients an aggregate may describe.
    what : str
        What the aggregate is, for the message (e.g. ``"the Brier parts"``).

    Raises
    ------
    DisclosureError
        If ``n < q``; the message names the rule and ``q``, never ``n`` (the site maps it to
        ``PERMISSION_DENIED``).
    """
    if n < q:
        raise DisclosureError(f"privacy level: {what} must describe at least q = {q} patients at this site")
