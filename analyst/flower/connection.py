"""The :class:`~analyst.connection.SiteTransport` over a Flower grid: each call is one message to the site's SuperNode.

The SuperNode's ClientApp (:mod:`site_node.flower.client_app`) hands the call to the hospital's daemon, so a
protocol asks exactly what it asks over gRPC, and gets the same replies and refusals (as :class:`SiteError`).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Mapping, Sequence

import grpc
from flwr.app import ConfigRecord, Message, RecordDict

from dsroc.v1 import site_pb2 as pb
from site_node.flower.wire import CALL, NAME, RECORD

from analyst.config import SiteConfig
from analyst.connection import SiteError
from analyst.federation import Federation

__all__ = ["FlowerConnection", "flower_federation", "site_nodes"]

#: Seconds between two pulls of a reply (Flower's own send_and_receive waits 3 s between pulls).
POLL_SECONDS = 0.05
_METHODS = pb.DESCRIPTOR.services_by_name["SiteService"].methods_by_name


def _exchange(grid, message: Message, timeout: float) -> Message | None:
    """Push one message and pull its reply; None when none came within ``timeout`` seconds."""
    (message_id,) = grid.push_messages([message])
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        replies = list(grid.pull_messages([message_id]))
        if replies:
            return replies[0]
        time.sleep(POLL_SECONDS)
    return None


class FlowerConnection:
    """One site reached through a Flower grid (a ServerApp's ``grid``) at its SuperNode's ``node_id``.

    Parameters
    ----------
    config : SiteConfig
        The site's name and the analyst's token there (its address is not used: the SuperLink routes).
    grid : flwr.serverapp.Grid
    node_id : int
    timeout : float
        Default seconds to wait for a reply; a Flower message starts a fresh ClientApp process at the site, so
        allow for its start-up.
    """

    def __init__(self, config: SiteConfig, grid, node_id: int, *, timeout: float = 300.0):
        self.config, self.name, self.grid, self.node_id, self.timeout = config, config.name, grid, int(node_id), timeout
        self._slots: threading.Semaphore | None = None
        self._count = threading.Lock()
        self.messages, self.seconds = 0, 0.0  # messages answered, and the seconds from push to reply summed

    def limit_calls(self, limit: int) -> None:
        if limit and self._slots is None:
            self._slots = threading.BoundedSemaphore(limit)

    def call(self, method: str, request, *, timeout: float | None = None, stream: bool = False,
             on_message: Callable[[object], None] | None = None, reply_type=None):
        """Send ``method`` with ``request`` to the site; its reply, or :class:`SiteError` with its status."""
        rpc = _METHODS.get(method)
        if stream or reply_type is not None or callable(request) or rpc is None or rpc.client_streaming \
                or rpc.server_streaming:
            raise SiteError(self.name, grpc.StatusCode.UNIMPLEMENTED,
                            f"{method}: the Flower transport carries the site's unary calls only (the paper "
                            "protocol's streams need the sites' daemons)")
        record = ConfigRecord({"method": method, "request": request.SerializeToString(), "token": self.config.token})
        message = Message(RecordDict({RECORD: record}), dst_node_id=self.node_id, message_type=CALL)
        slots = self._slots
        if slots is not None:
            slots.acquire()
        start = time.monotonic()
        try:
            reply = _exchange(self.grid, message, timeout or self.timeout)
        finally:
            if slots is not None:
                slots.release()
        with self._count:
            self.messages, self.seconds = self.messages + 1, self.seconds + time.monotonic() - start
        if reply is None:
            raise SiteError(self.name, grpc.StatusCode.DEADLINE_EXCEEDED,
                            f"{method}: no reply through Flower within {timeout or self.timeout:g} s")
        if reply.has_error():
            raise SiteError(self.name, grpc.StatusCode.UNAVAILABLE,
                            f"{method}: the SuperNode's ClientApp failed: {reply.error.reason}")
        out = reply.content[RECORD]
        if out["code"] != "OK":
            raise SiteError(self.name, grpc.StatusCode[str(out["code"])], str(out["details"]))
        return getattr(pb, rpc.output_type.name).FromString(out["reply"])

    def close(self) -> None:
        """Nothing to close: the grid belongs to the ServerApp."""


def site_nodes(grid, *, expect: int = 1, timeout: float = 300.0) -> dict[str, int]:
    """Each connected SuperNode's site name (from its operator's site config) to its node id, once at least
    ``expect`` SuperNodes are connected (RuntimeError if not within ``timeout`` seconds)."""
    end = time.monotonic() + timeout
    nodes = list(grid.get_node_ids())
    while len(nodes) < expect and time.monotonic() < end:
        time.sleep(1.0)
        nodes = list(grid.get_node_ids())
    if len(nodes) < expect:
        raise RuntimeError(f"{len(nodes)} SuperNode(s) connected within {timeout:g} s, {expect} expected")
    messages = [Message(RecordDict({RECORD: ConfigRecord({})}), dst_node_id=n, message_type=NAME) for n in nodes]
    ids = list(grid.push_messages(messages))
    names: dict[str, int] = {}
    pending = dict(zip(ids, nodes))
    while pending and time.monotonic() < end:
        for reply in grid.pull_messages(list(pending)):
            node = pending.pop(reply.metadata.reply_to_message_id)
            if reply.has_error():
                raise RuntimeError(f"SuperNode {node}: the dsroc ClientApp failed: {reply.error.reason}")
            site = str(reply.content[RECORD]["site"])
            if site in names:
                raise RuntimeError(f"two SuperNodes ({names[site]}, {node}) serve site {site!r}")
            names[site] = node
        time.sleep(POLL_SECONDS)
    if pending:
        raise RuntimeError(f"SuperNodes {sorted(pending.values())} did not say which site they are within {timeout:g} s")
    return names


def flower_federation(grid, sites: Sequence[SiteConfig], *, nodes: Mapping[str, int] | None = None,
                      timeout: float = 300.0) -> Federation:
    """A :class:`Federation` of ``sites`` (names and the analyst's tokens) reached through ``grid``'s SuperNodes."""
    nodes = site_nodes(grid, expect=len(sites), timeout=timeout) if nodes is None else dict(nodes)
    missing = [s.name for s in sites if s.name not in nodes]
    if missing:
        raise ValueError(f"no SuperNode serves site(s) {missing}; connected: {sorted(nodes)}")
    return Federation(sites, timeout=timeout, connect=lambda s: FlowerConnection(s, grid, nodes[s.name], timeout=timeout))
