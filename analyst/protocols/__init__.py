"""Validation protocols at the analyst, a package each (secagg in histogram/): session and options in, a result out."""

from analyst.protocols.base import Protocol, ProtocolOptions, ValidationRequest
from analyst.protocols.histogram import (HistogramOptions, HistogramProtocol, SecAggOptions, SecAggProtocol,
                                         SurvivalOptions)
from analyst.protocols.paper import PaperOptions, PaperProtocol

__all__ = ["PROTOCOLS", "HistogramOptions", "PaperOptions", "Protocol", "ProtocolOptions", "SecAggOptions",
           "SurvivalOptions", "ValidationRequest", "get_protocol"]

#: The protocols ``Federation.validate(protocol=...)`` dispatches to; a new protocol adds one entry.
PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (HistogramProtocol(), PaperProtocol(), SecAggProtocol())}


def get_protocol(name: str) -> Protocol:
    """The protocol named ``name`` (a ValueError naming the known ones otherwise)."""
    try:
        return PROTOCOLS[name]
    except (KeyError, TypeError):
        known = " or ".join(repr(k) for k in PROTOCOLS)
        raise ValueError(f"protocol must be {known}, got {name!r}") from None
