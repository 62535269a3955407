"""The privacy-level rule every release obeys, shared by the site daemon and the simulation study."""

from __future__ import annotations

from ..errors import DisclosureError

__all__ = ["PRIVACY_LEVEL_RULE", "require_privacy_level"]

#: How the refusal's message begins: an analyst recognises a site that refuses for its size by it.
PRIVACY_LEVEL_RULE = "privacy level"


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
        raise DisclosureError(f"{PRIVACY_LEVEL_RULE}: {what} must describe at least q = {q} patients at this site")
