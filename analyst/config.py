"""Federation file: which sites to talk to, where, and with which credentials."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ["SiteConfig", "load_federation_file"]

_SITE_KEYS = {"name", "address", "token", "token_file", "ca_file", "client_cert", "client_key",
              "insecure", "server_name"}


@dataclass(frozen=True)
class SiteConfig:
    """How to reach one site.

    Parameters
    ----------
    name : str
        The site's name, used in progress messages, errors and the report.
    address : str
        ``host:port`` of the site daemon.
    token : str
        The analyst's bearer token for this site.
    ca_file : Path, optional
        CA certificate that signed the site's server certificate. Required unless ``insecure``.
    client_cert, client_key : Path, optional
        Client certificate and key for mutual TLS (both or neither).
    insecure : bool
        Plain-text transport; only for local development, and only when set explicitly.
    server_name : str, optional
        Host name to verify in the server certificate when it differs from the address's host.
    """

    name: str
    address: str
    token: str
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    insecure: bool = False
    server_name: str | None = None

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str):
            raise ValueError("site 'name' must be a non-empty string")
        where = f"site '{self.name}'"
        host, sep, port = str(self.address).rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"{where}: 'address' must be host:port, got {self.address!r}")
        if not self.token or not isinstance(self.token, str):
            raise ValueError(f"{where}: a non-empty 'token' (or 'token_file') is required")
        if not isinstance(self.insecure, bool):
            raise ValueError(f"{where}: 'insecure' must be true or false")
        if not self.insecure and self.ca_file is None:
            raise ValueError(f"{where}: 'ca_file' is required for TLS (set insecure = true only for local tests)")
        if (self.client_cert is None) != (self.client_key is None):
            raise ValueError(f"{where}: 'client_cert' and 'client_key' must be given together")
        for key in ("ca_file", "client_cert", "client_key"):
            path = getattr(self, key)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"{where}: '{key}' file not found: {path}")

    @classmethod
    def from_mapping(cls, entry: Mapping[str, Any], *, base: Path | None = None) -> "SiteConfig":
        """Build a site from one ``[[sites]]`` table; relative paths are taken from ``base``."""
        name = entry.get("name", "?")
        unknown = set(entry) - _SITE_KEYS
        if unknown:
            raise ValueError(f"site '{name}': unknown key(s) {sorted(unknown)}; allowed: {sorted(_SITE_KEYS)}")
        base = base or Path.cwd()

        def path(key):
            value = entry.get(key)
            if value is None:
                return None
            p = Path(value).expanduser()
            return p if p.is_absolute() else base / p

        token = entry.get("token")
        token_file = path("token_file")
        if token is not None and token_file is not None:
            raise ValueError(f"site '{name}': give 'token' or 'token_file', not both")
        if token_file is not None:
            if not token_file.is_file():
                raise ValueError(f"site '{name}': 'token_file' not found: {token_file}")
            token = token_file.read_text(encoding="utf-8").strip()
        return cls(name=entry.get("name", ""), address=entry.get("address", ""), token=token or "",
                   ca_file=path("ca_file"), client_cert=path("client_cert"), client_key=path("client_key"),
                   insecure=entry.get("insecure", False), server_name=entry.get("server_name"))


def load_federation_file(path: str | Path) -> tuple[list[SiteConfig], dict[str, Any]]:
    """Read a federation TOML file.

    The file holds ``[[sites]]`` tables (see :class:`SiteConfig`) and an optional ``[options]``
    table (``timeout`` in seconds per call, ``retries`` on UNAVAILABLE).

    Returns
    -------
    sites : list of SiteConfig
    options : dict
    """
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"federation file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"federation file {path} is not valid TOML: {exc}") from None
    unknown = set(doc) - {"sites", "options"}
    if unknown:
        raise ValueError(f"federation file {path}: unknown top-level key(s) {sorted(unknown)}")
    entries = doc.get("sites")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"federation file {path}: needs at least one [[sites]] table")
    sites = [SiteConfig.from_mapping(e, base=path.parent) for e in entries]
    options = dict(doc.get("options", {}))
    bad = set(options) - {"timeout", "retries"}
    if bad:
        raise ValueError(f"federation file {path}: unknown [options] key(s) {sorted(bad)}")
    return sites, options
