"""One analyst cannot make another's validation wait (issue 36, target 1): three analysts, three real TLS daemons.

mallory stays within her quota at every site: four calls at once (the per-analyst limit), holds up to her limits
(refused past them), sessions closed and reopened, Budget queries, secure-aggregation advertisements whose epsilon
changes at every call (a fresh share calibration each, ~0.1 s of CPU). Before, her parallel calibrations took most of
the daemons' CPU and alice's histogram validation, measured alternately without and with mallory calling, waited
1.7 s more (median 0.49 s alone, 2.19 s attacked). Each analyst's costly calls now run one at a time
(:mod:`site_node.protocols.costly`): 0.30 s more (0.55 s alone, 0.84 s attacked), beside bob's validations, within
the 1 s the target allows. With the per-analyst calibration allowance and without this serialization the wait was
1.29 s and 1.51 s in two runs; with both, 0.24 s and 0.28 s.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time

import grpc

from analyst import Federation, SiteConfig
from dsroc.v1 import site_pb2 as pb
from site_node.cli.init import link_peers, sample_dataset
from site_node.testing import running_server, tls_section, write_site_config

from ..conftest import Client

TOKENS = {"alice": "token-of-alice", "bob": "token-of-bob", "mallory": "token-of-mallory"}
N_SITES = 3


def _federation(addresses, pki, who):
    return Federation([SiteConfig(name=f"s{k}", address=a, token=TOKENS[who], ca_file=pki.ca_cert,
                                  client_cert=pki.client_cert, client_key=pki.client_key)
                       for k, a in enumerate(addresses)])


def _validate(addresses, pki, who, epsilon):
    """The wall time of one histogram validation through every site (it must succeed)."""
    started = time.monotonic()
    with _federation(addresses, pki, who) as fed:
        result = fed.validate("test", "y", score="pred", epsilon=epsilon, delta=1e-5)
    assert 0.0 < result.auc < 1.0
    return time.monotonic() - started


def _mallory(address, pki, names, stop, calling, calls, offset):
    """One of mallory's four calls in progress at a site, repeated while ``calling`` until ``stop``: mostly secagg
    advertisements, each at a new epsilon (a new calibration), and holds up to her limits, Budget queries and new
    sessions; every refusal is one of her quotas'."""
    c = Client(address, TOKENS["mallory"], ca_cert=pki.ca_cert, client_cert=pki.client_cert, client_key=pki.client_key)
    session, n = c.open(), 0
    while not stop.is_set():
        if not calling.wait(0.05):
            continue
        n += 1
        kind = ("secagg", "secagg", "secagg", "hold", "secagg", "secagg", "secagg", "budget")[n % 8]
        try:
            if kind == "secagg":
                c.SecAggAdvertise(pb.SecAggAdvertiseRequest(
                    session_id=session, round_id=os.urandom(32), epsilon=1.0 + (n * 64 + offset) * 1e-6, delta=1e-5,
                    n_bins=10, sites=names, colluders=1))
            elif kind == "hold":  # up to her limits, refused past them; now and then in a new session
                if n % 40 == 3:
                    c.CloseSession(pb.CloseSessionRequest(session_id=session))
                    session = c.open()
                c.PrepareRelease(pb.PrepareRequest(histogram=pb.HistogramRequest(
                    session_id=session, epsilon=1.0 + (n % 7) * 0.1, delta=1e-5, n_bins=10)))
            else:
                c.Budget(pb.BudgetRequest(dataset="test", queries=[
                    pb.ReleaseQuery(protocol="paper", epsilon=0.5 + (n * 64 + offset) * 1e-6, delta=1e-5)]))
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
        calls[kind] = calls.get(kind, 0) + 1
    c.close()


def test_an_analyst_within_her_quota_cannot_make_another_wait_a_second(tmp_path, tls_pki):
    configs = [write_site_config(tmp_path / f"s{k}", name=f"s{k}", frames={"test": sample_dataset(400, seed=k)},
                                 analysts=TOKENS, tls=tls_section(tls_pki), policy={"budget_epsilon": 400.0})
               for k in range(N_SITES)]
    link_peers(configs)
    names = [f"s{k}" for k in range(N_SITES)]
    with contextlib.ExitStack() as stack:
        addresses = [stack.enter_context(running_server(config)).bound_address for config in configs]
        _validate(addresses, tls_pki, "bob", 1.0)  # every daemon warm
        stop, calling, calls = threading.Event(), threading.Event(), {}
        attackers = [threading.Thread(target=_mallory, args=(a, tls_pki, names, stop, calling, calls, offset))
                     for offset, a in enumerate(addresses * 4)]  # four calls at once at each site, her limit
        bob = threading.Thread(target=lambda: [_validate(addresses, tls_pki, "bob", 2.0 + 0.01 * k) for k in range(3)])
        for thread in attackers:
            thread.start()
        alone, attacked = [], []
        try:
            for k in range(3):  # alternately without and with mallory: the machine's own load drifts
                alone.append(_validate(addresses, tls_pki, "alice", 1.0 + 0.01 * k))
                calling.set()
                time.sleep(0.5)  # every attacker call in flight
                if k == 0:
                    bob.start()
                attacked.append(_validate(addresses, tls_pki, "alice", 2.0 + 0.01 * k))
                calling.clear()
                time.sleep(0.3)  # the calls in flight end
            calling.set()
            bob.join(120)
        finally:
            stop.set()
            for thread in attackers:
                thread.join(60)
    assert not bob.is_alive()
    assert min(calls.values()) >= 5, calls  # mallory kept calling all along
    wait = statistics.median(attacked) - statistics.median(alone)

    assert wait <= 1.0, (f"alice waited {wait:.2f} s more with mallory calling (alone {alone}, attacked {attacked}, "
                         f"mallory's calls {calls})")
