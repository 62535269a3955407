"""The analyst's side of dsroc as a Flower app (the ``flower`` extra): the :class:`FlowerConnection` transport, a
federation over a Flower grid, and the ServerApp (``analyst.flower.server_app:app``)."""

from .connection import FlowerConnection, flower_federation, site_nodes

__all__ = ["FlowerConnection", "flower_federation", "site_nodes"]
