"""How the analyst's protocols ask a site: the :class:`SiteTransport` interface, its gRPC implementation (one
authenticated channel per site, calls with deadlines, retry on UNAVAILABLE) and the parallel fan-out.

Every protocol asks through ``conn.call(method, request)`` only, so another engine (the Flower transport of
:mod:`analyst.flower`) carries the same protocol code by implementing :class:`SiteTransport`.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Callable, Protocol, Sequence, TypeVar

import grpc

from analyst.config import SiteConfig

__all__ = ["MAX_RETRIES", "SiteConnection", "SiteError", "SiteTransport", "explain", "fan_out", "fan_out_partial",
           "retry_service_config"]

T = TypeVar("T")

#: Message-size limit on the analyst's channels (arrays travel in chunks well below it).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: The sites' gRPC service.
SERVICE = "dsroc.v1.SiteService"
#: gRPC allows at most 5 attempts per call (``maxAttempts``), so at most 4 retries.
MAX_RETRIES = 4


def retry_service_config(retries: int) -> str:
    """gRPC service config: retry a call that failed with UNAVAILABLE (only), with jittered exponential backoff.

    gRPC retries only calls the server has not answered, so nothing is executed twice at a site; a
    channel that cannot connect (no server, TLS handshake refused) fails each attempt at once, so
    the whole call fails within about a second.
    """
    if retries == 0:
        return json.dumps({"methodConfig": [{"name": [{"service": SERVICE}]}]})
    policy = {"maxAttempts": retries + 1, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
              "retryableStatusCodes": ["UNAVAILABLE"]}
    return json.dumps({"methodConfig": [{"name": [{"service": SERVICE}], "retryPolicy": policy}]})


def explain(code: grpc.StatusCode, details: str, config: SiteConfig, *, timeout: float | None = None) -> str:
    """The transport's message with what to check, for the failures a new setup typically hits."""
    text = details or code.name
    low = text.lower()
    if code == grpc.StatusCode.UNAVAILABLE:
        if any(k in low for k in ("tls handshake", "tsi_", "ssl", "certificate")):
            return (f"{text} -- the TLS handshake with {config.address} failed: check that ca_file "
                    f"({config.ca_file}) is the CA that signed this site's server certificate, and that the "
                    "certificate names the host you connect to (set server_name if it differs)")
        if ("socket closed" in low or "connection reset" in low) and not config.insecure:
            have = "yours is set" if config.client_cert else "none is set"
            return (f"{text} -- the site closed the connection during the TLS handshake: it probably requires a "
                    f"client certificate (mutual TLS; {have}): check client_cert and client_key, and that the "
                    "site's client CA signed them")
        if any(k in low for k in ("connection refused", "failed to connect", "dns", "name resolution",
                                  "no route", "unreachable")):
            return f"{text} -- nothing answers at {config.address}: is the site running, and is the address right?"
        return f"{text} -- is the site running at {config.address}?"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return (f"{text} -- check this site's token ('token' or 'token_file' in the federation file): the site "
                "knows only the SHA-256 of the tokens it issued")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED and timeout is not None:
        return f"{text} -- no answer within {timeout:g} s (raise [options] timeout in the federation file)"
    return text


class SiteError(RuntimeError):
    """A site refused or failed a call.

    Attributes
    ----------
    site : str
        The site's name.
    code : grpc.StatusCode
        The gRPC status.
    message : str
        The site's (or the transport's) explanation.
    """

    def __init__(self, site: str, code: grpc.StatusCode, message: str):
        self.site, self.code, self.message = site, code, message
        super().__init__(f"site '{site}': {code.name}: {message}")


class SiteTransport(Protocol):
    """What the analyst's protocols need from the way to one site (``dsroc.v1.SiteService`` calls by name).

    ``call`` sends ``request`` (a ``dsroc.v1`` message) to ``method`` as the analyst of ``config.token`` and returns
    the reply message, or raises :class:`SiteError` with the site's status and explanation; ``stream``,
    ``on_message`` and ``reply_type`` are the streaming calls' options (see :meth:`SiteConnection.call`), which a
    transport may refuse with UNIMPLEMENTED. ``limit_calls`` bounds the calls in progress at once.
    """

    name: str
    config: SiteConfig

    def call(self, method: str, request, *, timeout: float | None = None, stream: bool = False,
             on_message: Callable[[object], None] | None = None, reply_type=None): ...

    def limit_calls(self, limit: int) -> None: ...

    def close(self) -> None: ...


class SiteConnection:
    """A channel to one site and a stub on it: the :class:`SiteTransport` over the sites' own gRPC daemons.

    Parameters
    ----------
    config : SiteConfig
        Address and credentials.
    stub_class : callable
        The generated gRPC stub class (``SiteStub``).
    timeout : float
        Default deadline per call in seconds.
    retries : int
        How often gRPC retries a call failing with UNAVAILABLE (0 to 4; its service-config retry policy,
        jittered exponential backoff from 0.1 s).
    """

    def __init__(self, config: SiteConfig, stub_class, *, timeout: float = 30.0, retries: int = 3):
        if isinstance(retries, bool) or int(retries) != retries or not 0 <= retries <= MAX_RETRIES:
            raise ValueError(f"retries must be an integer from 0 to {MAX_RETRIES} (gRPC allows 5 attempts), "
                             f"got {retries!r}")
        self.config, self.name = config, config.name
        self.timeout, self.retries = float(timeout), int(retries)
        options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.enable_retries", 1), ("grpc.service_config", retry_service_config(self.retries))]
        if config.server_name:
            options.append(("grpc.ssl_target_name_override", config.server_name))
        # The token as plain call metadata: on a TLS channel it travels encrypted like the rest of the call,
        # and unlike call credentials (a Python plugin run on gRPC's thread for every call) it costs nothing
        # per call -- half the analyst's CPU time of a small call.
        self._token_metadata = (("authorization", f"Bearer {config.token}"),)
        if config.insecure:
            self.channel = grpc.insecure_channel(config.address, options=options)
        else:
            read = lambda p: None if p is None else p.read_bytes()  # noqa: E731
            tls = grpc.ssl_channel_credentials(root_certificates=read(config.ca_file),
                                               private_key=read(config.client_key),
                                               certificate_chain=read(config.client_cert))
            self.channel = grpc.secure_channel(config.address, tls, options=options)
        self.stub = stub_class(self.channel)
        self._slots: threading.Semaphore | None = None  # the site's calls-in-progress limit, once known
        self._serialized: dict[str, Callable] = {}  # client-streaming calls taking messages already serialized

    def limit_calls(self, limit: int) -> None:
        """Keep at most ``limit`` calls to this site in progress at once (the site refuses more from one analyst
        with RESOURCE_EXHAUSTED; it reports its limit in its policy). 0 leaves the calls unbounded."""
        if limit and (self._slots is None or self._slots_limit != limit):
            self._slots, self._slots_limit = threading.BoundedSemaphore(limit), limit

    def call(self, method: str, request, *, timeout: float | None = None, stream: bool = False,
             on_message: Callable[[object], None] | None = None, reply_type=None):
        """Call ``method`` with ``request`` (a message, or a zero-argument factory of a request iterator
        for client-streaming calls).

        Server-streaming replies (``stream=True``) are read completely and returned as a list, or, with
        ``on_message``, handed to it one by one as they arrive (nothing is kept; returns None).
        ``reply_type``: a client-streaming call whose request messages are already serialized (bytes, e.g.
        built from arrays without a message object), its reply parsed as this message type.
        UNAVAILABLE is retried by gRPC's retry policy (see :func:`retry_service_config`); a failure
        raises :class:`SiteError` with what to check (:func:`explain`).
        """
        fn = getattr(self.stub, method) if reply_type is None else self._serialized_stream(method, reply_type)
        req = request() if callable(request) else request
        timeout = timeout or self.timeout
        slots = self._slots
        try:
            if slots is not None:
                slots.acquire()
            try:
                reply = fn(req, timeout=timeout, metadata=self._token_metadata)
                if not stream:
                    return reply
                if on_message is None:
                    return list(reply)
                for message in reply:
                    on_message(message)
                return None
            finally:
                if slots is not None:
                    slots.release()
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
            details = exc.details() if hasattr(exc, "details") else str(exc)
            raise SiteError(self.name, code, explain(code, details, self.config, timeout=timeout)) from None

    def _serialized_stream(self, method: str, reply_type) -> Callable:
        fn = self._serialized.get(method)
        if fn is None:
            path = f"/{SERVICE}/{method}"
            fn = self._serialized[method] = self.channel.stream_unary(
                path, request_serializer=None, response_deserializer=reply_type.FromString)
        return fn

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()


def fan_out_partial(connections: Sequence[SiteTransport], fn: Callable[[SiteTransport], T], *,
                    on_done: Callable[[str], None] | None = None,
                    executor: Executor | None = None) -> list[T | SiteError]:
    """Run ``fn(connection)`` for every site in parallel; each site's result or its :class:`SiteError`, in site order.

    ``executor``: a pool to run on (a :class:`analyst.Federation` keeps one for all its steps); by
    default a pool is made for this call.
    """
    def run(conn):
        try:
            out = fn(conn)
        except SiteError as exc:
            return exc
        except Exception as exc:  # a bad reply from a site is still that site's error
            err = SiteError(conn.name, grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
            err.__cause__ = exc
            return err
        if on_done is not None:
            on_done(conn.name)
        return out

    if len(connections) == 1:
        return [run(connections[0])]
    if executor is not None:
        return list(executor.map(run, connections))
    with ThreadPoolExecutor(max_workers=len(connections), thread_name_prefix="dsroc-site") as pool:
        return list(pool.map(run, connections))


def fan_out(connections: Sequence[SiteTransport], fn: Callable[[SiteTransport], T], *,
            on_done: Callable[[str], None] | None = None, executor: Executor | None = None) -> list[T]:
    """Run ``fn(connection)`` for every site in parallel and return the results in site order.

    If any site fails, the first failing site (in site order) is raised as :class:`SiteError`
    after all calls have finished, so no call is left running.
    """
    results = fan_out_partial(connections, fn, on_done=on_done, executor=executor)
    for r in results:
        if isinstance(r, SiteError):
            failed = [x.site for x in results if isinstance(x, SiteError)]
            if len(failed) > 1:
                r.args = (f"{r.args[0]} (also failed: {', '.join(failed[1:])})",)
            raise r
    return results
