"""The histogram protocol at the site: exact counts under negligible noise, the stated noise variance,
release-once, the policy's grid, the served protocols and bad input (ledger unchanged)."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from scipy.special import expit, logit

from dsroc.privacy.accounting import discretization_for
from dsroc.v1 import site_pb2 as pb
from site_node.testing import running_server

from ...conftest import read_frame

C = grpc.StatusCode
HUGE = {"max_epsilon": 5000.0, "budget_epsilon": 1e5, "max_delta": 0.01, "budget_delta": 0.05}


def _brute_force(scores, labels, edges):
    """Per-class counts by direct comparison: bin b holds lo-clipped scores in [e_b, e_b+1), the last bin closed."""
    s = np.clip(scores, edges[0], edges[-1])
    h = np.zeros((2, edges.size - 1), dtype=int)
    for b in range(edges.size - 1):
        inside = (s >= edges[b]) & ((s < edges[b + 1]) if b < edges.size - 2 else (s <= edges[b + 1]))
        h[0, b], h[1, b] = np.sum(inside & (labels == 0)), np.sum(inside & (labels == 1))
    return h


def _request(session, **kw):
    return pb.HistogramRequest(session_id=session, **{"epsilon": 1.0, "delta": 1e-5, "n_bins": 20, **kw})


@pytest.mark.parametrize("spacing", ["equal", "logit"])
def test_with_a_huge_epsilon_the_histograms_equal_brute_force(make_site_config, client_cls, spacing):
    config = make_site_config(policy=HUGE)
    frame = read_frame(config)
    with running_server(config) as srv:
        c = client_cls(srv)
        r = c.ReleaseHistogram(_request(c.open(), epsilon=4000.0, delta=0.01, spacing=spacing,
                                        scalars=["sum_sq", "sum_p", "sum_y"], score_sums=True))
        edges = np.asarray(r.edges)
        expected = (np.linspace(0, 1, 21) if spacing == "equal"
                    else expit(np.linspace(logit(0.0001), logit(0.9999), 21)))
        np.testing.assert_allclose(edges, expected, rtol=1e-12, atol=1e-15)
        h = _brute_force(frame["pred"].to_numpy(), frame["y"].to_numpy(), edges)
        np.testing.assert_array_equal(r.negatives, h[0])
        np.testing.assert_array_equal(r.positives, h[1])
        assert r.privacy_unit == "add or remove one patient" and r.epsilon == 4000.0 and not r.repeated
        p, y = frame["pred"].to_numpy(), frame["y"].to_numpy()
        truth = {"sum_sq": np.sum((y - p) ** 2), "sum_p": np.sum(p), "sum_y": np.sum(y)}
        for s in r.scalars:  # unbiased random rounding of each term to 1/16: SD at most sqrt(n) / 32
            assert s.resolution == 1 / 16 and abs(s.value - truth[s.name]) <= 5 * np.sqrt(len(p)) / 32
        assert {s.name for s in r.scalars} == set(truth)
        # Per-bin sums of the scores' offsets within their bin, by direct comparison: each offset is rounded
        # (unbiased) to 1/2, so a bin's sum is off by an SD of at most sqrt(count) / 4, plus their noise
        # (6 times the counts' on the integer scale).
        clipped = np.clip(p, edges[0], edges[-1])
        for label, sums in ((0, r.negative_sums), (1, r.positive_sums)):
            for b in range(edges.size - 1):
                inside = (clipped >= edges[b]) & ((clipped < edges[b + 1]) if b < edges.size - 2 else True) & (y == label)
                inside &= clipped <= edges[b + 1]
                exact = np.sum((clipped[inside] - edges[b]) / (edges[b + 1] - edges[b]))
                assert abs(sums[b] - exact) <= 5 * np.sqrt(inside.sum()) / 4 + 5 * r.sums_noise_sd + 1e-9
        assert r.sums_resolution == 1 / 2 and 0 < r.sums_noise_sd < 0.1
        c.close()


def test_an_explicit_grid_from_allowed_edges_is_binned_exactly(make_site_config, client_cls):
    """Interior edges taken from two allowed grids (equal 20 and logit 50): the site adds the score range's
    ends and counts by direct comparison; the release is its own (a new request, charged)."""
    config = make_site_config(policy=HUGE)
    frame = read_frame(config)
    interior = [float(expit(np.linspace(logit(0.0001), logit(0.9999), 51))[10]), 0.25, 0.6]
    with running_server(config) as srv:
        c = client_cls(srv)
        r = c.ReleaseHistogram(_request(c.open(), epsilon=4000.0, delta=0.01, n_bins=0, edges=interior,
                                        score_sums=True))
        edges = np.asarray(r.edges)
        np.testing.assert_allclose(edges, [0.0, *interior, 1.0], rtol=0, atol=1e-15)
        h = _brute_force(frame["pred"].to_numpy(), frame["y"].to_numpy(), edges)
        np.testing.assert_array_equal(r.negatives, h[0])
        np.testing.assert_array_equal(r.positives, h[1])
        assert not r.repeated and len(r.negative_sums) == 4
        c.close()


def test_with_real_noise_the_stated_variance_holds(make_site_config, client_cls):
    config = make_site_config(policy={"max_epsilon": 2.0, "budget_epsilon": 1000.0})
    frame = read_frame(config)
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        noise, stated = [], None
        for i in range(40):  # different epsilon, so new releases with fresh noise
            r = c.ReleaseHistogram(_request(s, epsilon=1.0 + 1e-3 * i, n_bins=10))
            h = _brute_force(frame["pred"].to_numpy(), frame["y"].to_numpy(), np.asarray(r.edges))
            noise.append(np.concatenate([np.asarray(r.negatives) - h[0], np.asarray(r.positives) - h[1]]))
            # discrete Laplace of scale b = 1 / epsilon, epsilon rounded down to the ledger's grid at this budget
            assert r.mechanism == "discrete_laplace"
            eps, grid = 1.0 + 1e-3 * i, discretization_for(1000.0)
            assert eps - grid < 1.0 / r.sigma <= eps
            a = np.exp(-1.0 / r.sigma)
            assert r.noise_sd == pytest.approx(np.sqrt(2 * a) / (1 - a), rel=1e-12)
            stated = r.noise_sd if stated is None else stated
        noise = np.concatenate(noise)  # 800 draws; the variance's sampling SD is about 8% (kurtosis about 6)
        assert abs(noise.mean()) < 4 * stated / np.sqrt(noise.size)
        assert noise.var() == pytest.approx(stated**2, rel=0.25)
        assert np.all(np.asarray(noise) == np.round(noise))  # integer noise
        c.close()


def test_release_once_after_a_restart_and_through_the_budget(site_config, client_cls, snapshot):
    with running_server(site_config) as srv:
        c = client_cls(srv)
        first = c.ReleaseHistogram(_request(c.open(), scalars=["sum_p"]))
        status = c.Budget(pb.BudgetRequest(dataset="test")).budget
        # A pure history, charged the release's epsilon 1 by basic composition (at the budget's delta 0.05, a
        # pure 1-DP history is (1 + log 0.95)-DP) and delta 0 at the budget's epsilon.
        assert status.releases == 1 and status.accounting == "pure epsilon-dp (basic composition)"
        assert status.epsilon_spent == pytest.approx(1.0 + np.log1p(-site_config.policy.budget_delta), abs=1e-9)
        assert status.delta_spent == 0.0
        c.close()
    before = snapshot(site_config.ledger_path)
    with running_server(site_config) as srv:
        c = client_cls(srv)
        again = c.ReleaseHistogram(_request(c.open(), scalars=["sum_p"]))
        assert again.repeated and again.release_id == first.release_id
        assert list(again.negatives) == list(first.negatives) and again.scalars == first.scalars
        assert snapshot(site_config.ledger_path) == before
        c.close()


def test_the_whole_release_costs_its_stated_epsilon_and_the_sums_are_never_free(make_site_config, client_cls):
    """Counts, per-bin score sums and three scalars at epsilon 1 fit a budget of exactly 1 (they share epsilon in
    the proportions 0.7 : 0.1 : 0.1 each, pure epsilon-DP parts adding up to 1; each part at epsilon 1 would
    compose to 5 and be refused), and the sums
    cannot be had as a repeat of a counts-only release: asking for them is a new release, charged."""
    caps = {"max_epsilon": 1.0, "max_delta": 1e-5, "budget_delta": 1e-5}
    config = make_site_config(policy={**caps, "budget_epsilon": 1.0})
    with running_server(config) as srv:
        c = client_cls(srv)
        r = c.ReleaseHistogram(_request(c.open(), epsilon=1.0, scalars=["sum_sq", "sum_p", "sum_y"], score_sums=True))
        assert not r.repeated and r.epsilon == 1.0 and r.epsilon_spent == pytest.approx(1.0, abs=0.02)
        assert len(r.negative_sums) == len(r.positive_sums) == 20
        # The counts get 0.7 / 1.1 of epsilon: scale 1.1 / 0.7 (less than a grid step of 5e-4 in epsilon above it);
        # the sums 0.1 / 1.1 at sensitivity 2 (half-bin units), each scalar 0.1 / 1.1 at sensitivity 16.
        assert r.mechanism == "discrete_laplace" and 1.1 / 0.7 <= r.sigma <= 1.0 / (0.7 / 1.1 - 5e-4)

        def sd(scale):  # the discrete Laplace's SD sqrt(2 a) / (1 - a), a = exp(-1 / scale)
            a = np.exp(-1.0 / scale)
            return np.sqrt(2 * a) / (1 - a)

        assert sd(2 / (1 / 11)) / 2 <= r.sums_noise_sd <= sd(2 / (1 / 11 - 5e-4)) / 2
        assert all(sd(16 / (1 / 11)) / 16 <= s.noise_sd <= sd(16 / (1 / 11 - 5e-4)) / 16 for s in r.scalars)
        c.close()
    config = make_site_config("twice", policy={**caps, "budget_epsilon": 10.0})
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        counts = c.ReleaseHistogram(_request(s, epsilon=1.0))
        sums = c.ReleaseHistogram(_request(s, epsilon=1.0, score_sums=True))
        assert not sums.repeated and sums.release_id != counts.release_id
        assert sums.epsilon_spent > counts.epsilon_spent + 0.3
        assert len(counts.negative_sums) == 0 and len(sums.negative_sums) == 20
        c.close()


def test_analyst_models_need_no_approval_in_the_histogram_protocol(make_site_config, client_cls):
    config = make_site_config(policy={"protocols": ["histogram"]})
    model = pb.GlmModel(link=pb.LINK_LOGIT, intercept=-1.0, coefficients=[pb.Coefficient(name="age", value=0.01)])
    with running_server(config) as srv:
        c = client_cls(srv)
        r = c.ReleaseHistogram(_request(c.open(model=model)))
        assert sum(r.negatives) + sum(r.positives) > 0
        c.close()


def test_paper_calls_name_the_served_protocols(make_site_config, client_cls, snapshot):
    config = make_site_config(policy={"protocols": ["histogram"]})
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        before = snapshot(config.ledger_path)
        calls = [lambda: c.release(s, pb.SCORE_CLASS_NEGATIVES), lambda: c.Sensitivity(pb.SensitivityRequest(session_id=s)),
                 lambda: c.BrierParts(pb.BrierPartsRequest(session_id=s)),
                 lambda: c.ConfusionParts(pb.ConfusionPartsRequest(session_id=s, threshold=0.5)),
                 lambda: c.PlacementMoments(pb.PlacementMomentsRequest(session_id=s)),
                 lambda: c.upload(s, pb.SCORE_CLASS_NEGATIVES, [0.1, 0.2])]
        for call in calls:
            with pytest.raises(grpc.RpcError) as refused:
                call()
            assert refused.value.code() == C.FAILED_PRECONDITION
            assert "does not serve the 'paper' protocol" in refused.value.details()
            assert "['histogram']" in refused.value.details()
        assert snapshot(config.ledger_path) == before
        policy = c.Describe(pb.DescribeRequest()).policy
        assert list(policy.protocols) == ["histogram"] and list(policy.histogram_bins) == [5, 8, 10, 12, 20, 50, 100, 200]
        assert policy.privacy_unit == "add or remove one patient"
        c.close()
    paper_only = make_site_config("paper", policy={"protocols": ["paper"]})
    with running_server(paper_only) as srv:
        c = client_cls(srv)
        with pytest.raises(grpc.RpcError) as refused:
            c.ReleaseHistogram(_request(c.open()))
        assert refused.value.code() == C.FAILED_PRECONDITION and "['paper']" in refused.value.details()
        c.close()


@pytest.mark.parametrize("fields, code, words", [
    ({"n_bins": 7}, C.PERMISSION_DENIED, "n_bins 7 is not one this site allows"),
    ({"spacing": "sqrt"}, C.INVALID_ARGUMENT, "spacing must be"),
    ({"epsilon": 11.0}, C.PERMISSION_DENIED, "epsilon 11.0 is above"),
    ({"epsilon": float("nan")}, C.INVALID_ARGUMENT, "epsilon must be a positive finite number, got nan"),
    ({"epsilon": 1e-9}, C.INVALID_ARGUMENT, "needs noise of SD above 1000 per cell"),
    ({"delta": 0.5}, C.PERMISSION_DENIED, "delta 0.5 is above"),
    ({"delta": 0.0}, C.INVALID_ARGUMENT, "delta must be a number strictly between 0 and 1"),
    ({"n_bins": 0, "edges": [0.123]}, C.PERMISSION_DENIED, "must be an edge of a grid this site allows"),
    ({"n_bins": 0, "edges": [0.5, 0.25]}, C.INVALID_ARGUMENT, "strictly increasing"),
    ({"n_bins": 0, "edges": [0.5, 1.0]}, C.INVALID_ARGUMENT, "strictly inside the score range"),
    ({"edges": [0.5]}, C.INVALID_ARGUMENT, "give either n_bins and spacing or the interior edges"),
    ({"scalars": ["sum_x"]}, C.INVALID_ARGUMENT, "scalars must be distinct names"),
    ({"scalars": ["sum_p", "sum_p"]}, C.INVALID_ARGUMENT, "scalars must be distinct names"),
])
def test_bad_input_is_refused_with_the_field_and_rule(server, client, snapshot, fields, code, words):
    s = client.open()
    before = snapshot(server.config.ledger_path)
    with pytest.raises(grpc.RpcError) as refused:
        client.ReleaseHistogram(_request(s, **fields))
    assert refused.value.code() == code and words in refused.value.details()
    assert snapshot(server.config.ledger_path) == before


def test_a_budget_too_small_is_resource_exhausted_and_charges_nothing(make_site_config, client_cls, snapshot):
    config = make_site_config(policy={"max_epsilon": 1.0, "budget_epsilon": 1.0, "max_delta": 1e-5,
                                      "budget_delta": 1e-5})
    with running_server(config) as srv:
        c = client_cls(srv)
        s = c.open()
        c.ReleaseHistogram(_request(s, epsilon=0.9))
        before = snapshot(config.ledger_path)
        with pytest.raises(grpc.RpcError) as refused:
            c.ReleaseHistogram(_request(s, epsilon=0.5))
        assert refused.value.code() == C.RESOURCE_EXHAUSTED and "remaining about epsilon" in refused.value.details()
        assert snapshot(config.ledger_path) == before
        # A release at exactly the budget fits an empty budget (calibration and check agree).
        fresh = make_site_config("fresh", policy={"max_epsilon": 1.0, "budget_epsilon": 1.0, "max_delta": 1e-5,
                                                  "budget_delta": 1e-5})
        c.close()
    with running_server(fresh) as srv:
        c = client_cls(srv)
        assert not c.ReleaseHistogram(_request(c.open(), epsilon=1.0, delta=1e-5)).repeated
        c.close()


def test_a_huge_budget_does_not_coarsen_the_noise_of_a_small_release(make_site_config, client_cls):
    """Issue 18: with budget_epsilon = 100 000 the accountant's grid grew to 25 nats and a release at
    epsilon 1 got noise 39 894 instead of 3.74 (every answer noise). The discrete Laplace's scale must be
    1 / epsilon (pure epsilon-DP, Ghosh et al. 2009) up to the coarsest grid step of epsilon (1e-2)."""
    config = make_site_config(policy={"max_epsilon": 10.0, "budget_epsilon": 1e5})
    with running_server(config) as srv:
        c = client_cls(srv)
        r = c.ReleaseHistogram(_request(c.open(), epsilon=0.995, delta=1e-5))
        assert 1.0 / 0.995 <= r.sigma <= 1.0 / (0.995 - 1e-2)
        b = c.Budget(pb.BudgetRequest(dataset="test")).budget
        assert b.releases == 1 and b.delta_spent == 0.0 and b.epsilon_spent <= 0.995
        c.close()


def test_every_edge_the_analyst_may_pick_is_one_the_site_accepts_and_a_finer_one_is_refused():
    """The analyst's second-stage candidates (dsroc.histogram.stages.policy_candidates of the sites' allowed bin
    counts, on the first release's logit grid) are edges of the site's own allowed grids: a grid of 12 of them spread
    over the range passes the site's check whole, while an edge halfway between two neighbouring candidates (finer
    than the policy's finest grid) is refused with PERMISSION_DENIED's error naming the rule."""
    from dsroc.histogram import histogram_edges
    from dsroc.histogram.stages import policy_candidates
    from site_node.config import Policy
    from site_node.errors import PermissionDenied
    from site_node.protocols.histogram.release import histogram_grid

    policy = Policy(histogram_bins=(5, 8, 12, 50, 100))
    fine = histogram_edges(50, lo=policy.histogram_logit_range[0], hi=policy.histogram_logit_range[1], spacing="logit")
    candidates = policy_candidates([policy.histogram_bins, (5, 8, 10, 12, 20, 50, 100)], fine, "logit")
    assert candidates.size > 100 and np.abs(fine[:, None] - candidates[None, :]).min(axis=1).max() <= 1e-12
    inner = candidates[(candidates > fine[0]) & (candidates < fine[-1])]
    for start in range(0, inner.size - 11 * 9, 7):  # every candidate lies in some grid the site checks
        pick = inner[start:start + 11 * 9:9]
        edges, spacing, _ = histogram_grid(policy, (0.0, 1.0), n_bins=0, spacing="", interior=pick)
        assert spacing == "explicit" and np.array_equal(edges, [0.0, *pick, 1.0])
    between = 0.5 * (inner[40] + inner[41])
    with pytest.raises(PermissionDenied, match="every explicit edge must be an edge of a grid this site allows"):
        histogram_grid(policy, (0.0, 1.0), n_bins=0, spacing="", interior=[inner[10], between, inner[80]])
