"""Memory before authentication, against a real ``dsroc-site serve`` process over mutual TLS: oversized requests
from a caller without a valid token, from a revoked certificate (with a stolen valid token), and to the open
health service must not make the daemon buffer them.

Before, gRPC read each unary request whole (up to site.max_message_bytes) before the interceptor's token and
revocation checks, and grew every stream's receive window to ~1.6 MB (BDP probing): 96 parallel 15 MiB calls
with a wrong token took the daemon from 134 MB to 1 000 MB. The daemon's peak resident memory is read from
``/proc/PID/status`` (``VmHWM``, reset before each flood through ``/proc/PID/clear_refs``).
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import grpc
import pytest

from site_node.cli.init import init_site
from site_node.config import load_config
from site_node.interceptors.audit import read_audit
from site_node.interceptors.auth import OPEN_READS
from site_node.security.crl import certificate_serial, revoke_certificate
from site_node.server import site_channel
from site_node.testing import Daemon

MB = 1 << 20


def _peak_mb(pid: int, reset: bool = False) -> float:
    """The process's peak resident memory in MB since the last reset (``reset``: start a new peak now)."""
    if reset:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc status")


def _flood(address, tls, method: str, token: str, calls: int, size: int) -> tuple[Counter, list[str]]:
    """``calls`` parallel calls of ``method`` carrying ``size`` bytes of garbage, each on its own connection (so
    that no per-connection stream limit helps); their status codes and details."""
    payload = b"\xff" * size
    channels = [site_channel(address, **tls, max_message_bytes=size + MB) for _ in range(calls)]
    codes, details, lock = Counter(), [], threading.Lock()

    def one(channel):
        call = channel.unary_unary(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
        try:
            call(payload, metadata=[("authorization", f"Bearer {token}")], timeout=120)
            code, detail = grpc.StatusCode.OK, ""
        except grpc.RpcError as exc:
            code, detail = exc.code(), exc.details() or ""
        with lock:
            codes[code] += 1
            details.append(detail)

    threads = [threading.Thread(target=one, args=(c,)) for c in channels]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in channels:
        c.close()
    return codes, details


@pytest.fixture
def revoked_site(tmp_path):
    """A served ``init`` site whose only client certificate is revoked (its token is still valid: stolen)."""
    result = init_site(tmp_path / "s")
    config = load_config(result.config)
    revoke_certificate(config.crl_path, result.pki.ca_cert, tmp_path / "s-ca" / "ca.key",
                       certificate_serial(result.pki.client_cert))
    tls = {"ca_cert": result.pki.ca_cert, "client_cert": result.pki.client_cert, "client_key": result.pki.client_key}
    with Daemon(result.config) as daemon:
        daemon.wait_healthy(**tls)
        yield daemon, tls, result.token, config


def _attack(daemon, tls, token, *, calls: int, size: int) -> tuple[dict[str, float], dict[str, float], dict]:
    """Flood with a wrong token, with the revoked certificate and a valid token, and the health service with
    garbage; each flood's peak of the daemon's memory and its growth over the memory before it (MB), and its
    answers."""
    peaks, grown, answers = {}, {}, {}
    floods = {"wrong token": ("/dsroc.v1.SiteService/Budget", "not-a-token"),
              "revoked certificate": ("/dsroc.v1.SiteService/Budget", token),
              "health": ("/grpc.health.v1.Health/Check", "")}
    for name, (method, bearer) in floods.items():
        before = _peak_mb(daemon.pid, reset=True)
        answers[name] = _flood(daemon.address, tls, method, bearer, calls, size)
        peaks[name] = _peak_mb(daemon.pid)
        grown[name] = peaks[name] - before
    assert daemon.proc.poll() is None
    return peaks, grown, answers


def _check_answers(answers, config, calls: int) -> None:
    """Every flood refused with the right status (never INTERNAL), each revoked call audited as such."""
    for name, (codes, details) in answers.items():
        if name == "health":
            assert codes == Counter({grpc.StatusCode.INVALID_ARGUMENT: calls}), codes  # read one at a time
        else:
            assert codes == Counter({grpc.StatusCode.UNAUTHENTICATED: calls}), codes
    assert all("is revoked at this site" in d for d in answers["revoked certificate"][1])
    revoked = [r for r in read_audit(config.audit_path) if "is revoked" in r["message"]]
    assert len(revoked) == calls and {r["decision"] for r in revoked} == {"UNAUTHENTICATED"}


def test_oversized_calls_before_authentication_are_not_buffered(revoked_site):
    daemon, tls, token, config = revoked_site
    _, grown, answers = _attack(daemon, tls, token, calls=32, size=6 * MB)
    # Before: a wrong-token flood buffered most of its 32 x 6 MiB (105 MB); now HTTP/2's 64 KiB window per stream.
    assert grown["wrong token"] < 24 and grown["revoked certificate"] < 24, grown
    # The health service reads OPEN_READS request at a time (its bytes copied several times by gRPC and the parser).
    assert OPEN_READS == 1 and grown["health"] < 64, grown
    _check_answers(answers, config, 32)


@pytest.mark.slow
def test_96_parallel_15_mib_calls_keep_the_daemon_under_300_mb(revoked_site):
    daemon, tls, token, config = revoked_site
    peaks, grown, answers = _attack(daemon, tls, token, calls=96, size=15 * MB)
    assert max(peaks.values()) <= 300, (peaks, grown)
    _check_answers(answers, config, 96)
