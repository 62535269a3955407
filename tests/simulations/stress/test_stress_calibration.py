"""The histogram protocol's calibration on the stress study's own releases, against the unbinned truth."""

import numpy as np

from dsroc import histogram_validation
from simulations.stress.cells import StressCell
from simulations.stress.study import generate_data, quantile_release
from simulations.stress.designs import Design


def test_at_prevalence_0_02_the_bin_means_shrink_towards_the_first_stage_and_o_e_and_the_slope_lose_their_bias():
    """Calibrated binormal scores at prevalence 0.02 (n 10 000, 5 sites, epsilon 1): the top bin spans scores from
    about 0.1 to 1, and its noisy mean score, shrunk towards the bin's middle, overstated the expected events and
    flattened the slope (O/E error -0.089, 4 Monte-Carlo SEs; slope -0.096, 3.4 SEs, against the pooled unbinned
    values of ``generate_data``). Shrunk towards the first stage's mean score of the bin, both errors lie within 2.5
    SEs of 0."""
    cell = StressCell(Design("binormal", 0.02, 0.76), 10_000, 5, 1.0)
    data = generate_data(cell.design, cell.n, range(60), seed=3, slope=True)
    rel = quantile_release(data, cell, seed=3)
    oe, slope = [], []
    for i in range(60):
        v = histogram_validation(rel.counts[i][0], rel.counts[i][1], rel.edges[i], sigma=rel.total_sd,
                                 sums0=rel.sums[i][0], sums1=rel.sums[i][1], sums_sigma=rel.sums_sd,
                                 grid_edges=rel.first["edges"], grid_counts=rel.first["counts"][i],
                                 grid_sigma=rel.first["sd"], seed=i)
        oe.append(v.oe.value - data.pooled["oe"][i])
        if v.recalibration is not None and v.recalibration.converged:
            slope.append(v.recalibration.slope - data.pooled["slope"][i])
    for errors in (np.array(oe), np.array(slope)):
        assert len(errors) >= 50
        assert abs(errors.mean()) < 2.5 * errors.std(ddof=1) / np.sqrt(errors.size)


def test_a_valid_release_at_five_events_never_raises_and_says_why_there_is_no_slope(policy_before_range16):
    """Two of the stress study's releases (calibrated binormal, prevalence 0.02, n 250: about 5 events; the policy
    before range16) that raised:
    in replication 30 the two occupied bins' noisy means meet at their common edge (one distinct score, "recalibration
    needs patients in at least two bins"); in replication 117 the reconstruction's Newton step met an exactly singular
    information ("Singular matrix"). Both now give a result: no slope where there is none, and why."""
    cell = StressCell(Design("binormal", 0.02, 0.76), 250, 5, 1.0)
    data = generate_data(cell.design, cell.n, [30, 117], seed=1, slope=True)
    rel = quantile_release(data, cell, seed=1)
    results = [histogram_validation(rel.counts[i][0], rel.counts[i][1], rel.edges[i], sigma=rel.total_sd,
                                    sums0=rel.sums[i][0], sums1=rel.sums[i][1], sums_sigma=rel.sums_sd,
                                    grid_edges=rel.first["edges"], grid_counts=rel.first["counts"][i],
                                    grid_sigma=rel.first["sd"]) for i in range(2)]
    assert results[0].recalibration is None
    assert "mean scores coincide" in results[0].unavailable["recalibration"]
    recal = results[1].recalibration
    assert (recal is not None and recal.converged) or "recalibration" in results[1].unavailable
    for v in results:
        assert np.isfinite(v.auc) and v.brier is not None and v.oe is not None
