"""Benchmark of a daemon's start with many datasets: seconds until its warm-up has read them all, measured in one run.

Starts ``python -m site_node serve`` on a ``dsroc-site init`` site (its sample dataset) with 1 more dataset and on one
with ``--datasets`` more (default 100; CSV files of ``--rows`` patients each), reads the warm-up's own timing from
each daemon's log ("datasets ready: ... in X s") and prints both and their ratio (the two-dataset site is the
anchor). Run from the repository root:
``python benchmarks/warm_up.py [--datasets N] [--rows N]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from site_node.cli.init import init_site  # noqa: E402
from site_node.testing import Daemon  # noqa: E402

READY = r"datasets ready: \d+ score columns prepared in ([0-9.]+) s"


def warm_up_seconds(folder: Path, datasets: int, rows: int, *, timeout: float = 900.0) -> float:
    """A site with ``datasets`` CSV datasets of ``rows`` patients: the seconds its daemon's warm-up took."""
    site = init_site(folder, listen="127.0.0.1:0")
    rng = np.random.default_rng(0)
    tables = []
    for k in range(datasets):
        path = folder / "data" / f"d{k}.csv"
        y = rng.integers(0, 2, rows)
        pd.DataFrame({"pred": np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), "y": y}).to_csv(path, index=False)
        tables.append(f'\n[datasets.d{k}]\npath = "data/d{k}.csv"\noutcomes = ["y"]\nscores = ["pred"]\n')
    with open(site.config, "a", encoding="utf-8") as f:
        f.write("".join(tables))
    with Daemon(site.config) as daemon:
        return float(daemon.wait_log(READY, timeout).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=100, help="datasets of the large site (default: 100)")
    parser.add_argument("--rows", type=int, default=2000, help="patients per dataset (default: 2000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsroc-warm-up-") as tmp:
        one = warm_up_seconds(Path(tmp) / "one", 1, args.rows)
        many = warm_up_seconds(Path(tmp) / "many", args.datasets, args.rows)
    print(f"warm-up, 2 datasets (anchor): {one:.2f} s")
    print(f"warm-up, {args.datasets + 1} datasets: {many:.2f} s  ({many / one:.1f}x the anchor)")


if __name__ == "__main__":
    main()
