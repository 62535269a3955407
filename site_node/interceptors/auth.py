"""Bearer tokens (the site stores only SHA-256 hashes) and the server interceptor for auth, audit and status codes."""

from __future__ import annotations

import contextvars
import hashlib
import logging
import secrets
import threading
from concurrent import futures
from typing import Iterable

import grpc
from google.protobuf.json_format import MessageToDict

from ..config import AnalystConfig
from ..errors import InvalidArgument, ResourceExhausted, Unauthenticated, status_for
from ..security.crl import RevokedCertificates
from .audit import MAX_MESSAGE_CHARS, AuditLog, AuditRecord, bounded
from .slots import CallSlots

__all__ = ["hash_token", "new_token", "current_analyst", "request_parameters", "AuthAuditInterceptor",
           "OPEN_METHOD_PREFIXES"]

log = logging.getLogger("dsroc.site")

# The standard health service answers without a token, so that load balancers and `grpc_health_probe`
# can watch the daemon; it reveals nothing but SERVING / NOT_SERVING.
OPEN_METHOD_PREFIXES = ("/grpc.health.v1.Health/",)
_MAX_LOGGED_LIST = 50
# Requests of the open methods read at once (a health check's is a few bytes), by threads of their own: any client
# with a certificate of the site's CA may call them, and each request may be up to site.max_message_bytes.
OPEN_READS = 1

_analyst: contextvars.ContextVar[str | None] = contextvars.ContextVar("dsroc_analyst", default=None)


def hash_token(token: str) -> str:
    """The SHA-256 hex digest of a bearer token: what a site config stores instead of the token."""
    if not isinstance(token, str) or not token:
        raise ValueError("token must be a non-empty string")
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random bearer token (256 bits, URL-safe)."""
    return "dsroc_" + secrets.token_urlsafe(32)


def current_analyst() -> str:
    """The authenticated analyst of the request being served (set by :class:`AuthAuditInterceptor`)."""
    name = _analyst.get()
    if name is None:
        raise Unauthenticated("no authenticated analyst for this request")
    return name


def _loggable(value):
    """Request parameters for the audit log, with long arrays shortened to their length."""
    if isinstance(value, dict):
        return {k: _loggable(v) for k, v in value.items()}
    if isinstance(value, list):
        return value if len(value) <= _MAX_LOGGED_LIST else f"[{len(value)} values]"
    return value


def request_parameters(message) -> dict:
    """A request message as its audit record's parameters (field names as in the proto, long lists shortened)."""
    return _loggable(MessageToDict(message, preserving_proto_field_name=True))


class AuthAuditInterceptor(grpc.ServerInterceptor):
    """Authenticate every call, write its audit record and turn exceptions into status codes.

    Deny by default: a call without a known token, or to a method outside ``methods``, is refused
    with ``UNAUTHENTICATED`` (and audited) before any servicer code runs, and before its request is read:
    whatever it sends beyond the HTTP/2 stream window (:func:`site_node.server.server_options`) is never
    taken in. A unary request too is read only once the caller's certificate is found not revoked and a
    call slot of theirs is free, so that neither a revoked certificate nor calls beyond an analyst's slots
    make the daemon buffer a message (``tests/site/security/test_pre_auth_memory.py``).

    Parameters
    ----------
    analysts : iterable of AnalystConfig
        Known analysts and their token hashes.
    audit : AuditLog
    methods : iterable of str
        Full method names served (``/dsroc.v1.SiteService/Describe``, ...).
    slots : CallSlots, optional
        Per-analyst limit on calls in progress (``RESOURCE_EXHAUSTED`` beyond it); none if omitted.
    revoked : RevokedCertificates, optional
        Client certificates refused whatever the token (``UNAUTHENTICATED``): the site's CRL.
    """

    def __init__(self, analysts: Iterable[AnalystConfig], audit: AuditLog, methods: Iterable[str],
                 slots: CallSlots | None = None, revoked: RevokedCertificates | None = None):
        self.set_analysts(analysts)
        self._audit = audit
        self._methods = frozenset(methods)
        self._slots = slots
        self.revoked = revoked if revoked is not None else RevokedCertificates()
        self._open_pool = futures.ThreadPoolExecutor(max_workers=OPEN_READS, thread_name_prefix="dsroc-open")

    def close(self) -> None:
        """Let the open methods' reading thread go (the server has stopped)."""
        self._open_pool.shutdown(wait=False)

    def set_analysts(self, analysts: Iterable[AnalystConfig]) -> None:
        """Replace the known analysts and token hashes (a reload): the next call is checked against these."""
        self._by_hash = {a.token_sha256: a.name for a in analysts}
        self._served = {}  # (method, analyst) -> the wrapped handler: the same for every call of theirs

    def _authenticate(self, metadata) -> str | None:
        value = dict(metadata or ()).get("authorization", "")
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self._by_hash.get(hash_token(token.strip()))

    def intercept_service(self, continuation, details):
        method = details.method
        if method.startswith(OPEN_METHOD_PREFIXES):
            return _open_method(continuation(details), self._open_pool)
        analyst = self._authenticate(details.invocation_metadata)
        served = self._served.get((method, analyst)) if analyst is not None else None
        if served is not None:
            return served
        call = method.rsplit("/", 1)[-1]
        handler = continuation(details) if method in self._methods else None
        if analyst is None or handler is None:
            message = bounded("missing or unknown bearer token (metadata 'authorization: Bearer <token>')"
                              if analyst is None else f"method {method} is not served by this site", MAX_MESSAGE_CHARS)
            record = AuditRecord(analyst or "", call, decision="UNAUTHENTICATED", message=message)
            return _refuse(handler, message, record, self._audit)
        # Built once per (method, analyst): its behaviour makes each call's record, slot and checks afresh, and
        # only known analysts and served methods are kept (at most their product; a reload starts over).
        served = self._served[(method, analyst)] = _wrap(handler, self._wrap_behavior, analyst, call)
        return served

    def _wrap_behavior(self, behavior, analyst: str, call: str, streaming_request: bool, streaming_response: bool):
        audit, slots, revoked = self._audit, self._slots, self.revoked

        def wrapped(request, context):
            record = AuditRecord(analyst, call, peer=context.peer())
            token, who = audit.begin(record), _analyst.set(analyst)
            release = _Once(lambda: slots.release(analyst)) if slots is not None else _Once(None)
            try:
                # The peer's certificate is read only while some certificate is revoked.
                serial = (revoked.revoked(next(iter(context.auth_context().get("x509_pem_cert", ())), None))
                          if revoked else None)
                if serial is not None:
                    release.disarm()
                    raise Unauthenticated(f"the client certificate (serial {serial:x}) is revoked at this site; "
                                          "ask the site for a new one")
                if slots is not None and not slots.acquire(analyst):
                    release.disarm()
                    raise ResourceExhausted(
                        f"you have {slots.limit} calls in progress at this site, the limit per analyst; "
                        "wait for one to finish"
                    )
                if streaming_request:
                    request = _parsed_stream(request)
                else:
                    request = _one_message(request)
                    _require_parsed(request)
                    record.parameters = request_parameters(request)
                # A server-streaming servicer does all checks and charging before returning its
                # iterator, so the record is complete here; its slot is given back when the stream ends.
                response = behavior(request, context)
                if streaming_response:
                    response, release = _Releasing(response, release), _Once(None)
                return response
            except Exception as exc:
                code, message = status_for(exc)
                message = bounded(message, MAX_MESSAGE_CHARS)
                if not context.is_active():
                    # gRPC ended the call already (client cancelled, or a message above the size
                    # limit): the analyst never sees ``message``, so the log must not claim it.
                    record.decision = "CANCELLED"
                    record.message = "the call ended before the site answered (client cancelled or message too large)"
                    return None
                if code is grpc.StatusCode.INTERNAL:
                    log.exception("internal error in %s for analyst %s", call, analyst)
                record.decision, record.message = code.name, message
                context.abort(code, message)
            finally:
                release()
                _analyst.reset(who)
                audit.end(record, token)

        return wrapped


class _Once:
    """Call ``fn`` at most once (``None``: do nothing)."""

    def __init__(self, fn):
        self._fn, self._lock = fn, threading.Lock()

    def disarm(self) -> None:
        self._fn = None

    def __call__(self) -> None:
        with self._lock:
            fn, self._fn = self._fn, None
        if fn is not None:
            fn()


class _Releasing:
    """A response stream that gives back its call slot when it ends, fails or is dropped (client gone)."""

    def __init__(self, iterator, release: _Once):
        self._iterator, self._release = iter(iterator), release

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self._iterator)
        except BaseException:
            self._release()
            raise

    def __del__(self):
        self._release()


def _wrap(handler, wrap_behavior, analyst: str, call: str):
    # Every behaviour is served as request-streaming: gRPC then reads no message before the behaviour asks for
    # it, and a unary behaviour gets its one message (:func:`_one_message`) only after the revocation and slot
    # checks. Served as unary, the whole message (up to site.max_message_bytes) is read first.
    kinds = (
        ("unary_unary", grpc.stream_unary_rpc_method_handler, False, False),
        ("unary_stream", grpc.stream_stream_rpc_method_handler, False, True),
        ("stream_unary", grpc.stream_unary_rpc_method_handler, True, False),
        ("stream_stream", grpc.stream_stream_rpc_method_handler, True, True),
    )
    for attr, make, streaming_request, streaming_response in kinds:
        behavior = getattr(handler, attr)
        if behavior is not None:
            return make(wrap_behavior(behavior, analyst, call, streaming_request, streaming_response),
                        request_deserializer=_tolerant(handler.request_deserializer),
                        response_serializer=handler.response_serializer)
    raise ValueError("handler has no behaviour")


# A request whose bytes do not parse: gRPC itself would answer INTERNAL without an audit record, so
# the deserializer returns this marker and the wrapped behaviour refuses it (audited) as INVALID_ARGUMENT.
_UNPARSABLE = object()


def _tolerant(deserializer):
    if deserializer is None:
        return None

    def parse(data):
        try:
            return deserializer(data)
        except Exception:  # noqa: BLE001 - any parse failure is the caller's malformed message
            return _UNPARSABLE

    return parse


def _require_parsed(message) -> None:
    if message is _UNPARSABLE:
        raise InvalidArgument("the request message could not be parsed (malformed protobuf for this call)")


def _one_message(messages):
    """The request of a unary call, read from its stream only now."""
    for message in messages:
        return message
    raise InvalidArgument("the call carries no request message (this call takes exactly one)")


def _parsed_stream(messages):
    for message in messages:
        _require_parsed(message)
        yield message


def _open_method(handler, pool: futures.ThreadPoolExecutor):
    """An open method's handler (the health service, no token needed) served request-streaming on ``pool``: at
    most its :data:`OPEN_READS` threads read such requests at once (the others wait unread, each in HTTP/2's
    window), never one of the workers that serve the analysts, and a request that does not parse is refused as
    ``INVALID_ARGUMENT`` (gRPC would answer INTERNAL). Health calls are answered at once (Watch by callbacks),
    so the pool's thread is not held beyond the read."""
    if handler is None or handler.request_streaming:
        return handler
    behavior = handler.unary_unary or handler.unary_stream

    def run(requests, context, *callback):
        request = next(requests, None)
        if request is None or request is _UNPARSABLE:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the request message is missing or could not be parsed")
        return behavior(request, context, *callback)

    run.experimental_thread_pool = pool
    if getattr(behavior, "experimental_non_blocking", False):  # health Watch answers by callbacks
        run.experimental_non_blocking = True
    make = grpc.stream_stream_rpc_method_handler if handler.response_streaming else grpc.stream_unary_rpc_method_handler
    return make(run, request_deserializer=_tolerant(handler.request_deserializer),
                response_serializer=handler.response_serializer)


def _refuse(handler, message: str, record: AuditRecord, audit: AuditLog):
    """A handler of the same shape as ``handler`` (unary if unknown) that audits and refuses with UNAUTHENTICATED.

    The record is written here rather than when the call arrives, because only here is the caller's
    address known: the one thing worth keeping about someone without a valid token.
    """

    def abort(requests, context):
        record.peer = context.peer()
        audit.write_unauthenticated(record)
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    # Request-streaming whatever the method: the request of an unauthenticated caller is never read (a unary
    # handler would take in the whole message, up to site.max_message_bytes, before refusing it).
    if handler is None or not handler.response_streaming:
        return grpc.stream_unary_rpc_method_handler(abort)
    return grpc.stream_stream_rpc_method_handler(abort)
