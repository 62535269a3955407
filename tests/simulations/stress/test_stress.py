"""The stress study: its generator's truth against independent computations, the release, the metrics, the smoke run."""

import json

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import integrate
from scipy.special import expit
from scipy.stats import mannwhitneyu, norm

from dsroc import bin_scores, histogram_edges, histogram_validation
from dsroc.histogram.stages import laplace_two_stage_plan, two_stage_plan
from simulations.cli import main
from simulations.stress.cells import DELTA, StressCell, default_cells, full_cells
from simulations.stress.study import (
    POLICY_BINS,
    POLICY_LOGIT_RANGE,
    generate_data,
    histogram_release,
    histogram_rows,
    quantile_plan,
    quantile_release,
)
from simulations.stress.designs import MODE, SKEW, SPREAD, Design, _parameters, population_truth, sample_design
from simulations.stress.report import summarise
from simulations.stress.run import load_stress, plan_tasks


def _gl_pdf(x):
    return SKEW * np.exp(-x) / (1 + np.exp(-x)) ** (SKEW + 1)


@pytest.mark.parametrize("auc", [0.6, 0.9, 0.99])
def test_population_auc_matches_closed_forms_and_quadrature(auc):
    """Each shape's population AUC, from the module's quantile midpoint rule, against an independent formula."""
    s, _, _ = _parameters(Design("binormal", 0.1, auc))
    assert norm.cdf(s / np.sqrt(2)) == pytest.approx(auc, abs=1e-12)
    assert population_truth(Design("binormal", 0.1, auc)).auc == pytest.approx(auc, abs=1e-6)
    d = _parameters(Design("bimodal", 0.1, auc))[0]
    sd = SPREAD * np.sqrt(2)  # X1 - X0: a four-normal mixture with means d + {-2 MODE, 0, 0, 2 MODE}
    closed = 0.25 * norm.cdf((d - 2 * MODE) / sd) + 0.5 * norm.cdf(d / sd) + 0.25 * norm.cdf((d + 2 * MODE) / sd)
    assert closed == pytest.approx(auc, abs=1e-6)
    d = _parameters(Design("skewed", 0.1, auc))[0]
    gl_cdf = lambda x: (1 + np.exp(-x)) ** -SKEW  # noqa: E731
    quad, _ = integrate.quad(lambda x: gl_cdf(x) * _gl_pdf(x - d), -200, 200, limit=500, points=[d])
    assert quad == pytest.approx(auc, abs=1e-6)
    u = _parameters(Design("uniform", 0.1, auc))[0]
    v = (1 - u) / 2
    assert u * u + 3 * u * v + 2 * v * v == pytest.approx(auc, abs=1e-12)
    assert population_truth(Design("uniform", 0.1, auc)).auc == pytest.approx(auc, abs=1e-6)


@pytest.mark.parametrize("shape", ["binormal", "skewed", "bimodal", "uniform"])
def test_samples_agree_with_the_population_truth(shape):
    """A large sample's AUC (Mann-Whitney), Brier, O/E and statsmodels calibration slope match the population values."""
    design = Design(shape, 0.2, 0.8)
    truth = population_truth(design)
    p, y, lp = sample_design(design, 300_000, np.random.default_rng(7))
    assert np.allclose(expit(lp), p)
    n1 = y.sum()
    auc = mannwhitneyu(p[y == 1], p[y == 0]).statistic / (n1 * (y.size - n1))
    assert abs(auc - truth.auc) < 4 * np.sqrt(truth.auc * (1 - truth.auc) / min(n1, y.size - n1))
    brier = (y - p) ** 2
    assert abs(brier.mean() - truth.brier) < 4 * brier.std() / np.sqrt(y.size)
    assert y.mean() / p.mean() == pytest.approx(truth.oe, rel=0.03)
    fit = sm.Logit(y, sm.add_constant(lp)).fit(disp=0)
    assert abs(fit.params[1] - truth.slope) < 4 * fit.bse[1]
    assert abs(fit.params[0] - truth.intercept) < 4 * fit.bse[0] + 1e-9
    if shape != "uniform":  # calibrated (binormal) or weakly calibrated by construction
        assert truth.slope == pytest.approx(1.0, abs=1e-4) and truth.intercept == pytest.approx(0.0, abs=1e-3)
        assert truth.oe == pytest.approx(1.0, abs=1e-4)


def test_pooled_truth_per_replication_is_the_brute_force_one():
    data = generate_data(Design("bimodal", 0.1, 0.9), 400, range(3), seed=5)
    b = data.batch
    for g in range(3):
        sl = slice(400 * g, 400 * (g + 1))
        p, y = b.scores[sl], b.labels[sl]
        pairs = (p[y == 1][:, None] > p[y == 0][None, :]).mean() + 0.5 * (p[y == 1][:, None] == p[y == 0][None, :]).mean()
        assert data.pooled["auc"][g] == pytest.approx(pairs, abs=1e-12)
        assert data.pooled["brier"][g] == pytest.approx(np.mean((y - p) ** 2), abs=1e-14)
        assert data.pooled["oe"][g] == pytest.approx(y.sum() / p.sum(), abs=1e-12)
        slope = sm.GLM(y, sm.add_constant(data.logits[sl]), family=sm.families.Binomial()).fit().params[1]
        assert data.pooled["slope"][g] == pytest.approx(slope, rel=1e-6)


def test_pooled_truth_survives_replications_with_almost_no_events():
    """Prevalence 0.02 at n = 60: some replications hold 0 or 1 events; no error, NaN only without a class."""
    data = generate_data(Design("binormal", 0.02, 0.76), 60, range(40), seed=1)
    n1 = data.batch.n1
    assert (n1 == 0).any() and (n1 == 1).any()
    assert np.array_equal(np.isnan(data.pooled["auc"]), n1 == 0)
    for g in np.flatnonzero(n1 >= 1):
        p, y = data.batch.scores[60 * g:60 * (g + 1)], data.batch.labels[60 * g:60 * (g + 1)]
        brute = (p[y == 0][:, None] < p[y == 1][None, :]).mean()
        assert data.pooled["auc"][g] == pytest.approx(brute, abs=1e-12)


def test_release_is_what_the_sites_count_and_noise_free_estimate_recovers_the_pooled_auc():
    """At a tiny noise the summed release equals every site's own bin_scores and its score sums the sites' offset
    sums up to the random rounding; on a fine grid the binned AUC then lies within half the share of within-bin
    pairs of the pooled AUC (the binning bound), and close to it."""
    cell = StressCell(Design("skewed", 0.3, 0.85), 2_000, 5, 1e4)
    data = generate_data(cell.design, cell.n, range(2), seed=3, slope=False)
    edges = histogram_edges(1000)
    release = histogram_release(data, cell, edges, seed=3, protocol="histogram", score_sums=True)
    assert release.sigma < 0.05 and release.sums_sd < 0.1
    b = data.batch
    for g in range(2):
        sl = slice(cell.n * g, cell.n * (g + 1))
        p, y, site = b.scores[sl], b.labels[sl], np.arange(cell.n) % cell.sites
        sums = np.sum([bin_scores(p[site == k], y[site == k], edges) for k in range(cell.sites)], axis=0)
        assert np.array_equal(release.counts[g], sums)
        idx = np.searchsorted(edges, p, side="right") - 1
        exact = [np.bincount(idx[y == c], weights=(p[y == c] - edges[idx[y == c]]) * 1000, minlength=1000) for c in (0, 1)]
        assert np.abs(release.sums[g] - exact).max() <= 4 * np.sqrt(sums.max() / 16) + 0.5
        assert abs(release.sums[g].sum() - np.sum(exact)) < 5 * np.sqrt(cell.n / 16)
        v = histogram_validation(release.counts[g][0], release.counts[g][1], edges, sigma=0.0, estimator="empirical")
        within = 0.5 * (sums[0] * sums[1]).sum() / (sums[0].sum() * sums[1].sum())
        assert abs(v.auc - data.pooled["auc"][g]) <= within + 1e-12
        assert abs(v.auc - data.pooled["auc"][g]) < 1e-3


def test_quantile_release_at_tiny_noise_puts_the_edges_at_the_pooled_quantiles_and_counts_what_the_sites_count(
        policy_grids):
    """Stage 1 at (almost) no noise: the second grid's interior edges are the edges of the default policy's logit grids
    nearest the quantiles of the mean of the two classes' pooled score CDFs, interpolated linearly between the fine
    edges (by direct comparison, as the analyst's protocol test), as
    many as the bin rule gives for the effective size over the summed noise SD (10 bins: the discrete Laplace's SD
    at epsilon 3000 is about 0); the summed second release equals every site's own bin_scores on that grid."""
    from scipy.special import expit, logit

    cell = StressCell(Design("binormal", 0.02, 0.76), 3_000, 5, 3000.0, delta=0.01)  # noise SD 0.045 and below
    data = generate_data(cell.design, cell.n, range(3), seed=4, slope=False)
    release = quantile_release(data, cell, seed=4)
    assert release.sigma < 0.05 and quantile_plan(cell.epsilon, cell.delta).sigma1 < 0.2
    fine, every = policy_grids
    b = data.batch
    for g in range(3):
        sl = slice(cell.n * g, cell.n * (g + 1))
        p, y, site = b.scores[sl], b.labels[sl], np.arange(cell.n) % cell.sites
        c = np.clip(p, fine[0], fine[-1])
        share = np.array([0.5 * np.mean(c[y == 0] < e) + 0.5 * np.mean(c[y == 1] < e) for e in fine[1:-1]])
        n0, n1 = np.sum(y == 0), np.sum(y == 1)
        ratio = (n0**-2.0 + n1**-2.0) ** -0.5 / (laplace_two_stage_plan(cell.epsilon, cell.delta).sigma2 * np.sqrt(5))
        bins = 5 if ratio < 200 else 7 if ratio < 400 else 10 if ratio < 1500 else 12
        assert bins == 12
        # the edges the default policy allows (its logit grids), the share interpolated linearly inside a fine bin
        allowed = every[(every > fine[0]) & (every < fine[-1])]
        at = np.interp(allowed, fine, np.concatenate([[0.0], share, [1.0]]))
        picked = sorted({int(np.argmin(np.abs(at - q))) for q in np.arange(1, bins) / bins})
        np.testing.assert_allclose(release.edges[g], [0.0, *allowed[picked], 1.0], rtol=0, atol=1e-12)
        # the first stage as the analyst passes it to histogram_validation: all scores on the fine grid, summed
        assert np.array_equal(release.first["counts"][g], np.histogram(np.clip(p, fine[0], fine[-1]), fine)[0])
        own = np.sum([bin_scores(p[site == k], y[site == k], release.edges[g]) for k in range(cell.sites)], axis=0)
        assert np.array_equal(release.counts[g], own)
        e = release.edges[g]
        idx = np.searchsorted(e, p, side="right") - 1
        offset = (p - e[idx]) / np.diff(e)[idx]  # each patient's place within its bin, in bin widths
        exact = [np.bincount(idx[y == c], weights=offset[y == c], minlength=e.size - 1) for c in (0, 1)]
        assert np.abs(release.sums[g] - exact).max() <= 5 * np.sqrt(own.max() / 16) + 0.5  # random rounding to 1/2


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 5.0])
def test_the_studys_two_stages_are_what_a_real_site_plans_for_the_analysts_requests(tmp_path, epsilon):
    """A site daemon's Site with the default histogram policy, asked for the two stages the analyst asks for
    (laplace_two_stage_plan's epsilon and delta per stage): the same fine grid, second grid and discrete Laplace
    noise as the study's, and that noise is the closed form's: stage 1 a tenth of epsilon on the counts, stage 2
    eight tenths on the counts and a tenth on the score sums (sensitivity 2), each within a grid step (5e-4)."""
    from site_node.config import load_config
    from site_node.store.ledger import SqliteLedger
    from site_node.protocols.histogram.protocol import HistogramProtocol
    from site_node.data.scores import ScoreSpec
    from site_node.site import Site
    from site_node.testing import write_site_config

    p, y, _ = sample_design(Design("skewed", 0.3, 0.8), 400, np.random.default_rng(1))
    config = load_config(write_site_config(
        tmp_path, name="sim", frames={"test": pd.DataFrame({"pred": p, "y": y})}, data_format="parquet",
        policy={"protocols": ["histogram"], "max_delta": 0.01, "budget_epsilon": 50.0, "budget_delta": 0.5},
        analysts={"alice": "t"}))
    assert (POLICY_BINS, POLICY_LOGIT_RANGE) == (config.policy.histogram_bins, config.policy.histogram_logit_range)
    site = Site(config, SqliteLedger.in_memory())
    try:
        session = site.open_session("alice", "test", "y", ScoreSpec(column="pred"))
        protocol = HistogramProtocol(site)
        stages, ours = laplace_two_stage_plan(epsilon, DELTA), quantile_plan(epsilon, DELTA)
        _, first = protocol.plan(session, epsilon=stages.epsilon1, delta=stages.delta1, n_bins=0, spacing="",
                                 interior=ours.fine_edges[1:-1])  # the first release's explicit grid
        assert first.sigma == pytest.approx(ours.sigma1, rel=1e-12)
        np.testing.assert_array_equal(first.edges, ours.fine_edges)
        interior = ours.fine_edges[[7, 19, 30, 41]]
        _, second = protocol.plan(session, epsilon=stages.epsilon2, delta=stages.delta2, n_bins=0, spacing="",
                                  score_sums=True, interior=interior)
        assert (second.sigma, second.sums_sigma) == pytest.approx((ours.sigma2, ours.sums_sigma), rel=1e-12)
        np.testing.assert_array_equal(second.edges, [0.0, *interior, 1.0])
        assert first.mechanism == second.mechanism == "discrete_laplace" and ours.noise == "laplace"
        for scale, share, sensitivity in ((ours.sigma1, 0.2, 1), (ours.sigma2, 0.7, 1), (ours.sums_sigma, 0.1, 2)):
            assert share * epsilon - 5e-4 < sensitivity / scale <= share * epsilon
        # the plan's SDs are the discrete Laplace's sqrt(2 a) / (1 - a), a = exp(-1 / scale), of those scales (the plan
        # rounds each part's epsilon onto the grid of a budget of epsilon, the site onto its ledger's: within 2e-3)
        for scale, sd in ((ours.sigma1, stages.sigma1), (ours.sigma2, stages.sigma2)):
            a = np.exp(-1.0 / scale)
            assert sd == pytest.approx(np.sqrt(2 * a) / (1 - a), rel=2e-3)
        assert ours.central2 == pytest.approx(stages.sigma2 * np.sqrt(5), rel=2e-3)
    finally:
        site.close()


def test_the_secagg_rows_run_the_protocols_two_rounds_with_each_sites_share():
    """The study's secagg release: each stage's share is dsroc.secagg.share_sigma's for five sites (the sites
    check the analyst's proposal against exactly that), the summed noise is the central plan's, the second grid has
    the bin rule's count for the effective size over that noise (10 bins at n = 10 000, prevalence 0.3, epsilon 1,
    by hand) at edges the policy allows, and the first round reaches the validation as the analyst passes it on (all scores on
    the fine grid, summed, its SD that of 2 x 5 shares)."""
    from dsroc.histogram.stages import release_parts
    from dsroc.privacy.distributed import summed_noise_variance
    from dsroc.secagg import share_sigma

    cell = StressCell(Design("binormal", 0.3, 0.76), 10_000, 5, 1.0)
    stages, plan = two_stage_plan(1.0, DELTA), quantile_plan(1.0, DELTA, shares=5)
    assert plan.sigma1 == share_sigma(stages.epsilon1, stages.delta1, 5)
    assert plan.sigma2 == share_sigma(stages.epsilon2, stages.delta2, 5, parts=tuple(release_parts(score_sums=True)))
    assert plan.sums_sigma == pytest.approx(6 * plan.sigma2)
    data = generate_data(cell.design, cell.n, range(2), seed=5, slope=False)
    release = quantile_release(data, cell, seed=5, protocol="secagg")
    assert release.total_sd == pytest.approx(stages.sigma2, rel=1e-3) == pytest.approx(plan.central2, rel=1e-3)
    n1 = data.batch.n1
    ratio = ((cell.n - n1) ** -2.0 + n1**-2.0) ** -0.5 / stages.sigma2
    assert np.all((ratio > 500) & (ratio < 1200))  # 10 bins, and no first-round noise moves it across 400 or 1 500
    assert [e.size - 1 for e in release.edges] == [10, 10] and release.sums is not None
    allowed = np.concatenate([histogram_edges(k, lo=0.0001, hi=0.9999, spacing="logit") for k in POLICY_BINS])
    assert all(np.isin(e[1:-1], allowed).all() for e in release.edges)  # each edge one the policy allows
    assert release.first["sd"] == pytest.approx(np.sqrt(summed_noise_variance(plan.sigma1, 10)), rel=1e-12)
    assert release.first["sd"] == pytest.approx(np.sqrt(2) * stages.sigma1, rel=1e-3)
    b = data.batch
    for g in range(2):  # the first round's counts of all scores: within a few noise SDs of the exact fine histogram
        exact = np.histogram(np.clip(b.scores[g * cell.n:(g + 1) * cell.n], plan.fine_edges[0], plan.fine_edges[-1]),
                             plan.fine_edges)[0]
        assert np.abs(release.first["counts"][g] - exact).max() < 6 * release.first["sd"]
    rows = histogram_rows(data, cell, 5, "secagg")
    auc = rows[rows["estimand"] == "auc"].sort_values("rep")
    for g in range(2):
        v = histogram_validation(*release.counts[g], release.edges[g], sigma=release.total_sd, level=0.95,
                                 sums0=release.sums[g][0], sums1=release.sums[g][1], sums_sigma=release.sums_sd,
                                 grid_edges=plan.fine_edges, grid_counts=release.first["counts"][g],
                                 grid_sigma=release.first["sd"])
        assert auc["estimate"].iloc[g] == pytest.approx(v.auc, abs=1e-12) and auc["estimator"].iloc[g] == v.estimator


def _brute_force(part):
    covered = sum(1 for lo, hi, t in zip(part["lower"], part["upper"], part["pooled"]) if lo <= t <= hi)
    return covered / len(part)


def test_summary_metrics_are_the_brute_force_ones():
    rng = np.random.default_rng(0)
    rows = 300
    est = rng.normal(0.7, 0.02, rows)
    frame = pd.DataFrame({
        "cell": "c", "protocol": "histogram", "estimand": "auc", "shape": "binormal", "prevalence": 0.3,
        "design_auc": 0.76, "n": 1000, "sites": 5, "epsilon": 1.0, "delta": 1e-5, "tau": 3.7, "rep": np.arange(rows),
        "n1": 300, "estimate": est, "lower": est - rng.uniform(0, 0.05, rows), "upper": est + rng.uniform(0, 0.05, rows),
        "se": rng.uniform(0.01, 0.02, rows), "pooled": rng.normal(0.7, 0.02, rows), "population": 0.7, "failure": "",
        "estimator": np.where(np.arange(rows) % 3 == 0, "empirical", "rocglm")})
    frame.loc[:9, ["estimate", "lower", "upper", "se"]] = np.nan  # ten failed replications
    s = summarise(frame).iloc[0]
    ok = frame.iloc[10:]
    err = ok["estimate"] - ok["pooled"]
    assert s["failures"] == 10 and s["replications"] == rows
    assert s["reported"] == "rocglm 194, empirical 96"  # among the 290 answered: rep % 3 == 0 from 10 to 299
    assert s["coverage_pooled"] == pytest.approx(_brute_force(ok), abs=1e-15)
    pop = sum(1 for lo, hi in zip(ok["lower"], ok["upper"]) if lo <= 0.7 <= hi) / len(ok)
    assert s["coverage_population"] == pytest.approx(pop, abs=1e-15)
    c = s["coverage_pooled"]
    assert s["coverage_pooled_se"] == pytest.approx(np.sqrt(c * (1 - c) / len(ok)))
    assert s["bias"] == pytest.approx(err.mean()) and s["mae"] == pytest.approx(err.abs().mean())
    assert s["rmse"] == pytest.approx(np.sqrt((err**2).mean()))
    assert s["mae_se"] == pytest.approx(err.abs().std(ddof=1) / np.sqrt(len(ok)))
    assert s["ci_width"] == pytest.approx((ok["upper"] - ok["lower"]).mean())


def test_grids_cover_the_factors_and_tasks_cover_every_replication():
    cells = default_cells()
    assert len(cells) == len(set(cells)) == 57
    for attr, levels in (("n", {250, 1000, 10000, 100000}), ("sites", {2, 5, 50}), ("epsilon", {0.5, 1.0, 5.0})):
        assert {getattr(c, attr) for c in cells} == levels
    assert {(c.design.shape, c.design.prevalence, c.design.auc) for c in cells} >= {
        (s, p, 0.76) for s in ("binormal", "skewed", "bimodal", "uniform") for p in (0.02, 0.1, 0.3, 0.5)}
    assert len(full_cells()) == 4 * 4 * 4 * 4 * 3 * 3
    tasks = plan_tasks(cells, [], reps=120)
    covered = {}
    for t in tasks:
        assert t.n * len(t.reps) <= 2_000_000 and all(c.design == t.design and c.n == t.n for c in t.cells)
        for c in t.cells:
            covered.setdefault(c.name, []).extend(t.reps)
    assert all(sorted(r) == list(range(120)) for r in covered.values()) and len(covered) == 57


def test_smoke_run_writes_its_report_and_resumes(tmp_path, capsys):
    out = tmp_path / "stress"
    assert main(["stress", "--smoke", "--reps", "6", "--quiet", "--out", str(out)]) == 0
    summary = pd.read_csv(out / "stress.csv")
    results = load_stress(out)
    assert set(summary["protocol"]) == {"histogram", "histogram_equal", "flat20", "secagg", "paper"}
    histogram = summary["protocol"] != "paper"
    assert (summary.loc[histogram, "replications"] == 6).all() and len(results) == 4 * 4 * 4 * 6 + 2 * 10
    assert (summary.loc[~histogram, "replications"] == 10).all()  # a paper cell runs at least 10
    answered = results[np.isfinite(results["estimate"]) & (results["estimand"] == "auc")]
    assert set(answered.loc[answered["protocol"] == "flat20", "estimator"]) == {"empirical"}
    assert set(answered.loc[answered["protocol"] == "paper", "estimator"]) == {"noise-corrected"}
    assert (answered["estimator"] != "").all()
    assert summary[["coverage_pooled", "coverage_population"]].stack().between(0, 1).all()
    centre = summary[(summary["protocol"] == "histogram") & (summary["estimand"] == "auc") & (summary["n"] == 1000)
                     & (summary["prevalence"] == 0.3)]
    assert centre["mae"].iat[0] < 0.05  # the binormal design the protocol was tuned on
    assert (out / "stress.png").stat().st_size > 10_000 and "FedCurve" in (out / "stress.md").read_text()
    # a run of the secagg protocol alone draws its curves where the histogram protocol's would be (not empty panels)
    import matplotlib.pyplot as plt

    from simulations.stress.figure import draw_stress_figure
    from simulations.stress.report import fedcurve_table

    secagg = summary[summary["protocol"] == "secagg"]
    fig = draw_stress_figure(secagg, fedcurve_table(secagg))
    labels = set(fig.axes[1].get_legend_handles_labels()[1])  # MAE along n
    assert "binormal, secagg" in labels and not any("histogram" in label for label in labels)
    assert fig._suptitle.get_text().startswith("Stress study: secagg protocol")
    plt.close(fig)
    capsys.readouterr()
    assert main(["stress", "--smoke", "--reps", "6", "--quiet", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out.split("\n}\n")[0] + "}")["units_run"] == 0
    assert main(["stress", "--smoke", "--reps", "7", "--quiet", "--out", str(out)]) == 2  # another run: refused


def test_a_run_of_some_protocols_runs_only_those(tmp_path, capsys):
    out = tmp_path / "one"
    assert main(["stress", "--smoke", "--reps", "2", "--quiet", "--protocols", "histogram", "--out", str(out)]) == 0
    summary = pd.read_csv(out / "stress.csv")
    assert set(summary["protocol"]) == {"histogram"} and (summary["replications"] == 2).all()
    assert len(load_stress(out)) == 4 * 4 * 2  # 4 cells x 4 estimands x 2 replications, no paper cells
    assert "histogram" in (out / "stress.md").read_text()
    capsys.readouterr()
    assert main(["stress", "--smoke", "--reps", "2", "--quiet", "--protocols", "fedcurve", "--out", str(tmp_path / "x")]) == 2
    assert "protocols must be" in capsys.readouterr().err
