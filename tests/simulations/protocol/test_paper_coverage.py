"""The paper-protocol coverage study: its score shapes, a small run through the CLI, and the recommended table's annotation."""

import numpy as np
import pandas as pd
import pytest

from simulations.cli import main
from simulations.protocol.paper_coverage import annotate_recommended, shape_batch, shape_population_auc
from simulations.common.truth import pooled_truth


@pytest.mark.parametrize("shape", ["binormal", "skewed", "bimodal"])
def test_shapes_have_their_population_auc(shape):
    # the pooled AUCs of large replications scatter around the closed form / quadrature value
    batch = shape_batch(shape, 3, range(4), 50_000)
    auc = pooled_truth(batch).auc_emp
    assert np.mean(auc) == pytest.approx(shape_population_auc(shape), abs=0.004)
    assert (batch.auc_population == shape_population_auc(shape)).all()
    assert set(np.unique(batch.sites)) == set(range(5)) and 0.27 < batch.labels.mean() < 0.33


def test_a_small_run_writes_the_coverage_and_annotates_the_recommendations(tmp_path, capsys):
    rec = pd.DataFrame({"sensitivity": [0.1, 0.1, 0.4], "epsilon": [5.0, 10.0, 10.0], "delta": [0.01, 0.01, 0.1],
                        "tau": [0.0569, 0.035, 0.5]})
    rec.to_csv(tmp_path / "rec.csv", index=False)
    args = ["paper-coverage", "--shapes", "binormal", "skewed", "--n", "300", "--reps", "4", "--quiet",
            "--settings", "sens=0.1_eps=5_delta=0.01", "--recommended", str(tmp_path / "rec.csv"), "--out", str(tmp_path / "run")]
    assert main(args) == 0
    assert "| skewed | 300 | sens=0.1_eps=5_delta=0.01 |" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "run" / "paper_coverage.csv")
    assert list(table["shape"]) == ["binormal", "skewed"] and (table["replications"] == 4).all()
    frames = [pd.read_csv(p) for p in sorted((tmp_path / "run" / "results").glob("skewed_*"))]
    ok = pd.concat(frames)
    covered = ((ok["ci_lower_corr"] <= ok["auc_emp"]) & (ok["auc_emp"] <= ok["ci_upper_corr"])).mean()
    assert table.loc[table["shape"] == "skewed", "corrected_coverage_pooled"].iat[0] == pytest.approx(covered)
    annotated = pd.read_csv(tmp_path / "run" / "recommended.csv")
    worst = table["corrected_coverage_pooled"].min()
    # tau 0.0569 and 0.035 take the studied tau 0.0569 (the nearest at least theirs); 0.5 was not studied
    assert annotated["corrected_coverage"].iloc[:2].tolist() == [worst, worst]
    assert np.isnan(annotated["corrected_coverage"].iat[2])
    assert main(args) == 0  # resumed: the saved chunks are reused
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "run" / "paper_coverage.csv"), table)


def test_annotation_picks_the_conservative_neighbour():
    coverage = pd.DataFrame({"subset": ["all"] * 4, "tau": [0.05, 0.05, 0.1, 0.1],
                             "corrected_coverage_pooled": [0.99, 0.95, 0.90, 1.0]})
    rec = pd.DataFrame({"tau": [0.01, 0.05, 0.07, 0.1, 0.2]})
    got = annotate_recommended(rec, coverage)["corrected_coverage"].tolist()
    assert got[:4] == [0.95, 0.95, 0.90, 0.90] and np.isnan(got[4])
