"""The site's state cannot be lost quietly: a marker outside ``state/`` remembers that the site served and which state it kept.

Everything that makes the privacy guarantee last lives in ``state/``: the ledger (budget spent), the
disclosure records, the model approvals and the release-signing key. If that folder were deleted,
emptied, replaced or damaged, a daemon that simply created a new one would start from a full budget.
So the first ``serve`` stamps a random state id into every SQLite file of ``state/`` and writes the
*marker* (``site.state_marker``, by default ``<config stem>.served`` next to the config file) naming
that id, the files and the signing key's public half. Every later ``serve`` and every read-only
command checks ``state/`` against the marker first and refuses, naming the file and the way out
(``dsroc-site restore BACKUP`` or ``serve --reset-state``, both audited), when it is missing, empty,
another site's or corrupt.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .ledger_head import head_path, head_problem, write_head

__all__ = ["StateError", "StateMarker", "SIGNING_KEY_FILE", "check_state", "mark_served", "open_state", "reset_state",
           "pid_file", "serving_lock", "serving_pid", "sqlite_state_id", "state_problem", "stamp_state_id", "utc_now", "write_pid_file"]

#: The release-signing key's file name inside ``state/`` (peers hold its public half).
SIGNING_KEY_FILE = "release_signing.key"
_TABLE = "dsroc_state"


class StateError(ValueError):
    """The site's state is missing, empty, foreign or damaged after it has served; the message says what to do."""


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class StateMarker:
    """What the marker file says: the state id, the files it covers and the signing key's public half."""

    site: str
    state_id: str
    files: tuple[str, ...]
    public_key: str
    first_served: str

    @classmethod
    def read(cls, path) -> "StateMarker | None":
        """The marker at ``path``, or None if there is none; ``StateError`` if it is unreadable."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(str(data["site"]), str(data["state_id"]), tuple(data["files"]), str(data["public_key"]),
                       str(data["first_served"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StateError(f"{path}: the state marker is unreadable ({exc}); it records that this site served "
                             "and which state it kept. Restore it from a backup (dsroc-site restore) or remove it "
                             "only if state/ is known to be this site's intact state") from None

    def write(self, path) -> None:
        """Write the marker atomically (a temporary file renamed over it)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"site": self.site, "state_id": self.state_id, "files": list(self.files),
                                   "public_key": self.public_key, "first_served": self.first_served},
                                  indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def sqlite_state_id(path) -> str | None:
    """The state id stamped in a SQLite file (None if unstamped); ``sqlite3.DatabaseError`` if not a sound database."""
    db = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    try:
        result = db.execute("PRAGMA quick_check").fetchone()[0]
        if result != "ok":
            raise sqlite3.DatabaseError(f"integrity check: {result}")
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (_TABLE,)).fetchone():
            return None
        row = db.execute(f"SELECT value FROM {_TABLE} WHERE key = 'state_id'").fetchone()
        return row[0] if row else None
    finally:
        db.close()


def stamp_state_id(path, state_id: str) -> None:
    """Write ``state_id`` into the SQLite file at ``path`` (a one-row table beside the store's own)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute(f"CREATE TABLE IF NOT EXISTS {_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute(f"INSERT OR REPLACE INTO {_TABLE} VALUES ('state_id', ?)", (state_id,))
    finally:
        db.close()


def _public_key(state_dir: Path) -> str:
    from ..security.signing import load_signing_key, public_key_text

    return public_key_text(load_signing_key(state_dir / SIGNING_KEY_FILE))


def _way_out(config) -> str:
    where = f" --config {config.source}" if config.source else ""
    return (f"restore the latest backup (dsroc-site restore BACKUP{where}), or, if there is none, start over with "
            f"dsroc-site serve{where} --reset-state, which forgets every privacy budget spent so far (audited)")


def state_problem(config) -> str | None:
    """What is wrong with the site's state against its marker (None if nothing, or if the site never served)."""
    marker = StateMarker.read(config.state_marker_path)
    state_dir = config.state_dir
    if marker is None:
        return None
    lead = (f"{state_dir}: this site served before (marker {config.state_marker_path}, first served "
            f"{marker.first_served}, state {marker.state_id[:8]})")
    if not state_dir.is_dir():
        return f"{lead} but its state folder is missing"
    for name in marker.files:
        path = state_dir / name
        if not path.exists():
            return f"{lead} but {name} is missing"
        if path.stat().st_size == 0:
            return f"{lead} but {name} is empty"
        if name == SIGNING_KEY_FILE:
            try:
                key = _public_key(state_dir)
            except (OSError, ValueError) as exc:
                return f"{lead} but {name} is not a readable signing key ({exc})"
            if key != marker.public_key:
                return f"{lead} but {name} is another key than the one its peers know"
            continue
        try:
            found = sqlite_state_id(path)
        except sqlite3.DatabaseError as exc:
            return f"{lead} but {name} is damaged: not a sound SQLite database ({exc})"
        if found != marker.state_id:
            what = "carries no state id (a new, empty file)" if found is None else f"is of another state ({found[:8]})"
            return f"{lead} but {name} {what}"
    behind = head_problem(config)
    return f"{lead} but {behind}" if behind else None


def check_state(config) -> None:
    """Raise :class:`StateError` (with the way out) if the site served before and its state is not what it kept."""
    problem = state_problem(config)
    if problem:
        raise StateError(f"{problem}. The site refuses to start from a fresh budget: {_way_out(config)}")


def mark_served(config) -> StateMarker:
    """Stamp every SQLite file of ``state/`` with the state id and write the marker (after the stores opened).

    Keeps the marker's id when there is one (checked by :func:`check_state` before), adopts the id a
    state folder already carries (a marker lost or a site from before markers), or draws a new one.
    """
    state_dir = config.state_dir
    marker = StateMarker.read(config.state_marker_path)
    stores = sorted(p.name for p in state_dir.glob("*.sqlite"))
    state_id = marker.state_id if marker else None
    if state_id is None:
        found = {sqlite_state_id(state_dir / name) for name in stores} - {None}
        state_id = found.pop() if len(found) == 1 else uuid.uuid4().hex
    for name in stores:
        stamp_state_id(state_dir / name, state_id)
    files = tuple(stores + ([SIGNING_KEY_FILE] if (state_dir / SIGNING_KEY_FILE).exists() else []))
    new = StateMarker(config.name, state_id, files, _public_key(state_dir) if SIGNING_KEY_FILE in files else "",
                      marker.first_served if marker else utc_now())
    if new != marker:
        new.write(config.state_marker_path)
    write_head(config)  # checked before: the ledger is at or past its head (a site from before heads gets one)
    return new


def open_state(config, *, reset: bool = False):
    """Lock the state folder (:func:`serving_lock`) and check it against the marker, or reset it; returns the lock.

    With ``reset`` a lost or damaged state is moved aside (:func:`reset_state`) and the reset is
    written to the new state's audit log; without it such a state raises :class:`StateError`.
    """
    if not reset:
        check_state(config)  # before the lock, which would create a missing folder
    lock = serving_lock(config)
    try:
        problem = state_problem(config)
        if reset:
            marker = StateMarker.read(config.state_marker_path)
            moved = reset_state(config)
            lock.close()
            lock = serving_lock(config)
            from ..interceptors.audit import AuditLog, AuditRecord

            AuditLog.for_config(config).write(AuditRecord(
                "", "ResetState", peer="dsroc-site serve --reset-state (site administrator)",
                parameters={"previous_state_id": marker.state_id if marker else None,
                            "moved_to": str(moved) if moved else None},
                message=problem or "no marker: the site had not served (or its marker was lost)"))
        else:
            check_state(config)
    except BaseException:
        lock.close()
        raise
    return lock


def reset_state(config) -> Path | None:
    """Move a lost or damaged state aside and forget the marker (``serve --reset-state``); the moved folder or None.

    Refused while the state is intact: a reset would hand every population a full budget again.
    """
    if state_problem(config) is None and StateMarker.read(config.state_marker_path) is not None:
        raise StateError(f"{config.state_dir}: the state is intact; --reset-state only replaces a lost or damaged "
                         "state (it would forget every privacy budget spent)")
    moved = None
    if config.state_dir.exists():
        moved = config.state_dir.with_name(f"{config.state_dir.name}.reset-{utc_now().replace(':', '')}")
        os.rename(config.state_dir, moved)
    config.state_marker_path.unlink(missing_ok=True)
    head_path(config).unlink(missing_ok=True)
    return moved


def pid_file(config) -> Path:
    """Where ``serve`` writes its process id (``state/daemon.pid``), for ``dsroc-site analyst`` to signal a reload."""
    return config.state_dir / "daemon.pid"


def write_pid_file(config) -> Path:
    """Write this process's id to :func:`pid_file` (removed when ``serve`` stops); returns the path."""
    path = pid_file(config)
    path.write_text(f"{os.getpid()}\n", encoding="utf-8")
    return path


def serving_pid(config) -> int | None:
    """The id of the daemon serving this state (its pid file, and it holds the state lock), or None."""
    try:
        pid = int(pid_file(config).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    try:
        serving_lock(config).close()  # free: nobody serves, the pid file is stale
        return None
    except StateError:
        return pid


def serving_lock(config):
    """Hold an exclusive lock on the state folder for as long as the returned file object stays open.

    ``serve`` holds it; ``restore`` and ``--reset-state`` take it too, so that they never move a state
    a running daemon writes to. ``StateError`` if another process holds it.
    """
    config.state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(config.state_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StateError(f"{config.state_dir}: another dsroc-site process is using this state (a daemon serving "
                         "it?); stop it first") from None
    return _Lock(fd)


class _Lock:
    """An open descriptor holding a ``flock``; :meth:`close` releases it (idempotent)."""

    def __init__(self, fd: int):
        self._fd = fd

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
