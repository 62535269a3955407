"""Local benchmark federations: synthetic site data, site configs with TLS, daemons started and stopped."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

__all__ = ["ROOT", "EPSILON", "DELTA", "READY", "TOKEN", "site_data", "write_data", "site_configs", "write_sites",
           "write_dev_sites", "start_daemons", "stop"]

ROOT = Path(__file__).resolve().parents[2]  # the tree whose daemons are started by default
EPSILON, DELTA = 5.0, 0.01
READY = "datasets ready"  # the daemon's log message once its warm-up has read every dataset
TOKEN = "bench-token"


def site_data(n: int, k_sites: int, seed: int = 0):
    """Scores, labels and site of n patients (a logistic score, labels drawn from it)."""
    rng = np.random.default_rng([seed, n])
    pred = rng.uniform(0.0, 1.0, n)
    y = (rng.uniform(0.0, 1.0, n) < pred).astype(np.int8)
    site = np.arange(n) % k_sites
    return pred, y, site


def write_data(data_dir: Path, k_sites: int, sizes) -> None:
    """Each site's Parquet file per size n, ``data_dir/site{k}/n{n}.parquet`` (kept when already there)."""
    import pandas as pd

    for n in sizes:
        if all((data_dir / f"site{k}" / f"n{n}.parquet").exists() for k in range(k_sites)):
            continue
        pred, y, site = site_data(n, k_sites)
        for k in range(k_sites):
            (data_dir / f"site{k}").mkdir(parents=True, exist_ok=True)
            mine = site == k
            pd.DataFrame({"pred": pred[mine], "y": y[mine]}).to_parquet(data_dir / f"site{k}" / f"n{n}.parquet")


def site_configs(addresses, pki, token: str = TOKEN) -> list:
    """The analyst's view of daemons at ``addresses`` (named ``site0``, ``site1``, ...), with the dev PKI's files."""
    from analyst import SiteConfig

    return [SiteConfig(name=f"site{k}", address=a, token=token, ca_file=pki.ca_cert, client_cert=pki.client_cert,
                       client_key=pki.client_key) for k, a in enumerate(addresses)]


def write_sites(root: Path, k_sites: int, sizes, pki, token_hash: str, data_dir: Path | None = None,
                protocols=("histogram", "paper")) -> list[Path]:
    """One folder per site: its config (TLS, generous budget, one dataset per n) and Parquet files (written
    under ``data_dir`` once and shared, or under each site's folder)."""
    from site_node.testing import write_site_config

    data_dir = Path(data_dir) if data_dir is not None else root / "data"
    write_data(data_dir, k_sites, sizes)
    policy = {"protocols": list(protocols), "sensitivity": "value", "sensitivity_value": 0.1,
              "budget_epsilon": 1000.0, "budget_delta": 0.5, "max_survivor_scores": 20_000_000}
    return [write_site_config(root / f"site{k}", site={"state_dir": "state"}, tls=pki, policy=policy,
                              analysts={"bench": {"token_sha256": token_hash, "datasets": ["*"]}},
                              datasets={f"n{n}": {"path": str(data_dir / f"site{k}" / f"n{n}.parquet"), "outcomes": ["y"],
                                                  "scores": ["pred"], "score_range": [0.0, 1.0]} for n in sizes})
            for k in range(k_sites)]


def write_dev_sites(root: Path, k_sites: int, sizes, *, token: str = TOKEN, data_dir: Path | None = None,
                    protocols=("histogram", "paper")):
    """A development PKI under ``root/pki`` and :func:`write_sites`' configs whose analyst holds ``token``;
    returns the PKI and the configs' paths."""
    from site_node.interceptors.auth import hash_token
    from site_node.security.pki import generate_dev_pki

    pki = generate_dev_pki(root / "pki")
    return pki, write_sites(root, k_sites, sizes, pki, hash_token(token), data_dir, protocols)


def start_daemons(configs, *, tree: Path = ROOT, wait_ready: bool = False, ready_timeout: float = 900.0):
    """Start the daemons one after another; returns (daemons, addresses, seconds to SERVING of each).

    ``wait_ready``: then wait until every daemon logged that its datasets are read (a tree whose daemon
    does not warm up never logs it: pass False); the seconds from the first start to that moment are
    the daemons' attribute ``ready_s``.
    """
    from site_node.testing import Daemon

    daemons, startup = [], []
    began = time.perf_counter()
    try:
        for config in configs:
            t = time.perf_counter()
            daemons.append(Daemon(config, tree=tree))
            daemons[-1].wait_serving()
            startup.append(time.perf_counter() - t)
        if wait_ready:
            for daemon in daemons:
                daemon.wait_log(READY, ready_timeout)
    except BaseException:
        stop(daemons)
        raise
    for daemon in daemons:
        daemon.ready_s = time.perf_counter() - began
    return daemons, [d.address for d in daemons], startup


def stop(daemons) -> None:
    """Stop the daemons (SIGTERM to all, then wait for each)."""
    from site_node.testing import stop_all

    stop_all(daemons)
