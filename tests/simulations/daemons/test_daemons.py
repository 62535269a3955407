"""The daemon check: the stress study's patients served by five real TLS site daemons and validated as a user does."""

import numpy as np
import pandas as pd

from simulations.daemons.check import run_daemon_check
from simulations.stress.cells import StressCell
from simulations.stress.designs import Design


def test_the_daemons_serve_the_studys_patients_and_answer_near_the_pooled_auc(tmp_path):
    """Two replications of a small cell through five `python -m site_node serve` daemons, histogram and secagg: the
    sites' files together are the replication's patients (brute-force Mann-Whitney AUC of their union equals the
    study's pooled truth), every validation answers within 0.06 of it with an interval around its estimate and
    names its estimator, and the in-process study's rows for the same patients stand beside them."""
    cell = StressCell(Design("binormal", 0.3, 0.76), 1_000, 5, 1.0)
    rows = run_daemon_check(tmp_path, reps=2, cells=((cell, 0.013),), stream=None)
    assert sorted(rows["protocol"].unique()) == ["histogram", "histogram (daemons)", "secagg", "secagg (daemons)"]
    assert (rows.groupby("protocol").size() == 2).all()
    for rep in range(2):
        union = pd.concat([pd.read_csv(tmp_path / "federation" / "c0" / f"site{k}" / "data" / f"c0r{rep}.csv")
                           for k in range(1, 6)])
        assert len(union) == cell.n
        x0, x1 = union.loc[union.y == 0, "pred"].to_numpy(), union.loc[union.y == 1, "pred"].to_numpy()
        brute = (x0[:, None] < x1[None, :]).mean() + 0.5 * (x0[:, None] == x1[None, :]).mean()
        assert np.allclose(rows.loc[rows.rep == rep, "pooled"], brute, rtol=0, atol=1e-12)
    daemons = rows[rows["protocol"].str.endswith("(daemons)")]
    assert (np.abs(daemons["estimate"] - daemons["pooled"]) < 0.06).all()
    assert ((daemons["lower"] < daemons["estimate"]) & (daemons["estimate"] < daemons["upper"])).all()
    assert daemons["estimator"].isin(["rocglm", "shape", "monotone", "resolved", "empirical"]).all()
    table = (tmp_path / "daemons.md").read_text()
    assert cell.name in table and "histogram" in table and "secagg" in table
