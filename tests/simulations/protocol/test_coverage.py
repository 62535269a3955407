"""The coverage table: both intervals, per setting, per fixed n, computed from the saved records."""

import numpy as np
import pandas as pd
import pytest

from simulations.cli import main
from simulations.common.dgp import generate_batch, population_auc
from simulations.common.results import load_results
from simulations.runner import run_study


def test_population_auc_matches_a_large_sample():
    # independent check of the closed form: Mann-Whitney on 400 000 draws of the DGP's densities
    rng = np.random.default_rng(0)
    for redrawn in (0.0, 0.3, 0.8):
        s = rng.random(400_000)
        y = s > 0.5
        flip = rng.random(s.size) < redrawn
        y[flip] = rng.random(int(flip.sum())) < 0.5
        s0, s1 = np.sort(s[~y]), s[y]
        auc = np.searchsorted(s0, s1).mean() / s0.size
        assert population_auc(redrawn) == pytest.approx(auc, abs=3e-3)


def test_fixed_n_replications():
    batch = generate_batch(3, range(4), n=5000)
    assert (batch.n == 5000).all() and batch.scores.size == 20_000
    with pytest.raises(ValueError, match="n must be an integer >= 100"):
        generate_batch(3, range(2), n=50)


def test_study_writes_the_coverage_of_both_intervals(tmp_path):
    settings = ["noise-free", "sens=0.1_eps=5_delta=0.01"]
    runs = []
    for n in (300, 1000):
        out = tmp_path / f"n{n}"
        run_study(out, mode="protocol", reps=40, settings=settings, n=n, progress=None)
        assert main(["report", str(out)]) == 0
        runs.append(out)
        table = pd.read_csv(out / "coverage.csv")
        res = load_results(out)
        assert (res["n"] == n).all()
        noisy = table[table["setting"] == settings[1]].iloc[0]
        ok = res[(res["setting"] == settings[1]) & (res["failure"] == "")]
        covered = ((ok["ci_lower_corr"] <= ok["auc_emp"]) & (ok["auc_emp"] <= ok["ci_upper_corr"])).mean()
        assert noisy["corrected_coverage_pooled"] == pytest.approx(covered)
        assert noisy["corrected_intervals"] == len(ok) and 0 < noisy["paper_coverage_pooled"] <= 1
        # without noise the corrected interval is centred at the pooled AUC itself
        free = res[(res["setting"] == "noise-free") & (res["failure"] == "")]
        np.testing.assert_allclose(free["auc_corr"], free["auc_emp"], atol=1e-12)
        assert set(table["subset"]) == {"all", "auc_emp > 0.9"}
    # a fixed-n run cannot be resumed as another n
    with pytest.raises(ValueError, match="n differ"):
        run_study(runs[0], mode="protocol", reps=40, settings=settings, n=2000, progress=None)
    assert main(["coverage", *map(str, runs), "--out", str(tmp_path / "all")]) == 0
    stacked = pd.read_csv(tmp_path / "all" / "coverage.csv")
    assert sorted(stacked["n_min"].unique()) == [300, 1000] and (stacked["mode"] == "protocol").all()
    assert "corrected: pooled" in (tmp_path / "all" / "coverage.md").read_text()
