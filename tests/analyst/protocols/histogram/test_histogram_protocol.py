"""The histogram protocol end to end over five real TLS sites: brute-force equality under negligible noise,
the stated noise variance, and the result's statement of protocol, privacy unit, epsilon and delta."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from dsroc import empirical_auc
from site_node.testing import running_server


def _binned_truth(frames, edges):
    s = np.concatenate([f["pred"].to_numpy() for f in frames])
    y = np.concatenate([f["y"].to_numpy() for f in frames])
    s = np.clip(s, edges[0], edges[-1])
    idx = np.array([min(int(np.sum(v >= edges[1:-1])), edges.size - 2) for v in s])  # bin by direct comparison
    return np.bincount(idx[y == 0], minlength=edges.size - 1), np.bincount(idx[y == 1], minlength=edges.size - 1), idx, y


@pytest.fixture(scope="module")
def exact_sites(tmp_path_factory, pki, helpers):
    """Five TLS sites whose test policy allows a huge epsilon (noise that is 0 with overwhelming probability)."""
    frames = helpers.site_frames(seed=5)
    with _huge_epsilon_sites(tmp_path_factory.mktemp("exact"), frames, pki, helpers) as addresses:
        yield frames, addresses


@contextlib.contextmanager
def _huge_epsilon_sites(root, frames, pki, helpers):
    """One running TLS site per frame, each with a test policy that allows a huge epsilon; yields the addresses."""
    with contextlib.ExitStack() as stack:
        servers = []
        for k, f in enumerate(frames):
            path = helpers.write_site(root / f"s{k}", f"s{k}", f, pki)
            path.write_text(path.read_text().replace("max_epsilon = 10.0", "max_epsilon = 5000.0")
                            .replace("budget_epsilon = 200.0", "budget_epsilon = 100000.0"))
            servers.append(stack.enter_context(running_server(path)))
        yield [s.bound_address for s in servers]


def test_with_a_huge_epsilon_the_answers_equal_brute_force(exact_sites, pki, helpers, tmp_path):
    frames, addresses = exact_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, n_bins=20, spacing="equal")
    v = res.detail.validation
    h0, h1, idx, y = _binned_truth(frames, v.edges)
    np.testing.assert_array_equal(v.counts0, h0)
    np.testing.assert_array_equal(v.counts1, h1)
    # Binned empirical AUC by brute force over all pairs (ties within a bin count one half).
    i0, i1 = idx[y == 0], idx[y == 1]
    brute = (np.sum(i1[:, None] > i0[None, :]) + 0.5 * np.sum(i1[:, None] == i0[None, :])) / (i0.size * i1.size)
    assert v.auc_empirical == pytest.approx(brute, abs=1e-12)
    # The per-bin score sums (released by default): O/E is sum y / sum p, and each calibration bin's predicted
    # value its patients' mean score, up to the sites' unbiased rounding of each score's offset to 1/2 of a bin.
    s = np.concatenate([f["pred"].to_numpy() for f in frames])
    assert v.oe.value == pytest.approx(y.sum() / s.sum(), rel=3e-3)
    for i, (a, b) in enumerate(v.calibration.groups):
        inside = (idx >= a) & (idx <= b)
        assert v.calibration.predicted[i] == pytest.approx(s[inside].mean(), abs=0.05 * 5 / np.sqrt(inside.sum()) / 4 + 1e-3)
    assert all(r.negative_sums is not None and r.negative_sums.size == 20 for r in res.detail.releases.values())
    # The resolved AUC orders within-bin pairs by the classes' mean offsets: inside the binning bound of the
    # unbinned AUC (the within-bin pairs' share), here within 0.002 of it (offsets rounded to 1/2 a bin).
    assert abs(v.auc_resolved - empirical_auc(s, y)) < 0.002
    assert res.detail.sigma < 1e-2 and all(not r.repeated for r in res.detail.releases.values())
    # the unified result says where its mean predictions come from and reports the resolved AUC
    assert res.calibration.predicted_from.startswith("within-bin mean score") and "AUC (resolved)" in res.summary(verbose=True)
    text = " ".join(str(res).split())  # the one-screen summary wraps its privacy line
    assert "protocol: histogram" in text and "privacy unit: add or remove one patient" in text
    # the privacy line: what the ledgers composed this validation's one release to, beside the request
    assert f"this validation: epsilon {res.guarantee_epsilon:.4g} at delta 0.01 per patient (1 release per site" in text
    assert "asked epsilon 4000)" in text and abs(res.guarantee_epsilon - 4000.0) < 1.0
    report = json.loads(res.to_json())
    assert report["protocol"] == "histogram" and report["privacy_unit"] == "add or remove one patient"
    assert report["epsilon"] == 4000.0 and report["delta"] == 0.01 and "post-processing" in report["guarantee"]
    assert "histogram protocol" in res.plot()._suptitle.get_text()
    assert "discrete Laplace, pure epsilon-DP per site" in " ".join(res.summary(verbose=True).split())
    assert report["detail"]["mechanism"] == "discrete Laplace, pure epsilon-DP per site"
    assert all(r["mechanism"] == "discrete_laplace" for r in report["detail"]["releases"].values())


def test_with_real_noise_the_stated_variance_holds(five_sites, pki, helpers):
    frames, addresses, _ = five_sites
    errors, sigmas = [], []
    with helpers.federation(addresses, pki) as fed:
        for i in range(10):  # ten validations at slightly different epsilon: ten independent releases per site
            res = fed.validate("test", "y", score="pred", epsilon=2.0 + 1e-3 * i, delta=1e-5, n_bins=20)
            h0, h1, _, _ = _binned_truth(frames, res.detail.validation.edges)
            summed0 = np.sum([r.negatives for r in res.detail.releases.values()], axis=0)
            summed1 = np.sum([r.positives for r in res.detail.releases.values()], axis=0)
            errors.append(np.concatenate([summed0 - h0, summed1 - h1]))
            sigmas.append(res.detail.sigma)
            assert res.detail.sigma == pytest.approx(np.sqrt(sum(r.noise_sd**2 for r in res.detail.releases.values())), rel=1e-12)
    errors = np.concatenate(errors)  # 400 summed cells; the variance's sampling SD is about 8% (kurtosis 1.2 + 3)
    sigma = float(np.mean(sigmas))
    assert abs(errors.mean()) < 4 * sigma / np.sqrt(errors.size)
    assert errors.var() == pytest.approx(sigma**2, rel=0.3)


def test_paper_result_states_its_weaker_guarantee(five_sites, pki, helpers):
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=5, delta=0.01, protocol="paper")
    text = " ".join(str(res).split())
    assert "protocol: paper" in text and "q-protected, not differentially private" in text
    assert json.loads(res.to_json())["protocol"] == "paper"
    with pytest.raises(ValueError, match="protocol must be"):
        helpers.federation(addresses, pki).validate("test", "y", score="pred", epsilon=5, delta=0.01, protocol="x")


def test_the_default_bin_count_follows_the_study_among_the_counts_all_sites_allow(exact_sites, pki, helpers, tmp_path):
    from analyst.protocols.histogram.release import default_n_bins

    _, addresses = exact_sites
    with helpers.federation(addresses, pki) as fed:
        # The discrete Laplace on the counts at 8/9 of epsilon 1 (the rest for the score sums): SD sqrt(2 a) / (1 - a),
        # a = exp(-8/9), 1.540 per site, above the study's 1.5 -> 5 bins; a huge epsilon -> 12.
        assert default_n_bins(fed, epsilon=1.0, delta=1e-5) == 5
        assert default_n_bins(fed, epsilon=4000.0, delta=0.01) == 12
    # A site whose policy lists only coarser-grained counts: the nearest count every site allows.
    path = helpers.write_site(tmp_path / "old", "old", helpers.site_frames(seed=6)[0], pki)
    path.write_text(path.read_text().replace("[policy]\n", "[policy]\nhistogram_bins = [10, 20, 50, 100]\n", 1))
    with running_server(path) as old, helpers.federation([*addresses, old.bound_address], pki) as fed:
        assert default_n_bins(fed, epsilon=1.0, delta=1e-5) == 10


@pytest.fixture(scope="module")
def constant_sites(tmp_path_factory, pki, helpers):
    """Two TLS sites whose model gives every patient the same score (0.3): every patient in one bin."""
    frames = [f.assign(pred=0.3) for f in helpers.site_frames(seed=8)[:2]]
    with _huge_epsilon_sites(tmp_path_factory.mktemp("constant"), frames, pki, helpers) as addresses:
        yield frames, addresses


def test_a_single_occupied_bin_gives_an_answer_that_says_what_is_missing_and_that_it_was_charged(constant_sites, pki,
                                                                                                helpers):
    frames, addresses = constant_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, n_bins=5, spacing="equal")
    v = res.detail.validation
    y = np.concatenate([f["y"].to_numpy() for f in frames])
    # Exact counts: everyone in bin 1 ([0.2, 0.4)); every pair is a within-bin tie, so the binned AUC is 1/2.
    np.testing.assert_array_equal(v.counts0, [0, (y == 0).sum(), 0, 0, 0])
    np.testing.assert_array_equal(v.counts1, [0, (y == 1).sum(), 0, 0, 0])
    assert v.auc_empirical == 0.5
    # Brier of a constant 0.3 by brute force: the class means are exact (0.3 up to the offsets' rounding to
    # 1/2 of the bin), the within-bin spread is estimated and bounded; no slope from one bin, and the result says why.
    truth = np.mean((y - 0.3) ** 2)
    assert v.brier.lower <= truth <= v.brier.upper and abs(v.brier.value - truth) < 0.01
    assert v.recalibration is None and "one bin" in v.unavailable["recalibration"]
    assert all(r.epsilon_spent > 0 and not r.repeated for r in res.detail.releases.values())
    text = " ".join(str(res).split())
    assert "no calibration intercept and slope" in text and "charged to the sites' ledgers" in text
    assert res.calibration.slope is None and "calibration slope not estimable" in text
    helpers.check_schema(json.loads(res.to_json()))  # NaN estimates and missing parts still follow the schema
    assert json.loads(res.to_json())["detail"]["unavailable"]["recalibration"] == v.unavailable["recalibration"]


def test_the_default_quantile_grid_follows_the_scores_and_charges_both_stages(exact_sites, pki, helpers):
    """The first stage's explicit logit grid (fine inside [0.005, 0.995], a few tail bins outside) per class; the
    second stage's interior edges are the edges of the
    policy's logit grids nearest the quantiles of the mean of the two classes' pooled score CDFs (interpolated
    linearly inside a fine bin), as many as the rule on the class sizes gives (by brute force here, where the noise
    is 0), or as asked."""
    from scipy.special import logit

    from dsroc.histogram.stages import laplace_two_stage_plan

    frames, addresses = exact_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=3000.0, delta=0.01)
        asked = fed.validate("test", "y", score="pred", epsilon=3000.0, delta=0.01, n_bins=5)
    d = res.detail
    assert d.spacing == "quantile" and set(d.grid_releases) == set(d.releases)
    s = np.concatenate([f["pred"].to_numpy() for f in frames])
    y = np.concatenate([f["y"].to_numpy() for f in frames])
    # The bin count: n_eff = (n0^-2 + n1^-2)^(-1/2) over the second stage's summed noise SD, 5 below 200 noise SDs,
    # 7 below 400, 10 below 1 500, else 12.
    ratio = (np.sum(y == 0) ** -2.0 + np.sum(y == 1) ** -2.0) ** -0.5 / (
        laplace_two_stage_plan(3000.0, 0.01).sigma2 * np.sqrt(len(frames)))
    bins = 5 if ratio < 200 else 7 if ratio < 400 else 10 if ratio < 1500 else 12
    fine = helpers.default_fine()  # the first release's explicit grid under the default policy
    np.testing.assert_allclose(next(iter(d.grid_releases.values())).negatives.size, fine.size - 1)
    for result, b in ((res, bins), (asked, 5)):
        np.testing.assert_allclose(result.detail.validation.edges, helpers.balanced_edges(s, y, fine, b), rtol=0,
                                   atol=1e-12)
    assert res.detail.n_bins == bins == 12
    # The shape AUC (the rule's nonparametric curve with the first stage) by brute force: the pooled per-class counts
    # on the edges, the shape of all scores on the fine grid.
    from dsroc.histogram.grid import bin_index
    from dsroc.histogram.resolved import fine_base
    from dsroc.histogram.shape import shape_auc

    v, e = res.detail.validation, res.detail.validation.edges
    brute = shape_auc(*(np.bincount(bin_index(s[y == c], e), minlength=e.size - 1) for c in (0, 1)),
                      *fine_base(e, fine, np.bincount(bin_index(s, fine), minlength=fine.size - 1)))
    assert v.auc_shape == pytest.approx(brute, abs=1e-4)
    # Every stage is charged: both releases are new, and each states the epsilon it was asked for (the
    # first a fifth of the epsilon, so a smaller epsilon). The first stage held the second's
    # budget too, so the budget after it already counts both.
    for name in d.releases:
        first, second = d.grid_releases[name], d.releases[name]
        assert not first.repeated and not second.repeated and first.epsilon < second.epsilon < 3000.0
        assert second.epsilon_spent == first.epsilon_spent > 0
    assert "quantiles of a first release" in res.summary(verbose=True) and "shows two modes" not in res.summary(verbose=True)
    report = json.loads(res.to_json())
    helpers.check_schema(report)
    assert set(report["detail"]["grid_releases"]) == set(d.releases)
    assert report["detail"]["auc_shape"] == pytest.approx(v.auc_shape, abs=1e-12)
    # The slope's interval spans the unbinned fit's range from the score sums and the first stage: it holds the
    # patient-level fit (statsmodels), and the result says what it includes.
    import statsmodels.api as sm

    from dsroc.histogram.slope import BINNING_INCLUDED

    y = np.concatenate([f["y"].to_numpy() for f in frames])
    truth = sm.Logit(y, sm.add_constant(logit(np.clip(s, 1e-12, 1 - 1e-12)))).fit(disp=0).params[1]
    slope = res.calibration.slope
    assert slope.lower <= truth <= slope.upper and slope.includes == BINNING_INCLUDED
    assert report["calibration"]["slope"]["includes"] == BINNING_INCLUDED


def test_per_site_heterogeneity_and_decision_curve_equal_brute_force(exact_sites, pki, helpers, tmp_path):
    from scipy import optimize
    from scipy.special import expit, logit

    from analyst.result.report import OPTIONAL_REPORT_FILES, write_report

    frames, addresses = exact_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, n_bins=20, estimator="empirical",
                           by_site=True, decision_curve=True, spacing="equal")
    edges = res.detail.validation.edges
    own = []
    for f, s in zip(frames, res.heterogeneity.sites):
        _, _, idx, y = _binned_truth([f], edges)
        i0, i1 = idx[y == 0], idx[y == 1]
        brute = (np.sum(i1[:, None] > i0[None, :]) + 0.5 * np.sum(i1[:, None] == i0[None, :])) / (i0.size * i1.size)
        assert s.auc == pytest.approx(brute, abs=1e-12) and s.auc_lower < s.auc < s.auc_upper
        own.append((s.auc, s.auc_variance))
    # the pooled AUC: REML by direct maximisation of the restricted likelihood on the logit scale
    a, var = np.array(own).T
    yl, vl = logit(a), var / (a * (1 - a)) ** 2

    def restricted(t2):
        w = 1 / (vl + t2)
        mu = np.sum(w * yl) / w.sum()
        return 0.5 * (np.sum(np.log(vl + t2)) + np.log(w.sum()) + np.sum(w * (yl - mu) ** 2))

    t2 = optimize.minimize_scalar(restricted, bounds=(0, 1), method="bounded", options={"xatol": 1e-12}).x
    t2 = t2 if restricted(t2) < restricted(0.0) else 0.0
    w = 1 / (vl + t2)
    pooled = res.heterogeneity.auc
    assert pooled.tau2 == pytest.approx(t2, abs=1e-7)
    assert pooled.estimate == pytest.approx(expit(np.sum(w * yl) / w.sum()), abs=1e-6)
    assert pooled.prediction_lower <= pooled.lower < pooled.estimate < pooled.upper <= pooled.prediction_upper
    # net benefit at each interior edge, by brute force on the unbinned pooled scores
    s = np.concatenate([f["pred"].to_numpy() for f in frames])
    y = np.concatenate([f["y"].to_numpy() for f in frames]).astype(bool)
    dc = res.decision_curve
    np.testing.assert_allclose(dc.thresholds, edges[1:-1])
    brute = [np.mean(y & (s >= t)) - np.mean(~y & (s >= t)) * t / (1 - t) for t in dc.thresholds]
    np.testing.assert_allclose(dc.net_benefit, brute, atol=1e-9)
    # the report: text, JSON (same schema), frames and the two extra figures
    text = res.summary(verbose=True)
    assert "Per site" in text and "prediction interval for a new site" in text and "Decision curve" in text
    report = json.loads(res.to_json())
    helpers.check_schema(report)
    assert len(report["heterogeneity"]["sites"]) == len(frames) and len(report["decision_curve"]["thresholds"]) == 19
    assert "auc" in res.to_frame("sites").columns and len(res.to_frame("decision_curve")) == 19
    paths = write_report(res, tmp_path / "out")
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert names >= {OPTIONAL_REPORT_FILES["forest"], OPTIONAL_REPORT_FILES["decision_curve"]}
    assert not names & {OPTIONAL_REPORT_FILES["subgroups"], OPTIONAL_REPORT_FILES["comparison"]}  # not asked for
    assert paths["forest"].stat().st_size > 10_000 and paths["decision_curve"].stat().st_size > 10_000


def test_a_score_range_beyond_probabilities_takes_an_equal_first_grid_and_the_policys_equal_edges(tmp_path_factory,
                                                                                                   pki, helpers):
    """Scores on [-10, 10] (a linear predictor, not probabilities): the sites refuse logit spacing before charging
    anything, so the first release is on their finest allowed equal grid (50 bins) and the second grid's interior edges
    are edges of the policy's equal grids on [-10, 10] nearest the quantiles of the mean of the two classes' CDFs
    (interpolated inside a fine bin; by brute force here, at negligible noise), which every site accepts."""
    frames = helpers.site_frames(seed=6)
    for f in frames:  # a steep, crowded linear predictor: most scores in a few of the fine grid's 50 bins
        f["pred"] = 2.0 * (f["pred"] - 0.5)
    root = tmp_path_factory.mktemp("range")
    with contextlib.ExitStack() as stack:
        servers = []
        for k, f in enumerate(frames):
            path = helpers.write_site(root / f"s{k}", f"s{k}", f, pki)
            path.write_text(path.read_text().replace("max_epsilon = 10.0", "max_epsilon = 5000.0")
                            .replace("budget_epsilon = 200.0", "budget_epsilon = 100000.0")
                            .replace('scores = ["pred"]', 'scores = ["pred"]\nscore_range = [-10.0, 10.0]'))
            servers.append(stack.enter_context(running_server(path)))
        with helpers.federation([s.bound_address for s in servers], pki) as fed:
            res = fed.validate("test", "y", score="pred", epsilon=3000.0, delta=0.01)
    d = res.detail
    s = np.concatenate([f["pred"].to_numpy() for f in frames])
    y = np.concatenate([f["y"].to_numpy() for f in frames])
    fine = np.linspace(-10.0, 10.0, 51)
    first = next(iter(d.grid_releases.values()))
    assert d.spacing == "quantile" and first.negatives.size == 50  # the finest allowed count up to 50, equal-spaced
    share = np.array([0.5 * np.mean(s[y == 0] < e) + 0.5 * np.mean(s[y == 1] < e) for e in fine[1:-1]])
    allowed = np.unique(np.concatenate([np.linspace(-10.0, 10.0, k + 1) for k in (5, 8, 10, 12, 20, 50, 100, 200)]))
    allowed = allowed[np.concatenate([[True], np.diff(allowed) > 1e-12])]
    allowed = allowed[(allowed > -10.0) & (allowed < 10.0)]
    at = np.interp(allowed, fine, np.concatenate([[0.0], share, [1.0]]))
    b = 12  # the bin rule at negligible noise; fewer distinct edges come back where the scores crowd
    picked = sorted({int(np.argmin(np.abs(at - q))) for q in np.arange(1, b) / b})
    np.testing.assert_allclose(d.validation.edges, [-10.0, *allowed[picked], 10.0], rtol=0, atol=1e-12)
    assert np.count_nonzero(np.histogram(s, fine)[0]) <= 6 < d.n_bins  # more bins than the fine bins the scores fill
    assert res.auc_ci[0] <= empirical_auc(s, y) <= res.auc_ci[1]


def _bimodal_frames(seed: int = 3):
    """Five sites whose classes' scores both have two modes (logits -2.25 and 2.25 apart from the shift)."""
    import pandas as pd
    from scipy.special import expit

    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(5):
        y = rng.integers(0, 2, 400)
        x = rng.choice([-1.5, 1.5], y.size) + rng.normal(0.0, 0.5, y.size) + 0.8 * y
        frames.append(pd.DataFrame({"x": x, "pred": expit(1.5 * x - 0.5), "y": y}))
    return frames


@pytest.mark.parametrize("protocol", ["histogram", "secagg"])
def test_two_modes_in_the_first_release_raise_the_second_stages_bin_count(protocol, tmp_path_factory, pki, helpers):
    """Through real sites at epsilon 1: the class sizes over the noise call for 5 bins, and a class's first release
    with a valley deeper than MODE_Z noise SDs raises them to 7 (both classes have two modes here; in a Monte Carlo of
    this release's noise the deeper of the two valleys exceeded MODE_Z in all of 300 draws, the shallower in 89 %)."""
    from dsroc.histogram.grid import consistent_counts
    from dsroc.histogram.modes import valley_depth
    from dsroc.histogram.stages import MODE_Z, second_stage_bins
    from site_node.cli.init import link_peers

    frames = _bimodal_frames()
    root = tmp_path_factory.mktemp(f"bimodal-{protocol}")
    paths = [helpers.write_site(root / f"s{k}", f"s{k}", f, pki) for k, f in enumerate(frames)]
    link_peers(paths)
    with contextlib.ExitStack() as stack:
        addresses = [stack.enter_context(running_server(p)).bound_address for p in paths]
        with helpers.federation(addresses, pki) as fed:
            res = fed.validate("test", "y", score="pred", epsilon=1.0, delta=1e-5, protocol=protocol)
    d = res.detail
    if protocol == "histogram":
        first = [np.sum([getattr(r, c) for r in d.grid_releases.values()], axis=0) for c in ("negatives", "positives")]
        sd1 = np.sqrt(sum(r.noise_sd**2 for r in d.grid_releases.values()))
        sd2 = np.sqrt(sum(r.noise_sd**2 for r in d.releases.values()))
        first_edges = d.grid_edges
    else:
        first = [np.asarray(d.grid_round.counts0), np.asarray(d.grid_round.counts1)]
        sd1, sd2, first_edges = d.grid_round.noise_sd, d.round.noise_sd, d.grid_round.edges
    np.testing.assert_allclose(first_edges, helpers.default_fine(), rtol=0, atol=1e-12)
    h = [consistent_counts(np.asarray(c, dtype=np.float64)) for c in first]
    assert second_stage_bins(h[0].sum(), h[1].sum(), sd2, most=12) == 5
    assert max(valley_depth(c, sd1, edges=first_edges) for c in h) > MODE_Z
    assert d.n_bins == 7 and res.detail.validation.edges.size == 8
    assert "A class's first release shows two modes" in " ".join(res.summary(verbose=True).split())
