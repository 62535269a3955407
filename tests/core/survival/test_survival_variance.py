"""The cumulative/dynamic AUC's variance approximation against the variance over simulated cohorts."""

import numpy as np

from dsroc.survival import SurvivalHistogram, cumulative_dynamic_auc


def test_the_auc_variance_matches_the_monte_carlo_variance():
    # sampling variance: fresh cohorts of 400 patients on a public grid, heavy censoring (IPC weights up to ~4)
    rng = np.random.default_rng(99)
    edges, scores = np.r_[np.linspace(0.0, 3.0, 31), np.inf], np.linspace(0.0, 1.0, 51)
    values, variances = [], []
    for _ in range(1500):
        scale = np.exp(-0.8 * rng.normal(size=400))
        event_time, censor_time = scale * rng.weibull(1.5, 400), rng.exponential(0.6, 400)
        risk = 1.0 - np.exp(-((1.0 / (1.1 * scale)) ** 1.4))
        hist = SurvivalHistogram.from_patients(np.minimum(event_time, censor_time),
                                               (event_time <= censor_time).astype(int), risk, time_edges=edges,
                                               score_edges=scores)
        result = cumulative_dynamic_auc(hist, 1.0)
        values.append(result.value)
        variances.append(result.variance)
    ratio = np.mean(variances) / np.var(values, ddof=1)
    assert 0.87 < ratio < 1.15  # the ratio's Monte Carlo SE is about 0.04
