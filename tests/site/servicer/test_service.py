"""The full call sequence against real servers on loopback, checked against independent computations."""

from __future__ import annotations

import math

import grpc
import numpy as np
import pytest
import statsmodels.api as sm
from scipy.optimize import brentq
from scipy.special import ndtri
from scipy.stats import norm

from dsroc import PartsAtTheta, fit_rocglm
from dsroc.v1 import site_pb2 as pb
from site_node.cli.init import sample_dataset
from site_node.testing import running_server

from ..conftest import channel_to
from .independent import NEG, POS, GRID, brute_placements, statsmodels_parts

def test_describe_lists_permitted_datasets_and_policy(client, server):
    d = client.Describe(pb.DescribeRequest())
    assert d.api_version == "dsroc.v1" and d.site_name == "site"
    assert [x.name for x in d.datasets] == ["test"]
    info = d.datasets[0]
    assert {c.name for c in info.columns} == {"age", "size", "nodes", "grade", "y", "pred"}
    assert list(info.outcome_columns) == ["y"] and list(info.score_columns) == ["pred"]
    assert d.policy.privacy_level == 5 and d.policy.max_glm_evaluations == 30 and d.policy.max_thresholds == 100
    assert info.budget.mu_spent == 0 and info.budget.mu_remaining == pytest.approx(info.budget.mu_budget)


def test_full_sequence_one_site(client, frame):
    session = client.open()
    s, y = frame["pred"].to_numpy(), frame["y"].to_numpy()
    s0, s1 = s[y == 0], s[y == 1]

    sens = client.Sensitivity(pb.SensitivityRequest(session_id=session))
    assert (sens.sensitivity, sens.rule, sens.formal_bound) == (1.0, "range", True)
    # OpenSession can carry the same answer and the policy Describe gives (one round trip instead of three).
    opened = client.OpenSession(pb.OpenSessionRequest(dataset="test", outcome="y", with_sensitivity=True,
                                                      score=pb.ScoreSource(score_column="pred")))
    assert opened.sensitivity == sens and opened.policy == client.Describe(pb.DescribeRequest()).policy
    plain = client.OpenSession(pb.OpenSessionRequest(dataset="test", outcome="y",
                                                     score=pb.ScoreSource(score_column="pred")))
    assert not plain.HasField("sensitivity") and plain.HasField("policy")
    for extra in (opened, plain):
        client.CloseSession(pb.CloseSessionRequest(session_id=extra.session_id))

    info0, noisy0, chunks = client.release(session, NEG, epsilon=5.0, delta=0.01, chunk_size=64)
    assert len(chunks) == math.ceil(s0.size / 64) and [c.offset for c in chunks] == list(range(0, s0.size, 64))
    assert not any(c.HasField("info") for c in chunks[1:])
    assert info0.n == s0.size == noisy0.size and np.all(np.diff(noisy0) >= 0)
    # The noise is exact discrete Gaussian on a lattice (dsroc.privacy.lattice): its SD tau is within 0.2 % above the
    # analytic Gaussian calibration tau0 (where the privacy-loss condition holds with equality), and the release is
    # charged at a Gaussian-DP mu at which the condition holds, within 1e-3 of the budget's delta.
    d, t, e = info0.sensitivity, info0.tau, info0.epsilon

    def condition(mu):
        return norm.cdf(mu / 2 - e / mu) - math.exp(e) * norm.cdf(-mu / 2 - e / mu)

    tau0 = d / brentq(lambda mu: condition(mu) - 0.01, 1e-3, 50.0, xtol=1e-14)
    assert 1.0 <= t / tau0 < 1.002
    assert condition(info0.mu) <= 0.01 and condition(info0.mu) == pytest.approx(0.01, rel=1e-3)
    assert info0.mu_charged == pytest.approx(info0.mu) and not info0.repeated
    assert abs(noisy0.mean() - s0.mean()) < 5 * t / math.sqrt(s0.size)

    info1, noisy1, _ = client.release(session, POS, epsilon=5.0, delta=0.01)
    assert info1.n == s1.size and info1.release_id == info0.release_id
    assert info1.mu_charged == 0 and info1.repeated  # one release covers both classes

    up0 = client.upload(session, NEG, noisy0, chunk=50)
    assert up0.n_received == noisy0.size and up0.evaluations_left == 30
    client.upload(session, POS, noisy1)

    pv0 = brute_placements(noisy0, s1)
    k = np.array([(pv0 <= t).sum() for t in GRID])
    theta = np.array([0.4, 0.9])
    r = client.RocGlmParts(pb.RocGlmPartsRequest(session_id=session, theta=theta))
    score, info, deviance = statsmodels_parts(k, s1.size, theta)
    np.testing.assert_allclose(r.score, score, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(np.reshape(r.information, (2, 2)), info, rtol=1e-8)
    assert r.deviance == pytest.approx(deviance, rel=1e-9)
    assert r.evaluations_left == 29 and r.n_thresholds == 28
    # Another grid, then the default grid again: each answer is for the grid asked.
    small = np.linspace(0, 1, 12)[1:-1]
    r12 = client.RocGlmParts(pb.RocGlmPartsRequest(session_id=session, theta=theta, grid=pb.GridSpec(n_points=12)))
    score12, _, deviance12 = statsmodels_parts(np.array([(pv0 <= t).sum() for t in small]), s1.size, theta, small)
    np.testing.assert_allclose(r12.score, score12, rtol=1e-8, atol=1e-8)
    assert r12.deviance == pytest.approx(deviance12, rel=1e-9) and r12.n_thresholds == 10
    again = client.RocGlmParts(pb.RocGlmPartsRequest(session_id=session, theta=theta))
    assert again.deviance == r.deviance and again.evaluations_left == 28  # a repeated question is free

    pv1 = brute_placements(noisy1, s0)
    m1 = client.PlacementMoments(pb.PlacementMomentsRequest(session_id=session))
    assert (m1.pv0.n, m1.pv1.n) == (s1.size, s0.size)
    assert m1.pv0.total == pytest.approx(pv0.sum()) and m1.pv1.total == pytest.approx(pv1.sum())
    # Pass 1 also sends the squared deviations from the site's own means (one-round-trip variance).
    assert m1.local_ssd_pv0 == pytest.approx(((pv0 - pv0.mean()) ** 2).sum(), rel=1e-12)
    assert m1.local_ssd_pv1 == pytest.approx(((pv1 - pv1.mean()) ** 2).sum(), rel=1e-12)
    m2 = client.PlacementMoments(pb.PlacementMomentsRequest(session_id=session, global_means=pb.GlobalMeans(
        mean_pv0=0.3, mean_pv1=0.6)))
    assert m2.second_pass and m2.ssd_pv0 == pytest.approx(((pv0 - 0.3) ** 2).sum())
    assert m2.ssd_pv1 == pytest.approx(((pv1 - 0.6) ** 2).sum())

    b = client.BrierParts(pb.BrierPartsRequest(session_id=session))
    assert b.n == s.size and b.sum_sq == pytest.approx(((y - s) ** 2).sum())

    cm = client.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=0.5))
    pred = s >= 0.5
    assert (cm.tp, cm.fp, cm.fn, cm.tn) == (np.sum(pred & (y == 1)), np.sum(pred & (y == 0)),
                                            np.sum(~pred & (y == 1)), np.sum(~pred & (y == 0)))

    c = client.CalibrationParts(pb.CalibrationPartsRequest(session_id=session, n_bins=10))
    edges = np.linspace(0, 1, 11)
    counts, _ = np.histogram(s, bins=edges)
    released = {x.index: x for x in c.bins}
    assert c.suppressed, "the sample data should have a sparse bin, so suppression is exercised"
    assert set(np.flatnonzero(counts < 5)) <= set(c.suppressed) and set(released) | set(c.suppressed) == set(range(10))
    # The withheld bins cannot be recovered as n (or n0, n1) minus the released counts (or positives),
    # nor with the confusion matrix at 0.5 (an edge) as the row totals minus the released bins on a side.
    hidden = np.isin(np.minimum(np.searchsorted(edges, s, side="right") - 1, 9), list(c.suppressed))
    for side in (hidden, hidden & pred, hidden & ~pred):
        assert all(k == 0 or k >= 5 for k in (side.sum(), (side & (y == 1)).sum(), (side & (y == 0)).sum()))
    for i, x in released.items():
        in_bin = (s >= edges[i]) & ((s < edges[i + 1]) if i < 9 else (s <= 1))
        assert x.count == in_bin.sum() and x.sum_scores == pytest.approx(s[in_bin].sum())
        assert x.sum_labels == y[in_bin].sum()


    budget = client.Budget(pb.BudgetRequest(dataset="test")).budget
    assert budget.releases == 1 and budget.mu_spent == pytest.approx(info0.mu)
    client.CloseSession(pb.CloseSessionRequest(session_id=session))


def test_glm_score_source_and_model_sensitivity(make_site_config, client_cls, frame, approve):
    config = make_site_config(policy={"sensitivity": "model"})
    model = pb.GlmModel(link=pb.LINK_PROBIT, intercept=-2.0, coefficients=[
        pb.Coefficient(name="age", value=0.01), pb.Coefficient(name="nodes", value=0.1)])
    approve(config, model)
    with running_server(config) as srv:
        c = client_cls(srv)
        session = c.open(model=model)
        sens = c.Sensitivity(pb.SensitivityRequest(session_id=session))
        assert sens.rule == "model" and not sens.formal_bound and "not a formal bound" in sens.note
        # Independent brute force: every record, each feature moved one histogram bin down and up.
        X = frame[["age", "nodes"]].to_numpy(float)
        f = lambda X: norm.cdf(-2.0 + 0.01 * X[:, 0] + 0.1 * X[:, 1])
        base, best = f(X), 0.0
        age_width = (X[:, 0].max() - X[:, 0].min()) / 10
        for moved in (X[:, 0] - age_width, X[:, 0] + age_width):
            ok = (moved >= X[:, 0].min()) & (moved <= X[:, 0].max())
            Xm = X.copy(); Xm[:, 0] = moved
            best = max(best, np.abs(f(Xm) - base)[ok].max())
        # nodes has at most 10 distinct values, so its bins are its levels: move to the adjacent level.
        levels = np.unique(X[:, 1])
        assert levels.size <= 10
        pos = np.searchsorted(levels, X[:, 1])
        for step in (-1, 1):
            ok = (pos + step >= 0) & (pos + step < levels.size)
            Xm = X[ok].copy(); Xm[:, 1] = levels[pos[ok] + step]
            best = max(best, np.abs(f(Xm) - base[ok]).max())
        assert sens.sensitivity == pytest.approx(best, rel=1e-12)
        # The released scores are the model's: their mean matches the model on the data within the noise.
        info, noisy, _ = c.release(session, POS, epsilon=10, delta=0.01)
        s1 = f(X)[frame["y"].to_numpy() == 1]
        assert info.sensitivity == pytest.approx(best) and abs(noisy.mean() - s1.mean()) < 5 * info.tau / math.sqrt(s1.size)
        b = c.BrierParts(pb.BrierPartsRequest(session_id=session))
        assert b.sum_sq == pytest.approx(((frame["y"].to_numpy() - f(X)) ** 2).sum())
        c.close()


def test_three_sites_distributed_fit_equals_pooled(make_site_config, client_cls):
    pooled = sample_dataset(900, seed=7)
    parts = [pooled.iloc[i::3] for i in range(3)]
    configs = [make_site_config(f"site{i}", frames={"test": p.reset_index(drop=True)}) for i, p in enumerate(parts)]
    servers = [running_server(c) for c in configs]
    try:
        clients = [client_cls(s.__enter__()) for s in servers]
        sessions = [c.open() for c in clients]
        released = [(c.release(s, NEG, epsilon=10)[1], c.release(s, POS, epsilon=10)[1]) for c, s in zip(clients, sessions)]
        S0 = np.concatenate([r[0] for r in released])
        S1 = np.concatenate([r[1] for r in released])
        for c, s in zip(clients, sessions):
            c.upload(s, NEG, S0)
            c.upload(s, POS, S1)

        def evaluate(theta):
            total = None
            for c, s in zip(clients, sessions):
                r = c.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=theta))
                p = PartsAtTheta(np.array(r.score), np.reshape(r.information, (2, 2)), r.deviance)
                total = p if total is None else total + p
            return total

        fit = fit_rocglm(evaluate)
        s, y = pooled["pred"].to_numpy(), pooled["y"].to_numpy()
        pv0 = brute_placements(S0, s[y == 1])
        k = np.array([(pv0 <= t).sum() for t in GRID])
        ref = sm.GLM(np.column_stack([k, (y == 1).sum() - k]), sm.add_constant(ndtri(GRID)),
                     family=sm.families.Binomial(link=sm.families.links.Probit())).fit()
        np.testing.assert_allclose(fit.params, ref.params, rtol=1e-4)  # both stop on the deviance rule

        firsts = [c.PlacementMoments(pb.PlacementMomentsRequest(session_id=s)) for c, s in zip(clients, sessions)]
        mean0 = sum(f.pv0.total for f in firsts) / sum(f.pv0.n for f in firsts)
        assert mean0 == pytest.approx(pv0.mean())
        mean1 = sum(f.pv1.total for f in firsts) / sum(f.pv1.n for f in firsts)
        seconds = [c.PlacementMoments(pb.PlacementMomentsRequest(session_id=s, global_means=pb.GlobalMeans(
            mean_pv0=mean0, mean_pv1=mean1))) for c, s in zip(clients, sessions)]
        var0 = sum(x.ssd_pv0 for x in seconds) / (pv0.size - 1)
        assert var0 == pytest.approx(np.var(pv0, ddof=1))
        pv1 = brute_placements(S1, s[y == 0])
        assert sum(x.ssd_pv1 for x in seconds) / (pv1.size - 1) == pytest.approx(np.var(pv1, ddof=1))
        for c in clients:
            c.close()
    finally:
        for srv in servers:
            srv.__exit__(None, None, None)


def test_health_service_reports_serving(server):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    import grpc

    with channel_to(server) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        for service in ("", "dsroc.v1.SiteService"):
            r = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert r.status == health_pb2.HealthCheckResponse.SERVING


def test_calibration_secondary_suppression(make_site_config, client_cls):
    # 200 patients; the top bin gets exactly 3 (below q = 5), bin 5 is the smallest of the others.
    rng = np.random.default_rng(9)
    sizes = [30, 25, 25, 20, 20, 8, 25, 22, 22, 3]
    pred = np.concatenate([rng.uniform(b / 10 + 0.001, (b + 1) / 10 - 0.001, k) for b, k in enumerate(sizes)])
    frame = sample_dataset(200, seed=9).assign(pred=pred.round(6))
    config = make_site_config(frames={"test": frame})
    with running_server(config) as srv:
        c = client_cls(srv)
        r = c.CalibrationParts(pb.CalibrationPartsRequest(session_id=c.open()))
        # Bin 9 alone would be recoverable as 200 - 197 = 3: bin 5 (the smallest released) is withheld too,
        # and more while the positives or negatives of the withheld bins (n1 or n0 minus the released
        # ones) would number 1 to 4.
        assert {5, 9} <= set(r.suppressed) and sorted(set(r.suppressed) | {b.index for b in r.bins}) == list(range(10))
        withheld = np.isin(np.minimum((pred * 10).astype(int), 9), list(r.suppressed))
        y = frame["y"].to_numpy()
        assert all(k == 0 or k >= 5 for k in (withheld.sum(), (withheld & (y == 1)).sum(), (withheld & (y == 0)).sum()))
        assert 200 - sum(b.count for b in r.bins) == withheld.sum()
        c.close()
