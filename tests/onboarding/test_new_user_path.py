"""A new user's path, run as real commands: init, check, serve, validate, each as the README writes it."""

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analyst.config import load_federation_file
from site_node.cli.init import init_site, name_seed, sample_dataset
from site_node.testing import Daemon

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def readme_block(heading: str) -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index(heading):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("  #")[0].strip() for line in block.strip().splitlines()]


def start_daemon(command: str, cwd: Path) -> Daemon:
    """Start a background ``dsroc-site serve`` as the README writes it (with its trailing '&') and wait until it
    serves every site it names."""
    assert command.endswith("&")
    words = shlex.split(command[:-1])
    assert words[:2] == ["dsroc-site", "serve"] and words[2::2] == ["--config"] * len(words[3::2]), command
    return Daemon(words[3::2], program=["dsroc-site"], env=ENV, cwd=cwd).wait_serving()


def test_four_readme_commands_validate_two_local_sites(tmp_path):
    init, check, serve, validate = readme_block("## From a fresh clone to a validation of two local sites")
    run = lambda cmd: subprocess.run(shlex.split(cmd), cwd=tmp_path, env=ENV, capture_output=True, text=True,  # noqa: E731
                                     timeout=120)
    r = run(init)
    assert r.returncode == 0, r.stderr
    r = run(check)
    assert r.returncode == 0 and "no problems found" in r.stdout and "grade: ok (model column)" in r.stdout, r.stdout
    daemon = start_daemon(serve, tmp_path)
    try:
        r = run(validate)
    finally:
        assert daemon.stop(timeout=20) == 0
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    # The histogram protocol (init's default): 400 patients per site, none shared, estimated from noisy counts.
    assert report["sites"] == ["site1", "site2"] and report["protocol"] == "histogram"
    assert abs(report["n"]["negatives"] + report["n"]["positives"] - 800) < 40 and not report["n"]["exact"]
    # the files written are the ones `dsroc validate --help` and the README name, and no others
    written = sorted(p.name for p in (tmp_path / "report").iterdir())
    help_text = " ".join(run("dsroc validate --help").stdout.split())
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    section = readme[readme.index("## From a fresh clone"):readme.index("## Starting a site")]
    for name in written:
        assert name in help_text and f"`{name}`" in section, name
    assert [n for n in ("roc.png", "calibration.png", "validation.png", "report.json", "summary.txt")
            if n not in written] == []
    sites, _ = load_federation_file(tmp_path / "fed" / "federation.toml")
    assert sorted(s.address for s in sites) == sorted(daemon.addresses)


def test_init_writes_an_analyst_snippet_accepted_as_is(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = init_site(tmp_path / "h", name="hospital-a", listen=f"127.0.0.1:{port}")
    for secret in (result.token_file, result.snippet.parent / "client.key"):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert result.token_file.read_text().strip() == result.token
    # the analyst's folder holds no CA key or server key
    assert sorted(p.name for p in result.snippet.parent.iterdir()) == [
        "analyst1.token", "ca.crt", "client.crt", "client.key", "federation.toml"]
    daemon = start_daemon(f"dsroc-site serve --config {result.config} &", tmp_path)
    try:
        r = subprocess.run(["dsroc", "budget", "--federation", str(result.snippet), "--dataset", "sample"],
                           env=ENV, capture_output=True, text=True, timeout=60)
    finally:
        assert daemon.stop(timeout=20) == 0
    assert r.returncode == 0 and "hospital-a" in r.stdout, r.stderr


def test_sample_data_is_drawn_per_site_name(tmp_path):
    a = init_site(tmp_path / "a", name="site1")
    b = init_site(tmp_path / "b", name="site2")
    fa, fb = pd.read_csv(a.dataset), pd.read_csv(b.dataset)
    merged = fa.merge(fb, how="inner")
    assert len(merged) == 0  # no patient (row) appears at both sites
    pd.testing.assert_frame_equal(fa, sample_dataset(400, seed=name_seed("site1")), check_dtype=False)
    assert name_seed("site1") != name_seed("site2")


def test_check_covers_model_columns(tmp_path):
    from site_node.cli import main

    result = init_site(tmp_path / "s")
    frame = pd.read_csv(result.dataset)
    frame.drop(columns=["grade"]).to_csv(result.dataset, index=False)
    r = subprocess.run(["dsroc-site", "check", "--config", str(result.config)], env=ENV, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert "grade: dataset 'sample' has no column 'grade' (model column)" in r.stdout
    frame.assign(size=frame["size"].where(frame.index > 3)).to_csv(result.dataset, index=False)
    assert main(["check", "--config", str(result.config)]) == 1


def test_init_federation_refuses_bad_counts_and_existing_folders(tmp_path):
    r = subprocess.run(["dsroc-site", "init", "--federation", "0", str(tmp_path / "f")], env=ENV,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "number of sites from 1 to 50" in r.stderr
    assert subprocess.run(["dsroc-site", "init", "--federation", "1", str(tmp_path / "f")], env=ENV,
                          capture_output=True).returncode == 0
    r = subprocess.run(["dsroc-site", "init", "--federation", "1", str(tmp_path / "f")], env=ENV,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "exists" in r.stderr


@pytest.mark.parametrize("cli", ["dsroc", "dsroc-site"])
def test_version(cli):
    from importlib.metadata import version

    r = subprocess.run([cli, "--version"], env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"{cli} {version('dsroc')}"
