"""``dsroc-site backup`` and ``dsroc-site restore``: the site's state copied out and put back (both audited)."""

from __future__ import annotations

__all__ = ["add_state_parsers"]


def _cmd_backup(args) -> int:
    from ..config import load_config
    from ..store.backup import backup_state

    manifest = backup_state(load_config(args.config), args.destination)
    print(f"backed up state {manifest['state_id']} of site {manifest['site']!r} to {args.destination}: "
          f"{', '.join(manifest['files'])}")
    print("Keep it where the site's disks are not (it holds the ledger, the signing key and the audit log).")
    return 0


def _cmd_restore(args) -> int:
    from ..config import load_config
    from ..store.backup import restore_state

    manifest, moved = restore_state(load_config(args.config), args.backup)
    print(f"restored state {manifest['state_id']} of site {manifest['site']!r} from the backup of {manifest['created']}")
    if moved:
        print(f"the state it replaced was moved to {moved}")
    print("Releases after the backup was made are not in the restored ledger: the budget they spent counts as "
          "unspent. Compare with the audit log of the replaced state before serving again.")
    return 0


def add_state_parsers(sub) -> None:
    """Add ``backup`` and ``restore`` to the ``dsroc-site`` subcommands."""
    p = sub.add_parser(
        "backup", help="copy the site's state (ledger, approvals, disclosure records, signing key, audit log)",
        description="Copy every file of the site's state/ into DESTINATION (a new folder, mode 0700): each SQLite "
        "file through SQLite's online backup API (consistent while the daemon serves), the release-signing key and "
        "the audit log, with manifest.json (SHA-256 of each file). Refused when the state is damaged. Run it "
        "daily (e.g. from cron or a systemd timer) and keep the copies off the site's disks.")
    p.add_argument("destination", metavar="DESTINATION", help="new (or empty) folder for the backup")
    p.add_argument("--config", required=True, help="site TOML file")
    p.set_defaults(func=_cmd_backup)

    p = sub.add_parser(
        "restore", help="put a backup in place of a lost or damaged state (stop the daemon first)",
        description="Check BACKUP (manifest, SHA-256 of each file, SQLite integrity, site name), move the current "
        "state/ aside (state.replaced-TIME), copy the backup in and record the restore in the audit log. Refused "
        "while a daemon serves the state. Releases after the backup was made are forgotten: back up often.")
    p.add_argument("backup", metavar="BACKUP", help="folder written by dsroc-site backup")
    p.add_argument("--config", required=True, help="site TOML file")
    p.set_defaults(func=_cmd_restore)
