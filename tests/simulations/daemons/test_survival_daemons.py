"""The survival daemon check: the survival study's cohorts served by five real TLS site daemons, validated as a user
does; noise-free, the daemons' estimates are the in-process estimates of the same histogram; the target cell (slow)."""

import numpy as np
import pandas as pd
import pytest

from dsroc.survival import SurvivalHistogram, brier_score, calibration_at, cumulative_dynamic_auc, harrell_c, uno_c
from simulations.daemons.survival import (SURVIVAL_CELLS, run_survival_daemon_check, serve_cohorts, site_score_edges,
                                          survival_daemon_rows, survival_daemon_table)
from simulations.survival.designs import HORIZON, Design
from simulations.survival.study import Cell, cohort, grids

CELL = Cell(Design("weibull", 0.3, 0.5), 1_000, 5, 1.0)
NOISE_FREE = 5_000.0  # the counts' discrete Laplace is 0 with probability 1 - 2e-2000 per cell


def brute_counts(frame: pd.DataFrame, time_edges, score_edges) -> np.ndarray:
    """Patient by patient: time bin k with e_k < T <= e_{k+1} (T = 0 in the first), score bin j with
    s_j <= r < s_{j+1} (the last closed)."""
    counts = np.zeros((time_edges.size - 1, 2, score_edges.size - 1))
    for t, d, r in frame[["time", "event", "risk"]].itertuples(index=False):
        k = next(i for i in range(time_edges.size - 1) if t <= time_edges[i + 1])
        j = next((i for i in range(score_edges.size - 2) if r < score_edges[i + 1]), score_edges.size - 2)
        counts[k, int(d), j] += 1
    return counts


def test_noise_free_the_daemons_release_the_cohorts_histogram_and_estimate_as_in_process(tmp_path):
    """One cohort at five `python -m site_node serve` daemons at an epsilon whose noise is zero, without risk sums:
    the sites' files are the cohort, the summed release is the brute-force histogram of the union of the files, each
    site charged the epsilon, and fed.validate's AUC(median follow-up), Uno's C, Harrell's C, Brier(1) and O/E(1)
    equal dsroc's estimators on that histogram to 1e-12."""
    from analyst import Federation
    from analyst.demo import running_daemons

    g = grids(CELL.design)
    time, event, risk, site = cohort(CELL, 0, 1)
    local = serve_cohorts(tmp_path, {"c": (time, event, risk, site)}, CELL, g, max_epsilon=NOISE_FREE,
                          budget_epsilon=NOISE_FREE + 1.0)
    union = pd.concat([pd.read_csv(tmp_path / f"site{k}" / "data" / "c.csv", float_precision="round_trip")
                       for k in range(1, 6)])
    assert len(union) == CELL.n and np.array_equal(np.sort(union["time"]), np.sort(time))
    score_edges = np.r_[0.0, site_score_edges(g), 1.0]
    assert np.abs(score_edges - g.score_edges).max() <= 0.5 / 10_000 + 1e-15
    with (running_daemons(local.configs, pki=local.pki, token=local.token, timeout=120),
          Federation.from_file(local.federation) as fed):
        rows = survival_daemon_rows(fed, CELL, g, {0: "c"}, epsilon=NOISE_FREE, risk_sums=False, draws=20)
        res = fed.validate("c", "event", score="risk", time="time", horizon=HORIZON, epsilon=NOISE_FREE, delta=1e-5,
                           time_edges=tuple(g.time_edges[1:-1]), edges=tuple(site_score_edges(g)), tau=g.tau,
                           by_site=False, draws=20)  # the same request: a free replay of the same release
        noisy = fed.validate("c", "event", score="risk", time="time", horizon=HORIZON, epsilon=1.0, delta=1e-5,
                             time_edges=tuple(g.time_edges[1:-1]), edges=tuple(site_score_edges(g)), tau=g.tau,
                             risk_sums=True, by_site=False, draws=20)
    counts = brute_counts(union, g.time_edges, score_edges)
    released = sum(s.release.counts[0] for s in res.detail.releases.values())
    assert np.array_equal(released, counts)
    assert all(s.repeated and s.epsilon == NOISE_FREE for s in res.detail.releases.values())
    h = SurvivalHistogram(counts, g.time_edges, score_edges)
    expected = {"auc": cumulative_dynamic_auc(h, g.auc_time).value, "uno": uno_c(h, g.tau), "harrell": harrell_c(h),
                "brier": brier_score(h, HORIZON), "oe": calibration_at(h, HORIZON, [0, h.shape[2]]).overall.ratio}
    got = rows.set_index("statistic")["estimate"]
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=0, abs=1e-12), name
    assert ((rows["lower"] <= rows["estimate"]) & (rows["estimate"] <= rows["upper"])).all()
    # at epsilon 1 each site's counts carry the discrete Laplace noise of the SD it states (5 x 1 058 cells: the
    # sample SD within 6 % of it; mean within 4 SE of 0)
    frames = [pd.read_csv(tmp_path / f"site{k}" / "data" / "c.csv", float_precision="round_trip") for k in range(1, 6)]
    sites = list(noisy.detail.releases.values())
    noise = np.concatenate([(s.release.counts[0] - brute_counts(f, g.time_edges, score_edges)).ravel()
                            for s, f in zip(sites, frames)])
    stated = sites[0].noise_sd
    assert all(s.noise_sd == stated and s.epsilon == 1.0 and not s.repeated for s in sites)
    assert noise.std() == pytest.approx(stated, rel=0.06)
    assert abs(noise.mean()) <= 4 * stated / np.sqrt(noise.size)


@pytest.mark.slow
def test_the_target_cell_through_the_daemons_meets_the_targets_as_the_study(tmp_path):
    """The target cell (epsilon 1, n 10 000, 5 sites, 50 % censoring, Weibull), 100 cohorts through the daemons:
    AUC(t), Uno's C, Brier(t) and O/E(t) cover the population value in at least 93 % less two Monte Carlo SEs,
    AUC(t) and Uno's C with MAE at most 0.01 plus two Monte Carlo SEs (the targets, as the study's slow test allows
    for its error), and no statistic's daemon bias is further than 4 Monte Carlo SEs from the in-process study's on
    the same cohorts."""
    reps = 100
    rows = run_survival_daemon_check(tmp_path, reps=reps, cells=SURVIVAL_CELLS, stream=None)
    assert len(pd.read_csv(tmp_path / "survival_daemons.csv")) == len(rows) == 2 * reps * 5
    s = survival_daemon_table(rows).set_index("statistic")
    floor = 0.93 - 2 * np.sqrt(0.95 * 0.05 / reps)
    for name in ("auc", "uno", "brier", "oe"):
        assert s.loc[name, "coverage_pop_daemons"] >= floor, name
        gap = s.loc[name, "bias_pop_daemons"] - s.loc[name, "bias_pop_study"]
        assert abs(gap) <= 4 * np.hypot(s.loc[name, "bias_pop_mcse_daemons"], s.loc[name, "bias_pop_mcse_study"]), name
    daemons = rows[rows["source"] == "daemons"]
    for name in ("auc", "uno"):
        err = (daemons.loc[daemons["statistic"] == name, "estimate"] - s.loc[name, "population"]).abs()
        assert err.mean() <= 0.01 + 2 * err.std(ddof=1) / np.sqrt(reps), name
