"""Local TLS sites over given data for studies: site configs with datasets, keys, a token and the federation file.

What ``python -m simulations daemons`` serves its replications from (the demo writes its own, commented, configs).
Every site gets the default site policy except the protocols and a budget for the validations asked, mutual TLS
with one development CA, peer signing keys (secure aggregation) and one analyst token; start the daemons with
:func:`analyst.demo.running_daemons`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd
import tomli_w

__all__ = ["LocalFederation", "write_local_federation"]


@dataclass(frozen=True)
class LocalFederation:
    """What :func:`write_local_federation` wrote: ``(name, config, port)`` per site, the certificates, the analyst's
    token and the federation file."""

    configs: list
    pki: object
    token: str
    federation: Path


def write_local_federation(root, datasets: Mapping[str, Sequence[pd.DataFrame]], *, outcome: str = "y",
                           score: str = "pred", protocols=("histogram", "secagg"),
                           budget_epsilon: float = 20.0) -> LocalFederation:
    """Write one site folder per entry of each dataset's frames (``datasets[name][k]`` is site ``k + 1``'s rows of
    dataset ``name``, one CSV each) under ``root``, with the default site policy but ``protocols`` and a budget of
    ``budget_epsilon`` per dataset (each dataset is its own population), and the analyst's ``federation.toml``."""
    from site_node.interceptors.auth import hash_token, new_token
    from site_node.cli.init import federation_document, free_port, link_peers
    from site_node.security.pki import generate_dev_pki

    root = Path(root)
    n_sites = {len(frames) for frames in datasets.values()}
    if len(n_sites) != 1:
        raise ValueError(f"every dataset must have the same number of sites' frames, got {sorted(n_sites)}")
    pki = generate_dev_pki(root / "pki")
    token = new_token()
    (root / "analyst.token").write_text(token + "\n", encoding="utf-8")
    configs = []
    for k in range(n_sites.pop()):
        name, port = f"site{k + 1}", free_port()
        folder = root / name
        (folder / "data").mkdir(parents=True, exist_ok=True)
        tables = {}
        for dataset, frames in datasets.items():
            frames[k].to_csv(folder / "data" / f"{dataset}.csv", index=False)
            tables[dataset] = {"path": f"data/{dataset}.csv", "outcomes": [outcome], "scores": [score],
                               "score_range": [0.0, 1.0]}
        config = {
            "site": {"name": name, "listen": f"127.0.0.1:{port}", "state_dir": "state"},
            "tls": {"cert": str(pki.server_cert), "key": str(pki.server_key), "client_ca": str(pki.ca_cert)},
            "policy": {"protocols": list(protocols), "privacy_level": 5, "max_epsilon": 10.0, "max_delta": 0.01,
                       "budget_epsilon": float(budget_epsilon), "budget_delta": 0.05},
            "analysts": {"study": {"token_sha256": hash_token(token), "datasets": ["*"]}},
            "datasets": tables,
        }
        (folder / "site.toml").write_text(tomli_w.dumps(config), encoding="utf-8")
        configs.append((name, folder / "site.toml", port))
    link_peers([path for _, path, _ in configs])  # secure aggregation: each site knows the others' signing keys
    entries = [{"name": name, "address": f"127.0.0.1:{port}", "token_file": "analyst.token",
                "ca_file": str(pki.ca_cert), "client_cert": str(pki.client_cert), "client_key": str(pki.client_key)}
               for name, _, port in configs]
    federation = root / "federation.toml"
    federation.write_text(federation_document(entries, comment="Local sites written by analyst.demo.local_sites."),
                          encoding="utf-8")
    return LocalFederation(configs, pki, token, federation)
