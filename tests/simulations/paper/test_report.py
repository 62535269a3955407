"""Report helpers: AUC bins, the recommendation rule, per-bin matrices, against hand-made tables."""

import numpy as np
import pandas as pd
import pytest

from simulations.paper.report import auc_bins, bin_matrix, recommended, settings_table


def test_auc_bins_are_right_closed_with_half_in_the_first():
    bins = auc_bins([0.5, 0.525, 0.5251, 0.975, 1.0, 0.49])
    assert list(bins[:5].astype(str)) == ["(0.5, 0.525]", "(0.5, 0.525]", "(0.525, 0.55]", "(0.95, 0.975]", "(0.975, 1]"]
    assert pd.isna(bins[5])
    assert len(bins.categories) == 20


def _results():
    rows = []
    # setting A: |dAUC| 0.004 everywhere; B: 0.02 in the top bin; C: fine but 2 of 10 fits fail
    for name, sens, eps in (("A", 0.1, 5.0), ("B", 0.1, 1.0), ("C", 0.2, 10.0)):
        for rep in range(10):
            auc = 0.51 + 0.048 * rep  # 0.51 .. 0.942, spread over bins
            d = 0.02 if (name == "B" and auc > 0.9) else 0.004 * (-1) ** rep
            failure = "separation" if (name == "C" and rep < 2) else ""
            rows.append({"setting": name, "sensitivity": sens, "epsilon": eps, "delta": 0.01, "tau": 0.1, "rep": rep,
                         "auc_emp": auc, "delta_auc": np.nan if failure else d, "delta_ci": 0.001, "failure": failure})
    return pd.DataFrame(rows)


def test_settings_table_and_recommendation_rule():
    results = _results()
    table = settings_table(results).set_index("setting")
    assert table.loc["A", "mae"] == pytest.approx(0.004)
    assert table.loc["B", "worst_bin_mae"] == pytest.approx(0.02)
    assert table.loc["C", "failures"] == 2 and table.loc["C", "failure_share"] == pytest.approx(0.2)
    rec = recommended(table.reset_index(), tolerance=0.01)
    assert list(zip(rec["sensitivity"], rec["epsilon"])) == [(0.1, 5.0)]  # B misses a bin, C fails too often
    assert rec["ci_within_tolerance"].all() and (rec["tolerance"] == 0.01).all()
    assert len(recommended(table.reset_index(), tolerance=0.03)) == 2


def test_bin_matrix_means_by_bin():
    results = _results()
    mae = bin_matrix(results, "abs_delta_auc")
    assert list(mae.index) == ["A", "B", "C"] and mae.shape[1] == 20
    top = auc_bins([0.942])[0]
    assert mae.loc["B", top] == pytest.approx(0.02)
    assert np.nanmax(mae.loc["A"]) == pytest.approx(0.004)
