"""What the README's commands generate in the clone (sites' ledgers and keys, the analyst's tokens and client keys,
the development CA's key, the report) is ignored by git: run them in a fresh repository holding only .gitignore."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[list[str]]:
    from tests.onboarding.test_new_user_path import readme_block

    lines = readme_block("## From a fresh clone") + readme_block("## Starting a site") + readme_block(
        "Running it for years")
    wanted = [line for line in lines if line.startswith("dsroc-site init") or line.startswith("dsroc-site analyst add")]
    assert len(wanted) >= 3, wanted  # init --federation 2 fed, init mysite, analyst add alice
    return [[sys.executable, "-m", "site_node", *shlex.split(line)[1:]] for line in wanted]


def test_the_readme_paths_leave_nothing_for_git_to_add(tmp_path):
    repo = tmp_path / "clone"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for cmd in _commands():
        proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
    (repo / "report").mkdir()
    (repo / "report" / "report.json").write_text("{}")  # dsroc validate --out report
    made = {p.relative_to(repo).parts[0] for p in repo.rglob("*") if ".git" not in p.relative_to(repo).parts[:1]}
    assert {"fed", "mysite", "mysite-analyst1", "mysite-ca", "mysite-alice", "report"} <= made
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert status == ["?? .gitignore"], status[:20]
