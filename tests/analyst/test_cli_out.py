"""``dsroc validate --out`` is atomic and refuses non-empty folders; --quiet prints nothing; the demo leaves no temp folder."""

import os
import subprocess
import sys
from pathlib import Path

from analyst.cli import main
from analyst.result.report import REPORT_FILES

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def write_federation(tmp_path, addresses, pki, token):
    (tmp_path / "t").write_text(token)
    lines = []
    for k, a in enumerate(addresses):
        lines += ["[[sites]]", f'name = "s{k}"', f'address = "{a}"', 'token_file = "t"', f'ca_file = "{pki.ca_cert}"', ""]
    (tmp_path / "f.toml").write_text("\n".join(lines))
    return tmp_path / "f.toml"


def validate(fed, out, *extra):
    return ["validate", "--protocol", "paper", "--federation", str(fed), "--dataset", "test", "--outcome", "y", "--score", "pred",
            "--epsilon", "5", "--delta", "0.01", "--out", str(out), *extra]


def test_out_is_refused_when_not_empty_and_replaced_with_force(tmp_path, five_sites, pki, helpers, capsys):
    _, addresses, _ = five_sites
    fed = write_federation(tmp_path, addresses[:2], pki, helpers.TOKEN)
    out = tmp_path / "report"
    out.mkdir()
    (out / "old.txt").write_text("keep")
    assert main(validate(fed, out, "--quiet")) == 2
    assert "not empty" in capsys.readouterr().err and (out / "old.txt").read_text() == "keep"
    assert main(validate(fed, out, "--quiet", "--force")) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(REPORT_FILES.values())
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(validate(fed, empty, "--quiet")) == 0 and (empty / "report.json").exists()


def test_out_leaves_nothing_on_failure(tmp_path, five_sites, pki, helpers, capsys):
    _, addresses, _ = five_sites
    fed = write_federation(tmp_path, addresses[:2], pki, helpers.TOKEN)
    before = sorted(tmp_path.iterdir())
    args = validate(fed, tmp_path / "new" / "deeper" / "report")
    args[args.index("--epsilon") + 1] = "-1"
    assert main(args) == 2
    assert sorted(tmp_path.iterdir()) == before  # no folder, no parents
    bad = write_federation(tmp_path, addresses[:2], pki, "wrong-token")
    assert main(validate(bad, tmp_path / "new" / "report")) == 3  # a site refuses after the folder was made
    assert "UNAUTHENTICATED" in capsys.readouterr().err
    assert sorted(tmp_path.iterdir()) == before


def test_quiet_prints_nothing(tmp_path, five_sites, pki, helpers):
    _, addresses, _ = five_sites
    fed = write_federation(tmp_path, addresses[:2], pki, helpers.TOKEN)
    proc = subprocess.run([sys.executable, "-m", "analyst", *validate(fed, tmp_path / "r", "--quiet")], env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
    assert (tmp_path / "r" / "report.json").exists()


def test_demo_without_out_leaves_no_temporary_folder(tmp_path):
    env = dict(ENV, TMPDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "analyst", "demo", "--n-patients", "200", "--quiet"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "q = 5" in proc.stderr
    assert list(tmp_path.iterdir()) == []  # the keys, token and configs went with the temporary folder
