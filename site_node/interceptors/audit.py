"""The audit log: one JSON line per request, accepted or refused; never patient data."""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from ..errors import status_for

__all__ = ["AuditRecord", "AuditLog", "bounded", "note", "part", "unsent_parts", "read_audit", "audit_files",
           "charges_path", "is_charge", "MAX_LOGGED_CHARS", "MAX_MESSAGE_CHARS", "DEFAULT_MAX_BYTES"]

# Every string an analyst can put in the log (dataset names, session ids, messages quoting them) is
# cut to this length; the marker keeps its full length and a hash, so equal long strings stay recognisable.
MAX_LOGGED_CHARS = 256
# Status messages quote analyst input too: bounded (longer) both in the answer and in the log, so
# that the answer fits in gRPC's metadata limits and the log keeps the very text that was sent.
MAX_MESSAGE_CHARS = 1024
DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # rotate the log beyond this size (site.audit_max_bytes)
_MAX_SUMMARY_PEERS = 100  # peer hosts named one by one in a minute's summary of unlogged refusals


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
    parts: list = field(default_factory=list)  # the records of a combined call's parts (:func:`part`), written after it

    def as_dict(self) -> dict:
        """The JSON object written to the log (every string bounded, see :func:`bounded`)."""
        return {
            **bounded({"time": self.time, "analyst": self.analyst, "call": self.call, "peer": self.peer,
                       "parameters": self.parameters, "decision": self.decision, "privacy_cost": self.privacy_cost}),
            "message": bounded(self.message, MAX_MESSAGE_CHARS),
        }


_current: contextvars.ContextVar[AuditRecord | None] = contextvars.ContextVar("dsroc_audit_record", default=None)


@contextmanager
def part(call: str, parameters: dict | None = None) -> Iterator[AuditRecord | None]:
    """Audit one part of a combined call as its own call: a record of its own (``call``, its parameters,
    what :func:`note` adds meanwhile, its decision), written right after the combined call's record.

    A part that raises gets the decision and message its own call would have had, and the exception
    goes on (it refuses the combined call). Outside a served call (no current record) nothing is recorded.
    """
    outer = _current.get()
    if outer is None:
        yield None
        return
    record = AuditRecord(outer.analyst, call, peer=outer.peer, parameters={"in_call": outer.call, **(parameters or {})})
    outer.parts.append(record)
    token = _current.set(record)
    try:
        yield record
    except BaseException as exc:
        code, message = status_for(exc)
        record.decision, record.message = code.name, message
        raise
    finally:
        _current.reset(token)


@contextmanager
def unsent_parts() -> Iterator[None]:
    """A combined call whose refusal drops the records of the parts answered before it (their answers were never
    sent): the log keeps the call's refusal and the refusing part's, nothing answered."""
    try:
        yield
    except BaseException:
        record = _current.get()
        if record is not None:
            record.parts[:] = [p for p in record.parts if p.decision != "OK"]
        raise


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
    a new file is started. Retention: after a rotation (and when the log is opened) the oldest rotated
    files go while all files together would exceed ``max_total_bytes`` or while a file's last record
    is older than ``max_age_days``; each deletion is itself recorded (``AuditRetention``). The records of
    releases the ledger charged (:func:`is_charge`) are never deleted: before a file goes, they are appended to
    ``<name>.charges`` (:func:`charges_path`), which retention keeps for as long as the ledger keeps the charge,
    for good; it grows by one line per charged release, as the ledger does by one row. Refusals
    of callers without a valid token are logged one by one up to ``unauthenticated_per_minute`` a
    minute, the rest counted in one summary record per minute, so that a flood of such calls cannot
    fill the disk.
    """

    def __init__(self, path, *, max_bytes: int = DEFAULT_MAX_BYTES, max_total_bytes: int | None = None,
                 max_age_days: float | None = None, unauthenticated_per_minute: int | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not (isinstance(max_bytes, int) and max_bytes > 0):
            raise ValueError(f"max_bytes must be a positive integer, got {max_bytes!r}")
        if max_total_bytes is not None and max_total_bytes < 2 * max_bytes:
            raise ValueError(f"max_total_bytes must be at least twice max_bytes, got {max_total_bytes!r}")
        self.max_bytes = max_bytes
        self.max_total_bytes = max_total_bytes
        self.max_age_days = max_age_days
        self.unauthenticated_per_minute = unauthenticated_per_minute
        self._lock = threading.Lock()
        self._window = (0, 0, {})  # minute, records written in it, peer host -> calls not logged one by one
        with self._lock:
            self._retain()

    @classmethod
    def for_config(cls, config) -> "AuditLog":
        """The audit log of a site config with its rotation, retention and rate settings."""
        return cls(config.audit_path, max_bytes=config.audit_max_bytes, max_total_bytes=config.audit_max_total_bytes,
                   max_age_days=config.audit_max_age_days,
                   unauthenticated_per_minute=config.audit_unauthenticated_per_minute)

    def begin(self, record: AuditRecord) -> contextvars.Token:
        """Make ``record`` the current request's record."""
        return _current.set(record)

    def end(self, record: AuditRecord, token: contextvars.Token) -> None:
        """Write ``record`` (then its parts' records) and clear the current record."""
        _current.reset(token)
        self.write(record)

    def write(self, record: AuditRecord) -> None:
        """Append one record and the records of its parts (one write)."""
        with self._lock:
            self._append(record)

    def write_unauthenticated(self, record: AuditRecord) -> None:
        """Append the refusal of a caller without a valid token, or count it in the minute's summary."""
        if self.unauthenticated_per_minute is None:
            return self.write(record)
        minute = int(time.time() // 60)
        with self._lock:
            self._flush_window(minute)
            _, written, skipped = self._window
            if written < self.unauthenticated_per_minute:
                self._window = (minute, written + 1, skipped)
                self._append(record)
            else:
                host = record.peer.rsplit(":", 1)[0]
                if host in skipped or len(skipped) < _MAX_SUMMARY_PEERS:
                    skipped[host] = skipped.get(host, 0) + 1
                else:
                    skipped["(other)"] = skipped.get("(other)", 0) + 1

    def flush(self) -> None:
        """Write the pending summary of unlogged refusals (the daemon calls this when it stops)."""
        with self._lock:
            self._flush_window(None)

    def _flush_window(self, minute: int | None) -> None:
        start, _, skipped = self._window
        if start == minute:
            return
        if skipped:
            since = datetime.fromtimestamp(start * 60, timezone.utc).isoformat(timespec="seconds")
            self._append(AuditRecord(
                "", "Unauthenticated", decision="UNAUTHENTICATED", parameters={"calls_by_peer": skipped},
                message=f"{sum(skipped.values())} more calls without a valid token in the minute from {since}, not "
                        f"logged one by one (site.audit_unauthenticated_per_minute = {self.unauthenticated_per_minute})"))
        self._window = (minute or 0, 0, {})

    def _append(self, record: AuditRecord) -> None:
        line = "".join(json.dumps(r.as_dict(), sort_keys=True, default=str) + "\n"
                       for r in (record, *record.parts)).encode("utf-8", "replace")
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
                os.close(fd)
                fd = -1
                self._retain()
            else:
                os.write(fd, line)
        finally:
            if fd >= 0:
                os.close(fd)

    def _rotate(self) -> None:
        rotated = _rotated(self.path)
        number = int(rotated[-1].name.rsplit(".", 1)[1]) + 1 if rotated else 1
        os.rename(self.path, self.path.with_name(f"{self.path.name}.{number:06d}"))

    def _retain(self) -> None:
        """Delete the oldest rotated files beyond the total size or age, recording each deletion, after moving their
        records of charged releases to the charges file."""
        if self.max_total_bytes is None and self.max_age_days is None:
            return
        rotated, charges = _rotated(self.path), charges_path(self.path)
        sizes = {f: f.stat().st_size for f in rotated}
        # the current file may grow to max_bytes (and a deletion record) before the next rotation
        total = sum(sizes.values()) + self.max_bytes + (charges.stat().st_size if charges.exists() else 0)
        oldest_kept = time.time() - self.max_age_days * 86400 if self.max_age_days else None
        for f in rotated:
            last = f.stat().st_mtime
            if not ((self.max_total_bytes is not None and total > self.max_total_bytes)
                    or (oldest_kept is not None and last < oldest_kept)):
                break
            kept = _charge_lines(f)
            if kept:  # durable before the file goes (a crash in between may copy them twice, never lose them)
                _append_synced(charges, b"".join(kept))
            f.unlink()
            total += sum(map(len, kept)) - sizes[f]
            moved = f"; its {len(kept)} records of charged releases moved to {charges.name}" if kept else ""
            line = json.dumps(AuditRecord(
                "", "AuditRetention", peer="site", parameters={"deleted": f.name, "bytes": sizes[f],
                                                               "charges_kept": len(kept)},
                message=f"deleted the rotated audit file {f.name} (last record "
                        f"{datetime.fromtimestamp(last, timezone.utc).isoformat(timespec='seconds')}): beyond "
                        f"site.audit_max_total_bytes = {self.max_total_bytes} or site.audit_max_age_days = "
                        f"{self.max_age_days}{moved}").as_dict(), sort_keys=True) + "\n"
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)


def is_charge(entry: dict) -> bool:
    """Whether an audit entry records a release the ledger charged: a privacy cost (the paper protocol's mu), an
    ``epsilon_charged`` (histogram, survival, boyd) or a secagg unmask that ``charged``; a replay charges nothing."""
    parameters = entry.get("parameters") or {}
    return bool(entry.get("privacy_cost")) or bool(parameters.get("epsilon_charged")) or \
        parameters.get("charged") is True


def _charge_lines(path: Path) -> list[bytes]:
    """The lines of an audit file that record charged releases (:func:`is_charge`), as written."""
    kept = []
    with path.open("rb") as f:
        for line in f:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and is_charge(entry):
                kept.append(line if line.endswith(b"\n") else line + b"\n")
    return kept


def _append_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def charges_path(path) -> Path:
    """The file that keeps an audit log's records of charged releases once their rotated files are deleted."""
    path = Path(path)
    return path.with_name(path.name + ".charges")


def _rotated(path: Path) -> list[Path]:
    prefix = path.name + "."
    return sorted(p for p in path.parent.glob(prefix + "*")
                  if p.name[len(prefix):].isdigit()) if path.parent.exists() else []


def audit_files(path) -> list[Path]:
    """The files of an audit log, oldest records first: the kept charges (:func:`charges_path`), the rotated
    files, then the current file (those that exist)."""
    path = Path(path)
    charges = charges_path(path)
    return ([charges] if charges.exists() else []) + _rotated(path) + ([path] if path.exists() else [])


def read_audit(path, *, last: int | None = None) -> list[dict]:
    """The records of an audit log and its rotated files, oldest first (only the last ``last`` if given)."""
    lines: deque | list = deque(maxlen=last) if last else []
    for file in audit_files(path):
        with file.open(encoding="utf-8") as f:
            lines.extend(line for line in f if line.strip())
    return [json.loads(line) for line in lines]
