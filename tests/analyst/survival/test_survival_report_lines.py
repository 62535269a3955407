"""The survival summary's Uno's C line: its tau, or why it is not reported."""

from __future__ import annotations

import numpy as np

from analyst.protocols.histogram.survival_result import SurvivalDetail
from dsroc.survival import SurvivalHistogram, censoring_survival, survival_validation


def test_the_summary_line_says_when_uno_c_is_not_reported():
    rng = np.random.default_rng(4)
    risk = rng.uniform(0.05, 0.95, 2000)
    t, c = rng.exponential(1500.0 * (1.1 - risk)), rng.uniform(0.0, 3000.0, 2000)
    edges = np.concatenate([np.arange(0.0, 3001.0, 250.0), [np.inf]])
    h = SurvivalHistogram.from_patients(np.minimum(np.minimum(t, c), 2999.0), (t <= c).astype(int), risk,
                                        time_edges=edges, score_edges=np.linspace(0.0, 1.0, 11))
    first = float(censoring_survival(h).survival[0])  # a minimum above it: no bin may count
    lines = {}
    for name, minimum in (("kept", 0.0), ("gone", min(0.999, first + 0.01))):
        v = survival_validation(h, 1000.0, count_sd=0.0, tau=2500.0, min_censoring=minimum, draws=20)
        detail = SurvivalDetail(v, "time", {}, h.time_edges, h.score_edges, False)
        (lines[name],) = [x for x in detail.summary_lines(None, 95) if x.startswith("Uno's C")]
    assert lines["kept"].startswith("Uno's C (tau 2500)") and "95% CI [" in lines["kept"]
    assert lines["gone"] == ("Uno's C                not reported (the released censoring survival is below the "
                             "sites' minimum: see the notes)")
