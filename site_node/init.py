"""``dsroc-site init``: a commented example config, a sample dataset, development certificates and a first token."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from .auth import hash_token, new_token
from .pki import DevPki, generate_dev_pki

__all__ = ["InitResult", "init_site", "sample_dataset", "CONFIG_TEMPLATE"]

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
privacy_level = 5               # q: every released aggregate covers at least q patients
max_epsilon = 10.0              # largest epsilon of one noisy release
max_delta = 0.01                # largest delta of one noisy release
budget_epsilon = 20.0           # total privacy budget per dataset (Gaussian-DP composition of all releases)
budget_delta = 0.05
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

# An SQL dataset (SQLite file or PostgreSQL through SQLAlchemy):
# [datasets.warehouse]
# format = "sql"
# url = "postgresql+psycopg://dsroc@db.hospital.local/clinical"
# query = "SELECT age, size, nodes, grade, y FROM validation_cohort"
# outcomes = ["y"]
"""


@dataclass(frozen=True)
class InitResult:
    """What ``init`` wrote."""

    config: Path
    dataset: Path
    pki: DevPki
    analyst: str
    token: str


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


def init_site(directory, *, name: str = "hospital", listen: str = "127.0.0.1:50051", analyst: str = "analyst1",
              hosts=("localhost", "127.0.0.1"), overwrite: bool = False) -> InitResult:
    """Write a ready-to-serve site folder: ``site.toml``, ``data/sample.csv``, ``pki/`` and a token.

    Parameters
    ----------
    directory : path
        Created if missing; refuses to overwrite an existing ``site.toml`` unless ``overwrite``.
    name, listen, analyst : str
        Site name, listen address and the first analyst's name.
    hosts : sequence of str
        Names the server certificate is valid for.
    """
    directory = Path(directory)
    config = directory / "site.toml"
    if config.exists() and not overwrite:
        raise FileExistsError(f"{config} exists; choose another folder")
    (directory / "data").mkdir(parents=True, exist_ok=True)
    dataset = directory / "data" / "sample.csv"
    sample_dataset().to_csv(dataset, index=False)
    pki = generate_dev_pki(directory / "pki", hosts=hosts, client_name=analyst)
    token = new_token()
    config.write_text(CONFIG_TEMPLATE.format(name=name, listen=listen, analyst=analyst,
                                             token_hash=hash_token(token)), encoding="utf-8")
    return InitResult(config, dataset, pki, analyst, token)
