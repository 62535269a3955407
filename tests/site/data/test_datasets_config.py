"""Config errors name the key and the file; datasets from CSV, Parquet, SQLite and a throwaway PostgreSQL."""

from __future__ import annotations

import glob
import grp
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import numpy as np
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


def unreachable_by(path: Path, uid: int) -> str | None:
    """Why the user ``uid`` cannot reach ``path`` (a parent folder it may not enter), or None."""
    for folder in reversed(path.parents):
        st = folder.stat()
        if st.st_uid == uid:
            continue
        groups = {g.gr_gid for g in grp.getgrall() if pwd.getpwuid(uid).pw_name in g.gr_mem} | {pwd.getpwuid(uid).pw_gid}
        if not st.st_mode & (0o010 if st.st_gid in groups else 0o001):
            return (f"the temporary folder {path} is not reachable by user {pwd.getpwuid(uid).pw_name}: {folder} has "
                    f"mode {stat.filemode(st.st_mode)}; point TMPDIR at a folder it may enter (e.g. TMPDIR=/tmp)")
    return None


def _pg_run(cmd: list[str], what: str, base: Path, uid: int) -> None:
    """Run a PostgreSQL tool; on failure fail the test with its output, its log and why it may not have started."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 0:
        return
    log = base / "log"
    why = unreachable_by(base / "data", uid)
    server_log = log.read_text()[-2000:] if log.exists() else ""
    shutil.rmtree(base, ignore_errors=True)  # nothing started: leave no cluster folder behind
    pytest.fail(f"PostgreSQL {what} failed (exit status {proc.returncode}): {(proc.stderr or proc.stdout).strip()}"
                + (f"\nserver log: {server_log}" if server_log else "") + (f"\n{why}" if why else ""),
                pytrace=False)


def test_the_postgresql_fixture_names_an_unreachable_temporary_folder():
    other = next(p for p in pwd.getpwall() if p.pw_uid not in (os.geteuid(), 0))
    root = Path(tempfile.mkdtemp(prefix="dsroc-reach-", dir="/tmp"))  # /tmp: every user may enter it
    try:
        root.chmod(0o755)
        (root / "locked" / "pg").mkdir(parents=True)
        (root / "locked").chmod(0o700)
        why = unreachable_by(root / "locked" / "pg" / "data", other.pw_uid)
        assert why is not None and f"{root / 'locked'} has mode drwx------" in why and "TMPDIR" in why
        (root / "locked").chmod(0o755)
        assert unreachable_by(root / "locked" / "pg" / "data", other.pw_uid) is None
    finally:
        shutil.rmtree(root)


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
    uid = pwd.getpwnam("postgres").pw_uid if as_root else os.geteuid()
    _pg_run(run_as + [str(bindir / "initdb"), "-D", str(data), "-U", user, "--auth=trust"], "initdb", base, uid)
    _pg_run(run_as + [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-o",
                      f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={base}", "start"],
            "pg_ctl start", base, uid)
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


def test_a_semicolon_csv_with_decimal_commas_is_read_as_its_columns(make_site_config, client_cls, tmp_path):
    frame = sample_dataset(120, seed=8)
    config = make_site_config(frames={"t": frame})
    path = config.datasets["t"].path
    frame.to_csv(path, sep=";", decimal=",", index=False)  # as a spreadsheet writes it in much of Europe
    assert path.read_text().splitlines()[0].count(";") == frame.shape[1] - 1 and "," in path.read_text()
    from site_node.data.datasets import open_table

    read = open_table(config.datasets["t"]).load()
    assert list(read.columns) == list(frame.columns)
    assert np.allclose(read["pred"].to_numpy(float), frame["pred"].to_numpy(float))
    _check_session(config, "t", frame, client_cls)


def test_check_names_a_missing_data_file_without_a_traceback(tmp_path, capsys):
    from site_node.cli import main

    result = init_site(tmp_path / "s")
    data = load_config(result.config).datasets["sample"].path
    data.unlink()
    rc = main(["check", "--config", str(result.config)])
    out, err = capsys.readouterr()
    assert rc != 0 and f"dataset sample: cannot be read: data file not found: {data} (datasets.sample.path)" in out
    assert "Traceback" not in out + err and "see the log above" not in out


def test_an_unparsable_port_is_refused_with_the_field_and_the_rule(tmp_path):
    result = init_site(tmp_path / "s")
    text = result.config.read_text()
    for bad in ("127.0.0.1:abc", "127.0.0.1:70000", ":50051", "127.0.0.1"):
        result.config.write_text(re.sub(r'listen = "[^"]*"', f'listen = "{bad}"', text))
        with pytest.raises(ConfigError, match=r"site.listen: must be host:port with a port from 0 to 65535"):
            load_config(result.config)
    result.config.write_text(re.sub(r'listen = "[^"]*"', 'listen = "[::1]:50051"', text))
    assert load_config(result.config).listen == "[::1]:50051"
