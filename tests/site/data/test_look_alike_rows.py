"""Look-alike datasets by their rows (issue 36, item 8): serve refuses what check flags, near-copies included.

Before, ``serve`` compared only the entries' sources (one database, one file, byte-identical files), so a shuffled
CSV, a Parquet or a SQLite-file copy of a declared dataset started with a full budget of its own over the same
patients (``check`` flagged them by their identical columns), and a copy missing one patient was flagged by
neither. Now both read the entries that could share patients and compare their identical columns and the
bottom-k sketches of their row hashes (:func:`site_node.data.populations.row_sketch`); ``serve`` refuses a flagged
pair before it makes any state, naming the fix (one population for the same patients, one each otherwise).
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest

from site_node.cli import main
from site_node.cli.init import sample_dataset
from site_node.config import ConfigError
from site_node.testing import running_server

from ..conftest import make_config

ENTRY = {"outcomes": ["y"], "scores": ["pred"]}


def _copy(frame: pd.DataFrame, data, kind: str) -> dict:
    """Write ``frame`` as a look-alike of ``kind`` under ``data``; its dataset entry."""
    if kind == "parquet":
        frame.to_parquet(data / "other.parquet", index=False)
        return {"path": "data/other.parquet", **ENTRY}
    if kind == "sqlite file":
        with sqlite3.connect(data / "other.db") as db:
            frame.to_sql("cohort", db, index=False)
        return {"url": "sqlite:///data/other.db", "table": "cohort", **ENTRY}
    frame.to_csv(data / "other.csv", index=False)
    return {"path": "data/other.csv", **ENTRY}


def _site(tmp_path, kind: str, *, declared=False, change=None):
    """The default ``test`` entry (a CSV) and ``other``: its rows shuffled, ``change``d, written as ``kind``."""
    base = make_config(tmp_path / "s")
    frame = pd.read_csv(base.datasets["test"].path).sample(frac=1.0, random_state=7)
    if change is not None:
        frame = change(frame)
    datasets = {"test": {"path": "data/test.csv", **ENTRY}, "other": _copy(frame, tmp_path / "s" / "data", kind)}
    if declared:
        datasets["test"]["population"], datasets["other"]["population"] = "cohort-a", "cohort-b"
    return make_config(tmp_path / "s", frames={}, datasets=datasets)


def _check(config, capsys) -> tuple[int, str]:
    import tomli_w

    path = config.source.parent / "check.toml"
    datasets = {n: {k: (list(v) if isinstance(v, tuple) else str(v) if k == "path" else v)
                    for k, v in vars(d).items() if k in ("path", "url", "table", "outcomes", "scores") and v}
                for n, d in config.datasets.items()}
    path.write_text(tomli_w.dumps({"site": {"name": "s"}, "analysts": {}, "datasets": datasets}))
    capsys.readouterr()
    code = main(["check", "--config", str(path)])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("kind", ["shuffled csv", "parquet", "sqlite file"])
def test_serve_refuses_a_copy_of_a_dataset_in_another_order_or_format(tmp_path, capsys, kind):
    config = _site(tmp_path, kind)
    code, out = _check(config, capsys)
    assert code == 1 and "datasets 'test' and 'other' may hold the same patients" in out
    with pytest.raises(ConfigError, match="datasets 'test' and 'other' may hold the same patients") as refused:
        with running_server(config):
            pass
    assert 'give both the same population = "..."' in str(refused.value)
    assert not config.ledger_path.exists()  # refused before any state was made


@pytest.mark.parametrize("kind", ["shuffled csv", "parquet"])
def test_serve_and_check_refuse_a_copy_missing_one_patient(tmp_path, capsys, kind):
    config = _site(tmp_path, kind, change=lambda f: f.iloc[1:])  # 299 of the 300 patients
    code, out = _check(config, capsys)
    assert code == 1 and "datasets 'test' and 'other' may hold the same patients (rows:" in out
    with pytest.raises(ConfigError, match=r"may hold the same patients \(rows: about 100 % of the 299"):
        with running_server(config):
            pass


def test_a_copy_with_two_thirds_of_the_patients_and_integers_as_floats_is_flagged_by_its_rows(tmp_path, capsys):
    def change(frame):
        frame = frame.iloc[:200].copy()
        frame["age"] = frame["age"] + 0.0  # the same values as floats: still the same rows
        return frame

    config = _site(tmp_path, "sqlite file", change=change)
    with pytest.raises(ConfigError, match=r"\(rows: about 100 % of the 200"):
        with running_server(config):
            pass


def test_other_patients_are_not_flagged_and_declared_populations_serve(tmp_path, capsys):
    other = sample_dataset(300, seed=2)  # another cohort of the same kind: same columns, other patients
    config = _site(tmp_path, "parquet", change=lambda f: other)
    assert "may hold the same patients" not in _check(config, capsys)[1]
    with running_server(config):
        pass
    declared = _site(tmp_path / "declared", "parquet", declared=True)  # the administrator: two cohorts
    with running_server(declared):
        pass


def test_the_row_sketch_estimates_the_shared_rows_within_its_error():
    """Independent check of the estimate against the exact count, for tables larger than the sketch."""
    from site_node.data.populations import row_sketch, shared_rows

    rng = np.random.default_rng(5)
    full = pd.DataFrame({"x": rng.normal(size=20_000), "y": rng.integers(0, 2, 20_000)})
    for shared in (0.0, 0.3, 0.9):
        k = int(shared * 10_000)
        a, b = full.iloc[:10_000], pd.concat([full.iloc[:k], full.iloc[10_000:20_000 - k]])
        exact = k / 10_000
        estimate = shared_rows(row_sketch(a), row_sketch(b))
        assert abs(estimate - exact) < 0.06, (shared, estimate)


@pytest.mark.parametrize("look_alike", [False, True])
def test_serve_compares_the_tables_in_a_helper_so_pandas_never_loads_in_the_daemon(tmp_path, look_alike):
    import pickle
    import subprocess
    import sys

    other = sample_dataset(300, seed=2)
    config = _site(tmp_path, "parquet", change=(lambda f: f.iloc[1:]) if look_alike else (lambda f: other))
    code = ("import pickle, sys\n"
            "from site_node.config import ConfigError\n"
            "from site_node.data.look_alikes import require_declared_populations\n"
            "try:\n"
            "    require_declared_populations(pickle.load(sys.stdin.buffer))\n"
            "    print('served', 'pandas' in sys.modules)\n"
            "except ConfigError as e:\n"
            "    print('refused', 'pandas' in sys.modules, e)\n")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(config), capture_output=True, check=True,
                         timeout=120).stdout.decode()
    # both tables were read and compared (a copy missing one patient is refused by its rows), and pandas stayed in
    # the helper process
    assert out.startswith("refused False" if look_alike else "served False"), out
    assert ("may hold the same patients (rows:" in out) == look_alike
