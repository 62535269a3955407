"""The one writer of site configs for tests and benchmarks: a site folder with its data files and its site.toml."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Mapping

from ..interceptors.auth import hash_token

__all__ = ["POLICY", "DATASET", "tls_section", "write_site_config", "toml_text"]

#: A policy that serves every protocol and lets a test spend freely; a test names only what it changes.
POLICY = {"protocols": ["histogram", "paper", "boyd", "secagg"], "privacy_level": 5, "max_epsilon": 10.0,
          "max_delta": 0.05, "budget_epsilon": 200.0, "budget_delta": 0.05}
#: The columns of a dataset written from a frame, unless the call says others.
DATASET = {"outcomes": ["y"], "scores": ["pred"]}


def tls_section(pki, *, mutual: bool = True) -> dict:
    """The ``[tls]`` table of a site serving with a development PKI's server certificate (``mutual``: clients
    need a certificate of its CA too)."""
    return {"cert": str(pki.server_cert), "key": str(pki.server_key), **({"client_ca": str(pki.ca_cert)} if mutual else {})}


def write_site_config(directory, *, name: str | None = None, frames: Mapping | None = None,
                      dataset: Mapping = DATASET, datasets: Mapping | None = None, policy: Mapping | None = None,
                      analysts: Mapping, tls=None, peers: Mapping[str, str] | None = None,
                      site: Mapping | None = None, data_format: str = "csv") -> Path:
    """Write ``directory/site.toml`` and the data files of its datasets; return the config's path.

    Parameters
    ----------
    directory : path
        The site's folder (created); the state goes to ``directory/state``.
    name : str, optional
        ``site.name``; default the folder's name.
    frames : mapping of str to DataFrame, optional
        One dataset each, written to ``data/<name>.csv`` (or ``.parquet``) with the columns of ``dataset``.
    dataset : mapping
        The entry of a dataset written from a frame, apart from its path.
    datasets : mapping, optional
        More ``[datasets.NAME]`` entries as they are; one named like a frame replaces the frame's entry.
    policy : mapping, optional
        What differs from :data:`POLICY`.
    analysts : mapping of str to str or mapping
        Analyst name to its token (allowed every dataset), or to its whole ``[analysts.NAME]`` entry.
    tls : mapping or DevPki, optional
        The ``[tls]`` table, or a development PKI for :func:`tls_section`; none: a site that serves only
        ``--insecure``.
    peers : mapping of str to str, optional
        Peer site name to its release-signing public key text.
    site : mapping, optional
        More keys of ``[site]`` (``listen`` is ``127.0.0.1:0`` unless given).
    data_format : {"csv", "parquet"}
    """
    directory = Path(directory)
    (directory / "data").mkdir(parents=True, exist_ok=True)
    entries = {}
    for table, frame in (frames or {}).items():
        path = Path("data") / f"{table}.{data_format}"
        if data_format == "csv":
            frame.to_csv(directory / path, index=False)
        elif data_format == "parquet":
            frame.to_parquet(directory / path)
        else:
            raise ValueError(f"data_format must be 'csv' or 'parquet', got {data_format!r}")
        entries[table] = {"path": path.as_posix(), **dataset}
    entries.update(datasets or {})
    data = {
        "site": {"name": name or directory.name, "listen": "127.0.0.1:0", **(site or {})},
        "policy": {**POLICY, **(policy or {})},
        "analysts": {who: entry if isinstance(entry, Mapping) else {"token_sha256": hash_token(entry), "datasets": ["*"]}
                     for who, entry in analysts.items()},
        "datasets": entries,
    }
    if tls:
        data["tls"] = dict(tls) if isinstance(tls, Mapping) else tls_section(tls)
    if peers:
        data["peers"] = {peer: {"public_key": key} for peer, key in peers.items()}
    config = directory / "site.toml"
    config.write_text(toml_text(data), encoding="utf-8")
    return config


def toml_text(tables: Mapping, *, _prefix: str = "") -> str:
    """``tables`` as TOML with each array on one line (``scores = ["pred"]``), as a person writes a site config,
    so that a test may edit the text as it would edit a hand-written file."""
    scalars = {k: v for k, v in tables.items() if not isinstance(v, Mapping)}
    lines = [f"[{_prefix}]"] if _prefix and scalars else []
    lines += [f"{_key(k)} = {_value(v)}" for k, v in scalars.items()]
    text = "\n".join(lines) + ("\n\n" if lines else "")
    for k, v in tables.items():
        if isinstance(v, Mapping):
            text += toml_text(v, _prefix=f"{_prefix}.{_key(k)}" if _prefix else _key(k))
    return text


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _value(value) -> str:
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"a site config holds finite numbers, got {value!r}")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML value for {type(value).__name__}")
