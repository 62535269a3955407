"""``dsroc-site analyst add|list|revoke``: hand out and withdraw an analyst's access, applied live by a running daemon."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from pathlib import Path

__all__ = ["add_analyst", "add_analyst_parser", "revoke_analyst"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _reload_running(config) -> str:
    """Signal the daemon serving ``config`` (SIGHUP) to reload its analysts; a sentence saying what happened."""
    from ..store.state import serving_pid

    pid = serving_pid(config)
    if pid is None:
        return "no daemon serves this site now: the change applies when it starts"
    os.kill(pid, signal.SIGHUP)
    return f"the running daemon (pid {pid}) was told to reload (SIGHUP): the change applies to its next call"


def _audit(config, call: str, parameters: dict) -> None:
    from ..interceptors.audit import AuditLog, AuditRecord

    AuditLog.for_config(config).write(AuditRecord("", call, peer="dsroc-site analyst (site administrator)",
                                                  parameters=parameters))


def _table_span(lines: list[str], name: str) -> tuple[int, int] | None:
    """The lines of the ``[analysts.NAME]`` table (header to the line before the next table), or None."""
    header = re.compile(r'^\s*\[\s*analysts\s*\.\s*("?)' + re.escape(name) + r'\1\s*\]\s*(#.*)?$')
    for start, line in enumerate(lines):
        if header.match(line):
            end = start + 1
            while end < len(lines) and not lines[end].lstrip().startswith("["):
                end += 1
            return start, end
    return None


def _rewrite(config, text: str):
    """Write the new config text if it loads; returns the new config (``ConfigError`` leaves the file as it was)."""
    from ..config import load_config

    path = Path(config.source)
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text, encoding="utf-8")
    try:
        load_config(tmp)
    except Exception:
        tmp.unlink()
        raise
    os.replace(tmp, path)
    return load_config(path)


def add_analyst(config, name: str, *, datasets=None, out=None, ca_key=None, address=None) -> Path:
    """Add analyst ``name`` to the site of ``config``: a token, a client certificate of their own and their folder.

    Appends ``[analysts.NAME]`` (the token's SHA-256 and the datasets allowed, by default every dataset
    configured now) to the config file, writes the analyst's folder ``out`` (default: beside the site
    folder, ``<site folder>-NAME``, so that it never lies in the folder the site serves from): the token
    (mode 0600), the CA certificate, a client certificate and key issued for ``name`` with the site's
    CA key (``ca_key``, default ``<site folder>-ca/ca.key`` as ``init`` writes it) when the site requires mutual TLS, and
    ``federation.toml``. Audited; a running daemon reloads at once. Returns the folder.
    """
    from ..interceptors.auth import hash_token, new_token
    from ..security.crl import certificate_serial
    from ..security.pki import issue_client_certificate
    from .init import write_private, analyst_folder, federation_document

    if not _NAME.match(name):
        raise ValueError(f"analyst name {name!r}: use 1 to 64 letters, digits, '-' or '_'")
    if name in config.analysts:
        raise ValueError(f"{config.source}: analysts.{name}: exists already (revoke first to replace the token)")
    datasets = list(datasets) if datasets else sorted(config.datasets)
    folder = Path(config.source).resolve().parent
    out = Path(out) if out else analyst_folder(folder, name)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty; choose another --out")
    ca_key = _ca_key(config, ca_key)
    token = new_token()
    text = Path(config.source).read_text(encoding="utf-8").rstrip("\n")
    text += f'\n\n[analysts.{name}]\ntoken_sha256 = "{hash_token(token)}"\ndatasets = {json.dumps(datasets)}\n'
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    entry = {"name": config.name, "address": address or config.listen.replace("0.0.0.0", "localhost"),
             "token_file": f"{name}.token"}
    if config.tls is not None and config.tls.client_ca is not None:
        cert, _ = issue_client_certificate(config.tls.client_ca, ca_key, name, out)
        text += f'client_cert_serial = "{certificate_serial(cert)}"   # put on the CRL by analyst revoke\n'
        shutil.copyfile(config.tls.client_ca, out / "ca.crt")
        entry.update(ca_file="ca.crt", client_cert="client.crt", client_key="client.key")
    elif config.tls is not None:
        shutil.copyfile(config.tls.cert, out / "ca.crt")
        entry["ca_file"] = "ca.crt"
    write_private(out / f"{name}.token", (token + "\n").encode())
    (out / "federation.toml").write_text(federation_document(
        [entry], comment=f"Analyst {name!r}'s entry for site {config.name!r} (written by dsroc-site analyst add)."),
        encoding="utf-8")
    config = _rewrite(config, text + "\n")
    _audit(config, "AnalystAdd", {"analyst": name, "datasets": datasets, "token_sha256": hash_token(token),
                                  "client_certificate": (out / "client.crt").exists()})
    return out


def _ca_key(config, ca_key) -> Path:
    """The CA key that signs client certificates and the CRL: ``ca_key``, or where ``init`` keeps it.

    FileNotFoundError when the site uses mutual TLS and the key is not there.
    """
    from .init import ca_folder

    folder = Path(config.source).resolve().parent
    if ca_key is None:  # where init keeps it; sites made before that kept it in pki/
        ca_key = next((p for p in (ca_folder(folder) / "ca.key", folder / "pki" / "ca.key") if p.exists()),
                      ca_folder(folder) / "ca.key")
    ca_key = Path(ca_key)
    if config.tls is not None and config.tls.client_ca is not None and not ca_key.exists():
        raise FileNotFoundError(f"{ca_key}: the CA key that signs client certificates is not there; give --ca-key")
    return ca_key


def revoke_analyst(config, name: str, *, ca_key=None) -> None:
    """Remove ``[analysts.NAME]`` from the config file and put their client certificate on the site's CRL (audited).

    A running daemon refuses the analyst's token and certificate from its next call on. The CRL is
    signed with the CA key (``ca_key``, default where ``init`` keeps it); when the analyst has a
    certificate and the key is missing nothing changes (FileNotFoundError).
    """
    from ..security.crl import revoke_certificate

    lines = Path(config.source).read_text(encoding="utf-8").splitlines(keepends=True)
    span = _table_span(lines, name)
    if name not in config.analysts or span is None:
        raise ValueError(f"{config.source}: no analyst {name!r} (dsroc-site analyst list shows them)")
    revoked = config.analysts[name]
    serial = revoked.client_cert_serial if config.tls is not None and config.tls.client_ca is not None else ""
    key = _ca_key(config, ca_key) if serial else None
    crl_path = config.crl_path
    config = _rewrite(config, "".join(lines[:span[0]] + lines[span[1]:]))
    if name in config.analysts:
        raise ValueError(f"{config.source}: analysts.{name} is defined in a form this command cannot remove; edit it")
    if serial:
        revoke_certificate(crl_path, config.tls.client_ca, key, serial)
    _audit(config, "AnalystRevoke", {"analyst": name, "token_sha256": revoked.token_sha256,
                                     "client_cert_serial": serial})


def _cmd_analyst(args) -> int:
    from ..config import load_config

    config = load_config(args.config)
    if args.action == "add":
        out = add_analyst(config, args.name, datasets=args.datasets, out=args.out, ca_key=args.ca_key,
                          address=args.address)
        print(f"added analyst {args.name!r} to {config.source}")
        print(f"wrote {out}/ (token, CA certificate, client certificate and key, federation.toml): give it to the "
              "analyst over a safe channel and delete your copy")
        print(_reload_running(config))
    elif args.action == "revoke":
        revoke_analyst(config, args.name, ca_key=args.ca_key)
        print(f"revoked analyst {args.name!r} in {config.source}")
        print(_reload_running(config))
    else:
        for a in config.analysts.values():
            print(f"{a.name:<20} datasets {', '.join(a.datasets) or '(none)'}   token sha256 {a.token_sha256[:12]}...")
        if not config.analysts:
            print("no analysts: nobody can use this site (dsroc-site analyst add NAME)")
    return 0


def add_analyst_parser(sub) -> None:
    """Add ``analyst`` with its actions to the ``dsroc-site`` subcommands."""
    p = sub.add_parser(
        "analyst", help="add, list or revoke analysts (token, own client certificate, folder; applied live)",
        description="Hand out and withdraw access. 'add' writes the analyst's token hash into the config, issues a "
        "client certificate of their own (mutual TLS) with the site's CA key and writes their folder; 'revoke' "
        "removes them from the config and puts their certificate on the site's CRL (signed with the CA key). Both "
        "are audited, and a running daemon reloads its analysts and CRL at once (SIGHUP), so a revoked analyst's "
        "next call is refused, whatever token comes with their certificate.")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser("add", help="add an analyst and write their folder")
    a.add_argument("name", metavar="NAME")
    a.add_argument("--datasets", nargs="+", help="datasets they may use (default: every dataset configured now)")
    a.add_argument("--out", help="their folder (default: beside the site folder, SITEFOLDER-NAME)")
    a.add_argument("--ca-key", help="the CA key that signs client certificates (default: SITEFOLDER-ca/ca.key, as init writes it)")
    a.add_argument("--address", help="host:port the analyst connects to (default: the config's listen address)")
    r = actions.add_parser("revoke", help="remove an analyst and revoke their certificate (their next call is refused)")
    r.add_argument("name", metavar="NAME")
    r.add_argument("--ca-key", help="the CA key that signs the CRL (default: SITEFOLDER-ca/ca.key, as init writes it)")
    lst = actions.add_parser("list", help="the analysts and the datasets each may use")
    for q in (a, r, lst):
        q.add_argument("--config", required=True, help="site TOML file")
        q.set_defaults(func=_cmd_analyst)
