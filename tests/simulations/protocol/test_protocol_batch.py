"""Batched protocol mode equals the per-site, per-replication deployed computation (tests/simulations/conftest.py)."""

import warnings

import numpy as np
import pandas as pd
import pytest

from dsroc import fit_rocglm, fit_rocglm_batch, mean_parts, pooled_mean, pooled_variance, rocglm_grid, sq_dev_parts
from dsroc.roc.batch import grouped_placement_values, grouped_rocglm_counts, grouped_variance
from simulations.common.dgp import N_SITES, generate_batch, generate_replication
from simulations.protocol.pipeline import refused_replications, release_noise, run_protocol_chunk
from simulations.common.settings import select_settings

SETTINGS = select_settings(
    ["noise-free", "sens=0.01_eps=10_delta=0.1", "sens=0.1_eps=1_delta=0.001", "sens=0.4_eps=0.1_delta=1e-05"]
)


def test_release_noise_reproduces_every_site_release_bit_for_bit(protocol_reference):
    seed, reps = 7, range(3, 9)
    batch = generate_batch(seed, reps)
    z = release_noise(batch, seed)
    for setting in SETTINGS[1:]:
        tau = setting.tau
        released = batch.scores + tau * z
        for b, rep in enumerate(reps):
            d = generate_replication(seed, rep)
            in_rep = batch.groups == b
            for k, (s0, s1) in enumerate(protocol_reference.site_classes(d)):
                r0, r1 = protocol_reference.release_scores(s0, s1, tau, seed, rep, k)
                at_site = in_rep & (batch.sites == k)
                np.testing.assert_array_equal(released[at_site & (batch.labels == 0)], r0)
                np.testing.assert_array_equal(released[at_site & (batch.labels == 1)], r1)


@pytest.mark.parametrize("privacy_level", [5, 45])  # 45: many sites refuse
def test_batched_protocol_equals_per_site_reference(protocol_reference, privacy_level):
    ours = run_protocol_chunk(4, range(30), SETTINGS, privacy_level=privacy_level)
    ref = protocol_reference.run(4, range(30), SETTINGS, privacy_level=privacy_level)
    for col in ("setting", "rep", "n", "n1", "converged", "failure"):
        pd.testing.assert_series_equal(ours[col], ref[col])
    # Converged fits agree to rounding, in the same steps: AUCs and CIs to ~1e-12; the parameters of steep,
    # ill-conditioned curves (gamma ~ 15-70) to ~4e-10 relative. A fit that does not converge (near
    # separation, gamma -> inf) drifts along a flat likelihood, where the order of summation over sites
    # changes the secant steps: both fail, at different points of the drift.
    ok = ours["converged"].to_numpy()
    pd.testing.assert_series_equal(ours["iterations"][ok], ref["iterations"][ok])
    for col in ours.columns[ours.dtypes == np.float64]:
        rtol = 1e-9 if col in ("gamma1", "gamma2") else 1e-10
        np.testing.assert_allclose(ours[col][ok], ref[col][ok], rtol=rtol, atol=1e-12, err_msg=col)
    assert (ours["gamma2"][~ok & (ours["failure"] == "no convergence")] > 10).all()  # the drift, not a bad step
    failures = set(ours["failure"])
    assert "" in failures and ("disclosure" in failures) == (privacy_level == 45)


def test_distributed_fisher_scoring_equals_summed_count_fit(protocol_reference):
    # The sum of the sites' RocGlmParts is the parts of the summed counts: the per-site Fisher scoring
    # and the batched fit on the pooled placement values take the same steps.
    seed, reps, grid = 11, range(36), rocglm_grid()
    batch = generate_batch(seed, reps)
    z = release_noise(batch, seed)
    g, s, neg, pos = batch.groups, batch.scores, batch.labels == 0, batch.labels == 1
    n_converged = 0
    for setting in SETTINGS[1:3]:
        tau = setting.tau
        released = s + tau * z
        pv0 = grouped_placement_values(released[neg], g[neg], s[pos], g[pos], n_groups=batch.size)
        pv1 = grouped_placement_values(released[pos], g[pos], s[neg], g[neg], n_groups=batch.size)
        counts = grouped_rocglm_counts(pv0, g[pos], grid, n_groups=batch.size)
        batched = fit_rocglm_batch(counts, batch.n1, grid, newton=False)
        var0 = grouped_variance(pv0, g[pos], n_groups=batch.size)
        var1 = grouped_variance(pv1, g[neg], n_groups=batch.size)
        for b, rep in enumerate(reps):
            sites = protocol_reference.site_classes(generate_replication(seed, rep))
            parts, site_pv0, site_pv1 = protocol_reference.site_fit_parts(seed, rep, sites, tau, grid)
            np.testing.assert_array_equal(sum(p.counts for p in parts), counts[b])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                fit = fit_rocglm(parts)
            assert batched.converged[b] == fit.converged
            if fit.converged:
                assert batched.iterations[b] == fit.iterations and batched.evaluations[b] == fit.evaluations
                np.testing.assert_allclose(batched.params[b], fit.params, rtol=0, atol=1e-10)
            n_converged += fit.converged
            # the two-pass moments over the sites
            for site_pv, var in ((site_pv0, var0), (site_pv1, var1)):
                mean, n = pooled_mean(mean_parts(v) for v in site_pv)
                two_pass = pooled_variance([sq_dev_parts(v, mean) for v in site_pv], n)
                assert var[b] == pytest.approx(two_pass, rel=1e-12)
    assert n_converged >= 60


def test_refusal_follows_the_site_guard():
    batch = generate_batch(2, range(20))
    per_site = np.bincount((batch.groups * N_SITES + batch.sites) * 2 + batch.labels).reshape(-1, N_SITES, 2)
    smallest = per_site.min(axis=(1, 2))
    for q in (5, int(np.median(smallest)) + 1):
        np.testing.assert_array_equal(refused_replications(batch, q), smallest < q)


def test_results_do_not_depend_on_the_chunking():
    whole = run_protocol_chunk(3, range(10), SETTINGS[:2])
    parts = pd.concat([run_protocol_chunk(3, range(0, 4), SETTINGS[:2]), run_protocol_chunk(3, range(4, 10), SETTINGS[:2])])
    key = ["setting", "rep"]
    pd.testing.assert_frame_equal(
        whole.sort_values(key).reset_index(drop=True), parts.sort_values(key).reset_index(drop=True), check_exact=True
    )
