"""The audit log: one JSON line per request, accepted or refused; never patient data."""

from __future__ import annotations

import contextvars
import json
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["AuditRecord", "AuditLog", "current_record", "note", "read_audit"]


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
        """The JSON object written to the log."""
        return {
            "time": self.time, "analyst": self.analyst, "call": self.call, "peer": self.peer,
            "parameters": self.parameters, "decision": self.decision, "message": self.message,
            "privacy_cost": self.privacy_cost,
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
    """Append-only JSON-lines file; each record is written and flushed before the answer is sent."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
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
        line = json.dumps(record.as_dict(), sort_keys=True, default=str) + "\n"
        with self._lock:
            # O_APPEND: concurrent writers (even another process) never interleave within a line.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)


def read_audit(path, *, last: int | None = None) -> list[dict]:
    """The records of an audit log, oldest first (only the last ``last`` if given)."""
    path = Path(path)
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as f:
        lines = deque(f, maxlen=last) if last else list(f)
    return [json.loads(line) for line in lines if line.strip()]
