"""Datasets read in a helper process: the same columns as pandas reads, errors for the log only, and a daemon that
never loads pandas, pyarrow or scipy to start or to read its data."""

from __future__ import annotations

import logging
import os
import sys
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from dsroc.v1 import site_pb2 as pb
from site_node.config import DatasetConfig
from site_node.data.datasets import DatasetStore, outcome_values, read_table, score_values
from site_node.errors import InvalidArgument
from site_node.cli.init import init_site
from site_node.data.table_reader import read_table_in_helper, read_tables_in_helper
from site_node.testing import Daemon, site_channel, site_stub


def _frame(n=50):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({
        "pred": rng.uniform(0, 1, n),
        "y": (rng.uniform(0, 1, n) < 0.4).astype(np.int8),
        "age": rng.integers(20, 90, n),
        "smoker": rng.uniform(0, 1, n) < 0.3,
        "ward": rng.choice(["a", "b", "c"], n),
        "bmi": rng.normal(27, 4, n),
    })
    frame.loc[[4, 9], "bmi"] = np.nan
    return frame


@pytest.fixture(params=["csv", "parquet", "sqlite"])
def stored(request, tmp_path):
    """A dataset config over the frame, stored in each format, and the frame as pandas reads it back."""
    frame = _frame()
    common = {"name": "cohort", "outcomes": ("y",), "scores": ("pred",)}
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'cohort.db'}"
        engine = sa.create_engine(url)
        frame.to_sql("cohort", engine, index=False)
        back = pd.read_sql_table("cohort", engine)
        engine.dispose()
        return DatasetConfig(format="sql", url=url, table="cohort", **common), back
    path = tmp_path / f"cohort.{request.param}"
    if request.param == "csv":
        frame.to_csv(path, index=False)
        return DatasetConfig(format="csv", path=path, **common), pd.read_csv(path)
    frame.to_parquet(path)
    return DatasetConfig(format="parquet", path=path, **common), pd.read_parquet(path)


def test_the_helper_reads_the_columns_pandas_reads(stored):
    config, frame = stored
    table = read_table_in_helper(config)
    assert len(table) == len(frame) == 50
    assert table.columns == ["pred", "y", "age", "smoker", "ward", "bmi"]
    assert table.kinds["pred"] == table.kinds["bmi"] == "float" and table.kinds["age"] == "int"
    assert table.kinds["ward"] == "string"
    assert table.missing == {"bmi"}  # no model columns configured: every column is readable
    for column in ("pred", "y", "age", "bmi"):
        np.testing.assert_array_equal(table.values[column], frame[column].to_numpy(dtype=float))
    assert "ward" not in table.values and not table.values["pred"].flags.writeable
    np.testing.assert_array_equal(table.values["smoker"].astype(bool), frame["smoker"].astype(bool).to_numpy())
    # The same checks on the helper's table as on the one read in this process.
    inline = read_table(config)
    np.testing.assert_array_equal(outcome_values(table, "cohort", "y"), outcome_values(inline, "cohort", "y"))
    np.testing.assert_array_equal(score_values(table, "cohort", "pred", (0, 1)), frame["pred"].to_numpy())
    with pytest.raises(InvalidArgument, match="score column 'bmi': has missing or non-finite values"):
        score_values(table, "cohort", "bmi", (0, 100))
    with pytest.raises(InvalidArgument, match="outcome column 'ward': has missing|outcome column 'ward': labels must"):
        outcome_values(table, "cohort", "ward")


def test_only_declared_columns_are_kept(tmp_path):
    path = tmp_path / "cohort.csv"
    _frame().to_csv(path, index=False)
    config = DatasetConfig(name="cohort", format="csv", path=path, outcomes=("y",), scores=("pred",),
                           model_columns=("age",))
    table = read_table_in_helper(config)
    assert sorted(table.values) == ["age", "pred", "y"] and table.missing == frozenset()
    assert table.columns == ["pred", "y", "age", "smoker", "ward", "bmi"]  # Describe still lists every column
    assert table.values["y"].dtype == table.values["age"].dtype == np.int8  # CSV integers are int64 in pandas
    assert table.nbytes == 50 * (8 + 1 + 1)


def test_a_dataset_the_helper_cannot_read_is_logged_for_the_administrator_only(tmp_path, caplog):
    config = DatasetConfig(name="gone", format="csv", path=tmp_path / "missing.csv", outcomes=("y",))
    with pytest.raises(RuntimeError, match="missing.csv"):
        read_table_in_helper(config)
    store = DatasetStore({"gone": config}, reader=read_table_in_helper)
    with caplog.at_level(logging.ERROR, logger="dsroc.site"), pytest.raises(InvalidArgument) as info:
        store.table("gone")
    assert "missing.csv" not in str(info.value) and "site log" in str(info.value)
    assert "missing.csv" in caplog.text


class _Launches:
    """Counts the helper processes started (a spy around the real ``subprocess.Popen``)."""

    def __init__(self, monkeypatch):
        import site_node.data.table_reader as reader

        self.count, real = 0, subprocess.Popen

        def popen(*args, **kwargs):
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(reader.subprocess, "Popen", popen)


def test_many_datasets_are_read_by_one_helper_in_order_and_a_bad_one_fails_alone(tmp_path, monkeypatch):
    """Twelve datasets (CSV and Parquet) and a missing file among them: one helper process reads them all, each table
    equals the one read in this process, and the missing one comes back as an error naming its file."""
    launches = _Launches(monkeypatch)
    configs = []
    for k in range(12):
        frame = _frame(20 + k)
        path = tmp_path / f"d{k}.{'csv' if k % 2 else 'parquet'}"
        frame.to_csv(path, index=False) if k % 2 else frame.to_parquet(path)
        configs.append(DatasetConfig(name=f"d{k}", format=path.suffix[1:], path=path, outcomes=("y",),
                                     scores=("pred",)))
    configs.insert(5, DatasetConfig(name="gone", format="csv", path=tmp_path / "missing.csv", outcomes=("y",)))
    tables = read_tables_in_helper(configs)
    assert launches.count == 1 and len(tables) == len(configs)
    assert isinstance(tables[5], RuntimeError) and "missing.csv" in str(tables[5])
    for config, table in zip(configs[:5] + configs[6:], tables[:5] + tables[6:]):
        inline = read_table(config)
        assert (table.n_rows, table.kinds, table.missing) == (inline.n_rows, inline.kinds, inline.missing)
        for column, values in inline.values.items():
            np.testing.assert_array_equal(table.values[column], values)


def test_a_store_prefetches_in_one_helper_and_reads_a_failed_one_again_on_use(tmp_path, monkeypatch, caplog):
    """The daemon's store: prefetching ten datasets starts one helper; tables then come from memory (no helper); the
    unreadable one is read again on first use, which fails with the analyst's message and the administrator's log."""
    configs = {}
    for k in range(10):
        _frame(30).to_csv(tmp_path / f"d{k}.csv", index=False)
        configs[f"d{k}"] = DatasetConfig(name=f"d{k}", format="csv", path=tmp_path / f"d{k}.csv", outcomes=("y",))
    configs["gone"] = DatasetConfig(name="gone", format="csv", path=tmp_path / "missing.csv", outcomes=("y",))
    store = DatasetStore(configs, reader=read_table_in_helper, many_reader=read_tables_in_helper)
    launches = _Launches(monkeypatch)
    store.prefetch(store.names())
    assert launches.count == 1
    assert all(len(store.table(f"d{k}")) == 30 for k in range(10)) and launches.count == 1
    with caplog.at_level(logging.ERROR, logger="dsroc.site"), pytest.raises(InvalidArgument, match="site log"):
        store.table("gone")
    assert launches.count == 2 and "missing.csv" in caplog.text
    store.prefetch(store.names())  # only the unread one is asked for again
    assert launches.count == 3


def _mapped_libraries(pid: int) -> set[str]:
    """The packages whose compiled extension modules a process has loaded (from /proc/PID/maps)."""
    names = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        if "site-packages/" in path:
            names.add(path.split("site-packages/")[1].split("/")[0])
    return names


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
def test_the_daemon_serves_and_reads_its_data_without_pandas(tmp_path):
    # The statistics need scipy, which the warm-up imports in the background on purpose (the first validation
    # costs what the next ones do); the table readers (pandas, pyarrow, SQLAlchemy) and the analyst's libraries
    # never load in the daemon, before, during or after the warm-up and a session.
    site = init_site(tmp_path / "s", listen="127.0.0.1:0")
    never = {"pandas", "pyarrow", "sqlalchemy", "matplotlib", "statsmodels"}
    with Daemon(site.config) as daemon:
        address = daemon.wait_serving().address
        loaded = _mapped_libraries(daemon.pid)
        assert "grpc" in loaded and "numpy" in loaded and not loaded & never
        tls = dict(ca_cert=site.pki.ca_cert, client_cert=site.pki.client_cert, client_key=site.pki.client_key)
        daemon.wait_healthy(**tls)  # SERVING once the warm-up has read the datasets
        assert not _mapped_libraries(daemon.pid) & never  # the warm-up read the datasets without them
        channel = site_channel(address, **tls)
        stub, md = site_stub(channel), [("authorization", f"Bearer {site.token}")]
        described = stub.Describe(pb.DescribeRequest(), metadata=md, timeout=60).datasets[0]
        assert [c.name for c in described.columns] == list(pd.read_csv(site.dataset).columns)
        stub.OpenSession(pb.OpenSessionRequest(dataset="sample", outcome="y", score=pb.ScoreSource(score_column="pred")),
                         metadata=md, timeout=60)
        channel.close()
        assert not _mapped_libraries(daemon.pid) & never


def _plain_frames():
    """Parquet files of plain columns (read by pyarrow alone) as pandas writes them or as arrow does."""
    import pyarrow as pa

    frame = _frame()
    yield "pandas frame", frame, {}
    yield "float32 with NaN, uint16", pd.DataFrame({"pred": np.array([0.1, np.nan, 0.7], dtype=np.float32),
                                                   "y": np.array([0, 1, 1], dtype=np.uint16)}), {}
    yield "row groups", frame, {"row_group_size": 7}
    yield "no rows", frame.drop(columns="ward").iloc[:0], {}  # (an empty string column: pandas type "empty")
    yield "arrow, float nulls, no pandas metadata", pa.table({
        "pred": pa.array([0.2, None, 0.9, 0.4], type=pa.float64()), "y": pa.array([1, 0, 0, 1], type=pa.int8()),
        "f": pa.array([None, 1.5, None, 2.0], type=pa.float32()), "s": pa.array(["a", None, "b", "c"]),
        "b": pa.array([True, False, True, True])}), {"row_group_size": 3}


@pytest.mark.parametrize("case", list(range(5)))
def test_a_plain_parquet_file_is_read_by_pyarrow_alone_as_pandas_reads_it(tmp_path, case):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from site_node.data.tables import Table, read_parquet_plain

    name, data, options = list(_plain_frames())[case]
    path = tmp_path / "plain.parquet"
    pq.write_table(data if isinstance(data, pa.Table) else pa.Table.from_pandas(data), path, **options)
    config = DatasetConfig(name="cohort", format="parquet", path=path, outcomes=("y",), scores=("pred",))
    mine, theirs = read_parquet_plain(config), Table.from_frame(pd.read_parquet(path), config)
    assert mine is not None, name
    assert (mine.n_rows, mine.kinds, mine.missing) == (theirs.n_rows, theirs.kinds, theirs.missing)
    assert mine.values.keys() == theirs.values.keys()
    for column, values in theirs.values.items():
        assert mine.values[column].dtype == values.dtype and not mine.values[column].flags.writeable
        np.testing.assert_array_equal(mine.values[column], values)  # NaN where pandas has NaN
    assert mine.n_rows == len(pd.read_parquet(path))


def test_a_parquet_file_pandas_restores_types_of_is_left_to_pandas(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from site_node.data.tables import read_parquet_plain

    n = 6
    frames = {
        "nullable integers": pd.DataFrame({"pred": np.linspace(0, 1, n), "y": pd.array([0, 1, None, 1, 0, 1],
                                                                                        dtype="Int64")}),
        "a category": pd.DataFrame({"pred": np.linspace(0, 1, n), "y": [0, 1] * 3,
                                    "ward": pd.Categorical(["a", "b"] * 3)}),
        "dates": pd.DataFrame({"pred": np.linspace(0, 1, n), "y": [0, 1] * 3,
                               "when": pd.date_range("2020-01-01", periods=n)}),
        "an index kept as a column": pd.DataFrame({"pred": np.linspace(0, 1, n), "y": [0, 1] * 3},
                                                  index=[f"p{i}" for i in range(n)]),
    }
    for name, frame in frames.items():
        path = tmp_path / f"{name}.parquet"
        frame.to_parquet(path)
        config = DatasetConfig(name="cohort", format="parquet", path=path, outcomes=("y",), scores=("pred",))
        assert read_parquet_plain(config) is None, name
        assert read_table(config).n_rows == n  # pandas reads it
    path = tmp_path / "int nulls.parquet"
    pq.write_table(pa.table({"pred": [0.1, 0.2], "y": pa.array([1, None], type=pa.int64())}), path)
    config = DatasetConfig(name="cohort", format="parquet", path=path, outcomes=("y",), scores=("pred",))
    assert read_parquet_plain(config) is None
    assert read_table(config).kinds["y"] == "float"  # pandas' float column with NaN


def test_the_helper_reads_a_plain_parquet_file_without_pandas(tmp_path):
    path = tmp_path / "cohort.parquet"
    _frame().to_parquet(path)
    code = ("import sys\nfrom pathlib import Path\nfrom site_node.config.site_config import DatasetConfig\n"
            "from site_node.data.tables import read_table\n"
            f"t = read_table(DatasetConfig(name='c', format='parquet', path=Path({str(path)!r}), outcomes=('y',), "
            "scores=('pred',)))\n"
            "print(t.n_rows, sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'grpc', 'cryptography')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    assert out.stdout.split(maxsplit=1) == ["50", "[]\n"]
