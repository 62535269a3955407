"""A real site server in-process on a free loopback port, and client channels to it."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import grpc

from dsroc.v1 import site_pb2_grpc

from ..config import SiteConfig, load_config
from ..server import SiteServer, site_channel

__all__ = ["running_site", "running_server", "site_channel", "site_stub"]


@contextlib.contextmanager
def running_server(config: SiteConfig | str | Path, *, insecure: bool = False, max_workers: int = 8,
                   max_calls_per_analyst: int | None = None) -> Iterator[SiteServer]:
    """Start a REAL site server in-process on 127.0.0.1 (free port); yield the :class:`SiteServer`; stop it."""
    if not isinstance(config, SiteConfig):
        config = load_config(config)
    server = SiteServer(config, insecure=insecure, address="127.0.0.1:0", max_workers=max_workers,
                        max_calls_per_analyst=max_calls_per_analyst).start()
    try:
        yield server
    finally:
        server.stop(grace=1.0)


@contextlib.contextmanager
def running_site(config: SiteConfig | str | Path, *, insecure: bool = False, max_workers: int = 8) -> Iterator[str]:
    """Start a REAL site server in-process on a free 127.0.0.1 port and yield its address ``"127.0.0.1:PORT"``.

    Parameters
    ----------
    config : SiteConfig or path to a site TOML file
        ``listen`` is ignored; the state (ledger, audit log) goes where the config says.
    insecure : bool, default False
        Plain text; otherwise the config's TLS files are used.
    """
    with running_server(config, insecure=insecure, max_workers=max_workers) as server:
        yield server.bound_address


def site_stub(channel: grpc.Channel) -> site_pb2_grpc.SiteServiceStub:
    """The raw generated stub on a channel (pass ``metadata=[("authorization", "Bearer <token>")]`` per call)."""
    return site_pb2_grpc.SiteServiceStub(channel)
