"""The one launcher of ``dsroc-site serve`` processes (the demo, tests, benchmarks): start, wait for, stop."""

from __future__ import annotations

import collections
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterable, Sequence

__all__ = ["Daemon", "DaemonFailed", "stop_all", "CHECKOUT"]

#: The checkout this module belongs to: the daemons import the same code unless told another tree.
CHECKOUT = Path(__file__).resolve().parents[1]
#: Lines of a daemon's log kept in memory (its pipe is always drained, so a chatty daemon never blocks).
LOG_LINES = 5000


class DaemonFailed(RuntimeError):
    """A daemon that exited, or did not get ready in time; carries its exit status and its log."""

    def __init__(self, message: str, *, returncode: int | None, log: str):
        super().__init__(f"{message}\n--- daemon log (end) ---\n{log[-3000:]}")
        self.returncode, self.log = returncode, log


class Daemon:
    """One ``dsroc-site serve`` process for one or more site configs, started at once.

    Its standard output (one ``{"event": "serving", ...}`` line per site) and its log (standard error) are read
    by threads from the start. Use it as a context manager (stopped on exit), or call :meth:`stop`.

    Parameters
    ----------
    configs : path or sequence of paths
        The site configs, one ``--config`` each.
    args : sequence of str
        More arguments of ``serve`` (``--insecure``, ``--listen``, ``--workers`` ...).
    tree : path, optional
        The checkout whose ``site_node`` the daemon runs (first on its ``PYTHONPATH``); default this one.
    program : sequence of str, optional
        What to run instead of ``python -m site_node`` (``["dsroc-site"]``, as a README says).
    env : mapping, optional
        The environment (default this process's) to which the tree is prepended on ``PYTHONPATH``.
    cwd : path, optional
        The daemon's working directory.
    """

    def __init__(self, configs, *, args: Sequence[str] = (), tree: Path | None = None,
                 program: Sequence[str] | None = None, env=None, cwd=None):
        self.configs = [Path(configs)] if isinstance(configs, (str, Path)) else [Path(c) for c in configs]
        env = dict(os.environ if env is None else env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree or CHECKOUT), env.get("PYTHONPATH")]))
        argv = [*(program or (sys.executable, "-m", "site_node")), "serve"]
        for config in self.configs:
            argv += ["--config", str(config)]
        self.proc = subprocess.Popen(argv + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env, cwd=cwd)
        self.pid = self.proc.pid
        self.addresses: list[str] = []
        self._serving: queue.Queue = queue.Queue()
        self._output: list[str] = []
        self._log: collections.deque = collections.deque(maxlen=LOG_LINES)
        self._logged, self._log_closed = threading.Condition(), False
        self._readers = [threading.Thread(target=read, daemon=True) for read in (self._read_stdout, self._read_log)]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            self._output.append(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == "serving":
                self._serving.put(event["address"])
        self._serving.put(None)  # the daemon closed its output: it exited

    def _read_log(self) -> None:
        for line in self.proc.stderr:
            with self._logged:
                self._log.append(line)
                self._logged.notify_all()
        with self._logged:
            self._log_closed = True
            self._logged.notify_all()

    @property
    def address(self) -> str:
        """The first site's ``host:port`` (after :meth:`wait_serving`)."""
        return self.addresses[0]

    def output(self) -> str:
        """What the daemon wrote to its standard output so far (its ``serving`` lines)."""
        return "".join(self._output)

    def log(self) -> str:
        """The daemon's log so far (its last :data:`LOG_LINES` lines)."""
        with self._logged:
            return "".join(self._log)

    def wait_serving(self, timeout: float = 60.0) -> Daemon:
        """Wait for every site's ``serving`` line and note the addresses; raise :class:`DaemonFailed` if the
        daemon exits first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while len(self.addresses) < len(self.configs):
            try:
                address = self._serving.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                raise self._failed(f"no 'serving' line within {timeout:g} s") from None
            if address is None:
                self.proc.wait(timeout=30)
                self._serving.put(None)
                raise self._failed(f"the daemon exited with status {self.proc.returncode} before serving")
            self.addresses.append(address)
        return self

    def wait_log(self, pattern: str, timeout: float = 60.0) -> re.Match:
        """The first match of ``pattern`` in a line of the daemon's log, once it is written; raise
        :class:`DaemonFailed` if the daemon exits or ``timeout`` seconds pass first."""
        found, deadline = re.compile(pattern), time.monotonic() + timeout
        with self._logged:
            while True:
                match = next(filter(None, map(found.search, self._log)), None)
                if match:
                    return match
                left = deadline - time.monotonic()
                if self._log_closed or left <= 0:
                    break
                self._logged.wait(min(left, 1.0))
        raise self._failed(f"no log line matching {pattern!r}" + (
            f" (the daemon exited with status {self.proc.wait(timeout=30)})" if self._log_closed
            else f" within {timeout:g} s"))

    def wait_healthy(self, *, ca_cert=None, client_cert=None, client_key=None, token: str | None = None,
                     timeout: float = 60.0) -> Daemon:
        """Wait until every site's gRPC health check says SERVING (a site does once its datasets are read), over
        mutual TLS with the given files (plain text without ``ca_cert``)."""
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        from .server import site_channel

        if not self.addresses:
            self.wait_serving(timeout)
        deadline = time.monotonic() + timeout
        metadata = [("authorization", f"Bearer {token}")] if token else []
        for address in self.addresses:
            with site_channel(address, ca_cert=ca_cert, client_cert=client_cert, client_key=client_key) as channel:
                health = health_pb2_grpc.HealthStub(channel)
                while True:
                    if self.proc.poll() is not None:
                        raise self._failed(f"the daemon exited with status {self.proc.returncode}")
                    try:
                        if health.Check(health_pb2.HealthCheckRequest(), timeout=2.0, metadata=metadata).status \
                                == health_pb2.HealthCheckResponse.SERVING:
                            break
                    except grpc.RpcError:
                        pass
                    if time.monotonic() > deadline:
                        raise self._failed(f"{address} did not report SERVING within {timeout:g} s")
                    time.sleep(0.1)
        return self

    def signal(self, signum: int) -> None:
        """Send ``signum`` (SIGHUP: reload) to the daemon."""
        self.proc.send_signal(signum)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds; its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return self.kill()
        return self._exited()

    def kill(self) -> int:
        """SIGKILL (a crash: no shutdown code runs); its exit status."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        return self._exited()

    def _exited(self) -> int:
        """The exit status, once the readers have the whole output and log."""
        for reader in self._readers:
            reader.join(timeout=10)
        return self.proc.returncode

    def _failed(self, message: str) -> DaemonFailed:
        return DaemonFailed(f"dsroc-site serve {' '.join(map(str, self.configs))}: {message}",
                            returncode=self.proc.poll(), log=self.log())

    def __enter__(self) -> Daemon:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def stop_all(daemons: Iterable[Daemon], timeout: float = 30.0) -> None:
    """Stop several daemons at once: SIGTERM to each, then wait for each."""
    daemons = list(daemons)
    for daemon in daemons:
        if daemon.proc.poll() is None:
            daemon.proc.send_signal(signal.SIGTERM)
    for daemon in daemons:
        daemon.stop(timeout)
