"""Small runs of the study in both modes: outputs, determinism, resume, Dask, and cross-checks of the numbers."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from dsroc import (
    auc_ci,
    auc_ci_batch,
    delong_variance_from_moments,
    empirical_auc,
    fit_rocglm,
    fit_rocglm_batch,
    placement_values,
    rocglm_grid,
    RocGlmParts,
)
from dsroc.roc.batch import grouped_class_placements, grouped_delong_variance, grouped_rocglm_counts
from simulations import runner
from simulations.cli import main
from simulations.common.dgp import generate_batch, generate_replication
from simulations.paper.published import run_paper_chunk
from simulations.protocol.pipeline import run_protocol_chunk
from simulations.paper.report import table1
from simulations.common.results import load_results
from simulations.runner import run_study
from simulations.common.settings import select_settings
from simulations.common.truth import pooled_truth

SMALL = ["noise-free", "sens=0.1_eps=10_delta=0.1", "sens=0.4_eps=0.5_delta=1e-05"]


@pytest.mark.parametrize("mode,reps", [("paper", 40), ("protocol", 8)])
def test_small_run_writes_every_output(tmp_path, mode, reps):
    assert main(["run", "--mode", mode, "--reps", str(reps), "--settings", *SMALL, "--quiet", "--out", str(tmp_path)]) == 0
    for name in ("table1.csv", "table1.md", "settings.csv", "recommended.csv", "fig5_mae.png", "fig6_dci.png", "timing.json"):
        assert (tmp_path / name).stat().st_size > 0, name
    t1 = pd.read_csv(tmp_path / "table1.csv")
    assert list(t1.columns) == ["auc_bin", "min", "q25", "median", "mean", "q75", "max", "sd", "count"]
    assert len(t1) == 20 and t1["auc_bin"].iloc[0] == "(0.5, 0.525]" and t1["auc_bin"].iloc[-1] == "(0.975, 1]"
    results = load_results(tmp_path)
    assert len(results) == reps * len(SMALL)
    free = results[results["setting"] == "noise-free"]
    in_range = free[(free["auc_emp"] >= 0.5) & (free["failure"].isin(["", "ci undefined"]))]
    assert t1["count"].sum() == len(in_range)
    rec = pd.read_csv(tmp_path / "recommended.csv")
    assert {"sensitivity", "epsilon", "delta", "tau", "tolerance", "worst_bin_mae", "ci_within_tolerance"} <= set(rec.columns)
    assert set(rec["tolerance"]) <= {0.01, 0.015, 0.02}
    settings = pd.read_csv(tmp_path / "settings.csv")
    assert list(settings["setting"]) == SMALL and (settings["replications"] == reps).all()
    timing = json.loads((tmp_path / "timing.json").read_text())
    assert timing["replications_computed_now"] == reps and timing["wall_seconds"] > 0
    # noise-free: the released scores are the true ones, so both CIs coincide in paper mode
    if mode == "paper":
        assert np.nanmax(free["delta_ci"]) == 0.0
    # much noise makes the ROC-GLM AUC far worse than little noise
    by = results.groupby("setting")["delta_auc"].apply(lambda d: d.abs().mean())
    assert by["sens=0.4_eps=0.5_delta=1e-05"] > 5 * by["sens=0.1_eps=10_delta=0.1"]


@pytest.mark.parametrize("mode", ["paper", "protocol"])
def test_identical_results_for_one_and_two_workers(tmp_path, mode):
    kwargs = dict(mode=mode, reps=12, seed=9, settings=SMALL, chunk=5, progress=None)
    run_study(tmp_path / "one", workers=1, **kwargs)
    run_study(tmp_path / "two", workers=2, **kwargs)
    pd.testing.assert_frame_equal(load_results(tmp_path / "one"), load_results(tmp_path / "two"))


def test_dask_local_cluster_gives_the_same_results(tmp_path):
    distributed = pytest.importorskip("distributed")
    kwargs = dict(mode="protocol", reps=4, seed=2, settings=SMALL[:2], chunk=2, progress=None)
    run_study(tmp_path / "local", **kwargs)
    with distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=1, dashboard_address=None) as cluster:
        timing = run_study(tmp_path / "dask", scheduler=cluster.scheduler_address, **kwargs)
    assert timing["workers"] == "dask"
    pd.testing.assert_frame_equal(load_results(tmp_path / "local"), load_results(tmp_path / "dask"))


def test_interrupted_run_resumes_where_it_stopped(tmp_path, monkeypatch):
    kwargs = dict(mode="paper", reps=15, seed=4, settings=SMALL[:2], chunk=5, progress=None)
    run_study(tmp_path / "full", **kwargs)
    real = runner.run_chunk
    calls = []

    def failing(task):
        calls.append(task.start)
        if len(calls) == 3:
            raise KeyboardInterrupt("simulated interruption")
        return real(task)

    monkeypatch.setattr(runner, "run_chunk", failing)
    with pytest.raises(KeyboardInterrupt):
        run_study(tmp_path / "resumed", **kwargs)
    assert len(list((tmp_path / "resumed" / "chunks").glob("*.parquet"))) == 2
    monkeypatch.setattr(runner, "run_chunk", real)
    timing = run_study(tmp_path / "resumed", **kwargs)
    assert timing["replications_computed_now"] == 5  # only the missing chunk
    pd.testing.assert_frame_equal(load_results(tmp_path / "full"), load_results(tmp_path / "resumed"))
    assert run_study(tmp_path / "resumed", **kwargs) == timing  # finished: nothing recomputed, timing kept
    with pytest.raises(ValueError, match="different run"):
        run_study(tmp_path / "resumed", **{**kwargs, "seed": 5})


def test_paper_mode_equals_the_grouped_computation_per_setting():
    # The code path before the settings of a replication were placed together (one grouped sort per
    # setting over the chunk's replications): the same counts, fits and CIs to rounding.
    settings = select_settings(["noise-free", "sens=0.2_eps=1_delta=0.001", "sens=0.4_eps=0.5_delta=1e-05"])
    frame = run_paper_chunk(4, range(12), settings)
    batch, grid = generate_batch(4, range(12)), rocglm_grid()
    g, y = batch.groups, batch.labels
    auc_emp = pooled_truth(batch).auc_emp
    for setting in settings:
        noisy = batch.scores if setting.tau == 0.0 else np.clip(batch.scores + setting.tau * batch.noise, 0.0, 1.0)
        placed = grouped_class_placements(noisy, y, g, n_groups=batch.size, ties="strict")
        counts = grouped_rocglm_counts(placed.pv[y == 1], g[y == 1], grid, n_groups=batch.size)
        fit = fit_rocglm_batch(counts, batch.n1, grid)
        var = grouped_delong_variance(placed, y, g, n_groups=batch.size)
        ci = auc_ci_batch(auc_emp, var)
        rows = frame[frame["setting"] == setting.name].sort_values("rep")
        np.testing.assert_array_equal(rows["iterations"], fit.iterations)
        for column, want in (("auc_rocglm", fit.auc), ("gamma1", fit.params[:, 0]), ("gamma2", fit.params[:, 1]),
                             ("var_dist", var), ("ci_lower_dist", ci.lower), ("ci_upper_dist", ci.upper)):
            np.testing.assert_allclose(rows[column], want, rtol=0, atol=1e-12, err_msg=column)
        if setting.noise_free:  # without noise the grouped variance itself, bit for bit
            np.testing.assert_array_equal(rows["var_dist"], var)


def test_paper_mode_equals_single_data_set_functions():
    settings = select_settings(["noise-free", "sens=0.2_eps=1_delta=0.001"])
    frame = run_paper_chunk(8, range(3), settings)
    grid = rocglm_grid()
    for setting in settings:
        for rep in range(3):
            d = generate_replication(8, rep)
            row = frame[(frame["setting"] == setting.name) & (frame["rep"] == rep)].iloc[0]
            noisy = np.clip(d.scores + setting.tau * d.noise, 0, 1)
            s0, s1 = noisy[d.labels == 0], noisy[d.labels == 1]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                fit = fit_rocglm(RocGlmParts.from_placements(placement_values(s0, s1, ties="strict"), grid))
            assert row["auc_rocglm"] == pytest.approx(fit.auc, abs=1e-9)
            assert row["gamma1"] == pytest.approx(fit.params[0], abs=1e-7)
            auc = empirical_auc(d.scores, d.labels)
            assert row["auc_emp"] == pytest.approx(auc, abs=1e-12)
            pv0, pv1 = placement_values(s0, s1, ties="strict"), placement_values(s1, s0, ties="strict")
            var = delong_variance_from_moments(var_pv0=pv0.var(ddof=1), n1=s1.size, var_pv1=pv1.var(ddof=1), n0=s0.size)
            assert row["var_dist"] == pytest.approx(var, rel=1e-10)
            lo, hi = auc_ci(auc, var)
            assert (row["ci_lower_dist"], row["ci_upper_dist"]) == pytest.approx((lo, hi), abs=1e-12)


def test_noise_free_protocol_equals_paper_where_they_must():
    # Without noise and without ties, strict and mid-rank survivor functions agree, S~0 is S0, and the
    # per-site counts add up to the pooled ones: same ROC-GLM, same placement-value variance. The CIs
    # differ by design (centred at the ROC-GLM AUC in protocol mode, the empirical AUC in paper mode).
    settings = select_settings(["noise-free"])
    paper = run_paper_chunk(2, range(6), settings)
    protocol = run_protocol_chunk(2, range(6), settings)
    ok = (protocol["failure"] == "") & (paper["failure"] == "")
    assert ok.sum() >= 4
    for col in ("auc_emp", "auc_rocglm", "gamma1", "gamma2"):
        np.testing.assert_allclose(protocol.loc[ok, col], paper.loc[ok, col], rtol=0, atol=1e-9)
    np.testing.assert_allclose(protocol.loc[ok, "var_dist"], paper.loc[ok, "var_true"], rtol=1e-9)
    # Both go to the MLE: the pooled fit with Newton steps after R's rule, the distributed one with
    # Fisher steps (the sites return the expected information only), which take more of them.
    assert (paper["iterations"][ok] <= protocol["iterations"][ok]).all()
    assert paper["converged"][ok].all() and protocol["converged"][ok].all()


def test_table1_needs_noise_free(tmp_path):
    run_study(tmp_path, reps=3, settings=["sens=0.1_eps=10_delta=0.1"], progress=None)
    with pytest.raises(ValueError, match="noise-free"):
        table1(load_results(tmp_path))
    assert main(["report", str(tmp_path)]) == 0  # the rest of the report still works


def test_cli_rejects_bad_input(tmp_path, capsys):
    assert main(["run", "--reps", "0", "--out", str(tmp_path)]) == 2
    assert "reps must be a positive integer" in capsys.readouterr().err
    assert main(["run", "--reps", "2", "--settings", "sens=9", "--out", str(tmp_path / "x")]) == 2
    assert "unknown setting" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "nothing")]) == 2
    with pytest.raises(SystemExit):
        main(["run", "--mode", "fast", "--out", str(tmp_path)])


# The medians of the paper's Table 1 (Schalk et al. 2024), bins (0.5, 0.525] ... (0.975, 1].
PAPER_TABLE1_MEDIANS = [0.0005, 0.0006, 0.0009, 0.0012, 0.0015, 0.0017, 0.0018, 0.0018, 0.0016, 0.0015,
                        0.0011, 0.0004, -0.0002, -0.0013, -0.0026, -0.0044, -0.0065, -0.0091, -0.0113, -0.0062]


@pytest.mark.slow
def test_full_paper_study(tmp_path):
    timing = run_study(tmp_path, mode="paper", reps=10_000, workers=2, progress=None)
    assert timing["wall_seconds"] < 300  # the target on 2 cores
    results = load_results(tmp_path)
    free = results[results["setting"] == "noise-free"]
    t1 = table1(results)
    usable = free[free["failure"].isin(["", "ci undefined"]) & (free["auc_emp"] >= 0.5)]
    assert t1["count"].sum() == len(usable) > 9_700
    np.testing.assert_allclose(t1["median"], PAPER_TABLE1_MEDIANS, atol=0.001)
