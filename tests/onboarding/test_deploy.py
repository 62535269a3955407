"""The systemd units and the container file in deploy/ run the real CLI: verified by systemd-analyze and parsed here."""

from __future__ import annotations

import configparser
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from site_node.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
INSTALLED = "/opt/dsroc/venv/bin/dsroc-site"  # where the units expect the console script


def _unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read(DEPLOY / name)
    return parser


def _dsroc_site_args(command: str) -> list[str]:
    """The arguments after the dsroc-site program in an ExecStart line (also inside ``/bin/sh -c '...'``)."""
    words = shlex.split(command)
    if words[:2] == ["/bin/sh", "-c"]:
        words = shlex.split(re.sub(r"\$\([^)]*\)", "TIME", words[2]))  # $(date ...) stands for a time stamp
    at = words.index(INSTALLED)
    return words[at + 1:]


def test_systemd_analyze_verifies_the_units_with_the_real_console_script(tmp_path):
    # The units name /opt/dsroc/venv/bin/dsroc-site; here the script of this environment stands in for it.
    script = Path(sys.executable).parent / "dsroc-site"
    assert script.exists(), "pip install -e . makes the dsroc-site console script"
    units = sorted(p.name for p in DEPLOY.glob("dsroc-site*.*"))
    assert units == ["dsroc-site-backup.service", "dsroc-site-backup.timer", "dsroc-site.service"]
    for name in units:
        (tmp_path / name).write_text((DEPLOY / name).read_text().replace(INSTALLED, str(script)))
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed (apt-get install systemd; .ci/run installs it)"
    result = subprocess.run([analyze, "verify", *(str(tmp_path / n) for n in units)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and not result.stdout.strip() and not result.stderr.strip(), result.stderr


@pytest.mark.parametrize("unit", ["dsroc-site.service", "dsroc-site-backup.service"])
def test_the_units_commands_are_valid_dsroc_site_command_lines(unit):
    service = _unit(unit)["Service"]
    args = build_parser().parse_args(_dsroc_site_args(service["ExecStart"]))
    assert args.command == ("serve" if unit == "dsroc-site.service" else "backup")
    assert args.config in ("/etc/dsroc/site.toml", ["/etc/dsroc/site.toml"])
    if unit == "dsroc-site.service":
        assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"  # serve reloads its analysts on SIGHUP
        assert service["RestartPreventExitStatus"] == "2"  # a lost state is not restarted into
        assert service["StateDirectory"] == "dsroc" and "/etc/dsroc" in service["ReadWritePaths"]


def test_the_container_file_copies_every_package_and_runs_the_real_cli():
    text = (DEPLOY / "Containerfile").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    copied = set()
    for line in lines:
        if line.startswith("COPY "):
            *sources, _ = line.split()[1:]
            for source in sources:
                assert (ROOT / source).exists(), source
                copied.add(source)
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {p.rstrip("*") for p in packages} <= copied
    assert "constraints.txt" in copied and re.search(r"pip install [^\n]*-c constraints\.txt \.", text)
    entry = json.loads(next(line for line in lines if line.startswith("ENTRYPOINT"))[len("ENTRYPOINT"):])
    cmd = json.loads(next(line for line in lines if line.startswith("CMD"))[len("CMD"):])
    assert entry == ["dsroc-site"]
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["dsroc-site"] == "site_node.cli:main"
    args = build_parser().parse_args(cmd)
    assert args.command == "serve" and args.config == ["/etc/dsroc/site.toml"]
    assert "STOPSIGNAL SIGTERM" in lines and any(line.startswith("USER ") and "root" not in line for line in lines)
