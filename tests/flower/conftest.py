"""A real Flower deployment on loopback: the sites' daemons, a SuperLink, one SuperNode per site, and ``flwr run``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from site_node.cli.main import main as site_main
from site_node.config import load_config
from site_node.server import SiteServer

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
APP = ROOT / "deploy" / "flower"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_config(fed: Path, site: str) -> str:
    """The SuperNode's --node-config for ``site`` of ``dsroc-site init --federation``: its config, the CA of its
    daemon's certificate and a client certificate its daemon accepts (mutual TLS)."""
    return (f'site-config="{fed / site / "site.toml"}" ca-file="{fed / site / "pki" / "ca.crt"}" '
            f'client-cert="{fed / f"{site}-analyst1" / "client.crt"}" client-key="{fed / f"{site}-analyst1" / "client.key"}"')


def descendants(pid: int) -> list[int]:
    """The ids of the processes below ``pid`` (from /proc), deepest last."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class FlowerDeployment:
    """Sites ``site1..siteN`` (daemons in-process), a SuperLink and N SuperNodes (subprocesses), ``flwr run``."""

    def __init__(self, root: Path, n_sites: int):
        self.root, self.fed = root, root / "fed"
        assert site_main(["init", "--federation", str(n_sites), str(self.fed)]) == 0
        self.sites = [f"site{k + 1}" for k in range(n_sites)]
        self.federation_file = self.fed / "federation.toml"
        self.home = root / "flwr-home"
        self.home.mkdir()
        self.port = free_port()
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "local"\n\n[superlink.local]\naddress = "127.0.0.1:{self.port}"\ninsecure = true\n')
        self.env = {**os.environ, "FLWR_HOME": str(self.home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        self.servers: list[SiteServer] = []
        self.processes: list[subprocess.Popen] = []

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "wb")
        proc = subprocess.Popen([str(BIN / args[0]), *args[1:]], env=self.env, cwd=self.root, stdout=log,
                                stderr=subprocess.STDOUT)
        self.processes.append(proc)
        return proc

    def start_sites(self) -> "FlowerDeployment":
        """The sites' daemons, in-process, on the addresses their configs name."""
        for site in self.sites:
            self.servers.append(SiteServer(load_config(self.fed / site / "site.toml")).start())
        return self

    def start_flower(self) -> "FlowerDeployment":
        """The SuperLink and one SuperNode per site (subprocesses)."""
        self._spawn("superlink", "flower-superlink", "--insecure", "--port", str(self.port),
                    "--database", str(self.root / "superlink.db"), "--disable-runtime-dependency-installation")
        self._wait_for_superlink()
        for site in self.sites:
            self._spawn(site, "flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{self.port}",
                        "--port", str(free_port()), "--node-config", node_config(self.fed, site))
        return self

    def _wait_for_superlink(self, timeout: float = 180.0) -> None:
        """Until the SuperLink answers its Control API (``flwr ls``), or AssertionError with its log."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with contextlib.suppress(subprocess.TimeoutExpired):
                if subprocess.run([str(BIN / "flwr"), "ls", "local"], env=self.env, cwd=self.root,
                                  capture_output=True, timeout=60).returncode == 0:
                    return
            time.sleep(1.0)
        raise AssertionError(f"the SuperLink did not answer within {timeout:g} s:\n{self.log('superlink')[-3000:]}")

    def run(self, out: Path, *, timeout: float = 1200.0, **run_config) -> subprocess.CompletedProcess:
        """``flwr run`` of the dsroc app bundle with this federation (and ``run_config`` on top)."""
        config = {"federation": str(self.federation_file), "out": str(out), **run_config}
        text = " ".join(f"{k}={v!r}" if not isinstance(v, str) else f'{k}="{v}"' for k, v in config.items())
        return subprocess.run([str(BIN / "flwr"), "run", str(APP), "local", "--stream", "--run-config", text],
                              env=self.env, cwd=self.root, capture_output=True, text=True, timeout=timeout)

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_bytes().decode(errors="replace")

    def stop(self) -> None:
        # Flower's processes start others (SuperExec, a flwr-clientapp per message) that may outlive them: end those
        # too, by their ids (descendants of the processes this deployment started).
        children = [pid for proc in self.processes for pid in descendants(proc.pid)]
        for proc in reversed(self.processes):
            proc.terminate()
        for proc in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)
            if proc.poll() is None:
                proc.kill()
        children += [pid for proc in self.processes for pid in descendants(proc.pid)]
        for pid in dict.fromkeys(children):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for server in self.servers:
            server.stop(grace=1.0)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    d = FlowerDeployment(tmp_path_factory.mktemp("flower"), 2).start_sites().start_flower()
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """Only the sites' daemons (for the in-process grid)."""
    d = FlowerDeployment(tmp_path_factory.mktemp("sites"), 2).start_sites()
    try:
        yield d
    finally:
        d.stop()
