"""``dsroc-site backup`` and ``restore``: a consistent copy of every file in ``state/`` and its audited return."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

from ..interceptors.audit import AuditLog, AuditRecord, audit_files
from .ledger_head import write_head
from .state import (SIGNING_KEY_FILE, StateError, StateMarker, check_state, serving_lock, sqlite_state_id, utc_now)

__all__ = ["MANIFEST", "backup_state", "restore_state"]

#: The backup's table of contents: site, state id, time and the SHA-256 of every file.
MANIFEST = "manifest.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _private_copy(src: Path, dst: Path) -> None:
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out, open(src, "rb") as f:
        shutil.copyfileobj(f, out)


def backup_state(config, destination) -> dict:
    """Copy the site's state to the new folder ``destination``; returns the manifest.

    Each SQLite file is copied with SQLite's online backup API (a consistent snapshot even while the
    daemon writes), the signing key and the audit log files as they are; ``manifest.json`` lists
    every file with its SHA-256. Refused when the state is damaged (:func:`check_state`) or absent.
    The backup is written to the site's audit log.
    """
    check_state(config)
    state_dir, destination = config.state_dir, Path(destination)
    stores = sorted(state_dir.glob("*.sqlite")) if state_dir.is_dir() else []
    if not stores:
        raise StateError(f"{state_dir}: no state to back up (the site has not served yet)")
    if destination.exists() and any(destination.iterdir()):
        raise FileExistsError(f"{destination} exists and is not empty; back up into a new folder")
    destination.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in stores:
        os.close(os.open(destination / path.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        source, target = sqlite3.connect(f"file:{path}?mode=ro", uri=True), sqlite3.connect(destination / path.name)
        try:
            source.backup(target)
        finally:
            source.close()
            target.close()
    ids = {sqlite_state_id(destination / p.name) for p in stores}
    state_id = ids.pop() if len(ids) == 1 else None
    AuditLog.for_config(config).write(AuditRecord(  # before the log is copied: the backup holds its own record
        "", "BackupState", peer="dsroc-site backup (site administrator)",
        parameters={"to": str(destination.resolve()), "state_id": state_id}))
    others = [state_dir / SIGNING_KEY_FILE] if (state_dir / SIGNING_KEY_FILE).exists() else []
    for path in others + audit_files(config.audit_path):
        _private_copy(path, destination / path.name)
    manifest = {"site": config.name, "state_id": state_id, "created": utc_now(),
                "files": {p.name: _sha256(p) for p in sorted(destination.iterdir())}}
    (destination / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _verified_manifest(config, backup: Path) -> dict:
    try:
        manifest = json.loads((backup / MANIFEST).read_text(encoding="utf-8"))
        files = dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StateError(f"{backup}: not a dsroc-site backup ({MANIFEST} unreadable: {exc})") from None
    if manifest.get("site") != config.name:
        raise StateError(f"{backup}: a backup of site {manifest.get('site')!r}, not of {config.name!r}")
    for name, digest in files.items():
        path = backup / name
        if Path(name).name != name or not path.is_file() or _sha256(path) != digest:
            raise StateError(f"{backup}: {name} is missing or differs from the backup's manifest (damaged backup)")
        if name.endswith(".sqlite"):
            try:
                found = sqlite_state_id(path)
            except sqlite3.DatabaseError as exc:
                raise StateError(f"{backup}: {name} is not a sound SQLite database ({exc})") from None
            if found != manifest["state_id"]:
                raise StateError(f"{backup}: {name} is of another state than the backup's manifest")
    if not any(name.endswith(".sqlite") for name in files):
        raise StateError(f"{backup}: the backup holds no ledger")
    return manifest


def restore_state(config, backup) -> tuple[dict, Path | None]:
    """Put a backup (from :func:`backup_state`) in place of the site's state; returns its manifest and where the old state went.

    Checks the backup (manifest, hashes, SQLite integrity, site name), refuses while a daemon serves
    the state, moves the current ``state/`` aside (``state.replaced-TIME``), copies the backup in,
    writes the marker for the restored state and records the restore in its audit log (the replaced
    state's audit log, when there is one, is kept instead of the backup's older copy). Releases after
    the backup was made are forgotten: their budget counts as unspent.
    """
    backup = Path(backup)
    manifest = _verified_manifest(config, backup)
    lock = serving_lock(config)
    try:
        state_dir = config.state_dir
        moved = None
        if any(state_dir.iterdir()):
            moved = state_dir.with_name(f"{state_dir.name}.replaced-{utc_now().replace(':', '')}")
            os.rename(state_dir, moved)
            state_dir.mkdir(mode=0o700)
        # the audit log of the replaced state is newer than the backup's: it is kept (append-only evidence)
        kept_logs = {p.name for p in audit_files(moved / config.audit_path.name)} if moved else set()
        for name in manifest["files"]:
            if name not in kept_logs:
                _private_copy(backup / name, state_dir / name)
        for name in kept_logs:
            _private_copy(moved / name, state_dir / name)
        try:
            old = StateMarker.read(config.state_marker_path)
        except StateError:  # a damaged marker is replaced too
            old = None
        public = ""
        if (state_dir / SIGNING_KEY_FILE).exists():
            from ..security.signing import load_signing_key, public_key_text

            public = public_key_text(load_signing_key(state_dir / SIGNING_KEY_FILE))
        kept = tuple(sorted(n for n in manifest["files"] if n.endswith(".sqlite"))) + ((SIGNING_KEY_FILE,) if public else ())
        StateMarker(config.name, manifest["state_id"], kept, public,
                    old.first_served if old else manifest["created"]).write(config.state_marker_path)
        write_head(config)  # the administrator chose this older ledger: its head is where the site stands now
        AuditLog.for_config(config).write(AuditRecord(
            "", "RestoreState", peer="dsroc-site restore (site administrator)",
            parameters={"backup": str(backup.resolve()), "backup_created": manifest["created"],
                        "state_id": manifest["state_id"], "replaced_state_moved_to": str(moved) if moved else None},
            message="releases after the backup was made are no longer in the ledger"))
    finally:
        lock.close()
    check_state(config)
    return manifest, moved
