"""The audit log: one JSON line per request, accepted or refused; never patient data."""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["AuditRecord", "AuditLog", "bounded", "current_record", "note", "read_audit", "audit_files",
           "MAX_LOGGED_CHARS", "MAX_MESSAGE_CHARS", "DEFAULT_MAX_BYTES"]

# Every string an analyst can put in the log (dataset names, session ids, messages quoting them) is
# cut to this length; the marker keeps its full length and a hash, so equal long strings stay recognisable.
MAX_LOGGED_CHARS = 256
# Status messages quote analyst input too: bounded (longer) both in the answer and in the log, so
# that the answer fits in gRPC's metadata limits and the log keeps the very text that was sent.
MAX_MESSAGE_CHARS = 1024
DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # rotate the log beyond this size (site.audit_max_bytes)


def bounded(value, limit: int = MAX_LOGGED_CHARS):
    """``value`` with every string (keys too, in dicts and lists) cut to ``limit`` characters plus a marker.

    A cut string keeps its first three quarters and last quarter of the room left (a message
    quoting a long name keeps the rule at its end) around ``...[cut: N chars, sha256 HEX16]...``: the
    full length and the start of the SHA-256 of the full UTF-8 text.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        marker = f"...[cut: {len(value)} chars, sha256 {digest}]..."
        keep = max(limit - len(marker), 4)  # the result is no longer than ``limit``: bounding it again keeps it
        return value[:keep - keep // 4] + marker + value[len(value) - keep // 4:]
    if isinstance(value, dict):
        return {bounded(str(k), limit): bounded(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [bounded(v, limit) for v in value]
    return value


@dataclass
class AuditRecord:
    """What the log keeps about one request.

    ``parameters`` describe the analyst's request (dataset, epsilon, grid size, ...), never the
    site's data; ``privacy_cost`` is the Gaussian-DP mu this request charged.
    """

    analyst: str
    call: str
    peer: str = ""
    parameters: dict = field(default_factory=dict)
    decision: str = "OK"
    message: str = ""
    privacy_cost: float = 0.0
    time: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="milliseconds"))

    def as_dict(self) -> dict:
        """The JSON object written to the log (every string bounded, see :func:`bounded`)."""
        return {
            **bounded({"time": self.time, "analyst": self.analyst, "call": self.call, "peer": self.peer,
                       "parameters": self.parameters, "decision": self.decision, "privacy_cost": self.privacy_cost}),
            "message": bounded(self.message, MAX_MESSAGE_CHARS),
        }


_current: contextvars.ContextVar[AuditRecord | None] = contextvars.ContextVar("dsroc_audit_record", default=None)


def current_record() -> AuditRecord | None:
    """The audit record of the request being served in this thread (set by the interceptor)."""
    return _current.get()


def note(*, parameters: dict | None = None, privacy_cost: float | None = None) -> None:
    """Add request parameters or the charged privacy cost to the current request's audit record."""
    record = _current.get()
    if record is None:
        return
    if parameters:
        record.parameters.update(parameters)
    if privacy_cost is not None:
        record.privacy_cost = float(privacy_cost)


class AuditLog:
    """Append-only JSON-lines file; each record is written and flushed before the answer is sent.

    When the file reaches ``max_bytes`` it is renamed to ``<name>.000001`` (then ``.000002``, ...) and
    a new file is started; rotated files are never deleted or rewritten by the site.
    """

    def __init__(self, path, *, max_bytes: int = DEFAULT_MAX_BYTES):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not (isinstance(max_bytes, int) and max_bytes > 0):
            raise ValueError(f"max_bytes must be a positive integer, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    def begin(self, record: AuditRecord) -> contextvars.Token:
        """Make ``record`` the current request's record."""
        return _current.set(record)

    def end(self, record: AuditRecord, token: contextvars.Token) -> None:
        """Write ``record`` and clear the current record."""
        _current.reset(token)
        self.write(record)

    def write(self, record: AuditRecord) -> None:
        """Append one record."""
        line = (json.dumps(record.as_dict(), sort_keys=True, default=str) + "\n").encode("utf-8", "replace")
        with self._lock:
            # O_APPEND: concurrent writers (even another process) never interleave within a line.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                size = os.fstat(fd).st_size
                if size and size + len(line) > self.max_bytes:
                    os.close(fd)
                    fd = -1
                    self._rotate()
                    fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                os.write(fd, line)
            finally:
                if fd >= 0:
                    os.close(fd)

    def _rotate(self) -> None:
        rotated = audit_files(self.path)[:-1]
        number = int(rotated[-1].name.rsplit(".", 1)[1]) + 1 if rotated else 1
        os.rename(self.path, self.path.with_name(f"{self.path.name}.{number:06d}"))


def audit_files(path) -> list[Path]:
    """The rotated files of an audit log, oldest first, then the current file (those that exist)."""
    path = Path(path)
    prefix = path.name + "."
    rotated = sorted(p for p in path.parent.glob(prefix + "*")
                     if p.name[len(prefix):].isdigit()) if path.parent.exists() else []
    return rotated + ([path] if path.exists() else [])


def read_audit(path, *, last: int | None = None) -> list[dict]:
    """The records of an audit log and its rotated files, oldest first (only the last ``last`` if given)."""
    lines: deque | list = deque(maxlen=last) if last else []
    for file in audit_files(path):
        with file.open(encoding="utf-8") as f:
            lines.extend(line for line in f if line.strip())
    return [json.loads(line) for line in lines]
