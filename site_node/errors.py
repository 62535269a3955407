"""Exceptions of the site daemon and the gRPC status code each one maps to."""

from __future__ import annotations

import grpc

from dsroc import DisclosureError

__all__ = [
    "SiteError",
    "InvalidArgument",
    "FailedPrecondition",
    "PermissionDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "NotFound",
    "status_for",
]


class SiteError(Exception):
    """A refusal with a message safe to show the analyst (it never contains patient data or counts)."""

    code = grpc.StatusCode.INTERNAL


class InvalidArgument(SiteError):
    """Bad input: NaN, wrong range, unknown column, malformed grid, theta or edges."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class FailedPrecondition(SiteError):
    """Calls out of order (e.g. RocGlmParts before the survivor function was uploaded)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(SiteError):
    """A disclosure rule (privacy level, per-release caps) or a dataset the analyst may not use."""

    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(SiteError):
    """The privacy budget or a query cap is used up."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unauthenticated(SiteError):
    """Missing or unknown bearer token."""

    code = grpc.StatusCode.UNAUTHENTICATED


class NotFound(SiteError):
    """Unknown dataset or session (sessions expire after inactivity)."""

    code = grpc.StatusCode.NOT_FOUND


INTERNAL_MESSAGE = "internal error at the site; the site administrator can find the details in the site log"


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """The gRPC status code and analyst-facing message for an exception raised while serving a call.

    Only :class:`SiteError` and the core's :class:`dsroc.DisclosureError` carry their own message;
    anything else is an internal error whose text stays in the site log, because a message from deep
    inside a computation might describe the data.
    """
    if isinstance(exc, SiteError):
        return exc.code, str(exc)
    if isinstance(exc, DisclosureError):
        return grpc.StatusCode.PERMISSION_DENIED, str(exc)
    return grpc.StatusCode.INTERNAL, INTERNAL_MESSAGE
