"""The distributed procedure over five real TLS site servers, checked against pooled computations."""

import json
import time

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy.stats import norm

import dsroc
from analyst import SiteError


def brute_placements(ref, query):
    """Mid-rank survivor function of ``ref`` at ``query`` by an explicit comparison matrix."""
    ref, query = np.asarray(ref)[None, :], np.asarray(query)[:, None]
    return ((ref > query).sum(1) + 0.5 * (ref == query).sum(1)) / ref.size


@pytest.fixture(scope="module")
def pooled(five_sites):
    frames, _, _ = five_sites
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def negligible(five_sites, pki, helpers):
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        return fed.validate("test", "y", protocol="paper", score="pred", epsilon=5, delta=0.01, threshold=0.5, a0=0.7)


def test_negligible_noise_equals_the_pooled_analysis(negligible, pooled, helpers):
    res = negligible
    s, y = pooled["pred"].to_numpy(), pooled["y"].to_numpy()
    s0, s1 = s[y == 0], s[y == 1]
    pv0, pv1 = brute_placements(s0, s1), brute_placements(s1, s0)
    # ROC-GLM by statsmodels: binomial probit of the counts k_j out of n1 on Phi^-1(t_j)
    grid = np.linspace(0, 1, 30)[1:-1]
    k = (pv0[None, :] <= grid[:, None]).sum(1)
    glm = sm.GLM(np.column_stack([k, s1.size - k]), sm.add_constant(norm.ppf(grid)),
                 family=sm.families.Binomial(link=sm.families.links.Probit())).fit(tol=1e-12)
    g1, g2 = glm.params
    assert np.allclose(res.detail.rocglm.params, [g1, g2], atol=1e-6)
    assert res.auc == pytest.approx(norm.cdf(g1 / np.sqrt(1 + g2**2)), abs=1e-6)
    assert res.detail.rocglm.converged
    # DeLong variance from brute-force placement values; logit CI centred at the ROC-GLM AUC
    var = pv1.var(ddof=1) / s0.size + pv0.var(ddof=1) / s1.size
    assert res.auc_variance == pytest.approx(var, rel=1e-6)
    z = norm.ppf(0.975)
    logit = np.log(res.auc / (1 - res.auc))
    half = z * np.sqrt(var) / (res.auc * (1 - res.auc))
    assert res.auc_ci == pytest.approx((1 / (1 + np.exp(-(logit - half))), 1 / (1 + np.exp(-(logit + half)))), abs=1e-6)
    # the CI is centred at the ROC-GLM AUC, not at the empirical one: on these data the two differ enough
    # that the interval around the empirical AUC would fail the check above
    emp = pv1.mean()
    assert emp == pytest.approx(dsroc.empirical_auc(s, y), abs=1e-12) and abs(emp - res.auc) > 1e-3
    assert np.max(np.abs(np.subtract(dsroc.auc_ci(emp, var), res.auc_ci))) > 1e-4
    # the noise-corrected AUC: with negligible noise, the empirical AUC and its DeLong interval
    corr = res.detail.auc_corrected
    assert corr.auc == pytest.approx(emp, abs=1e-9) and corr.variance == pytest.approx(var, rel=1e-6)
    assert (corr.ci.lower, corr.ci.upper) == pytest.approx(dsroc.auc_ci(emp, var), abs=1e-6)
    corrected = res.to_dict()["detail"]["auc_corrected"]
    helpers.check_schema(json.loads(res.to_json()))
    assert [corrected["lower"], corrected["upper"]] == pytest.approx(list(dsroc.auc_ci(emp, var)), abs=1e-6)
    assert "AUC (noise-corrected)" in str(res)
    assert res.warnings == ()  # (5, 0.01) is recommended for the sites' tiny Delta
    assert res.test.reject == (res.auc_ci[0] > 0.7)
    assert res.brier.value == pytest.approx(np.mean((y - s) ** 2), abs=1e-12)
    assert (res.n, res.n0, res.n1) == (len(pooled), s0.size, s1.size)
    c = res.confusion
    assert (c.tp, c.fp, c.fn, c.tn) == (int(((s >= 0.5) & (y == 1)).sum()), int(((s >= 0.5) & (y == 0)).sum()),
                                        int(((s < 0.5) & (y == 1)).sum()), int(((s < 0.5) & (y == 0)).sum()))


def test_calibration_matches_pooled_bins_and_withholds_the_small_cell(negligible, pooled, five_sites):
    cal = negligible.detail.calibration_curve
    assert np.array_equal(negligible.calibration.observed, cal.observed, equal_nan=True)
    assert np.array_equal(negligible.calibration.predicted, cal.predicted, equal_nan=True)
    s = pooled["pred"].to_numpy()
    pooled = pooled.assign(bin=np.minimum((s * 10).astype(int), 9), site=np.repeat(np.arange(5), 400))
    # site s0 has exactly 3 patients in the top bin (< q = 5): the analyst must not see that cell at all,
    # nor recover it as s0's n minus its released counts (so s0 withholds at least one more bin).
    withheld = {(int(site[1:]), b) for site, b in cal.suppressed}
    assert (0, 9) in withheld and 9 not in cal.per_site["s0"].bins
    s0_withheld = [b for site, b in withheld if site == 0]
    assert len(s0_withheld) >= 2
    assert int(pooled[(pooled.site == 0) & pooled.bin.isin(s0_withheld)].shape[0]) >= 5
    cells = list(zip(pooled.site, pooled.bin))
    released = pooled[[cell not in withheld for cell in cells]]
    g = released.groupby("bin").agg(n=("y", "size"), obs=("y", "mean"), pred=("pred", "mean"))
    for b in range(10):
        if b not in g.index:
            assert cal.count[b] == 0 and np.isnan(cal.observed[b])
            continue
        assert cal.count[b] == g.loc[b, "n"]
        assert cal.observed[b] == pytest.approx(g.loc[b, "obs"], abs=1e-12)
        assert cal.predicted[b] == pytest.approx(g.loc[b, "pred"], abs=1e-12)
    # A released bin's count and positives also give its negatives: each class of a released cell is
    # 0 or at least q (the sites' disclosure auditor withholds the others, e.g. top bins with few negatives).
    per_cell = released.groupby(["site", "bin"])["y"].agg(["sum", "size"])
    assert ((per_cell["sum"] == 0) | (per_cell["sum"] >= 5)).all()
    assert ((per_cell["size"] - per_cell["sum"] == 0) | (per_cell["size"] - per_cell["sum"] >= 5)).all()
    report = negligible.to_dict()["calibration"]
    assert all(row["bin"] != 9 for row in report["per_site"]["s0"])
    for b, row in enumerate(report["bins"]):  # a bin no site released has an unknown count, not 0
        every = b not in g.index
        assert (row["n"] is None) == every
        assert row["status"] == ("withheld by every site" if every else "withheld by some sites"
                                 if any(wb == b for _, wb in withheld) else "released")


def test_real_noise_keeps_the_auc_close(five_sites, pki, pooled, helpers):
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", protocol="paper", score="pred", epsilon=5, delta=0.01, sensitivity=0.1)
    s, y = pooled["pred"].to_numpy(), pooled["y"].to_numpy()
    # The sites draw their noise from the OS; replaying their mechanism 2000 times on these data gives
    # Delta AUC = -0.002 (SD 0.002, largest 0.010), so 0.02 is a bound that does not flake.
    assert abs(res.auc - dsroc.empirical_auc(s, y)) < 0.02
    tau = dsroc.analytic_gaussian_sigma(5, 0.01, 0.1)
    for p in res.privacy.values():
        # exact lattice noise: at most 0.2 % above the analytic Gaussian calibration
        assert p.sensitivity == pytest.approx(0.1) and tau <= p.noise_sd < 1.002 * tau
        assert p.mu_remaining > 0
    assert res.auc_ci[0] < res.auc < res.auc_ci[1]
    # Noise-corrected: A(tau) from the placement means plus the blur deconvolved from the released scores. Its
    # noise SD on these data is about 0.001 (0.01 does not flake); its CI holds the pooled AUC.
    corr, emp = res.detail.auc_corrected, dsroc.empirical_auc(s, y)
    assert abs(corr.auc - emp) < 0.01 and corr.ci.lower < emp < corr.ci.upper
    assert corr.noise_variance > 0 and corr.variance > res.auc_variance


def test_wald_interval_at_another_level(five_sites, pki, negligible, helpers):
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", protocol="paper", score="pred", epsilon=5, delta=0.01, alpha=0.1, ci_method="wald")
    # the same release (same epsilon, delta, Delta) is replayed, so the fit is the same
    assert res.auc == pytest.approx(negligible.auc, abs=1e-12)
    half = norm.ppf(0.95) * np.sqrt(negligible.auc_variance)
    assert res.auc_ci == pytest.approx((res.auc - half, res.auc + half), abs=1e-9)
    assert res.level == pytest.approx(0.9) and "90% CI" in res.summary(verbose=True) and "Wald (AUC-scale) CI" in res.summary(verbose=True)


def test_settings_outside_the_study_are_refused_before_any_charge_unless_asked_for(five_sites, pki, helpers):
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        before = {n: (b["releases"], b["reservations"]) for n, b in fed.budget("test").items()}
        with pytest.raises(ValueError) as err:
            fed.validate("test", "y", protocol="paper", score="pred", epsilon=1, delta=0.01, sensitivity=0.19)
        assert {n: (b["releases"], b["reservations"]) for n, b in fed.budget("test").items()} == before
        res = fed.validate("test", "y", protocol="paper", score="pred", epsilon=1, delta=0.01, sensitivity=0.19,
                           outside_study=True)
    why = str(err.value)
    # tau of Delta 0.19 at (1, 0.01), analytic Gaussian: far above the study's; the reason and what works
    assert "tau = 0.357" in why and "sensitivity 0.19 at site s0: asked for by the analyst" in why
    assert "recommends for Delta 0.2: (5, 0.01)" in why and "epsilon >= 5.97 at delta 0.01" in why
    assert "histogram protocol" in why and "outside_study=True" in why
    assert why.endswith("nothing was released or charged at any site")
    assert all(p.sensitivity == pytest.approx(0.19) for p in res.privacy.values())
    assert res.warnings[0].startswith("outside the simulation study (outside_study): the paper protocol at epsilon 1")
    # the study recommends epsilon >= 5 for Delta = 0.2 (e.g. (5, 0.01), (10, 0.01)), not (1, 0.01)
    assert "epsilon = 1, delta = 0.01 is not among" in res.warnings[1]
    # the noise (tau ~ 0.8 on scores of SD ~ 0.25) bends the fitted curve below the diagonal: said too
    assert all("below the diagonal" in w for w in res.warnings[2:])
    assert "(5, 0.01)" in res.warnings[1] and "(10, 0.01)" in res.warnings[1]
    assert res.to_dict()["warnings"] == list(res.warnings)
    assert "Warnings\n  - outside the simulation study" in str(res)


def test_a_model_sent_as_coefficients_gives_the_score_column_result(five_sites, pki, negligible, helpers):
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", protocol="paper", model=helpers.MODEL, epsilon=5, delta=0.01)
    assert res.auc == pytest.approx(negligible.auc, abs=1e-6)
    assert res.brier.value == pytest.approx(negligible.brier.value, abs=1e-9)
    assert "GLM (logit link, 1 coefficient)" in str(res)


def test_refusals_name_the_site_and_status(five_sites, pki, helpers):
    import grpc

    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki, token="wrong") as fed:
        with pytest.raises(SiteError) as err:
            fed.describe()
    assert err.value.code == grpc.StatusCode.UNAUTHENTICATED and err.value.site == "s0"
    with helpers.federation(addresses, pki) as fed:
        with pytest.raises(SiteError) as err:
            fed.validate("nope", "y", protocol="paper", score="pred", epsilon=5, delta=0.01)
        assert err.value.code == grpc.StatusCode.NOT_FOUND
        with fed.session("test", "y", score="pred") as s:
            with pytest.raises(SiteError) as err:
                s.confusion(0.99)  # some cell below q at every site (0.99 is on the sites' 0.01 lattice)
            assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
            with pytest.raises(SiteError) as err:
                s.fit_rocglm()  # no survivor function uploaded yet
            assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(ValueError, match="exactly one"):
            fed.validate("test", "y", protocol="paper", epsilon=5, delta=0.01)


def test_describe_and_budget(five_sites, pki, helpers):
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        info = fed.describe()
        budget = fed.budget("test")
        planned = fed.budget("test", epsilon=5.0, delta=0.01), fed.describe(epsilon=5.0, delta=0.01)
    # These sites' policies list no survival grid: no survival line, the binary protocols' lines only.
    assert {p for b in (planned[0]["s0"], planned[1]["s0"]["datasets"][0]["budget"])
            for p in (x["query"]["protocol"] for x in b["left"])} == {"paper", "histogram", "boyd"}
    assert list(info) == [f"s{k}" for k in range(5)]
    assert info["s0"]["datasets"][0]["name"] == "test"
    assert info["s0"]["policy"]["privacy_level"] == 5
    assert set(budget["s1"]) >= {"mu_remaining", "epsilon_spent", "budget_epsilon"}


def test_a_site_stopped_mid_analysis_is_named(tmp_path, pki, helpers):
    import contextlib

    import grpc

    from site_node.cli.init import link_peers
    from site_node.testing import running_server

    frames = helpers.site_frames(seed=5)[:3]
    with contextlib.ExitStack() as stack:
        paths = [helpers.write_site(tmp_path / f"s{k}", f"s{k}", f, pki) for k, f in enumerate(frames)]
        link_peers(paths)
        servers = [stack.enter_context(running_server(path)) for path in paths]
        with helpers.federation([s.bound_address for s in servers], pki, retries=1, timeout=5) as fed:
            with fed.session("test", "y", score="pred") as s:
                s.upload_survivors(s.release(epsilon=5, delta=0.01))
                servers[1].stop(grace=0)
                started = time.perf_counter()
                with pytest.raises(SiteError) as err:
                    s.fit_rocglm()
                assert time.perf_counter() - started < 5  # gRPC's retry policy fails fast on a closed port
    assert err.value.site == "s1" and err.value.code == grpc.StatusCode.UNAVAILABLE
    assert "s1" in str(err.value) and "is the site running" in str(err.value)


def test_only_unavailable_is_retried(five_sites, pki, helpers):
    import json

    _, addresses, servers = five_sites
    log = servers[0].config.audit_path

    def budget_calls():
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return sum(1 for r in rows if r["call"].endswith("Budget") and r["decision"] != "OK")

    before = budget_calls()
    with helpers.federation(addresses[:1], pki, token="wrong", retries=3) as fed:
        with pytest.raises(SiteError):
            fed.budget("test")
    assert budget_calls() == before + 1  # refused once, not retried


def test_plain_text_only_when_explicit(tmp_path, pki, helpers):
    from analyst import Federation, SiteConfig
    from site_node.testing import running_site

    frame = helpers.site_frames(seed=2)[1]
    with running_site(helpers.write_site(tmp_path / "p", "p", frame, pki), insecure=True) as address:
        with Federation([SiteConfig(name="p", address=address, token=helpers.TOKEN, insecure=True)]) as fed:
            res = fed.validate("test", "y", protocol="paper", score="pred", epsilon=5, delta=0.01)
        # a TLS client cannot talk to the plain-text site: the failure names the site
        with Federation([SiteConfig(name="p", address=address, token=helpers.TOKEN, ca_file=pki.ca_cert)],
                        retries=0, timeout=3) as fed:
            with pytest.raises(SiteError, match="site 'p'"):
                fed.describe()
    s, y = frame["pred"].to_numpy(), frame["y"].to_numpy()
    assert res.brier.value == pytest.approx(np.mean((y - s) ** 2), abs=1e-12)


def test_a_repeated_validation_is_identical_and_free_of_query_cost(tmp_path, pki, helpers):
    from site_node.testing import running_server

    path = helpers.write_site(tmp_path / "c", "c", helpers.site_frames(seed=4)[2], pki,
                              policy={"max_glm_evaluations": 7})
    messages = []
    with running_server(path) as server:
        with helpers.federation([server.bound_address], pki) as fed:
            first = fed.validate("test", "y", protocol="paper", score="pred", epsilon=5, delta=0.01,
                                 progress=lambda step, site, msg: messages.append(msg))
            assert "7 ROC-GLM evaluations left for this S~0" in messages
            assert first.detail.rocglm.evaluations > 7 / 2  # a second fit would not fit in the cap if counted
            messages.clear()
            second = fed.validate("test", "y", protocol="paper", score="pred", epsilon=5, delta=0.01,
                                  progress=lambda step, site, msg: messages.append(msg))
    # the same release, the same S~0 and the same Fisher-scoring path: the same questions and answers
    left = 7 - first.detail.rocglm.evaluations
    assert f"{left} ROC-GLM evaluations left for this S~0" in messages
    assert second.auc == first.auc and second.auc_ci == first.auc_ci


def test_a_paper_validation_asks_each_site_few_questions(five_sites, pki, helpers, monkeypatch):
    # Each round trip costs every site a call: the policy, sensitivity and the release's hold come with the
    # session; both
    # survivor functions go in one stream whose reply carries the placement moments (one pass), Brier sums,
    # calibration cells, budget and the fit's first evaluation; the closing comes after the result.
    from collections import Counter

    from analyst.connection import SiteConnection

    calls = Counter()
    real_call = SiteConnection.call

    def counting(self, method, request, **kw):
        calls[self.name, method] += 1
        return real_call(self, method, request, **kw)

    monkeypatch.setattr(SiteConnection, "call", counting)
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", protocol="paper", score="pred", epsilon=5, delta=0.01)
    sites = {site for site, _ in calls}
    assert len(sites) == 5
    for site in sites:
        asked = {method: n for (s, method), n in calls.items() if s == site}
        evaluations = asked.pop("RocGlmParts")
        # Every site holds the release's budget with its session, before any site releases (all or nothing).
        assert asked == {"OpenSession": 1, "ReleaseNoisyScores": 1, "UploadSurvivors": 1, "CloseSession": 1}
        assert evaluations <= res.detail.rocglm.iterations + 1  # the first came with the upload


def test_a_validation_stays_within_the_calls_a_site_serves_at_once(tmp_path, pki, helpers):
    # A site serves one analyst a limited number of calls at once and refuses more (RESOURCE_EXHAUSTED);
    # the validation runs its steps (and both classes' streams) at the same time, so it must keep to the
    # limit the site reports in its policy -- here one call at a time.
    import contextlib

    from site_node.cli.init import link_peers
    from site_node.testing import running_server

    frames = helpers.site_frames(seed=5)[:3]
    with contextlib.ExitStack() as stack:
        paths = [helpers.write_site(tmp_path / f"s{k}", f"s{k}", f, pki) for k, f in enumerate(frames)]
        link_peers(paths)
        servers = [stack.enter_context(running_server(path, max_calls_per_analyst=1)) for path in paths]
        with helpers.federation([s.bound_address for s in servers], pki) as fed:
            assert {d["policy"]["max_calls_in_progress"] for d in fed.describe().values()} == {1}
            res = fed.validate("test", "y", protocol="paper", score="pred", epsilon=5, delta=0.01, threshold=0.5)
    assert res.detail.rocglm.converged and res.n == sum(len(f) for f in frames)


def test_sites_from_before_one_stream_and_paper_aggregates_are_asked_each_call(tmp_path, pki, helpers, monkeypatch):
    # A site from before UploadSurvivors and PaperAggregates answers UNIMPLEMENTED, and one from before
    # both_classes sends the negatives only: the analyst then uploads each class, asks the four calls and the
    # positives' release apart.
    import contextlib
    from collections import Counter

    import grpc

    from analyst.connection import SiteConnection
    from site_node.errors import SiteError
    from site_node.cli.init import link_peers
    from site_node.servicer.dispatch import SiteServicer
    from site_node.testing import running_server

    class Unimplemented(SiteError):
        code = grpc.StatusCode.UNIMPLEMENTED

    def unimplemented(self, request, context):
        raise Unimplemented("Method not found!")

    monkeypatch.setattr(SiteServicer, "PaperAggregates", unimplemented)
    monkeypatch.setattr(SiteServicer, "UploadSurvivors", unimplemented)
    one_class = SiteServicer.ReleaseNoisyScores

    def without_both_classes(self, request, context):  # a site from before ReleaseRequest.both_classes
        request.ClearField("both_classes")
        return one_class(self, request, context)

    monkeypatch.setattr(SiteServicer, "ReleaseNoisyScores", without_both_classes)
    open_session = SiteServicer.OpenSession

    def without_prepare(self, request, context):  # s0 is from before OpenSessionRequest.prepare; s1 holds
        if self.site.config.name == "s0":
            request.ClearField("prepare")
        return open_session(self, request, context)

    monkeypatch.setattr(SiteServicer, "OpenSession", without_prepare)
    calls = Counter()
    real_call = SiteConnection.call
    monkeypatch.setattr(SiteConnection, "call", lambda self, method, request, **kw: (
        calls.update([method]), real_call(self, method, request, **kw))[1])
    frames = helpers.site_frames()[:2]
    configs = [helpers.write_site(tmp_path / f"s{k}", f"s{k}", f, pki) for k, f in enumerate(frames)]
    link_peers(configs)
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(running_server(c)) for c in configs]
        with helpers.federation([s.bound_address for s in servers], pki) as fed:
            res = fed.validate("test", "y", protocol="paper", score="pred", epsilon=5, delta=0.01)
        budgets = [server.site.ledger.budget(server.config.datasets["test"].population, server.site.policy)
                   for server in servers]
    assert calls["PaperAggregates"] == 2 and calls["ReleaseNoisyScores"] == 4  # each class asked apart
    assert calls["UploadSurvivors"] == 2 and calls["UploadSurvivor"] == 4
    # s1's hold made with its session is returned, and both sites hold with PrepareRelease (all or nothing).
    assert calls["CancelReservation"] == 1 and calls["PrepareRelease"] == 2
    assert [(b.releases, b.reservations) for b in budgets] == [(1, 0), (1, 0)]
    assert all(calls[m] == 2 for m in ("PlacementMoments", "BrierParts", "CalibrationParts", "Budget"))
    pooled = pd.concat(frames)
    assert res.n == len(pooled) and res.brier.value == pytest.approx(((pooled["y"] - pooled["pred"]) ** 2).mean(), abs=1e-12)
