"""Boyd's per-site DP AUC and AP (ReleaseBoydStatistics) over real mutual-TLS daemons, charged to the ledger."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from dsroc.privacy.accounting import Accountant
from dsroc.mechanisms import smooth_noise_calibration, smooth_sensitivity
from dsroc.v1 import site_pb2 as pb
from site_node.protocols.boyd import boyd_events
from site_node.cli.init import sample_dataset


def strict_auc(s, y):
    x, z = s[y == 0], s[y == 1]
    return float((x[:, None] < z[None, :]).mean())


def brute_ap(s, y):
    pos = np.sort(s[y == 1])[::-1]
    neg = s[y == 0]
    return float(np.mean([j / (j + (neg >= v).sum()) for j, v in enumerate(pos, start=1)]))


def boyd(client, session, epsilon=8.0, delta=0.01, count_share=0.0):
    return client.ReleaseBoydStatistics(pb.BoydRequest(session_id=session, epsilon=epsilon, delta=delta,
                                                       count_share=count_share))


def test_release_is_charged_once_and_close_to_the_site_statistics(tls_site, snapshot, frame):
    server, client = tls_site()
    session = client.open()
    first = boyd(client, session)
    s, y = frame["pred"].to_numpy(), frame["y"].to_numpy()
    assert first.n == s.size and not first.repeated and "bounded DP" in first.privacy_unit
    # The site spends 0.9 epsilon / 2 on each statistic: its Laplace scale is 2 S* / (0.45 epsilon).
    cal = smooth_noise_calibration(0.45 * 8.0, 0.005)
    n1 = int(y.sum())
    auc_scale = cal.factor * smooth_sensitivity(n1, s.size, beta=cal.beta)
    ap_scale = cal.factor * smooth_sensitivity(n1, s.size, beta=cal.beta, statistic="ap")
    assert abs(first.auc - strict_auc(s, y)) < 12 * auc_scale  # beyond 12 scales: probability e^-12
    assert abs(first.average_precision - brute_ap(s, y)) < 12 * ap_scale
    assert abs(first.n1_noisy - n1) < 30  # Laplace(1 / 0.8): beyond 30 has probability e^-24
    budget = client.Budget(pb.BudgetRequest(dataset="test")).budget
    expected = Accountant(boyd_events(8.0, 0.01, 0.1)).epsilon(budget.budget_delta)
    assert budget.releases == 1 and budget.epsilon_spent == pytest.approx(expected, rel=1e-6)
    before = snapshot(server.config.ledger_path)
    again = boyd(client, client.open())
    assert again.repeated and (again.auc, again.average_precision, again.n1_noisy) == (first.auc, first.average_precision, first.n1_noisy)
    assert snapshot(server.config.ledger_path) == before


@pytest.mark.parametrize(
    "request_kw, code",
    [
        ({"epsilon": 0.0}, grpc.StatusCode.INVALID_ARGUMENT),
        ({"epsilon": float("nan")}, grpc.StatusCode.INVALID_ARGUMENT),
        ({"delta": 0.0}, grpc.StatusCode.INVALID_ARGUMENT),
        ({"delta": 1.0}, grpc.StatusCode.INVALID_ARGUMENT),
        ({"count_share": 1.5}, grpc.StatusCode.INVALID_ARGUMENT),
        ({"epsilon": 11.0}, grpc.StatusCode.PERMISSION_DENIED),  # above the policy's per-release cap
    ],
)
def test_bad_requests_are_refused_with_the_ledger_unchanged(tls_site, snapshot, request_kw, code):
    server, client = tls_site()
    session = client.open()
    before = snapshot(server.config.ledger_path)
    with pytest.raises(grpc.RpcError) as info:
        boyd(client, session, **request_kw)
    assert info.value.code() == code, info.value.details()
    assert snapshot(server.config.ledger_path) == before


def test_budget_exhaustion_and_unknown_session(tls_site, snapshot):
    server, client = tls_site(policy={"budget_epsilon": 6.0, "max_epsilon": 6.0})
    session = client.open()
    boyd(client, session, epsilon=5.0)
    before = snapshot(server.config.ledger_path)
    with pytest.raises(grpc.RpcError) as info:
        boyd(client, session, epsilon=4.0)  # a different release: would exceed the budget
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "nothing was released" in info.value.details()
    assert snapshot(server.config.ledger_path) == before
    with pytest.raises(grpc.RpcError) as info:
        boyd(client, "no-such-session")
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_privacy_level_applies(tls_site, snapshot):
    small = sample_dataset(300, seed=1)
    small.loc[:, "y"] = 0
    small.loc[:3, "y"] = 1  # four positives, below q = 5
    server, client = tls_site(frames={"test": small})
    session = client.open()
    before = snapshot(server.config.ledger_path)
    with pytest.raises(grpc.RpcError) as info:
        boyd(client, session)
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert snapshot(server.config.ledger_path) == before


def test_release_does_not_reveal_the_class_count(tls_site, frame):
    """Attack: the smooth sensitivity S* is a function of the private n1, so a released noise scale
    (factor * S*) would pin n1 down; the answer must carry only the noisy values."""
    _, client = tls_site()
    r = boyd(client, client.open())
    n, n1 = r.n, int(frame["y"].sum())
    cal = smooth_noise_calibration(0.45 * 8.0, 0.005)
    released = [getattr(r, f, 0.0) for f in ("auc_scale", "ap_scale")]
    candidates = set()
    for statistic, value in zip(("auc", "ap"), released):
        if value:
            scales = cal.factor * np.array([smooth_sensitivity(i, n, beta=cal.beta, statistic=statistic)
                                            for i in range(n + 1)])
            candidates |= set(np.flatnonzero(np.isclose(scales, value, rtol=1e-12)).tolist())
    assert n1 not in candidates


def test_a_site_that_does_not_serve_boyd_refuses_it_and_charges_nothing(tls_site, snapshot):
    # Boyd's release discloses the site's n (bounded DP), which the histogram protocol keeps private.
    server, client = tls_site(policy={"protocols": ["histogram"]})
    session = client.open()
    before = snapshot(server.config.ledger_path)
    with pytest.raises(grpc.RpcError) as err:
        boyd(client, session)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "'boyd'" in err.value.details() and "['histogram']" in err.value.details()
    assert snapshot(server.config.ledger_path) == before
