"""Fixtures for the survival release's tests: survival data files, daemons with a survival policy, brute-force cells."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dsroc.v1 import site_pb2 as pb
from site_node.cli.init import sample_dataset

# The policy's public interior time grid (days), and the rest of a survival site's policy.
TIME_GRID = [90.0, 180.0, 365.0, 547.5, 730.0, 1095.0, 1460.0]
SURVIVAL_POLICY = {"survival_time_edges": TIME_GRID, "survival_max_time_bins": 6, "histogram_bins": [5, 10, 20],
                   "max_epsilon": 10.0, "budget_epsilon": 100.0}
HUGE = {"max_epsilon": 5000.0, "budget_epsilon": 1e6}


def survival_frame(n: int = 300, *, seed: int = 1) -> pd.DataFrame:
    """``sample_dataset``'s patients with a follow-up time ``time`` (days; ties and a time 0 included) and their
    outcome ``y`` as the event indicator (1 event, 0 censored)."""
    frame = sample_dataset(n, seed=seed)
    rng = np.random.default_rng(seed + 100)
    time = np.round(rng.exponential(700.0, n) * (1.5 - frame["pred"].to_numpy()))
    time[:3] = [0.0, 90.0, 180.0]  # on edges and at 0: the first bin holds T = 0, a bin holds its right edge
    return frame.assign(time=time)


def survival_dataset(name: str = "test", **fields) -> dict:
    """A dataset table for ``make_config(datasets=...)`` declaring the time column ``time`` (``fields`` override)."""
    return {name: {"path": f"data/{name}.csv", "outcomes": ["y"], "scores": ["pred"],
                   "model_columns": ["age", "size", "nodes", "grade"], "time_columns": ["time"], **fields}}


def brute_force_cells(time, event, risk, time_edges, score_edges) -> np.ndarray:
    """Counts ``(K, 2, J)`` by direct comparison: time bin k holds e_k < T <= e_{k+1} (T = 0 in the first), score bin j
    holds s_j <= r < s_{j+1} (the last closed)."""
    k_bins, j_bins = len(time_edges) - 1, len(score_edges) - 1
    out = np.zeros((k_bins, 2, j_bins), dtype=np.int64)
    for t, d, r in zip(time, event, risk):
        k = next(i for i in range(k_bins) if t <= time_edges[i + 1])
        j = next(i for i in range(j_bins) if r < score_edges[i + 1] or i == j_bins - 1)
        out[k, int(d), j] += 1
    return out


def laplace_epsilon_at(scale: float, delta: float, *, releases: int = 1) -> float:
    """The smallest epsilon at which ``releases`` (1 or 2) counts, each with discrete Laplace noise of ``scale`` and
    each moved by one patient, are together (epsilon, delta)-DP: the hockey-stick divergence of the two neighbouring
    output distributions (products over the releases), summed over their support by brute force."""
    from scipy.optimize import brentq

    x = np.arange(-int(40 * scale) - 40, int(40 * scale) + 41)
    p, q = np.exp(-np.abs(x) / scale), np.exp(-np.abs(x - 1) / scale)
    p, q = p / p.sum(), q / q.sum()
    if releases == 2:
        p, q = np.outer(p, p), np.outer(q, q)
    return brentq(lambda e: np.maximum(0.0, p - np.exp(e) * q).sum() - delta, 0.0, releases / scale)


def counts_of(reply: pb.SurvivalResponse) -> np.ndarray:
    """A reply's counts as ``(K, 2, J)`` (cell (k, d, j) at (k * 2 + d) * J + j)."""
    return np.asarray(reply.counts, dtype=np.int64).reshape(len(reply.time_edges) - 1, 2, len(reply.edges) - 1)


@pytest.fixture
def survival_site(tls_site):
    """``make(name="site", frame=None, policy=None, dataset=None, **kw)``: a REAL mutual-TLS daemon whose ``test``
    dataset has a time column (``dataset``: its other fields), with the survival policy; returns ``(server, client,
    frame)``."""

    def make(name="site", *, frame=None, policy=None, dataset=None, **kw):
        frame = survival_frame() if frame is None else frame
        server, client = tls_site(name, frames={"test": frame}, datasets=survival_dataset(**(dataset or {})),
                                  policy={**SURVIVAL_POLICY, **(policy or {})}, **kw)
        return server, client, frame

    return make


def open_survival(client, *, time="time", dataset="test", outcome="y", column="pred") -> str:
    """A survival session's id."""
    return client.OpenSession(pb.OpenSessionRequest(dataset=dataset, outcome=outcome, time=time,
                                                    score=pb.ScoreSource(score_column=column))).session_id
