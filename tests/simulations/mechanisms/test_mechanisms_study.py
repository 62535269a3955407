"""The mechanisms study: vectorised mechanisms against one-replication-at-a-time dsroc calls, and the CLI run."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dsroc import (
    analytic_gaussian_sigma,
    average_precision,
    empirical_auc,
    fit_rocglm,
    histogram_edges,
    histogram_validation,
    placement_values,
    RocGlmParts,
    rocglm_grid,
)
from dsroc.mechanisms import combine_site_releases
from simulations.mechanisms import study as mech
from simulations.cli import main
from simulations.mechanisms.checks import boyd_headline, sun_table2, sun_table5
from simulations.mechanisms.settings import MechanismSetting, generate_data, select_mechanism_settings
from simulations.common.results import load_results


def strict_auc(s, y):
    x, z = s[y == 0], s[y == 1]
    return float((x[:, None] < z[None, :]).mean())


@pytest.fixture(scope="module")
def prepared():
    data = generate_data(3, range(4), 250)
    return mech._Prepared(3, data, 5)


def test_truths_and_site_statistics_per_replication(prepared):
    data = prepared.data
    for b in range(data.b):
        s, y = data.scores[b], data.labels[b]
        assert prepared.auc_true[b] == pytest.approx(empirical_auc(s, y), abs=1e-13)
        assert prepared.auc_strict[b] == pytest.approx(strict_auc(s, y), abs=1e-13)
        assert prepared.ap_true[b] == pytest.approx(average_precision(s, y), abs=1e-13)
        sites = data.sites(5)
        sizes = np.bincount(sites[b], minlength=5)
        assert sizes.max() - sizes.min() <= 1  # near-equal sites, both classes at each
        for k in range(5):
            mine = sites[b] == k
            assert prepared.site_auc[b, k] == pytest.approx(strict_auc(s[mine], y[mine]), abs=1e-13)
            assert prepared.site_ap[b, k] == pytest.approx(average_precision(s[mine], y[mine]), abs=1e-13)
            assert prepared.site_n1[b, k] == y[mine].sum() and prepared.site_n[b, k] == mine.sum()


def test_paper_protocol_equals_the_per_site_reference(prepared):
    """Each site releases its scores + tau_k z; true positives placed under the pooled S~0; ROC-GLM fit."""
    data, k = prepared.data, prepared.k
    tau = np.vectorize(lambda d: analytic_gaussian_sigma(1.0, 1e-5, d))(prepared.delta_model)
    auc, ap = mech._paper(prepared, tau)
    grid = rocglm_grid()
    sites = data.sites(k)
    for b in range(data.b):
        s, y = data.scores[b], data.labels[b]
        released = s + tau[b, sites[b]] * prepared.z[b]
        pv0 = placement_values(released[y == 0], s[y == 1])
        fit = fit_rocglm(RocGlmParts.from_placements(pv0, grid))
        assert auc[b] == pytest.approx(fit.auc, abs=1e-9)
        assert ap[b] == pytest.approx(average_precision(released, y), abs=1e-12)


def test_histogram_protocol_uses_the_entry_points_estimate(prepared):
    """With noise of SD 1e-9 (always 0 after rounding) the histogram mechanism's AUC is dsroc.histogram_validation's
    on the exact counts at that sigma, and its AP the average precision of the binned scores."""
    data = prepared.data
    auc, ap = mech._histogram(prepared, 1e-9, np.random.default_rng(0))
    m = 12  # the analyst's default bin count at negligible noise (dsroc.recommended_n_bins)
    edges = histogram_edges(m)
    for b in range(data.b):
        s, y = data.scores[b], data.labels[b]
        idx = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, m - 1)
        h0, h1 = np.bincount(idx[y == 0], minlength=m), np.bincount(idx[y == 1], minlength=m)
        v = histogram_validation(h0, h1, edges, sigma=1e-9 * np.sqrt(prepared.k), noise_draws=2)
        assert auc[b] == pytest.approx(v.auc, abs=1e-9)
        binned = np.repeat(np.arange(float(m)), h0 + h1)
        labels = np.concatenate([np.r_[np.zeros(h0[i]), np.ones(h1[i])] for i in range(m)]).astype(int)
        assert ap[b] == pytest.approx(average_precision(binned, labels), abs=1e-12)


def test_large_epsilon_recovers_each_mechanisms_estimand():
    setting = MechanismSetting(250, 5, 1e3)
    frame = mech.run_mechanisms_chunk(5, range(3), [setting])
    data = generate_data(5, range(3), 250)
    sites = data.sites(5)
    for b in range(3):
        s, y = data.scores[b], data.labels[b]
        rows = frame[frame["rep"] == b].set_index("mechanism")
        assert rows.loc["boyd_central", "auc"] == pytest.approx(strict_auc(s, y), abs=1e-3)
        per_site = [strict_auc(s[sites[b] == k], y[sites[b] == k]) for k in range(5)]
        n1 = [y[sites[b] == k].sum() for k in range(5)]
        n = [np.sum(sites[b] == k) for k in range(5)]
        assert rows.loc["boyd_site", "auc"] == pytest.approx(combine_site_releases(per_site, n1, n), abs=0.01)
        for name in ("fedauc_rr", "fedauc_lap", "fedauc_lap_adaptive"):
            assert rows.loc[name, "auc"] == pytest.approx(empirical_auc(s, y), abs=2e-3)
    assert set(frame["unit"]) == {"rows", "scores", "labels"}
    stated = frame.groupby("mechanism")[["unit", "delta"]].first()
    for name, (unit, delta, _) in mech.MECHANISMS.items():
        assert (stated.loc[name, "unit"], stated.loc[name, "delta"]) == (unit, delta)


def test_fedauc_rr_in_the_study_is_unbiased():
    frame = mech.run_mechanisms_chunk(7, range(40), [MechanismSetting(1000, 1, 2.0)])
    rr = frame[frame["mechanism"] == "fedauc_rr"]
    err = rr["auc_unclipped"] - rr["auc_true"]
    assert abs(err.mean()) < 4 * err.std(ddof=1) / np.sqrt(err.size)


def test_papers_checks_small():
    boyd = pd.DataFrame(boyd_headline(2, reps=300))
    laplace = boyd[(boyd["noise"] == "laplace") & (boyd["epsilon"] >= 0.5)]
    assert laplace["dp_below_estimation"].all()  # Boyd: Laplace DP error below estimation error at eps > 0.25
    assert not boyd[boyd["noise"] == "cauchy"]["dp_below_estimation"].any()  # Cauchy error >> estimation error
    table5 = pd.DataFrame(sun_table5(2, runs=12))
    assert (np.diff(table5["sd"]) < 0).all()  # SD falls with epsilon
    table2 = pd.DataFrame(sun_table2(2, runs=5))
    assert np.allclose(table2["formula"], table2["printed_formula"], rtol=2e-3)


def test_cli_run_resume_and_report(tmp_path):
    out = tmp_path / "mech"
    args = ["mechanisms", "--reps", "4", "--chunk", "2", "--settings", "n=250_K=5_eps=1", "n=250_K=1_eps=10",
            "--check-runs", "3", "--check-reps", "50", "--quiet", "--out", str(out)]
    assert main(args) == 0
    results = load_results(out)
    assert len(results) == 2 * 4 * len(mech.MECHANISMS)
    table = pd.read_csv(out / "mechanisms.csv")
    assert {"auc_bias", "auc_mae", "auc_rmse", "ap_mae", "unit", "delta"} <= set(table.columns)
    assert (out / "frontier.png").stat().st_size > 10_000
    checks = json.loads((out / "checks.json").read_text())
    assert set(checks) == {"boyd_headline", "sun_table5", "sun_table2"}
    timing = json.loads((out / "timing.json").read_text())
    assert main(args) == 0  # resumed: nothing recomputed, same timing
    assert json.loads((out / "timing.json").read_text()) == timing
    assert main(["report", str(out)]) == 0
    with pytest.raises(ValueError, match="unknown setting"):
        select_mechanism_settings(["n=7"])


@pytest.mark.slow
def test_full_mechanisms_study(tmp_path):
    out = tmp_path / "full"
    assert main(["mechanisms", "--reps", "200", "--workers", "2", "--quiet", "--out", str(out)]) == 0
    checks = json.loads((out / "checks.json").read_text())
    assert all(r["within_3se"] for r in checks["sun_table5"]) and all(r["within_3se"] for r in checks["sun_table2"])
