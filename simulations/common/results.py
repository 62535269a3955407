"""The saved results of a run: one Parquet file per setting under ``out/results``, or CSV parts under ``out/parts``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

__all__ = ["RESULTS", "load_results", "load_parts"]

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


def load_parts(out, command: str) -> pd.DataFrame:
    """All per-replication rows of a finished (or partial) run written as ``out/parts/*.csv.gz`` by
    ``python -m simulations <command>``; its ``failure`` column "" where the replication succeeded."""
    files = sorted((Path(out) / "parts").glob("*[0-9].csv.gz"))
    if not files:
        raise FileNotFoundError(f"no results in {out}/parts; run python -m simulations {command} --out {out} first")
    frame = pd.concat([pd.read_csv(f, keep_default_na=False, na_values=[""]) for f in files], ignore_index=True)
    frame["failure"] = frame["failure"].fillna("")
    return frame
