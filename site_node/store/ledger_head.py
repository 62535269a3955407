"""The ledger's head outside ``state/``: how many releases it has committed and the latest one's id, never to go back.

The state marker tells this site's state from a new or foreign one, but an older copy of the same state (a file
put back, a restored snapshot of the disk, a ``-wal`` file lost after a crash) carries the same state id and
holds fewer releases: its budget would count as unspent. So after every release's commit the ledger writes its
*head* to a file beside the marker (``<marker>.ledger-head``; the marker's folder, not ``state/``), and every
start compares the ledger with it: a ledger with fewer releases than the head, or another release at the head's
place, is refused. The head is written after the commit (itself synced), so it is never ahead of a ledger that
survived: a crash between the two leaves it one release behind, which passes. Only ``restore`` (the
administrator's explicit, audited choice of an older state) and ``--reset-state`` move it back.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LedgerHead", "HeadWriter", "head_path", "ledger_head", "head_problem", "write_head"]

log = logging.getLogger("dsroc.site")


def head_path(config) -> Path:
    """Where the site keeps its ledger's head: beside the state marker."""
    marker = config.state_marker_path
    return marker.with_name(marker.name + ".ledger-head")


@dataclass(frozen=True)
class LedgerHead:
    """The number of releases a ledger committed and the id of the latest (empty when there is none)."""

    releases: int
    release_id: str

    @classmethod
    def read(cls, path) -> "LedgerHead | None":
        """The head at ``path``, or None if there is none; ``ValueError`` if it is unreadable."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(int(data["releases"]), str(data["release_id"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: the ledger head is unreadable ({exc})") from None

    def write(self, path) -> None:
        """Write the head durably and atomically (synced, then renamed over the old one)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"releases": self.releases, "release_id": self.release_id}, f)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


class HeadWriter:
    """What the ledger calls after each release's commit (with its lock held, so heads are written in order)."""

    def __init__(self, path):
        self.path = Path(path)

    def __call__(self, releases: int, release_id: str) -> None:
        try:
            LedgerHead(int(releases), str(release_id)).write(self.path)
        except OSError as exc:  # the release is committed: a head left behind only weakens the next start's check
            log.error("ledger head %s not advanced (%s): a rollback to before this release would go unnoticed",
                      self.path, exc)


def ledger_head(ledger_path) -> LedgerHead:
    """The head of the ledger file at ``ledger_path`` (read-only): its number of releases and the latest's id."""
    db = sqlite3.connect(f"file:{Path(ledger_path)}?mode=ro", uri=True)
    try:
        (count,) = db.execute("SELECT COUNT(*) FROM releases").fetchone()
        row = db.execute("SELECT release_id FROM releases ORDER BY rowid DESC LIMIT 1").fetchone()
        return LedgerHead(count, row[0] if row else "")
    finally:
        db.close()


def write_head(config) -> None:
    """Set the head to the site's ledger as it is (at a start that passed the check, and after a restore)."""
    if config.ledger_path.exists():
        LedgerHead.write(ledger_head(config.ledger_path), head_path(config))


def head_problem(config) -> str | None:
    """Why the site's ledger is behind its head (an older copy, or a lost ``-wal``), or None."""
    path = head_path(config)
    try:
        head = LedgerHead.read(path)
    except ValueError as exc:
        return str(exc)
    if head is None or head.releases == 0:
        return None
    name = config.ledger_path.name
    try:
        db = sqlite3.connect(f"file:{config.ledger_path}?mode=ro", uri=True)
        try:
            (count,) = db.execute("SELECT COUNT(*) FROM releases").fetchone()
            row = db.execute("SELECT release_id FROM releases ORDER BY rowid LIMIT 1 OFFSET ?",
                             (head.releases - 1,)).fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        return f"{name} cannot be read ({exc})"
    plural = "" if count == 1 else "s"
    if count < head.releases:
        return (f"{name} holds {count} release{plural} where this site had committed {head.releases} (the latest "
                f"{head.release_id[:8]}, head {path}): an older copy of the state, or its -wal file lost after a "
                "crash, whose budget spent would count as unspent")
    if row[0] != head.release_id:
        return (f"{name} holds another release at place {head.releases} than the one this site committed there "
                f"({head.release_id[:8]}, head {path}): not the ledger this site kept")
    return None
