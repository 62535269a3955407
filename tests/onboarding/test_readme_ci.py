"""README's two commands and ``.ci/run``: a fresh Debian machine (no ``python``, no system pip) can run them."""

import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_two_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## The two commands"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = [line.split("  #")[0].strip() for line in block.strip().splitlines()]
    assert len(commands) == 2, commands
    return commands


def test_readme_first_command_makes_and_uses_a_virtual_environment():
    install, tests = readme_two_commands()
    steps = [s.strip() for s in install.split("&&")]
    # python3 (a stock Debian has no 'python'), a venv (Debian refuses system-wide pip), then install and demo
    assert steps[0] == "python3 -m venv .venv"
    assert steps[1] == ". .venv/bin/activate"
    assert steps[2] == 'pip install -c constraints.txt -e ".[test,flower]"'  # the lock, as .ci/run uses it
    assert steps[-1] == "dsroc demo"
    assert tests == "python -m pytest"  # inside the activated venv, 'python' exists


def test_ci_runs_exactly_the_readme_test_command_inside_its_own_venv():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in script.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    venv = lines.index("python3 -m venv .venv")
    activate = lines.index(". .venv/bin/activate")
    assert venv < activate
    # no bare 'python' or 'pip' before the venv is active
    for ln in lines[:activate]:
        words = shlex.split(ln, comments=True)
        assert "python" not in words and "pip" not in words, ln
    _, tests = readme_two_commands()
    assert lines[-1] == tests
    assert any('install --quiet -c constraints.txt -e ".[test,flower]"' in ln for ln in lines[activate:])
    assert "postgresql" in script and "python3-venv" in script  # the apt step stays, venv added when missing
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111


def test_pyproject_declares_the_shared_dependencies():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=\[ ]", d)[0].lower() for d in deps}
    assert {"dp-accounting", "opendp", "tomli-w", "tqdm"} <= names


def test_the_lock_pins_every_dependency_exactly():
    lock = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    pins = dict(ln.split("==") for ln in lock.splitlines() if ln and not ln.startswith("#"))
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", v) for v in pins.values()), pins
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = pyproject["optional-dependencies"]
    declared = pyproject["dependencies"] + extras["test"] + extras["flower"]
    names = {re.split(r"[<>=\[ ]", d)[0].lower().replace("_", "-") for d in declared}
    assert names <= {p.lower().replace("_", "-") for p in pins}, names - set(pins)
    refresh = (ROOT / ".ci" / "refresh-lock").read_text(encoding="utf-8")
    assert "python -m pytest" in refresh and refresh.index("python -m pytest") < refresh.index("mv constraints.txt.new")


def test_the_lock_holds_flwr_and_the_protobuf_the_committed_stubs_were_generated_for():
    """One environment: the locked protobuf is < 7 (flwr's bound) and not older than the stubs' gencode."""
    lock = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    pins = dict(ln.split("==") for ln in lock.splitlines() if ln and not ln.startswith("#"))
    protobuf = tuple(int(x) for x in pins["protobuf"].split(".")[:3])
    assert "flwr" in pins and protobuf < (7,)
    gencode = re.search(r"ValidateProtobufRuntimeVersion\(\s*_runtime_version.Domain.PUBLIC,\s*(\d+),\s*(\d+),\s*(\d+),",
                        (ROOT / "dsroc" / "v1" / "site_pb2.py").read_text(encoding="utf-8"))
    assert protobuf >= tuple(int(x) for x in gencode.groups())
    grpc_generated = re.search(r"GRPC_GENERATED_VERSION = '([\d.]+)'",
                               (ROOT / "dsroc" / "v1" / "site_pb2_grpc.py").read_text(encoding="utf-8")).group(1)
    assert tuple(map(int, pins["grpcio"].split("."))) >= tuple(map(int, grpc_generated.split(".")))
    assert ".[test,flower]" in (ROOT / ".ci" / "refresh-lock").read_text(encoding="utf-8")
