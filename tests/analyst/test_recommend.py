"""Recommended privacy settings: the packaged simulation table, read independently with pandas."""

from importlib import resources

import numpy as np
import pandas as pd
import pytest

from analyst import recommend_settings
from analyst.cli import main
from analyst.recommend import recommendation_warning


@pytest.fixture(scope="module")
def table():
    with resources.files("analyst").joinpath("data", "recommended_protocol.csv").open() as f:
        return pd.read_csv(f)


def expected(table, sensitivity, tolerance):
    """The rows of the smallest studied Delta >= sensitivity at this tolerance, most private first."""
    studied = np.sort(table["sensitivity"].unique())
    chosen = studied[studied >= sensitivity].min()
    rows = table[(table["sensitivity"] == chosen) & np.isclose(table["tolerance"], tolerance)]
    return chosen, list(rows.sort_values(["epsilon", "delta"])[["epsilon", "delta"]].itertuples(index=False, name=None))


def test_the_packaged_table_is_the_full_protocol_mode_study(table):
    assert set(table["mode"]) == {"protocol"} and set(table["replications"]) == {10000}
    assert sorted(table["tolerance"].unique()) == [0.01, 0.015, 0.02]
    # every listed setting met its tolerance in every AUC bin and failed in at most 1 % of replications
    assert (table["worst_bin_mae"] <= table["tolerance"]).all() and (table["failure_share"] <= 0.01).all()


@pytest.mark.parametrize("tolerance", [0.01, 0.015, 0.02])
def test_recommendations_are_the_tables_rows_for_the_next_studied_delta(table, tolerance):
    studied = np.sort(table["sensitivity"].unique())
    asked = np.concatenate([studied, studied * 0.999, (studied[:-1] + studied[1:]) / 2, [1e-9]])
    for sensitivity in asked:
        chosen, rows = expected(table, sensitivity, tolerance)
        if not rows:  # e.g. Delta = 0.3 at tolerance 0.01: studied, but nothing met it
            with pytest.raises(ValueError, match=f"Delta = {chosen:g}"):
                recommend_settings(float(sensitivity), tolerance=tolerance)
            continue
        got = recommend_settings(float(sensitivity), tolerance=tolerance)
        assert [(s.epsilon, s.delta) for s in got] == rows
        assert {s.studied_sensitivity for s in got} == {chosen} and chosen >= sensitivity * (1 - 1e-12)
        assert all(s.worst_bin_mae <= tolerance for s in got)


def test_the_demo_delta_gets_the_studied_delta_0_2_and_the_papers_setting(table):
    got = recommend_settings(0.19)
    assert [(s.epsilon, s.delta) for s in got] == expected(table, 0.19, 0.015)[1]
    assert got[0].studied_sensitivity == 0.2
    # the paper's GBSG2 setting is among those the deployed procedure met the tolerance with
    assert (5, 0.01) in [(s.epsilon, s.delta) for s in got]
    assert recommendation_warning(5, 0.01, [0.18, 0.19]) is None
    text = recommendation_warning(1, 0.01, [0.18, 0.19], tau=0.5)
    assert "epsilon = 1, delta = 0.01 is not among" in text and "Delta = 0.19" in text and "(5, 0.01)" in text
    assert f"tau = 0.5; the recommended settings have tau <= {max(s.tau for s in got):.3g}" in text


def test_no_recommendation_beyond_the_studied_deltas(table):
    with pytest.raises(ValueError, match="exceeds every Delta"):
        recommend_settings(table["sensitivity"].max() * 1.01)
    assert "exceeds every Delta" in recommendation_warning(10, 0.1, [0.05, 0.45])


def test_bad_arguments_and_tables_are_named(tmp_path, table):
    for bad in (0, -0.1, float("nan"), float("inf"), True, "0.1"):
        with pytest.raises(ValueError, match="sensitivity must be a positive"):
            recommend_settings(bad)
    with pytest.raises(ValueError, match="tolerance 0.03 is not in .* available: 0.01, 0.015, 0.02"):
        recommend_settings(0.1, tolerance=0.03)
    with pytest.raises(ValueError, match="not found"):
        recommend_settings(0.1, table=tmp_path / "missing.csv")
    table.drop(columns=["tau"]).to_csv(tmp_path / "no_tau.csv", index=False)
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['tau'\]"):
        recommend_settings(0.1, table=tmp_path / "no_tau.csv")
    # another run's table is used as given
    mine = table[(table["sensitivity"] == 0.1) & (table["tolerance"] == 0.02) & (table["epsilon"] == 10)]
    mine.to_csv(tmp_path / "mine.csv", index=False)
    got = recommend_settings(0.05, tolerance=0.02, table=tmp_path / "mine.csv")
    assert [(s.epsilon, s.delta) for s in got] == list(mine.sort_values("delta")[["epsilon", "delta"]].itertuples(
        index=False, name=None))


def test_cli_recommend(capsys, table):
    assert main(["recommend", "--sensitivity", "0.19", "--max-delta", "1"]) == 0
    out = capsys.readouterr().out
    _, rows = expected(table, 0.19, 0.015)
    lines = [line.split() for line in out.splitlines()[2:]]
    assert [(float(a[0]), float(a[1])) for a in lines] == rows
    assert "Delta = 0.2" in out and "within 0.015" in out
    assert main(["recommend", "--sensitivity", "0.05", "--tolerance", "0.01", "--json", "--max-delta", "1"]) == 0
    import json

    got = json.loads(capsys.readouterr().out)
    assert [(r["epsilon"], r["delta"]) for r in got] == expected(table, 0.05, 0.01)[1]
    assert main(["recommend", "--sensitivity", "0.9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dsroc: error: no recommendation exists") and "Traceback" not in err


def test_the_corrected_ci_coverage_filters_the_recommendations(table, capsys):
    # every setting up to the largest tau of the coverage study carries the corrected CI's worst coverage
    studied = table["corrected_coverage"].notna()
    assert studied.any()
    if (~studied).any():  # NaN only beyond the largest studied noise
        assert table.loc[~studied, "tau"].min() > table.loc[studied, "tau"].max()
    rows = table[(table["sensitivity"] == 0.1) & np.isclose(table["tolerance"], 0.015) & (table["delta"] <= 0.01)]
    assert (rows["corrected_coverage"] >= 0.93).all()  # the study's target holds for every studied setting
    keep = rows[rows["corrected_coverage"] >= 0.99].sort_values(["epsilon", "delta"])
    got = recommend_settings(0.1, max_delta=0.01, min_corrected_coverage=0.99)
    assert [(s.epsilon, s.delta) for s in got] == list(keep[["epsilon", "delta"]].itertuples(index=False, name=None))
    assert all(s.corrected_coverage >= 0.99 for s in got) and 0 < len(got) < len(rows)
    with pytest.raises(ValueError, match="noise-corrected CI"):
        recommend_settings(0.1, max_delta=0.01, min_corrected_coverage=1.01)
    assert main(["recommend", "--sensitivity", "0.1", "--max-delta", "0.01", "--min-coverage", "0.99"]) == 0
    out = capsys.readouterr().out
    assert "Corrected-CI coverage" in out and len(out.splitlines()) == 2 + len(got)
