"""The demo's site daemons: one ``dsroc-site serve`` subprocess per config, up once each reports health SERVING."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from analyst.session import Progress

__all__ = ["running_daemons", "wait_serving"]


def wait_serving(address: str, pki, token: str, proc: subprocess.Popen, *, timeout: float = 60.0) -> None:
    """Wait until the daemon at ``address`` answers health SERVING over mutual TLS (``RuntimeError`` when it exits
    or does not within ``timeout`` seconds)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    creds = grpc.ssl_channel_credentials(root_certificates=Path(pki.ca_cert).read_bytes(),
                                         private_key=Path(pki.client_key).read_bytes(),
                                         certificate_chain=Path(pki.client_cert).read_bytes())
    deadline = time.monotonic() + timeout
    with grpc.secure_channel(address, creds) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the site daemon at {address} exited with status {proc.returncode}")
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2.0,
                                   metadata=(("authorization", f"Bearer {token}"),))
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.1)
    raise RuntimeError(f"the site daemon at {address} did not report SERVING within {timeout:g} s")


@contextmanager
def running_daemons(configs: Sequence[tuple[str, Path, int]], *, pki, token: str,
                    progress: Progress | None = None, timeout: float = 60.0) -> Iterator[list[subprocess.Popen]]:
    """Start one ``dsroc-site serve`` subprocess per config, wait (up to ``timeout`` seconds each) for health
    SERVING, which a site reports once its datasets are ready, and stop them on exit.

    Daemons are stopped with SIGTERM and waited for (killed only if they do not exit within 15 s).
    """
    root = str(Path(__file__).resolve().parents[2])  # the daemons import the same checkout
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    procs: list[subprocess.Popen] = []
    try:
        for name, path, _ in configs:
            log = open(path.parent / "daemon.log", "wb")  # noqa: SIM115 - closed with the process below
            procs.append(subprocess.Popen([sys.executable, "-m", "site_node", "serve", "--config", str(path)],
                                          stdout=log, stderr=subprocess.STDOUT, env=env, cwd=path.parent))
            log.close()
        for (name, path, port), proc in zip(configs, procs):
            try:
                wait_serving(f"127.0.0.1:{port}", pki, token, proc, timeout=timeout)
            except RuntimeError as exc:
                tail = (path.parent / "daemon.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{name}: {exc}\n--- {path.parent / 'daemon.log'} (end) ---\n{tail}") from None
            if progress:
                progress("start site daemons", name, f"SERVING on 127.0.0.1:{port} (TLS, pid {proc.pid})")
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
