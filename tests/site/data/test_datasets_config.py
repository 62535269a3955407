"""Config errors name the key and the file; datasets from CSV, Parquet, SQLite and a throwaway PostgreSQL."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import sqlalchemy as sa

from dsroc.v1 import site_pb2 as pb
from site_node.config import ConfigError, load_config
from site_node.cli.init import free_port, init_site, sample_dataset
from site_node.testing import running_server

NEG = pb.SCORE_CLASS_NEGATIVES


def test_init_config_loads(tmp_path):
    result = init_site(tmp_path / "s")
    config = load_config(result.config)
    assert config.name == "hospital" and config.policy.privacy_level == 5
    assert config.tls.client_ca == (tmp_path / "s" / "pki" / "ca.crt").resolve()
    assert config.datasets["sample"].path == (tmp_path / "s" / "data" / "sample.csv").resolve()
    with pytest.raises(FileExistsError):
        init_site(tmp_path / "s")


@pytest.mark.parametrize("edit, key", [
    (lambda t: t.replace('name = "hospital"', ""), "site.name: is required"),
    (lambda t: t.replace("privacy_level = 5", "privacy_level = 0"), "policy.privacy_level: must be a positive"),
    (lambda t: t.replace("privacy_level = 5", 'privacy_level = "five"'), "policy.privacy_level: must be int"),
    (lambda t: t.replace('sensitivity = "range"', 'sensitivity = "trust-me"'), "policy.sensitivity: must be one of"),
    (lambda t: t.replace("max_delta = 0.01", "max_delta = 1.5"), "policy.max_delta"),
    (lambda t: t.replace("max_epsilon = 10.0", "max_epsilon = 50.0"), "policy.max_epsilon: must not exceed"),
    (lambda t: t.replace('datasets = ["sample"]', 'datasets = ["nope"]'), "analysts.analyst1.datasets: unknown dataset"),
    (lambda t: t.replace("max_sessions = 64", "max_sessions = 64\ncolour = 3"), "site.colour: unknown key"),
    (lambda t: t.replace('format = "csv"', 'format = "xlsx"'), "datasets.sample.format: must be one of"),
    (lambda t: t.replace('outcomes = ["y"]                # outcome', 'outcomes = []  #'), "datasets.sample.outcomes"),
    (lambda t: t.replace("score_range = [0.0, 1.0]", "score_range = [1.0, 0.0]"), "datasets.sample.score_range"),
    (lambda t: t.replace('sensitivity = "range"', 'sensitivity = "value"'), "policy.sensitivity_value: is required"),
    (lambda t: t + "\n[datasets.db]\nformat = \"sql\"\nurl = \"sqlite:///x.db\"\noutcomes = [\"y\"]\n",
     "datasets.db.table: give exactly one of table or query"),
    (lambda t: t.replace("[policy]", "[policy\n"), "not valid TOML"),
])
def test_config_errors_name_key_and_file(tmp_path, edit, key):
    result = init_site(tmp_path / "s")
    result.config.write_text(edit(result.config.read_text()))
    with pytest.raises(ConfigError) as info:
        load_config(result.config)
    assert str(result.config) in str(info.value) and key in str(info.value)


def test_token_hash_must_be_sha256(tmp_path):
    result = init_site(tmp_path / "s")
    text = result.config.read_text()
    start = text.index('token_sha256 = "') + len('token_sha256 = "')
    result.config.write_text(text[:start] + "plain-token" + text[start + 64:])
    with pytest.raises(ConfigError, match="analysts.analyst1.token_sha256"):
        load_config(result.config)


def _check_session(config, dataset, frame, client_cls):
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open(dataset=dataset)
        b = c.BrierParts(pb.BrierPartsRequest(session_id=s))
        y, p = frame["y"].to_numpy(), frame["pred"].to_numpy()
        assert b.n == len(frame) and b.sum_sq == pytest.approx(((y - p) ** 2).sum())
        info, _, _ = c.release(s, NEG)
        assert info.n == (y == 0).sum()
        c.close()


def test_parquet_and_sqlite_datasets(make_site_config, client_cls, tmp_path):
    frame = sample_dataset(120, seed=5)
    folder = tmp_path / "site"
    (folder / "data").mkdir(parents=True)
    frame.to_parquet(folder / "data" / "cohort.parquet")
    engine = sa.create_engine(f"sqlite:///{folder / 'data' / 'cohort.db'}")
    frame.to_sql("cohort", engine, index=False)
    engine.dispose()
    common = {"outcomes": ["y"], "scores": ["pred"]}
    # Entries over one database, and copies of a table in another format, must declare their populations (serve
    # refuses look-alikes otherwise); this test reads formats, not budgets, so each entry is declared a population
    # of its own.
    config = make_site_config("site", frames={}, datasets={
        "pq": {"path": "data/cohort.parquet", **common, "population": "c"},
        "lite": {"format": "sql", "url": "sqlite:///data/cohort.db", "table": "cohort", **common, "population": "a"},
        "litequery": {"format": "sql", "url": "sqlite:///data/cohort.db",
                      "query": "SELECT * FROM cohort WHERE age > 50", **common, "population": "b"},
    })
    _check_session(config, "pq", frame, client_cls)
    _check_session(config, "lite", frame, client_cls)
    _check_session(config, "litequery", frame[frame["age"] > 50], client_cls)


def test_unreadable_dataset_is_reported_without_details(make_site_config, client_cls):
    config = make_site_config(frames={}, datasets={"gone": {"path": "data/missing.csv", "outcomes": ["y"]}})
    with running_server(config) as srv:
        c = client_cls(srv)
        import grpc

        with pytest.raises(grpc.RpcError) as info:
            c.open(dataset="gone")
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "missing.csv" not in info.value.details()
        c.close()


# ---------------------------------------------------------------------------------------- PostgreSQL

def _pg_bindir() -> Path | None:
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
        if (Path(out) / "initdb").exists():
            return Path(out)
    except (OSError, subprocess.CalledProcessError):
        pass
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@pytest.fixture
def postgres():
    """A throwaway PostgreSQL cluster on 127.0.0.1 in a temp dir; yields its SQLAlchemy URL."""
    bindir = _pg_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (initdb/pg_ctl) found via pg_config or /usr/lib/postgresql")
    as_root = os.geteuid() == 0
    # initdb refuses to run as root: then run the server as the postgres user in a directory it owns.
    run_as = ["runuser", "-u", "postgres", "--"] if as_root else []
    base = Path(tempfile.mkdtemp(prefix="dsroc-pg-"))
    data = base / "data"
    if as_root:
        shutil.chown(base, "postgres", "postgres")
    port = free_port()
    user = "postgres" if as_root else os.environ.get("USER", "postgres")
    subprocess.run(run_as + [str(bindir / "initdb"), "-D", str(data), "-U", user, "--auth=trust"],
                   check=True, capture_output=True)
    subprocess.run(run_as + [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-o",
                             f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={base}",
                             "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://{user}@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(run_as + [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.postgres
def test_postgresql_dataset(postgres, make_site_config, client_cls):
    frame = sample_dataset(150, seed=6)
    engine = sa.create_engine(postgres)
    frame.to_sql("validation_cohort", engine, index=False)
    engine.dispose()
    common = {"outcomes": ["y"], "scores": ["pred"]}
    config = make_site_config(frames={}, datasets={
        # one database: the populations are declared (here: one each, this test reads formats, not budgets)
        "pg": {"format": "sql", "url": postgres, "table": "validation_cohort", **common, "population": "a"},
        "pgq": {"format": "sql", "url": postgres, "query": "SELECT * FROM validation_cohort WHERE nodes >= 2", **common,
                "population": "b"},
    })
    _check_session(config, "pg", frame, client_cls)
    _check_session(config, "pgq", frame[frame["nodes"] >= 2], client_cls)


def test_chunks_must_fit_the_message_limit(tmp_path):
    result = init_site(tmp_path / "s")
    result.config.write_text(result.config.read_text().replace("max_message_bytes = 16777216", "max_message_bytes = 100000"))
    with pytest.raises(ConfigError, match="policy.max_chunk_scores"):
        load_config(result.config)


def test_describe_survives_an_unreadable_dataset(make_site_config, client_cls):
    config = make_site_config(datasets={"gone": {"path": "data/missing.csv", "outcomes": ["y"]}})
    with running_server(config) as srv:
        c = client_cls(srv)
        described = {d.name: len(d.columns) for d in c.Describe(pb.DescribeRequest()).datasets}
        assert described == {"test": 6, "gone": 0}
        c.close()
