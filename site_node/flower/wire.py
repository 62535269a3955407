"""The records a dsroc Flower message and its reply carry (the analyst's :mod:`analyst.flower` writes the same)."""

__all__ = ["CALL", "NAME", "RECORD"]

#: The record of a call (``method``, ``request``: the serialized dsroc.v1 message, ``token``: the analyst's bearer
#: token at this site) and of its reply (``code``: gRPC status name, ``details``, ``reply``: the serialized reply).
RECORD = "dsroc"
#: ``message_type`` of a call to the site, and of the question "which site are you" (reply: ``site``).
CALL = "query.dsroc"
NAME = "query.site"
