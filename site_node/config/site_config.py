"""What a site configuration holds: listen address, TLS, analysts, privacy policy, datasets, and the state's paths."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "ConfigError",
    "is_loopback",
    "TlsConfig",
    "Policy",
    "AnalystConfig",
    "DatasetConfig",
    "SiteConfig",
    "SENSITIVITY_RULES",
    "PROTOCOLS",
    "SPACINGS",
    "FORMATS",
    "source_identity",
]

SENSITIVITY_RULES = ("value", "range", "model")
PROTOCOLS = ("histogram", "paper", "boyd", "secagg")
SPACINGS = ("equal", "logit")
FORMATS = ("csv", "parquet", "sql")


class ConfigError(ValueError):
    """A configuration problem; the message names the file and the key."""


@dataclass(frozen=True)
class TlsConfig:
    """Server certificate and key; with ``client_ca`` the site requires client certificates (mutual TLS)."""

    cert: Path
    key: Path
    client_ca: Path | None = None


@dataclass(frozen=True)
class Policy:
    """The site's privacy policy (SPEC section 3)."""

    privacy_level: int = 5
    max_epsilon: float = 10.0
    max_delta: float = 0.01
    budget_epsilon: float = 20.0
    budget_delta: float = 0.05
    sensitivity: str = "range"
    sensitivity_value: float | None = None
    model_sensitivity_bins: int = 10
    max_glm_evaluations: int = 30
    max_thresholds: int = 100
    max_chunk_scores: int = 65536
    max_survivor_scores: int = 20_000_000
    max_survivor_uploads: int = 25
    max_models: int = 1
    threshold_steps: int = 100
    protocols: tuple[str, ...] = ("histogram",)
    histogram_bins: tuple[int, ...] = (5, 8, 10, 12, 20, 50, 100, 200)
    histogram_spacings: tuple[str, ...] = ("equal", "logit")
    histogram_logit_range: tuple[float, float] = (0.0001, 0.9999)
    # secagg: the largest number of other sites that may collude with the analyst while this site's
    # guarantee still holds, and the fewest sites a round may have.
    secagg_colluders: int = 0
    secagg_min_sites: int = 3
    # Subgroups (policy.strata): the columns a histogram release may be stratified by, each with its public cut
    # points, as ((column, (cut, ...)), ...); and the most cells per class of one histogram release (bins x
    # strata, or bins x bins of a joint release of two models).
    strata: tuple[tuple[str, tuple[float, ...]], ...] = ()
    histogram_max_cells: int = 400
    # Survival releases: the public interior time edges a release's time bins may use (empty: the site serves no
    # survival release) and the most time bins of one release (its interior edges plus one).
    survival_time_edges: tuple[float, ...] = ()
    survival_max_time_bins: int = 24
    # Uno's C: the largest truncation time tau it may be reported at (0: no limit) and the smallest censoring
    # survival G(tau-) of the released histogram it may be reported with (0: none). Published for the analyst
    # library, which refuses a larger tau before any hold and truncates tau where G falls below the minimum; tau is
    # post-processing of the release, never sent to the site (docs/site.md, docs/privacy.md).
    survival_max_tau: float = 0.0
    survival_min_censoring_survival: float = 0.0
    # Budget holds (PrepareRelease, secagg masks) of one analyst on one population: at most this many unexpired,
    # holding at most this epsilon composed (None: half the budget; a first validation's holds are always allowed),
    # and holds that end unused (expired or cancelled) spend at most this many seconds of hold time an hour.
    max_holds_per_analyst: int = 4
    max_held_epsilon: float | None = None
    hold_seconds_per_hour: float = 300.0

    @property
    def held_epsilon_cap(self) -> float:
        """The epsilon one analyst's holds may keep from the others beyond its first validation's:
        ``max_held_epsilon``, by default half the budget's epsilon."""
        return self.budget_epsilon / 2.0 if self.max_held_epsilon is None else self.max_held_epsilon

    def strata_cuts(self, column: str) -> tuple[float, ...] | None:
        """The cut points of a stratifiable column (None when the policy does not list it)."""
        return dict(self.strata).get(column)


@dataclass(frozen=True)
class AnalystConfig:
    """An analyst: the SHA-256 hash of their bearer token, the datasets they may use ("*" = all) and the
    serial (hexadecimal) of the client certificate issued to them, which ``analyst revoke`` puts on the CRL."""

    name: str
    token_sha256: str
    datasets: tuple[str, ...]
    client_cert_serial: str = ""

    def may_use(self, dataset: str) -> bool:
        """Whether this analyst may use ``dataset``."""
        return "*" in self.datasets or dataset in self.datasets


@dataclass(frozen=True)
class DatasetConfig:
    """A dataset: a CSV or Parquet file, or an SQL table/query through an SQLAlchemy URL."""

    name: str
    format: str
    path: Path | None = None
    url: str | None = None
    table: str | None = None
    query: str | None = None
    outcomes: tuple[str, ...] = ()
    scores: tuple[str, ...] = ()
    score_range: tuple[float, float] = (0.0, 1.0)
    model_columns: tuple[str, ...] | None = None
    sensitivity: str | None = None
    description: str = ""
    population: str | None = None
    strata_columns: tuple[str, ...] = ()  # the policy's stratifiable columns, kept in memory with the others
    time_columns: tuple[str, ...] = ()  # follow-up times (survival outcomes: the outcome is then the event indicator)

    def __post_init__(self):
        if self.population is None:
            object.__setattr__(self, "population", source_identity(self))


def source_identity(config: DatasetConfig) -> str:
    """The normalised identity of a dataset's source: the resolved file, or the database URL and table/query.

    Two entries with the same identity read the same patients, so by default they are one
    population: one budget, one history, one set of caps.
    """
    if config.format != "sql":
        return f"file:{Path(config.path).resolve()}"
    url = re.sub(r"//([^:/@]*):[^@/]*@", r"//\1@", config.url or "")  # the password is no part of the identity
    what = f"table={config.table}" if config.table is not None else "query=" + " ".join((config.query or "").split())
    return f"sql:{url}#{what}"


@dataclass(frozen=True)
class SiteConfig:
    """The whole site configuration; relative paths are resolved against the config file's folder."""

    name: str
    listen: str
    state_dir: Path
    policy: Policy
    analysts: dict[str, AnalystConfig]
    datasets: dict[str, DatasetConfig]
    tls: TlsConfig | None = None
    session_idle_seconds: float = 900.0
    max_sessions: int = 64
    max_sessions_per_analyst: int = 16
    max_message_bytes: int = 16 * 1024 * 1024
    audit_max_bytes: int = 64 * 1024 * 1024
    audit_max_total_bytes: int = 1024 * 1024 * 1024
    audit_max_age_days: float | None = None
    audit_unauthenticated_per_minute: int = 600
    calibration_cpu_seconds_per_minute: float = 6.0
    state_marker: Path | None = None
    noise_key: Path | None = None
    crl: Path | None = None
    peers: dict[str, str] = field(default_factory=dict)  # peer site name -> release-signing public key (base64)
    source: Path | None = field(default=None, compare=False)

    @property
    def ledger_path(self) -> Path:
        """The SQLite privacy ledger."""
        return self.state_dir / "ledger.sqlite"

    @property
    def signing_key_path(self) -> Path:
        """The site's Ed25519 release-signing key (created on first start; its public key goes to the peers)."""
        return self.state_dir / "release_signing.key"

    @property
    def approvals_path(self) -> Path:
        """The models approved for the paper protocol (``dsroc-site model approve``)."""
        return self.state_dir / "approvals.sqlite"

    @property
    def disclosure_path(self) -> Path:
        """The disclosure auditor's record of every count answered (per population)."""
        return self.state_dir / "disclosure.sqlite"

    @property
    def state_marker_path(self) -> Path:
        """The marker outside ``state/`` that records that the site served and which state it kept (:mod:`site_node.store.state`)."""
        if self.state_marker is not None:
            return self.state_marker
        if self.source is not None:
            return Path(self.source).resolve().with_suffix(".served")
        return self.state_dir.with_name(self.state_dir.name + ".served")

    @property
    def noise_key_path(self) -> Path:
        """The key that seals the paper protocol's releases in the ledger (:mod:`site_node.security.noise_key`); outside ``state/``."""
        if self.noise_key is not None:
            return self.noise_key
        return self.state_marker_path.with_suffix(".noise.key")

    @property
    def crl_path(self) -> Path:
        """The revoked client certificates, signed by the client CA (:mod:`site_node.security.crl`); outside ``state/``."""
        if self.crl is not None:
            return self.crl
        return self.state_marker_path.with_suffix(".crl")

    @property
    def audit_path(self) -> Path:
        """The append-only JSON-lines audit log."""
        return self.state_dir / "audit.jsonl"


def is_loopback(address: str) -> bool:
    """Whether a listen address ``host:port`` binds to the loopback interface only."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
