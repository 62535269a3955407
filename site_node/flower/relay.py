"""The site's answer to one Flower message: the named ``dsroc.v1.SiteService`` call, asked of the hospital's own daemon.

Flower (1.42) starts a fresh ``flwr-clientapp`` process for every message and ends it after one reply, so
nothing a validation keeps between its calls -- sessions, holds, secure-aggregation round keys, the release
cache -- could live in the ClientApp. The warm site is the daemon (``dsroc-site serve``, listening on loopback
only), and every Flower message passes through its one entry point: the same authentication, audit log,
call limits, privacy ledger, policy and refusals as a call over the network. The ClientApp adds no decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

__all__ = ["CALLS", "NodeSite", "Reply", "SERVICE", "relay"]

SERVICE = "dsroc.v1.SiteService"


def _unary_calls() -> frozenset[str]:
    from dsroc.v1 import site_pb2

    methods = site_pb2.DESCRIPTOR.services_by_name["SiteService"].methods
    return frozenset(m.name for m in methods if not m.client_streaming and not m.server_streaming)


#: The calls a Flower message may carry: the site's unary calls (its streams need the daemon's own channel).
CALLS = _unary_calls()


@dataclass(frozen=True)
class Reply:
    """A call's outcome as it travels back in the reply message: gRPC status name, explanation, serialized reply."""

    code: str
    details: str = ""
    payload: bytes = b""


@dataclass(frozen=True)
class NodeSite:
    """Where the ClientApp finds the hospital's daemon, from the SuperNode's ``--node-config`` (set by its operator).

    Keys: ``site-config`` (the site's ``site.toml``: its name and listen address), ``ca-file`` (the CA that signed
    the daemon's server certificate; without it the daemon must serve plain text on loopback, ``--insecure``),
    ``client-cert`` / ``client-key`` (when the daemon requires client certificates), ``server-name`` (the name
    in the daemon's certificate, when it differs from the listen host).
    """

    name: str
    address: str
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    server_name: str | None = None

    @classmethod
    def from_node_config(cls, node_config) -> "NodeSite":
        from site_node.config import ConfigError, is_loopback, load_config

        known = {"site-config", "ca-file", "client-cert", "client-key", "server-name"}
        unknown = sorted(set(node_config) - known)
        if unknown:
            raise ConfigError(f"--node-config: unknown key(s) {unknown}; known: {sorted(known)}")
        if "site-config" not in node_config:
            raise ConfigError("--node-config: site-config (the path of the site's site.toml) is required")
        config = load_config(node_config["site-config"])
        host, port = config.listen.rsplit(":", 1)
        if host in ("0.0.0.0", "::", "[::]", ""):
            host = "127.0.0.1"
        address = f"{host}:{port}"
        path = lambda key: Path(node_config[key]) if node_config.get(key) else None  # noqa: E731
        site = cls(config.name, address, path("ca-file"), path("client-cert"), path("client-key"),
                   node_config.get("server-name") or None)
        if site.ca_file is None and not is_loopback(address):
            raise ConfigError(f"--node-config: ca-file is required: the daemon at {address} is not on loopback, "
                              "and plain text would carry the analyst's token and the releases in clear")
        if (site.client_cert is None) != (site.client_key is None):
            raise ConfigError("--node-config: client-cert and client-key go together (both or neither)")
        return site

    def channel(self) -> grpc.Channel:
        if self.ca_file is None:
            return grpc.insecure_channel(self.address)
        read = lambda p: None if p is None else p.read_bytes()  # noqa: E731
        tls = grpc.ssl_channel_credentials(root_certificates=read(self.ca_file), private_key=read(self.client_key),
                                           certificate_chain=read(self.client_cert))
        options = [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []
        return grpc.secure_channel(self.address, tls, options=options)


def relay(site: NodeSite, method: str, request: bytes, token: str, *, timeout: float = 300.0) -> Reply:
    """Ask the daemon ``method`` with the serialized ``request`` as the analyst of ``token``; its reply or refusal."""
    if method not in CALLS:
        return Reply("UNIMPLEMENTED", f"method: the Flower transport carries the site's unary calls "
                                      f"({', '.join(sorted(CALLS))}), not {method!r}")
    if not isinstance(request, bytes):
        return Reply("INVALID_ARGUMENT", "request: must be the serialized dsroc.v1 request (bytes)")
    with site.channel() as channel:
        call = channel.unary_unary(f"/{SERVICE}/{method}", request_serializer=None, response_deserializer=None)
        try:
            payload = call(request, timeout=timeout, metadata=(("authorization", f"Bearer {token}"),))
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
            return Reply(code.name, exc.details() if hasattr(exc, "details") else str(exc))
    return Reply("OK", "", payload)
