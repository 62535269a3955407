"""Histogram mode and the protocol comparison: the batched study equals the analyst's entry point per replication."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from dsroc import bin_scores, empirical_auc, histogram_edges, histogram_validation
from dsroc.histogram.grid import bin_index, recommended_n_bins
from dsroc.privacy.laplace import discrete_laplace_noise
from simulations.common.binormal import binormal_means, generate_binormal_batch
from simulations.cli import main
from simulations.comparison.study import compare_settings, compare_table, run_compare_chunk
from simulations.common.dgp import N_SITES, generate_replication
from simulations.histogram.study import NOISE_DRAWS, _salt, histogram_frame, run_histogram_chunk
from simulations.common.results import load_results
from simulations.runner import run_study
from simulations.common.settings import select_settings


def _reference(scores, labels, sites, setting, seed, rep, *, n_bins=None, estimator="rocglm"):
    """One replication as the deployed system computes it: each site counts and adds its own noise, the
    analyst sums and calls dsroc.histogram_validation."""
    scale = setting.tau
    a = np.exp(-1.0 / scale) if scale > 0 else 0.0
    sd = np.sqrt(2 * a) / (1 - a)  # one count's discrete Laplace SD
    edges = histogram_edges(n_bins or (20 if scale == 0 else recommended_n_bins(sd)))
    h0, h1 = np.zeros(edges.size - 1), np.zeros(edges.size - 1)
    for k in range(N_SITES):
        c0, c1 = bin_scores(scores[sites == k], labels[sites == k], edges)
        if scale > 0:
            rng = np.random.default_rng([seed, rep, 1 + k, _salt(setting.name)])
            noise = discrete_laplace_noise(scale, (2, edges.size - 1), rng)
            c0, c1 = c0 + noise[0], c1 + noise[1]
        h0, h1 = h0 + c0, h1 + c1
    total = 0.0 if scale == 0 else np.sqrt(N_SITES) * sd
    return histogram_validation(h0, h1, edges, sigma=total, estimator=estimator, noise_draws=NOISE_DRAWS, seed=[seed, rep])


def test_histogram_mode_equals_the_analyst_entry_point_per_replication():
    settings = select_settings(["noise-free", "eps=1_delta=1e-05", "eps=5_delta=0.01"], mode="histogram")
    frame = run_histogram_chunk(3, range(3), settings)
    assert len(frame) == 9
    for setting in settings:
        # the discrete Laplace's scale of a counts-only release: 1 / epsilon, epsilon within a grid step (5e-4) below
        assert setting.noise_free or setting.epsilon - 5e-4 < 1.0 / setting.tau <= setting.epsilon
        for rep in range(3):
            d = generate_replication(3, rep)
            row = frame[(frame["setting"] == setting.name) & (frame["rep"] == rep)].iloc[0]
            ref = _reference(d.scores, d.labels, d.sites, setting, 3, rep)
            assert row["auc_rocglm"] == pytest.approx(ref.auc, abs=1e-12)
            assert (row["ci_lower_dist"], row["ci_upper_dist"]) == pytest.approx(ref.auc_ci, abs=1e-12)
            assert row["var_dist"] == pytest.approx(ref.auc_variance, rel=1e-10)
            assert row["auc_emp"] == pytest.approx(empirical_auc(d.scores, d.labels), abs=1e-12)


def test_noise_free_flat_histogram_is_the_mann_whitney_of_the_binned_scores():
    batch = generate_binormal_batch(4, range(3), 500)
    setting = select_settings(["noise-free"], mode="histogram")[0]
    frame = histogram_frame(batch, 4, [setting], n_bins=20, estimator="empirical")
    edges = histogram_edges(20)
    for b in range(3):
        part = batch.groups == b
        assert frame["auc_rocglm"].iat[b] == pytest.approx(empirical_auc(bin_index(batch.scores[part], edges), batch.labels[part]), abs=1e-12)


def test_binormal_design_is_calibrated_with_the_stated_auc():
    batch = generate_binormal_batch(0, range(2), 50_000)
    assert batch.labels.mean() == pytest.approx(0.3, abs=0.005)
    assert empirical_auc(batch.scores, batch.labels) == pytest.approx(norm.cdf(1 / np.sqrt(2)), abs=0.005)
    mu0, mu1 = binormal_means()
    assert mu1 - mu0 == pytest.approx(1.0)
    # Calibrated: among patients with p in [0.25, 0.35) about 30 % are positive.
    band = (batch.scores >= 0.25) & (batch.scores < 0.35)
    assert batch.labels[band].mean() == pytest.approx(0.3, abs=0.015)
    assert np.array_equal(generate_binormal_batch(0, [1], 200).scores, generate_binormal_batch(0, [0, 1], 200).scores[200:])


def test_histogram_mode_runs_resumes_and_reports(tmp_path):
    kwargs = dict(mode="histogram", reps=4, seed=2, settings=["noise-free", "eps=1_delta=1e-05"], chunk=2, progress=None)
    timing = run_study(tmp_path, **kwargs)
    assert timing["replications_computed_now"] == 4
    results = load_results(tmp_path)
    assert set(results["setting"]) == {"noise-free", "eps=1_delta=1e-05"} and len(results) == 8
    assert np.allclose(results.loc[results["setting"] != "noise-free", "tau"], 1.0, rtol=1e-6)  # scale 1 / epsilon
    assert main(["report", str(tmp_path)]) == 0
    assert (tmp_path / "settings.csv").exists() and (tmp_path / "fig5_mae.png").exists()
    with pytest.raises(ValueError, match="histogram mode"):
        run_study(tmp_path / "other", mode="histogram", reps=2, settings=["sens=0.1"], progress=None)


def test_compare_chunk_and_table(tmp_path):
    cells = compare_settings(["histogram_n=250_eps=1_delta=1e-05", "paper-range_n=250_eps=1_delta=1e-05",
                              "histogram-flat20_n=250_eps=5_delta=0.01"])
    frame = run_compare_chunk(5, range(3), cells)
    assert list(frame["setting"].unique()) == [c.name for c in cells] and len(frame) == 9
    table = compare_table(frame)
    # The table's MAE and coverage, recomputed by hand for one cell.
    part = frame[frame["protocol"] == "histogram"]
    row = table[table["protocol"] == "histogram"].iloc[0]
    assert row["mae"] == pytest.approx(np.mean(np.abs(part["auc_est"] - part["auc_emp"])))
    assert row["coverage"] == pytest.approx(np.mean((part["ci_lower"] <= part["auc_emp"]) & (part["auc_emp"] <= part["ci_upper"])))
    names = [c.name for c in cells]
    assert main(["compare", "--reps", "2", "--quiet", "--settings", *names, "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "config.json").read_text())["mode"] == "compare"
    assert (tmp_path / "compare.png").exists()
    written = pd.read_csv(tmp_path / "compare.csv")
    assert set(written["protocol"]) == {"histogram", "histogram-flat20", "paper-range"} and len(written) == 3
    assert len(compare_settings()) == 72


@pytest.mark.slow
def test_full_comparison_meets_the_coverage_target(tmp_path):
    """The full comparison (300 replications, minutes): the histogram protocol's CI covers the pooled AUC in
    at least 93 % of replications at every n >= 1 000, and its AUC MAE at n = 10 000, epsilon = 1 is <= 0.003."""
    run_study(tmp_path, mode="compare", reps=300, seed=1, workers=2, progress=None)
    table = compare_table(load_results(tmp_path))
    hist = table[(table["protocol"] == "histogram") & (table["n"] >= 1000)]
    assert (hist["coverage"] >= 0.93).all()
    assert hist[(hist["n"] == 10000) & (hist["epsilon"] == 1.0)]["mae"].iat[0] <= 0.003
