"""``dsroc-site init``: a commented example config, sample data, development certificates and the analyst's files."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import tomli_w
from scipy.special import expit

from ..config import load_config
from ..interceptors.auth import hash_token, new_token
from ..security.crl import certificate_serial
from ..security.pki import DevPki, generate_dev_pki
from ..security.signing import ensure_signing_key, public_key_text

__all__ = ["CONFIG_TEMPLATE", "analyst_folder", "ca_folder", "FederationInit", "InitResult", "federation_document", "free_port", "init_federation",
           "init_site", "link_peers", "name_seed",
           "sample_dataset"]

def analyst_folder(site_folder, analyst: str) -> Path:
    """The analyst's folder beside (never inside) the site folder: ``<site folder>-<analyst>``."""
    site_folder = Path(site_folder)
    return site_folder.parent / f"{site_folder.resolve().name}-{analyst}"


def ca_folder(site_folder) -> Path:
    """Where ``init`` keeps the development CA's private key: beside the site folder, ``<site folder>-ca``."""
    site_folder = Path(site_folder)
    return site_folder.parent / f"{site_folder.resolve().name}-ca"

CONFIG_TEMPLATE = """\
# dsroc site configuration (written by `dsroc-site init`). Relative paths are relative to this file.
# Reference: docs/site.md.

[site]
name = "{name}"                 # shown to analysts
listen = "{listen}"        # host:port; use 0.0.0.0:PORT to accept connections from other hosts
state_dir = "state"             # ledger.sqlite (privacy ledger) and audit.jsonl (audit log) go here
session_idle_seconds = 900      # sessions expire after this much inactivity
max_sessions = 64               # open sessions at once (all analysts)
max_sessions_per_analyst = 16   # open sessions at once of one analyst (so one cannot lock out the others)
max_message_bytes = 16777216    # gRPC message-size limit, both directions

[tls]                           # TLS is on by default; `serve --insecure` is for local development only
cert = "pki/server.crt"
key = "pki/server.key"
client_ca = "pki/ca.crt"        # remove this line to accept clients without certificates (no mutual TLS)

[policy]
protocols = ["histogram"]       # "histogram": every answer is one differentially private release (docs/privacy.md);
                                # add "paper" to also serve the paper's protocol (q-protected answers, not DP)
                                # and "boyd" for Boyd's DP AUC/AP release (bounded DP: discloses the site's n)
                                # and "secagg" for the histogram counts summed under secure aggregation
secagg_colluders = 0            # secagg: other sites that may collude with the analyst (the guarantee holds)
secagg_min_sites = 3            # secagg: the fewest sites of a round
histogram_bins = [5, 8, 10, 12, 20, 50, 100, 200]  # bin counts a histogram release may use (public grid)
histogram_spacings = ["equal", "logit"] # equal width on the score range, or on the logit scale
histogram_logit_range = [0.0001, 0.9999]  # range of logit-spaced grids
# survival_time_edges = [180.0, 365.0, 730.0, 1095.0]  # survival: the public time grid (empty: no survival release)
# survival_max_time_bins = 24   # survival: most time bins of one release
# survival_max_tau = 0.0        # survival: the largest truncation time of Uno's C (0: no limit)
# survival_min_censoring_survival = 0.0  # survival: Uno's C only where the censoring survival G >= this
privacy_level = 5               # q (paper protocol): every released aggregate covers at least q patients
max_epsilon = 10.0              # largest epsilon of one noisy release
max_delta = 0.01                # largest delta of one noisy release
budget_epsilon = 20.0           # total privacy budget per population (datasets over the same patients share it),
budget_delta = 0.05             # composed over every release by the site's accountant
sensitivity = "range"           # l2-sensitivity rule: "value" (sensitivity_value below), "range" (score
                                # range width, a formal bound) or "model" (data-derived estimate, GLMs only)
# sensitivity_value = 0.1
model_sensitivity_bins = 10     # histogram bins of the "model" rule
max_glm_evaluations = 30        # ROC-GLM theta-evaluations per uploaded survivor function
max_thresholds = 100            # largest ROC-GLM grid (and number of calibration bins)
max_chunk_scores = 65536        # scores per streamed message
max_survivor_scores = 20000000  # largest uploaded survivor function
max_survivor_uploads = 25       # different survivor functions accepted per dataset, score source, outcome, class
threshold_steps = 100           # confusion thresholds and explicit calibration edges lie on this many steps
                                # of the score range (0.01 for probabilities): refusals cannot be bisected
max_models = 1                  # different analyst GLMs accepted per dataset, ever. Raise with care: answers about two
                                # models whose scores differ for one patient only (e.g. their Brier sums) differ by
                                # that patient's contribution, which reveals the patient's outcome

# One table per analyst. Only the SHA-256 of the token is stored; the token itself was printed once.
[analysts.{analyst}]
token_sha256 = "{token_hash}"
datasets = ["sample"]           # datasets this analyst may use ("*" = all)
client_cert_serial = "{serial}"   # their client certificate: put on the CRL by dsroc-site analyst revoke

# One table per dataset: format "csv", "parquet" or "sql".
[datasets.sample]
description = "synthetic sample data written by dsroc-site init"
format = "csv"
path = "data/sample.csv"
outcomes = ["y"]                # outcome columns (labels 0/1)
scores = ["pred"]               # score columns (predictions of a model already applied here)
score_range = [0.0, 1.0]        # declared range of the score columns
model_columns = ["age", "size", "nodes", "grade"]   # columns an analyst's GLM may read
# sensitivity = "model"         # per-dataset override of policy.sensitivity
# time_columns = ["time"]       # survival: follow-up times (>= 0); a session with time reads the outcome as the event
# population = "cohort-2024"    # entries over the same patients must share one; the default is the file or table

# An SQL dataset (SQLite file or PostgreSQL through SQLAlchemy):
# [datasets.warehouse]
# format = "sql"
# url = "postgresql+psycopg://dsroc@db.hospital.local/clinical"
# query = "SELECT age, size, nodes, grade, y FROM validation_cohort"
# outcomes = ["y"]
"""


@dataclass(frozen=True)
class InitResult:
    """What ``init`` wrote.

    Attributes
    ----------
    config, dataset : Path
        ``site.toml`` and the sample data.
    pki : DevPki
        The development certificates.
    analyst, token : str
        The first analyst's name and bearer token (the config stores only its SHA-256).
    snippet : Path
        ``<site folder>-<analyst>/federation.toml``: a ``[[sites]]`` table that ``dsroc validate
        --federation`` accepts as is.
    token_file : Path
        ``<site folder>-<analyst>/<analyst>.token`` (mode 0600), read by the snippet.
    """

    config: Path
    dataset: Path
    pki: DevPki
    analyst: str
    token: str
    snippet: Path
    token_file: Path
    name: str
    address: str

    def site_entry(self, folder) -> dict:
        """The analyst's ``[[sites]]`` table for this site, its paths relative to ``folder``."""
        adir = self.snippet.parent
        rel = lambda p: os.path.relpath(p, folder)  # noqa: E731
        return {"name": self.name, "address": self.address, "token_file": rel(self.token_file),
                "ca_file": rel(adir / "ca.crt"), "client_cert": rel(adir / "client.crt"),
                "client_key": rel(adir / "client.key")}


@dataclass(frozen=True)
class FederationInit:
    """What ``init --federation N`` wrote: the sites and the analyst's federation file."""

    sites: tuple[InitResult, ...]
    federation: Path


def name_seed(name: str) -> int:
    """A seed derived from a site name, so that sites with different names get different sample patients."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")


def sample_dataset(n: int = 400, *, seed: int = 0) -> pd.DataFrame:
    """Synthetic patients: four features, a 0/1 outcome ``y`` and a model's prediction ``pred``."""
    rng = np.random.default_rng(seed)
    age = rng.normal(55, 10, n).round()
    size = rng.gamma(2.0, 12.0, n).round(1)
    nodes = rng.poisson(3, n)
    grade = rng.integers(1, 4, n)
    eta = -4.0 + 0.02 * age + 0.03 * size + 0.15 * nodes + 0.4 * grade
    y = rng.binomial(1, expit(eta))
    pred = expit(eta + rng.normal(0, 0.5, n)).round(4)
    return pd.DataFrame({"age": age, "size": size, "nodes": nodes, "grade": grade, "y": y, "pred": pred})


def _analyst_address(listen: str, hosts) -> str:
    """Where the analyst connects: the listen address, with a wildcard host replaced by the certificate's first name."""
    host, _, port = listen.rpartition(":")
    if host in ("0.0.0.0", "::", "[::]", ""):
        host = hosts[0]
    return f"{host}:{port}"


def federation_document(entries, *, comment: str = "") -> str:
    """A federation TOML file (``[[sites]]`` tables) as text; the single place that writes one."""
    header = "".join(f"# {line}\n" for line in comment.splitlines())
    return header + tomli_w.dumps({"sites": list(entries)})


def write_private(path: Path, data: bytes) -> None:
    """Write a secret (token, key) readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def init_site(directory, *, name: str = "hospital", listen: str | None = None, analyst: str = "analyst1",
              hosts=("localhost", "127.0.0.1"), overwrite: bool = False, n_patients: int = 400) -> InitResult:
    """Write a ready-to-serve site folder and the analyst's files.

    Writes ``site.toml``, ``data/sample.csv`` (synthetic patients drawn from a seed derived from
    ``name``, so that two sites never hold the same patients) and ``pki/`` (CA certificate, server
    certificate and key) into ``directory``, the folder the site serves from; beside it
    ``<directory>-ca/ca.key`` (the CA's private key, which signs certificates: ``dsroc-site analyst
    add`` reads it) and the analyst's folder ``<directory>-<analyst>/``: a federation snippet (one
    ``[[sites]]`` table), the token file (mode 0600), a copy of the CA certificate and the client
    certificate and key, to hand to the analyst as one folder. Nothing in ``directory`` can sign a
    certificate or authenticate as an analyst.

    Parameters
    ----------
    directory : path
        Created if missing; refuses to overwrite an existing ``site.toml`` unless ``overwrite``.
    name, listen, analyst : str
        Site name, listen address (default: a port free now on 127.0.0.1) and the first analyst's name.
    hosts : sequence of str
        Names the server certificate is valid for.
    n_patients : int
        Rows of the sample data.
    """
    directory = Path(directory)
    config = directory / "site.toml"
    if config.exists() and not overwrite:
        raise FileExistsError(f"{config} exists; choose another folder (or --force)")
    listen = listen or f"127.0.0.1:{free_port()}"
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"listen must be host:port, got {listen!r}")
    (directory / "data").mkdir(parents=True, exist_ok=True)
    dataset = directory / "data" / "sample.csv"
    sample_dataset(n_patients, seed=name_seed(name)).to_csv(dataset, index=False)
    adir = analyst_folder(directory, analyst)
    pki = generate_dev_pki(directory / "pki", hosts=hosts, client_name=analyst, ca_key_dir=ca_folder(directory),
                           client_dir=adir)
    token = new_token()
    config.write_text(CONFIG_TEMPLATE.format(name=name, listen=listen, analyst=analyst, token_hash=hash_token(token),
                                             serial=certificate_serial(pki.client_cert)), encoding="utf-8")
    link_peers([config])  # the site's release-signing key (dsroc-site key prints its public half for peers)
    # the analyst's folder: everything needed to connect, nothing the site keeps secret (no CA or server key)
    token_file = adir / f"{analyst}.token"
    write_private(token_file, (token + "\n").encode())
    shutil.copyfile(pki.ca_cert, adir / "ca.crt")
    result = InitResult(config, dataset, pki, analyst, token, adir / "federation.toml", token_file, name,
                        _analyst_address(listen, hosts))
    result.snippet.write_text(federation_document(
        [result.site_entry(adir)],
        comment=f"Analyst's federation entry for site {name!r} (written by dsroc-site init).\n"
                "Use as is: dsroc validate --federation THIS_FILE ...; or copy the [[sites]] table into a\n"
                "federation file with other sites (paths are relative to the file that holds them)."),
        encoding="utf-8")
    return result


# Listening ports are taken below Linux's ephemeral range (32768-60999): a port the kernel hands out for bind(0)
# is one it also hands to outgoing connections, so between picking it and the daemon's bind another process's
# connection could take it ("address already in use").
LOCAL_PORTS = (20000, 32767)


def free_port() -> int:
    """A TCP port free now on 127.0.0.1 (for a local site's ``listen`` address), outside the ephemeral range."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randint(*LOCAL_PORTS)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # the range is full: any port the kernel gives
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_federation(directory, n_sites: int, *, analyst: str = "analyst1", overwrite: bool = False) -> FederationInit:
    """Set up ``n_sites`` local sites (``site1`` ... on free loopback ports) and the analyst's ``federation.toml``.

    Each site gets its own folder (as :func:`init_site`), its own certificates, token and sample
    patients; ``DIRECTORY/federation.toml`` lists them all for ``dsroc validate --federation``.
    """
    if isinstance(n_sites, bool) or not isinstance(n_sites, int) or not 1 <= n_sites <= 50:
        raise ValueError(f"--federation needs a number of sites from 1 to 50, got {n_sites!r}")
    directory = Path(directory)
    federation = directory / "federation.toml"
    if federation.exists() and not overwrite:
        raise FileExistsError(f"{federation} exists; choose another folder (or --force)")
    sites = tuple(init_site(directory / f"site{k}", name=f"site{k}", listen=f"127.0.0.1:{free_port()}",
                            analyst=analyst, overwrite=overwrite) for k in range(1, n_sites + 1))
    link_peers([r.config for r in sites])  # each site lists the others' release-signing keys
    federation.write_text(federation_document(
        [r.site_entry(directory) for r in sites],
        comment=f"Analyst's federation of {n_sites} local sites (written by dsroc-site init --federation)."),
        encoding="utf-8")
    return FederationInit(sites, federation)


def link_peers(config_paths) -> dict[str, str]:
    """Make the sites of ``config_paths`` (site TOML files) peers of each other; returns name -> public key.

    Creates each site's signing key if needed and appends a ``[peers.NAME]`` table for every other site
    to each file (files that already have a ``[peers`` table are refused). For development federations
    (tests, the demo, ``dsroc-site init``); a real federation exchanges public keys between administrators.
    """
    configs = [load_config(p) for p in config_paths]
    keys = {c.name: public_key_text(ensure_signing_key(c.signing_key_path)) for c in configs}
    for path, config in zip(config_paths, configs):
        text = Path(path).read_text(encoding="utf-8")
        if "[peers" in text:
            raise ValueError(f"{path}: already has peers; edit them by hand")
        tables = "".join(f'\n[peers.{json.dumps(name)}]\npublic_key = "{key}"\n'
                         for name, key in keys.items() if name != config.name)
        Path(path).write_text(text.rstrip("\n") + "\n" + tables, encoding="utf-8")
    return keys
