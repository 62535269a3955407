"""The gRPC servicer: shared calls, the paper protocol's calls, the budget's messages; dispatched to the protocols."""

from .dispatch import API_VERSION, SiteServicer

__all__ = ["API_VERSION", "SiteServicer"]
