"""Assemble and run the site's gRPC server: TLS, interceptor, servicer, health service, message limits, channels."""

from __future__ import annotations

import logging
import threading
import time
from concurrent import futures
from dataclasses import fields, replace
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from dsroc.privacy.accounting import discretization_for
from dsroc.v1 import site_pb2, site_pb2_grpc

from .config import ConfigError, SiteConfig, is_loopback, load_config
from .data.datasets import DatasetStore, read_table
from .data.look_alikes import require_declared_populations
from .data.table_reader import read_table_in_helper, read_tables_in_helper
from .interceptors.audit import AuditLog
from .interceptors.auth import AuthAuditInterceptor
from .interceptors.slots import CallSlots
from .memory import FreedMemory
from .security.crl import RevokedCertificates, revoked_serials
from .servicer.dispatch import SiteServicer
from .site import Site
from .store.ledger import SqliteLedger
from .store.ledger_head import HeadWriter, head_path
from .store.state import mark_served, open_state

__all__ = ["SERVICE_NAME", "SiteServer", "channel_options", "server_options", "site_channel", "server_credentials", "crl_serials",
           "is_loopback"]

log = logging.getLogger("dsroc.site")

SERVICE_NAME = "dsroc.v1.SiteService"


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """Explicit message-size limits, for servers and clients alike."""
    return [("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes)]


def server_options(config: SiteConfig, max_workers: int) -> list[tuple[str, int]]:
    """The gRPC server's options: message limits, no shared port, and what bounds a caller's memory before it is
    authenticated.

    No BDP probing: gRPC would otherwise grow every stream's receive window with the measured bandwidth
    (about 1.6 MB per stream on loopback), and a caller may send that much on each of its streams before the
    daemon reads a byte of it; without probing a stream's window stays at HTTP/2's 64 KiB until the servicer
    asks for the message (:class:`~site_node.interceptors.auth.AuthAuditInterceptor` reads none before the
    caller's token, certificate and call slot are checked), and a read opens it for that message only. The
    streams of one connection are bounded too: a client's further calls wait in the client.
    """
    return channel_options(config.max_message_bytes) + [
        # gRPC sets SO_REUSEPORT by default: a second daemon on the same port would start and share
        # the traffic (and the ledger's folder) with the first. Without it, binding a used port fails.
        ("grpc.so_reuseport", 0),
        ("grpc.http2.bdp_probe", 0),
        ("grpc.max_concurrent_streams", max(16, 4 * max_workers)),
    ]


def site_channel(address: str, *, ca_cert=None, client_cert=None, client_key=None,
                 max_message_bytes: int = 16 * 1024 * 1024) -> grpc.Channel:
    """A channel to a site: TLS when ``ca_cert`` is given (mutual TLS with a client cert/key), else plain text."""
    options = channel_options(max_message_bytes)
    if ca_cert is None:
        return grpc.insecure_channel(address, options=options)
    creds = grpc.ssl_channel_credentials(
        root_certificates=Path(ca_cert).read_bytes(),
        private_key=Path(client_key).read_bytes() if client_key else None,
        certificate_chain=Path(client_cert).read_bytes() if client_cert else None,
    )
    return grpc.secure_channel(address, creds, options=options)


def server_credentials(config: SiteConfig) -> grpc.ServerCredentials:
    """TLS credentials from the config's ``[tls]`` files; mutual TLS when ``client_ca`` is set."""
    tls = config.tls
    if tls is None:
        raise ConfigError(
            f"{config.source or '<config>'}: tls: TLS is on by default; configure [tls] cert and key, "
            "or run with --insecure for local development"
        )
    try:
        key, cert = Path(tls.key).read_bytes(), Path(tls.cert).read_bytes()
        ca = Path(tls.client_ca).read_bytes() if tls.client_ca else None
    except OSError as exc:
        raise ConfigError(f"{config.source or '<config>'}: tls: cannot read {exc.filename}: {exc.strerror}") from None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)


def crl_serials(config: SiteConfig) -> frozenset[int]:
    """The client certificates the site's CRL revokes (:mod:`site_node.security.crl`); ConfigError if it is not the client CA's."""
    if config.tls is None or config.tls.client_ca is None:
        return frozenset()
    try:
        return revoked_serials(config.crl_path, config.tls.client_ca)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{config.source or '<config>'}: site.crl: {exc}") from None


class SiteServer:
    """The daemon: a gRPC server for one site config.

    Parameters
    ----------
    config : SiteConfig
    insecure : bool, default False
        Plain text instead of TLS (local development only).
    address : str, optional
        Overrides ``config.listen`` (``127.0.0.1:0`` picks a free port).
    max_workers : int, default 8
    max_calls_per_analyst : int, optional
        Calls of one analyst in progress at once; default half the workers (at least 1), so that one
        analyst with stalled streams cannot take every worker.
    read_datasets_in_helper : bool, default False
        Read each dataset in a helper process (:mod:`site_node.data.table_reader`), so that pandas, pyarrow
        and SQLAlchemy never take memory in this one; ``dsroc-site serve`` does.
    reset_state : bool, default False
        Move a lost or damaged state aside and start a new one (audited); without it such a state is
        refused with :class:`~site_node.store.state.StateError` (:mod:`site_node.store.state`).
    warm_up : bool, default False
        Once listening, read the datasets and prepare their scores in the background
        (:meth:`site_node.site.Site.warm_up`), so that the first validation costs what the next ones do;
        the health service reports NOT_SERVING until that is done (then SERVING), and calls that arrive
        meanwhile wait for the dataset they need. ``dsroc-site serve`` does.
    trim_memory : bool, default False
        Give the C allocator's freed memory back to the system whenever the last call in progress ends
        (:class:`site_node.memory.FreedMemory`), so that calls reuse freed arrays but the daemon's memory
        between validations stays what its data needs. ``dsroc-site serve`` does.
    """

    def __init__(self, config: SiteConfig, *, insecure: bool = False, address: str | None = None, max_workers: int = 8,
                 max_calls_per_analyst: int | None = None, read_datasets_in_helper: bool = False,
                 reset_state: bool = False, warm_up: bool = False, trim_memory: bool = False):
        self.config = config
        self.warm_up = warm_up
        self.insecure = insecure
        self.address = address or config.listen
        if insecure and not is_loopback(self.address):
            # Plain text would carry bearer tokens and released scores over the network in clear.
            raise ConfigError(
                f"{config.source or '<config>'}: site.listen: --insecure serves only a loopback address "
                f"(127.0.0.1, ::1, localhost), not {self.address}; configure [tls] to serve on the network"
            )
        credentials = None if insecure else server_credentials(config)
        revoked = RevokedCertificates(() if insecure else crl_serials(config))
        require_declared_populations(config)
        self._state_lock = open_state(config, reset=reset_state)
        try:
            self.ledger = SqliteLedger(config.ledger_path, interval=discretization_for(config.policy.budget_epsilon),
                                       head=HeadWriter(head_path(config)))
            self.audit = AuditLog.for_config(config)
            store = (DatasetStore(config.datasets, reader=read_table_in_helper, many_reader=read_tables_in_helper)
                     if read_datasets_in_helper else DatasetStore(config.datasets, reader=read_table))
            self.site = Site(config, self.ledger, datasets=store)
            mark_served(config)
        except BaseException:
            self._state_lock.close()
            raise
        if reset_state:
            log.warning("site %s: state reset (--reset-state): every population starts from a full budget", config.name)
        methods = [f"/{SERVICE_NAME}/{m.name}" for m in site_pb2.DESCRIPTOR.services_by_name["SiteService"].methods]
        self.freed_memory = FreedMemory() if trim_memory else None
        if self.freed_memory is not None:
            self.site.sessions.on_close = self.freed_memory.note_freed
        slots = CallSlots(max_calls_per_analyst or max(1, max_workers // 2),
                          on_release=None if self.freed_memory is None else self.freed_memory.call_ended)
        self.interceptor = AuthAuditInterceptor(config.analysts.values(), self.audit, methods, slots, revoked)
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="dsroc-site"),
            interceptors=[self.interceptor],
            options=server_options(config, max_workers),
        )
        site_pb2_grpc.add_SiteServiceServicer_to_server(SiteServicer(self.site, calls_per_analyst=slots.limit),
                                                        self.server)
        self.health = health.HealthServicer()
        self._health_lock, self._stopping = threading.Lock(), False
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        try:
            if insecure:
                self.port = self.server.add_insecure_port(self.address)
            else:
                self.port = self.server.add_secure_port(self.address, credentials)
        except RuntimeError:
            self.port = 0
        if not self.port:
            self.site.close()
            self.ledger.close()
            self._state_lock.close()
            raise OSError(f"cannot listen on {self.address}: the address is in use (another dsroc-site serving "
                          "this port?) or not an address of this host")
        host = self.address.rsplit(":", 1)[0]
        self.bound_address = f"{host}:{self.port}"

    def _set_health(self, status) -> None:
        for service in ("", SERVICE_NAME):
            self.health.set(service, status)

    def start(self) -> "SiteServer":
        """Start serving; the health service reports SERVING now, or once the warm-up is done."""
        self.server.start()
        warming = self.warm_up
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING if warming else health_pb2.HealthCheckResponse.SERVING)
        log.info("site %s serving on %s (%s)%s", self.config.name, self.bound_address,
                 "INSECURE plain text" if self.insecure else "TLS",
                 "; health SERVING once the datasets are ready" if warming else "")
        if warming:
            threading.Thread(target=self._warm_up, name="dsroc-warm-up", daemon=True).start()
        return self

    def _warm_up(self) -> None:
        started = time.perf_counter()
        try:
            prepared = self.site.warm_up()
        except Exception:  # noqa: BLE001 - a request reads what the warm-up could not, and says why
            log.exception("site %s: warming up the datasets failed; they are read on first use", self.config.name)
        else:
            log.info("site %s: datasets ready: %d score columns prepared in %.2f s", self.config.name, prepared,
                     time.perf_counter() - started)
        finally:
            with self._health_lock:
                if not self._stopping:
                    self._set_health(health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace: float | None = 5.0) -> None:
        """Report NOT_SERVING, finish running calls (up to ``grace`` seconds) and close the ledger."""
        with self._health_lock:
            self._stopping = True
            self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self.server.stop(grace).wait()
        self.interceptor.close()
        self.audit.flush()
        self.site.close()
        self.ledger.close()
        self._state_lock.close()
        log.info("site %s stopped", self.config.name)

    def reload(self) -> None:
        """Re-read the config file and apply its analysts (names, token hashes, datasets allowed) and its CRL; ``SIGHUP`` does this.

        The next call of every analyst is checked against the new table, so removing an analyst (or
        their token hash) revokes them at once, and so is every call's client certificate against the
        CRL (:mod:`site_node.security.crl`). Other changes need a restart and are logged as
        ignored; a config that does not load is logged and changes nothing. Model approvals need no
        reload (each call reads them). Written to the log and the audit log.
        """
        from .interceptors.audit import AuditRecord

        try:
            new = load_config(self.config.source)
            serials = () if self.insecure else crl_serials(new)
        except ConfigError as exc:
            log.error("site %s: reload refused, the config does not load (nothing changed): %s", self.config.name, exc)
            return
        old = self.config.analysts
        changes = {"added": sorted(set(new.analysts) - set(old)), "removed": sorted(set(old) - set(new.analysts)),
                   "changed": sorted(n for n in set(old) & set(new.analysts) if old[n] != new.analysts[n])}
        ignored = sorted(f.name for f in fields(SiteConfig)
                         if f.compare and f.name != "analysts" and getattr(new, f.name) != getattr(self.config, f.name))
        self.config = replace(self.config, analysts=new.analysts)
        self.site.config = replace(self.site.config, analysts=new.analysts)
        self.interceptor.set_analysts(new.analysts.values())
        self.interceptor.revoked.replace(serials)
        changes["revoked_certificates"] = len(serials)
        log.info("site %s reloaded its analysts from %s: added %s, removed %s, changed %s", self.config.name,
                 self.config.source, changes["added"], changes["removed"], changes["changed"])
        if ignored:
            log.warning("site %s: reload applies analysts only; restart to apply the changes to %s", self.config.name,
                        ", ".join(ignored))
        self.audit.write(AuditRecord("", "Reload", peer="SIGHUP (site administrator)",
                                     parameters={**changes, "ignored_until_restart": ignored}))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops (or ``timeout``)."""
        return self.server.wait_for_termination(timeout)
