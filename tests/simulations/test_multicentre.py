"""The multicentre study: its unbinned DeLong reference against a brute force, and seconds-long runs of each analysis."""

import numpy as np
import pytest
from scipy import stats

from simulations.multicentre import _delong_paired_p, decision_curves, heterogeneity, paired_comparison, subgroups


def test_unbinned_paired_delong_equals_the_definition():
    rng = np.random.default_rng(0)
    y = rng.random(300) < 0.4
    sa = np.round(rng.normal(size=300) + y, 1)  # ties
    sb = np.round(0.5 * sa + rng.normal(size=300), 1)

    def psi(s):
        return (s[y][:, None] > s[~y][None, :]) + 0.5 * (s[y][:, None] == s[~y][None, :])

    pa, pb = psi(sa), psi(sb)
    var = np.var(pa.mean(1) - pb.mean(1), ddof=1) / y.sum() + np.var(pa.mean(0) - pb.mean(0), ddof=1) / (~y).sum()
    z = (pa.mean() - pb.mean()) / np.sqrt(var)
    assert _delong_paired_p(sa, sb, y) == pytest.approx(2 * stats.norm.sf(abs(z)), rel=1e-10)


def test_each_analysis_runs_and_reports_sane_figures():
    dc = decision_curves(20, n=4000)
    assert all(dc[f"mae@{u:g}"] < 0.02 for u in (0.1, 0.2, 0.3))
    assert all(dc[f"coverage@{u:g}"] >= 0.75 for u in (0.1, 0.2, 0.3))
    pc = paired_comparison(10, n=4000, epsilon=5.0)
    assert 0 <= pc["power"] <= pc["power_noise_free_unbinned"] + 0.3 and pc["coverage"] >= 0.7
    sg = subgroups(5, n=4000, epsilon=5.0)
    assert sg["halfwidth_ratio_to_noise_free"] > 0.9  # binning and noise never make the interval narrower
    het = heterogeneity(4, sites=5, n=600, epsilon=5.0)
    assert het["tau2_mean"] >= 0 and 0 <= het["pi_coverage_new_site"] <= 1
