"""Fixtures: five real TLS site servers on loopback over synthetic data, and helpers to build federations."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from analyst import Federation, SiteConfig
from site_node.rules.approvals import approve_model
from site_node.security.pki import generate_dev_pki
from site_node.cli.init import link_peers
from site_node.testing import running_server, tls_section, write_site_config

TOKEN = "analyst-test-token"
N_SITES, N_PER_SITE = 5, 400
#: the score is a logistic model of the feature x, so a GLM sent by the analyst reproduces it
MODEL = {"link": "logit", "intercept": -0.3, "coefficients": {"x": 1.1}}


def site_frames(seed: int = 11) -> list[pd.DataFrame]:
    """Five sites' data; site s0 has exactly 3 patients with a score in the top calibration bin."""
    rng = np.random.default_rng(seed)
    frames = []
    for k in range(N_SITES):
        y = rng.integers(0, 2, N_PER_SITE)
        x = rng.normal(1.3 * y - 0.4, 1.0)
        if k == 0:
            # keep all but three scores below 0.9 (expit(x) < 0.9 <=> x < logit(0.9))
            cap = (np.log(0.9 / 0.1) + 0.3) / 1.1
            high = x >= cap - 0.05
            x[high] = rng.uniform(cap - 1.5, cap - 0.05, high.sum())
            x[:3] = cap + np.array([0.3, 0.5, 0.7])  # distinct: ties would be broken by the noise
        frames.append(pd.DataFrame({"x": x, "pred": expit(-0.3 + 1.1 * x), "y": y}))
    # no ties: noise of any size would break a tie and move a placement value by 1/(2n)
    assert np.unique(np.concatenate([f["pred"] for f in frames])).size == N_SITES * N_PER_SITE
    return frames


def write_site(directory: Path, name: str, frame: pd.DataFrame, pki, *, sensitivity_value: float = 1e-9,
               q: int = 5, policy: dict | None = None, site: dict | None = None) -> Path:
    """A site config with TLS, rule 'value' and a generous budget (``policy``, ``site``: what differs)."""
    return write_site_config(
        directory, name=name, frames={"test": frame}, analysts={"tester": TOKEN}, tls=tls_section(pki, mutual=False),
        dataset={"outcomes": ["y"], "scores": ["pred"], "model_columns": ["x"]}, site={"state_dir": "state", **(site or {})},
        policy={"privacy_level": q, "sensitivity": "value", "sensitivity_value": sensitivity_value, **(policy or {})})


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    return generate_dev_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def five_sites(tmp_path_factory, pki):
    """Five running sites; yields (frames, addresses, servers)."""
    root = tmp_path_factory.mktemp("sites")
    frames = site_frames()
    with contextlib.ExitStack() as stack:
        configs = [write_site(root / f"s{k}", f"s{k}", f, pki) for k, f in enumerate(frames)]
        link_peers(configs)  # each site knows the others' release-signing keys
        for config in configs:  # the sites' administrators approved the analysts' model (paper protocol)
            approve_model(config, MODEL)
        servers = [stack.enter_context(running_server(config)) for config in configs]
        yield frames, [s.bound_address for s in servers], servers


def federation(addresses, pki, *, token: str = TOKEN, **options) -> Federation:
    return Federation([SiteConfig(name=f"s{k}", address=a, token=token, ca_file=pki.ca_cert)
                       for k, a in enumerate(addresses)], **options)


def check_schema(report: dict) -> None:
    """Validate a report dictionary (``ValidationResult.to_dict`` or report.json) against the packaged JSON Schema."""
    import json

    import jsonschema

    from analyst.result import schema_path

    schema = json.loads(schema_path().read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(report)


def default_fine() -> np.ndarray:
    """The first release's explicit grid under the default policy (logit range [0.0001, 0.9999]), by hand: the score
    range's ends, the 10-bin logit grid's edges outside [0.005, 0.995] and the 100-bin grid's inside."""
    from scipy.special import expit, logit

    core, tails = (np.linspace(logit(0.0001), logit(0.9999), k + 1) for k in (100, 10))
    inside = (core >= logit(0.005) - 1e-9) & (core <= logit(0.995) + 1e-9)
    return np.concatenate([[0.0], np.sort(expit(np.concatenate([core[inside], tails[(tails < logit(0.005))
                                                                                  | (tails > logit(0.995))]]))), [1.0]])


def balanced_edges(s, y, fine, n_bins: int, share=None) -> np.ndarray:
    """The quantile grid's second-stage edges by brute force: the mean of the two classes' CDFs of the clipped scores
    ``s`` (or ``share`` at the fine inner edges) interpolated linearly between the fine edges, at each edge of the
    default policy's logit grids (bins 5, 8, 10, 12, 20, 50, 100, 200 on [0.0001, 0.9999]) inside the fine grid; for
    each level ``k / n_bins`` the edge whose share is nearest, once each, within the score range [0, 1]."""
    from scipy.special import expit, logit

    c = np.clip(s, fine[0], fine[-1])
    if share is None:
        share = np.array([0.5 * np.mean(c[y == 0] < e) + 0.5 * np.mean(c[y == 1] < e) for e in fine[1:-1]])
    allowed = np.unique(np.concatenate([expit(np.linspace(logit(0.0001), logit(0.9999), k + 1))
                                        for k in (5, 8, 10, 12, 20, 50, 100, 200)]))
    allowed = allowed[(allowed > fine[0]) & (allowed < fine[-1])]
    at = np.interp(allowed, fine, np.concatenate([[0.0], share, [1.0]]))
    picked = sorted({int(np.argmin(np.abs(at - q))) for q in np.arange(1, n_bins) / n_bins})
    return np.array([0.0, *allowed[picked], 1.0])


def ledger_counts(config) -> tuple[int, int]:
    """(releases, unexpired holds) in a site's ledger file (``config``: its site.toml), read directly."""
    import sqlite3
    import time

    with sqlite3.connect(config.parent / "state" / "ledger.sqlite") as db:
        releases = db.execute("SELECT COUNT(*) FROM releases").fetchone()[0]
        holds = db.execute("SELECT COUNT(*) FROM reservations WHERE expires > ?", (time.time(),)).fetchone()[0]
    return releases, holds


def _sibling(name: str):
    """A helper module next to this conftest (test modules cannot import siblings under importlib mode)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"analyst_tests_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def helpers():
    """The helper functions of this conftest (test modules cannot import it under importlib mode)."""
    class H:
        pass

    h = H()
    h.TOKEN, h.MODEL, h.site_frames, h.write_site, h.federation = TOKEN, MODEL, site_frames, write_site, federation
    h.check_schema, h.balanced_edges, h.default_fine = check_schema, balanced_edges, default_fine
    h.ledger_counts = ledger_counts
    h.results = _sibling("results")  # results of both protocols built in process: paper_result, histogram_result_of
    return h
