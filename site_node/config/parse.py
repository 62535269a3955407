"""Reading a site configuration: the TOML file checked key by key, errors naming the file and the dotted key."""

from __future__ import annotations

import math
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..security.signing import parse_public_key
from .site_config import (FORMATS, PROTOCOLS, SENSITIVITY_RULES, SPACINGS, AnalystConfig, ConfigError, DatasetConfig,
                          Policy, SiteConfig, TlsConfig, source_identity)

__all__ = ["load_config", "parse_config"]


def load_config(path) -> SiteConfig:
    """Read and validate a site config file.

    Raises
    ------
    ConfigError
        Naming the file and the key, for a missing file, bad TOML, or any invalid value.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return parse_config(data, source=path)


class _Reader:
    """Typed access to one TOML table, with errors naming the file and the dotted key."""

    def __init__(self, table: Any, prefix: str, source: str):
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: {prefix or 'top level'} must be a table")
        self.table, self.prefix, self.source = table, prefix, source
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def fail(self, name: str, rule: str):
        raise ConfigError(f"{self.source}: {self.key(name)}: {rule}")

    def get(self, name: str, kind, default=..., *, rule: str = ""):
        self.used.add(name)
        if name not in self.table:
            if default is ...:
                self.fail(name, "is required")
            return default
        value = self.table[name]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            self.fail(name, f"must be {rule or kind.__name__}, got {value!r}")
        return value

    def positive(self, name: str, kind, default):
        value = self.get(name, kind, default)
        if value is not None and not (math.isfinite(value) and value > 0):
            self.fail(name, f"must be a positive number, got {value!r}")
        return value

    def strings(self, name: str, default=...):
        value = self.get(name, list, default, rule="a list of strings")
        if value is None:
            return None
        if not all(isinstance(v, str) and v for v in value):
            self.fail(name, f"must be a list of non-empty strings, got {value!r}")
        return tuple(value)

    def sub(self, name: str, default=...) -> "_Reader | None":
        value = self.get(name, dict, default, rule="a table")
        return None if value is None else _Reader(value, self.key(name), self.source)

    def done(self):
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            raise ConfigError(f"{self.source}: {self.key(unknown[0])}: unknown key (typo?)")


def _path(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def parse_config(data: dict, *, source: Path | None = None) -> SiteConfig:
    """Validate a parsed TOML document (see :func:`load_config`)."""
    src = str(source) if source is not None else "<config>"
    base = source.resolve().parent if source is not None else Path.cwd()
    top = _Reader(data, "", src)

    site = top.sub("site")
    name = site.get("name", str)
    listen = site.get("listen", str, "127.0.0.1:50051")
    if ":" not in listen:
        site.fail("listen", f"must be host:port, got {listen!r}")
    state_dir = _path(base, site.get("state_dir", str, "state"))
    idle = site.positive("session_idle_seconds", float, 900.0)
    max_sessions = site.positive("max_sessions", int, 64)
    per_analyst = site.positive("max_sessions_per_analyst", int, min(16, max_sessions))
    max_bytes = site.positive("max_message_bytes", int, 16 * 1024 * 1024)
    audit_max_bytes = site.positive("audit_max_bytes", int, 64 * 1024 * 1024)
    audit_total = site.positive("audit_max_total_bytes", int, 1024 * 1024 * 1024)
    if audit_total < 2 * audit_max_bytes:
        site.fail("audit_max_total_bytes", f"must be at least twice site.audit_max_bytes ({2 * audit_max_bytes})")
    audit_age = site.positive("audit_max_age_days", float, None)
    audit_rate = site.positive("audit_unauthenticated_per_minute", int, 600)
    calibration_cpu = site.positive("calibration_cpu_seconds_per_minute", float, 6.0)
    marker = site.get("state_marker", str, None)
    noise_key = site.get("noise_key", str, None)
    crl = site.get("crl", str, None)
    site.done()

    tls = None
    tls_reader = top.sub("tls", None)
    if tls_reader is not None:
        ca = tls_reader.get("client_ca", str, None)
        tls = TlsConfig(
            cert=_path(base, tls_reader.get("cert", str)),
            key=_path(base, tls_reader.get("key", str)),
            client_ca=_path(base, ca) if ca else None,
        )
        tls_reader.done()

    policy = _parse_policy(top.sub("policy", {}))

    analysts = {}
    for analyst_name, table in top.get("analysts", dict, {}, rule="a table of analysts").items():
        a = _Reader(table, f"analysts.{analyst_name}", src)
        digest = a.get("token_sha256", str).lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            a.fail("token_sha256", "must be the 64-hex-digit SHA-256 of the token (dsroc-site init prints one)")
        serial = a.get("client_cert_serial", str, "").lower()
        if serial and any(c not in "0123456789abcdef" for c in serial):
            a.fail("client_cert_serial", "must be the certificate's serial number in hexadecimal")
        analysts[analyst_name] = AnalystConfig(analyst_name, digest, a.strings("datasets"), serial)
        a.done()
    hashes = [a.token_sha256 for a in analysts.values()]
    if len(set(hashes)) != len(hashes):
        raise ConfigError(f"{src}: analysts: two analysts share a token hash")

    datasets = {}
    for ds_name, table in top.get("datasets", dict, {}, rule="a table of datasets").items():
        datasets[ds_name] = replace(_parse_dataset(_Reader(table, f"datasets.{ds_name}", src), ds_name, base),
                                    strata_columns=tuple(c for c, _ in policy.strata))
    peers = {}
    for peer_name, table in top.get("peers", dict, {}, rule="a table of peer sites").items():
        r = _Reader(table, f"peers.{peer_name}", src)
        key = r.get("public_key", str)
        try:
            parse_public_key(key)
        except ValueError as exc:
            r.fail("public_key", str(exc))
        peers[peer_name] = key
        r.done()
    top.done()
    if name in peers:
        raise ConfigError(f"{src}: peers.{name}: the site itself is not a peer (its own key is {state_dir}/release_signing.key)")

    # A streamed chunk of doubles (8 bytes each, plus framing) must fit in one message.
    if policy.max_chunk_scores * 8 + 1024 > max_bytes:
        raise ConfigError(f"{src}: policy.max_chunk_scores: {policy.max_chunk_scores} scores do not fit in "
                          f"site.max_message_bytes = {max_bytes}")
    for a in analysts.values():
        for ds in a.datasets:
            if ds != "*" and ds not in datasets:
                raise ConfigError(f"{src}: analysts.{a.name}.datasets: unknown dataset {ds!r}")
    identities: dict[str, DatasetConfig] = {}
    for ds in datasets.values():
        first = identities.setdefault(source_identity(ds), ds)
        if first.population != ds.population:
            raise ConfigError(f"{src}: datasets.{ds.name}.population: reads the same source as dataset {first.name!r} "
                              "but names another population; entries over the same patients must share one budget")
    for ds in datasets.values():
        rule = ds.sensitivity or policy.sensitivity
        if rule == "value" and policy.sensitivity_value is None:
            raise ConfigError(f"{src}: policy.sensitivity_value: is required by the sensitivity rule 'value'")
    return SiteConfig(
        name=name, listen=listen, state_dir=state_dir, policy=policy, analysts=analysts, datasets=datasets,
        tls=tls, session_idle_seconds=idle, max_sessions=max_sessions,
        max_sessions_per_analyst=per_analyst, max_message_bytes=max_bytes, audit_max_bytes=audit_max_bytes,
        audit_max_total_bytes=audit_total, audit_max_age_days=audit_age, audit_unauthenticated_per_minute=audit_rate,
        calibration_cpu_seconds_per_minute=calibration_cpu,
        state_marker=_path(base, marker) if marker else None, noise_key=_path(base, noise_key) if noise_key else None,
        crl=_path(base, crl) if crl else None, peers=peers, source=source,
    )


def _parse_policy(p: _Reader) -> Policy:
    d = Policy()
    q = p.positive("privacy_level", int, d.privacy_level)
    values = {name: p.positive(name, float, getattr(d, name))
              for name in ("max_epsilon", "max_delta", "budget_epsilon", "budget_delta")}
    for name in ("max_delta", "budget_delta"):
        if values[name] >= 1:
            p.fail(name, f"must lie strictly between 0 and 1, got {values[name]!r}")
    if values["max_epsilon"] > values["budget_epsilon"]:
        p.fail("max_epsilon", "must not exceed policy.budget_epsilon")
    if values["max_delta"] > values["budget_delta"]:
        p.fail("max_delta", "must not exceed policy.budget_delta")
    rule = p.get("sensitivity", str, d.sensitivity)
    if rule not in SENSITIVITY_RULES:
        p.fail("sensitivity", f"must be one of {SENSITIVITY_RULES}, got {rule!r}")
    policy = Policy(
        privacy_level=q,
        sensitivity=rule,
        sensitivity_value=p.positive("sensitivity_value", float, None),
        model_sensitivity_bins=p.positive("model_sensitivity_bins", int, d.model_sensitivity_bins),
        max_glm_evaluations=p.positive("max_glm_evaluations", int, d.max_glm_evaluations),
        max_thresholds=p.positive("max_thresholds", int, d.max_thresholds),
        max_chunk_scores=p.positive("max_chunk_scores", int, d.max_chunk_scores),
        max_survivor_scores=p.positive("max_survivor_scores", int, d.max_survivor_scores),
        max_survivor_uploads=p.positive("max_survivor_uploads", int, d.max_survivor_uploads),
        max_models=p.positive("max_models", int, d.max_models),
        threshold_steps=p.positive("threshold_steps", int, d.threshold_steps),
        protocols=_choices(p, "protocols", PROTOCOLS, d.protocols),
        histogram_bins=_bin_counts(p, d.histogram_bins),
        histogram_spacings=_choices(p, "histogram_spacings", SPACINGS, d.histogram_spacings),
        histogram_logit_range=_logit_range(p, d.histogram_logit_range),
        secagg_colluders=_count(p, "secagg_colluders", d.secagg_colluders, 0),
        secagg_min_sites=_count(p, "secagg_min_sites", d.secagg_min_sites, 2),
        strata=_strata(p),
        histogram_max_cells=p.positive("histogram_max_cells", int, d.histogram_max_cells),
        survival_time_edges=_time_edges(p),
        survival_max_time_bins=_count(p, "survival_max_time_bins", d.survival_max_time_bins, 2),
        survival_max_tau=_tau_limit(p, d.survival_max_tau),
        survival_min_censoring_survival=_min_censoring(p, d.survival_min_censoring_survival),
        max_holds_per_analyst=_count(p, "max_holds_per_analyst", d.max_holds_per_analyst, 1),
        max_held_epsilon=p.positive("max_held_epsilon", float, d.max_held_epsilon),
        hold_seconds_per_hour=p.positive("hold_seconds_per_hour", float, d.hold_seconds_per_hour),
        **values,
    )
    if policy.secagg_min_sites < policy.secagg_colluders + 1:
        p.fail("secagg_min_sites", "must exceed policy.secagg_colluders (a round needs a site outside any coalition)")
    if policy.survival_max_time_bins > 1000:  # K x 2 x J cells per release: keep a release a few megabytes
        p.fail("survival_max_time_bins", f"must be at most 1000, got {policy.survival_max_time_bins}")
    if policy.model_sensitivity_bins < 2:
        p.fail("model_sensitivity_bins", "must be at least 2")
    if policy.max_thresholds < 2:
        p.fail("max_thresholds", "must be at least 2")
    # 8 bytes a double plus framing: a chunk must fit well inside the message-size limit.
    if policy.max_chunk_scores > 1_000_000:
        p.fail("max_chunk_scores", "must be at most 1000000 (8 MB per message)")
    p.done()
    return policy


def _strata(p: _Reader) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """``[policy.strata]``: column = [cut points], each list non-empty, finite and strictly increasing."""
    table = p.sub("strata", {})
    out = []
    for column in table.table:
        cuts = table.get(column, list, rule="a list of cut points")
        if (not cuts or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in cuts)
                or any(b <= a for a, b in zip(cuts, cuts[1:]))):
            table.fail(column, f"must be a non-empty list of finite, strictly increasing cut points, got {cuts!r}")
        out.append((column, tuple(float(v) for v in cuts)))
    return tuple(sorted(out))


def _time_edges(p: _Reader) -> tuple[float, ...]:
    """``policy.survival_time_edges``: the public interior time grid, finite, > 0 and strictly increasing (empty:
    no survival release)."""
    edges = p.get("survival_time_edges", list, [], rule="a list of time edges")
    if (not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in edges)
            or any(b <= a for a, b in zip(edges, edges[1:]))):
        p.fail("survival_time_edges", f"must be a list of finite, positive, strictly increasing times, got {edges!r}")
    return tuple(float(v) for v in edges)


def _tau_limit(p: _Reader, default: float) -> float:
    """``policy.survival_max_tau``: the largest truncation time of Uno's C, finite and >= 0 (0: no limit)."""
    value = p.get("survival_max_tau", float, default, rule="a time (0: no limit)")
    if not math.isfinite(value) or value < 0:
        p.fail("survival_max_tau", f"must be a finite time >= 0 (0: no limit), got {value!r}")
    return float(value)


def _min_censoring(p: _Reader, default: float) -> float:
    """``policy.survival_min_censoring_survival``: the smallest censoring survival of Uno's C, in [0, 1)."""
    value = p.get("survival_min_censoring_survival", float, default, rule="a probability in [0, 1)")
    if not 0.0 <= value < 1.0:
        p.fail("survival_min_censoring_survival", f"must be a probability in [0, 1) (0: no minimum), got {value!r}")
    return float(value)


def _count(p: _Reader, name: str, default: int, least: int) -> int:
    value = p.get(name, int, default)
    if isinstance(value, bool) or value < least:
        p.fail(name, f"must be an integer of at least {least}, got {value!r}")
    return value


def _choices(p: _Reader, name: str, allowed: tuple[str, ...], default: tuple[str, ...]) -> tuple[str, ...]:
    values = p.strings(name, default)
    if not values or len(set(values)) != len(values) or not set(values) <= set(allowed):
        p.fail(name, f"must be a non-empty list of distinct values from {list(allowed)}, got {list(values)!r}")
    return tuple(values)


def _bin_counts(p: _Reader, default: tuple[int, ...]) -> tuple[int, ...]:
    values = p.get("histogram_bins", list, list(default), rule="a list of bin counts")
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and 2 <= v <= 10_000 for v in values):
        p.fail("histogram_bins", f"must be a non-empty list of integers from 2 to 10000, got {values!r}")
    return tuple(sorted(set(values)))


def _logit_range(p: _Reader, default: tuple[float, float]) -> tuple[float, float]:
    values = p.get("histogram_logit_range", list, list(default), rule="a list [min, max]")
    if (len(values) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            or not 0.0 < values[0] < values[1] < 1.0):
        p.fail("histogram_logit_range", f"must be [min, max] with 0 < min < max < 1, got {values!r}")
    return float(values[0]), float(values[1])


def _parse_dataset(d: _Reader, name: str, base: Path) -> DatasetConfig:
    fmt = d.get("format", str, None)
    path = d.get("path", str, None)
    url = d.get("url", str, None)
    if fmt is None:
        fmt = "sql" if url else Path(path or "").suffix.lstrip(".").lower() or None
        if fmt is None:
            d.fail("format", f"is required (one of {FORMATS}) when neither path nor url says it")
    if fmt not in FORMATS:
        d.fail("format", f"must be one of {FORMATS}, got {fmt!r}")
    table, query = d.get("table", str, None), d.get("query", str, None)
    if fmt == "sql":
        if not url:
            d.fail("url", "is required for format 'sql' (an SQLAlchemy URL, e.g. sqlite:///data.db)")
        if (table is None) == (query is None):
            d.fail("table", "give exactly one of table or query for format 'sql'")
        if path is not None:
            d.fail("path", "is not used by format 'sql' (use url)")
    elif not path:
        d.fail("path", f"is required for format {fmt!r}")
    rng = d.get("score_range", list, [0.0, 1.0], rule="a list [min, max]")
    if len(rng) != 2 or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in rng) or rng[0] >= rng[1]:
        d.fail("score_range", f"must be [min, max] with finite min < max, got {rng!r}")
    rule = d.get("sensitivity", str, None)
    if rule is not None and rule not in SENSITIVITY_RULES:
        d.fail("sensitivity", f"must be one of {SENSITIVITY_RULES}, got {rule!r}")
    outcomes = d.strings("outcomes")
    if not outcomes:
        d.fail("outcomes", "must name at least one outcome column")
    cfg = DatasetConfig(
        name=name,
        format=fmt,
        path=_path(base, path) if path else None,
        url=_sqlite_url(url, base) if url else None,
        table=table,
        query=query,
        outcomes=outcomes,
        scores=d.strings("scores", ()),
        score_range=(float(rng[0]), float(rng[1])),
        model_columns=d.strings("model_columns", None),
        sensitivity=rule,
        description=d.get("description", str, ""),
        population=d.get("population", str, None),
        time_columns=d.strings("time_columns", ()),
    )
    if cfg.population == "":
        d.fail("population", "must be a non-empty name (entries with the same population share one privacy budget)")
    overlap = set(cfg.outcomes) & (set(cfg.scores) | set(cfg.model_columns or ()))
    if overlap:
        d.fail("outcomes", f"an outcome column cannot also be a score or model column: {sorted(overlap)}")
    overlap = set(cfg.time_columns) & (set(cfg.outcomes) | set(cfg.scores) | set(cfg.model_columns or ()))
    if overlap:
        d.fail("time_columns", f"a time column cannot also be an outcome, score or model column: {sorted(overlap)}")
    d.done()
    return cfg


def _sqlite_url(url: str, base: Path) -> str:
    """Resolve a relative SQLite file URL (``sqlite:///rel.db``) against the config file's folder."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and url != "sqlite:///:memory:":
        rest = url[len(prefix):]
        if rest and not Path(rest).is_absolute():
            return prefix + str(base / rest)
    return url
