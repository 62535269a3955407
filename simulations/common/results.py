"""The saved results of a finished run: one Parquet file per setting under ``out/results``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

__all__ = ["RESULTS", "load_results"]

RESULTS = "results"


def load_results(out, columns=None) -> pd.DataFrame:
    """All per-replication results of a finished run (one row per setting and replication).

    ``columns`` restricts the columns read (all by default).
    """
    results = Path(out) / RESULTS
    if not (results / "_complete.json").exists():
        raise FileNotFoundError(f"{out} holds no finished run (no {RESULTS}/_complete.json); run or resume it first")
    names = json.loads((results / "_complete.json").read_text())["settings"]
    return pd.concat([pd.read_parquet(results / f"{name}.parquet", columns=columns) for name in names], ignore_index=True)
