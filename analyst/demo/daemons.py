"""The demo's site daemons: one ``dsroc-site serve`` process per config, up once each reports health SERVING."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from analyst.session import Progress
from site_node.launcher import Daemon, stop_all

__all__ = ["running_daemons"]


@contextmanager
def running_daemons(configs: Sequence[tuple[str, Path, int]], *, pki, token: str,
                    progress: Progress | None = None, timeout: float = 60.0) -> Iterator[list[Daemon]]:
    """Start one ``dsroc-site serve`` process per ``(name, config, port)``, wait (up to ``timeout`` seconds each)
    for health SERVING over mutual TLS, which a site reports once its datasets are ready, and stop them on exit.

    Daemons are stopped with SIGTERM and waited for (killed only if they do not exit within 15 s); each one's log
    is then written to ``daemon.log`` beside its config. A daemon that exits or is not ready in time raises
    :class:`site_node.launcher.DaemonFailed` (a ``RuntimeError``) with its exit status and log.
    """
    daemons: list[Daemon] = []
    try:
        for _, path, _ in configs:
            daemons.append(Daemon(path, cwd=path.parent))
        for (name, _, _), daemon in zip(configs, daemons):
            daemon.wait_serving(timeout).wait_healthy(ca_cert=pki.ca_cert, client_cert=pki.client_cert,
                                                      client_key=pki.client_key, token=token, timeout=timeout)
            if progress:
                progress("start site daemons", name, f"SERVING on {daemon.address} (TLS, pid {daemon.pid})")
        yield daemons
    finally:
        stop_all(daemons, timeout=15.0)
        for (_, path, _), daemon in zip(configs, daemons):
            (path.parent / "daemon.log").write_text(daemon.output() + daemon.log(), encoding="utf-8")
