"""One authenticated gRPC channel per site, calls with deadlines, retry on UNAVAILABLE, parallel fan-out."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

import grpc

from analyst.config import SiteConfig

__all__ = ["SiteConnection", "SiteError", "fan_out"]

T = TypeVar("T")

#: Message-size limit on the analyst's channels (arrays travel in chunks well below it).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


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


class _BearerToken(grpc.AuthMetadataPlugin):
    def __init__(self, token: str):
        self._token = token

    def __call__(self, context, callback):
        callback((("authorization", f"Bearer {self._token}"),), None)


class SiteConnection:
    """A channel to one site and a stub on it.

    Parameters
    ----------
    config : SiteConfig
        Address and credentials.
    stub_class : callable
        The generated gRPC stub class (``SiteStub``).
    timeout : float
        Default deadline per call in seconds.
    retries : int
        How often a call failing with UNAVAILABLE is retried (exponential backoff from 0.2 s).
    """

    def __init__(self, config: SiteConfig, stub_class, *, timeout: float = 30.0, retries: int = 3):
        self.config, self.name = config, config.name
        self.timeout, self.retries = float(timeout), int(retries)
        options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        if config.server_name:
            options.append(("grpc.ssl_target_name_override", config.server_name))
        if config.insecure:
            self._token_metadata = (("authorization", f"Bearer {config.token}"),)
            self.channel = grpc.insecure_channel(config.address, options=options)
        else:
            self._token_metadata = None  # the token rides on the call credentials
            read = lambda p: None if p is None else p.read_bytes()  # noqa: E731
            tls = grpc.ssl_channel_credentials(root_certificates=read(config.ca_file),
                                               private_key=read(config.client_key),
                                               certificate_chain=read(config.client_cert))
            creds = grpc.composite_channel_credentials(
                tls, grpc.metadata_call_credentials(_BearerToken(config.token)))
            self.channel = grpc.secure_channel(config.address, creds, options=options)
        self.stub = stub_class(self.channel)

    def call(self, method: str, request, *, timeout: float | None = None, stream: bool = False):
        """Call ``method`` with ``request`` (a message, or a zero-argument factory of a request iterator
        for client-streaming calls).

        Server-streaming replies (``stream=True``) are read completely inside the retry loop and
        returned as a list. UNAVAILABLE is retried with backoff; every other status raises
        :class:`SiteError` at once.
        """
        fn = getattr(self.stub, method)
        delay = 0.2
        for attempt in range(self.retries + 1):
            req = request() if callable(request) else request
            try:
                reply = fn(req, timeout=timeout or self.timeout, metadata=self._token_metadata)
                return list(reply) if stream else reply
            except grpc.RpcError as exc:
                code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
                if code == grpc.StatusCode.UNAVAILABLE and attempt < self.retries:
                    time.sleep(delay)
                    delay *= 2
                    continue
                details = (exc.details() if hasattr(exc, "details") else str(exc)) or code.name
                if code == grpc.StatusCode.UNAVAILABLE:
                    # the transport's text ("Socket closed", a TLS error) rarely says what to check
                    details += (f" (after {attempt + 1} attempt{'s' if attempt else ''}: is the site running at "
                                f"{self.config.address}, and do its CA and client certificate match the site's TLS?)")
                raise SiteError(self.name, code, details) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()


def fan_out(connections: Sequence[SiteConnection], fn: Callable[[SiteConnection], T], *,
            on_done: Callable[[str], None] | None = None) -> list[T]:
    """Run ``fn(connection)`` for every site in parallel and return the results in site order.

    If any site fails, the first failing site (in site order) is raised as :class:`SiteError`
    after all calls have finished, so no call is left running.
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
        results = [run(connections[0])]
    else:
        with ThreadPoolExecutor(max_workers=len(connections), thread_name_prefix="dsroc-site") as pool:
            results = list(pool.map(run, connections))
    for r in results:
        if isinstance(r, SiteError):
            failed = [x.site for x in results if isinstance(x, SiteError)]
            if len(failed) > 1:
                r.args = (f"{r.args[0]} (also failed: {', '.join(failed[1:])})",)
            raise r
    return results
