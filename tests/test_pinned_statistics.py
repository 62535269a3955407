"""Pinned numbers: the study's runs of every protocol give the same statistics as the code the pins were taken from.

The files in ``tests/data/pinned/`` were written by the code of commit a6f2bea (before the layout moved to one
package per protocol) with ``DSROC_REPIN=1 python -m pytest tests/test_pinned_statistics.py``. They cover the
histogram protocol's two-stage quantile release and its AUC rule, calibration and slope, its equal grid, the secagg
protocol and the paper protocol (the stress study's smoke grid), and the paper study's per-replication fits and
noise corrections in paper and protocol mode. A refactor that is meant to move code without changing what it
computes must leave them equal; a change meant to alter a statistic re-pins them in its own commit and says why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

PINNED = Path(__file__).parent / "data" / "pinned"
REPIN = os.environ.get("DSROC_REPIN") == "1"
# Columns that measure the run itself (wall time), not a statistic.
NOT_STATISTICS = {"seconds", "elapsed", "time", "wall_seconds"}
SETTINGS = ["noise-free", "sens=0.1_eps=5_delta=0.01", "sens=0.3_eps=1_delta=0.001"]


def _study(args: list[str], out: Path) -> None:
    subprocess.run([sys.executable, "-m", "simulations", *args, "--quiet", "--out", str(out)], check=True,
                   capture_output=True, timeout=600)


def _compare(frame: pd.DataFrame, name: str) -> None:
    path = PINNED / name
    frame = frame.drop(columns=[c for c in frame.columns if c in NOT_STATISTICS])
    if REPIN:
        PINNED.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False, float_format="%.17g")
        return
    pinned = pd.read_csv(path)
    fresh = pd.read_csv(pd.io.common.StringIO(frame.to_csv(index=False, float_format="%.17g")))
    assert list(fresh.columns) == list(pinned.columns)
    assert len(fresh) == len(pinned)
    for column in pinned.columns:
        a, b = fresh[column].to_numpy(), pinned[column].to_numpy()
        if pinned[column].dtype.kind == "f":
            # Bit-identical up to the last printed digit; NaN where the pin has NaN.
            np.testing.assert_array_equal(np.isnan(a.astype(float)), np.isnan(b), err_msg=f"{name}: {column}")
            np.testing.assert_allclose(a.astype(float), b, rtol=1e-13, atol=1e-15, equal_nan=True,
                                       err_msg=f"{name}: {column}")
        else:
            assert a.astype(str).tolist() == b.astype(str).tolist(), f"{name}: {column}"


def test_stress_smoke_grid_is_pinned(tmp_path):
    _study(["stress", "--smoke", "--reps", "20", "--seed", "1"], tmp_path)
    _compare(pd.read_csv(tmp_path / "stress.csv"), "stress_smoke.csv")


@pytest.mark.parametrize("mode", ["paper", "protocol"])
def test_paper_study_replications_are_pinned(tmp_path, mode):
    _study(["run", "--mode", mode, "--reps", "60", "--seed", "3", "--settings", *SETTINGS], tmp_path)
    frame = pd.concat([pd.read_parquet(tmp_path / "results" / f"{s}.parquet") for s in SETTINGS], ignore_index=True)
    _compare(frame, f"{mode}_replications.csv")
