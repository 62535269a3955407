"""Protocol mode, batched: what the deployed system computes -- five sites, released noisy scores, distributed fit and CI.

The network is replaced by direct calls, and all replications of a chunk are computed together. Each
step equals what the site daemons and the analyst compute, one replication at a time, on the same
:mod:`dsroc` functions (``tests/simulations/conftest.py`` keeps that per-site loop, and the tests compare
the two):

- a site's release adds ``add_gaussian_noise(scores, tau, rng)`` to its negatives, then its positives,
  with ``rng = default_rng([seed, rep, 1 + site])``. That is ``scores + tau * z`` with ``z`` the
  generator's standard normal draws, bit for bit (numpy's ``normal(0, tau)`` is ``0 + tau * z``), so the
  draws are made once per (replication, site) and scaled per setting (common random numbers);
- each site places its true positives under the pooled released negatives ``S~0`` and its true
  negatives under the pooled released positives ``S~1`` (mid-rank ties); pooled over the sites these are
  the grouped placement values of the replication;
- the sites' ``RocGlmParts`` are linear in the counts, so their sum is the parts of the summed counts,
  the counts of all the replication's positives: the distributed Fisher scoring is
  ``fit_rocglm_batch`` on them with Fisher steps throughout (``newton=False``: same steps, same
  iterations);
- the CI's two-pass moments over the sites are the pooled sample variances of the replication's PV0
  and PV1 (equal up to the order of summation, ~1e-15); the CI is centred at the ROC-GLM AUC;
- a site with fewer than q negatives or positives refuses (``dsroc.require_privacy_level``, the rule the site guard applies).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dsroc import (
    DisclosureError,
    auc_ci_batch,
    delong_variance_from_moments,
    fit_rocglm_batch,
    require_privacy_level,
    rocglm_grid,
)
from dsroc.roc.batch import grouped_mean, grouped_placement_values, grouped_rocglm_counts, grouped_variance
from dsroc.roc.noise_correction import grouped_deconvolution_correction, grouped_noise_variance, noise_corrected_auc

from ..common.dgp import N_SITES, Batch, generate_batch
from ..common.records import failure_codes, replication_columns, setting_frame, tau_of
from ..common.truth import pooled_truth

__all__ = ["PRIVACY_LEVEL", "release_noise", "refused_replications", "run_protocol_chunk"]

PRIVACY_LEVEL = 5  # q: the site default of SPEC section 3


def _cells(batch: Batch) -> np.ndarray:
    """Cell id (replication, site, class) of each element, in that lexicographic order."""
    return (batch.groups * N_SITES + batch.sites) * 2 + batch.labels


def release_noise(batch: Batch, seed: int) -> np.ndarray:
    """The standard normal draws behind every site's release, aligned with the batch's elements.

    Site ``k`` of replication ``rep`` draws from ``default_rng([seed, rep, 1 + k])``: first one value per
    negative, then one per positive, each class in the order the site holds it. The release at noise
    level ``tau`` is ``scores + tau * release_noise(...)``.
    """
    order = np.argsort(_cells(batch), kind="stable")  # by (replication, site, class), site order within
    per_site = np.bincount(batch.groups * N_SITES + batch.sites, minlength=batch.size * N_SITES)
    draws = [
        np.random.default_rng([seed, int(rep), 1 + k]).standard_normal(int(per_site[b * N_SITES + k]))
        for b, rep in enumerate(batch.reps.tolist())
        for k in range(N_SITES)
    ]
    z = np.empty(batch.scores.size)
    z[order] = np.concatenate(draws)
    return z


def refused_replications(batch: Batch, privacy_level: int = PRIVACY_LEVEL) -> np.ndarray:
    """True for replications in which some site holds fewer than ``privacy_level`` negatives or positives.

    Such a site refuses its release and aggregates, so the replication has no distributed result.
    """
    sizes = np.bincount(_cells(batch), minlength=batch.size * N_SITES * 2).reshape(batch.size, N_SITES, 2)
    refused = np.zeros(batch.size, dtype=bool)
    for b, per_site in enumerate(sizes.tolist()):
        try:
            for n0, n1 in per_site:
                require_privacy_level(n0, privacy_level, "each class of a release (negatives)")
                require_privacy_level(n1, privacy_level, "each class of a release (positives)")
        except DisclosureError:
            refused[b] = True
    return refused


def run_protocol_chunk(seed: int, reps, settings, *, grid=None, privacy_level: int = PRIVACY_LEVEL,
                       n: int | None = None, batch: Batch | None = None) -> pd.DataFrame:
    """Run replications ``reps`` in every setting through the deployed procedure, in process.

    Per replication the data are split over five sites. Per setting each site releases its negatives
    and positives with independent Gaussian noise (not truncated); the pooled released negatives form
    ``S~0`` and positives ``S~1``; each site places its true positives under ``S~0`` (mid-rank ties) and
    contributes its ``RocGlmParts``; the sum drives Fisher scoring; the CI is centred at the ROC-GLM
    AUC with the DeLong variance from the distributed two-pass moments of the placement values. The
    reference is the empirical AUC of the pooled true scores with its DeLong logit CI. A site with
    fewer than ``privacy_level`` negatives or positives refuses (failure ``"disclosure"``). ``batch``
    replaces the paper's data by other replications (``reps`` is then ignored; the protocol comparison
    passes its binormal design).

    Next to it, the noise-corrected AUC and CI the analyst reports (:func:`dsroc.noise_corrected_auc`):
    the mean placement values (pass 1 of the moments), the blur deconvolved from the released scores
    (:func:`dsroc.deconvolution_correction`), and the noise variance redrawn around the releases with the
    replication's own seed ``(seed, rep, 0)``.
    ``n`` fixes the size of every replication (default: drawn as in the paper).

    Returns
    -------
    DataFrame
        One row per (setting, replication), columns :data:`simulations.common.records.COLUMNS`.
    """
    grid = rocglm_grid(grid)
    batch = generate_batch(seed, reps, n) if batch is None else batch
    B, g, s = batch.size, batch.groups, batch.scores
    neg, pos = batch.labels == 0, batch.labels == 1
    n0 = batch.n - batch.n1
    auc_emp, var_true, ref = pooled_truth(batch)
    refused = refused_replications(batch, privacy_level)
    z = release_noise(batch, seed)
    # Split by class once: s0/s1 true scores, z0/z1 their release noise, g0/g1 their replications.
    s0, s1, z0, z1, g0, g1 = s[neg], s[pos], z[neg], z[pos], g[neg], g[pos]
    frames = []
    for setting in settings:
        tau = tau_of(setting)
        released0, released1 = (s0, s1) if tau == 0.0 else (s0 + tau * z0, s1 + tau * z1)
        # The analyst pools the releases into S~0 and S~1; each site places its true scores under them.
        pv0 = grouped_placement_values(released0, g0, s1, g1, n_groups=B, ties="mid")
        pv1 = grouped_placement_values(released1, g1, s0, g0, n_groups=B, ties="mid")
        fit = fit_rocglm_batch(grouped_rocglm_counts(pv0, g1, grid, n_groups=B), batch.n1, grid, newton=False)
        var_dist = delong_variance_from_moments(
            var_pv0=grouped_variance(pv0, g1, n_groups=B), n1=batch.n1,
            var_pv1=grouped_variance(pv1, g0, n_groups=B), n0=n0,
        )
        # No fit, no moments: a refusing site answers nothing, and separated counts stop the analyst.
        no_fit = refused | fit.degenerate
        var_dist[no_fit] = np.nan
        params, auc = fit.params.copy(), fit.auc.copy()
        params[refused], auc[refused] = np.nan, np.nan
        iterations, converged = np.where(refused, 0, fit.iterations), fit.converged & ~refused
        dist = auc_ci_batch(auc, var_dist)
        corr = _corrected(pv0, pv1, released0, released1, g0, g1, var_dist, tau, batch, seed)
        columns = {
            **replication_columns(batch, auc_emp),
            "auc_rocglm": auc,
            "delta_auc": auc_emp - auc,
            "gamma1": params[:, 0],
            "gamma2": params[:, 1],
            "iterations": iterations,
            "converged": converged,
            "failure": failure_codes(fit.degenerate, converged, ref.defined, refused),
            "ci_lower": ref.lower,
            "ci_upper": ref.upper,
            "ci_lower_dist": dist.lower,
            "ci_upper_dist": dist.upper,
            "delta_ci": np.abs(dist.lower - ref.lower) + np.abs(dist.upper - ref.upper),
            "var_true": var_true,
            "var_dist": var_dist,
            "auc_corr": np.where(no_fit, np.nan, corr.auc),
            "var_corr": np.where(no_fit, np.nan, corr.variance),
            "ci_lower_corr": np.where(no_fit, np.nan, corr.ci.lower),
            "ci_upper_corr": np.where(no_fit, np.nan, corr.ci.upper),
        }
        frames.append(setting_frame(setting, columns))
    return pd.concat(frames, ignore_index=True)


def _corrected(pv0, pv1, released0, released1, g0, g1, var_dist, tau, batch, seed):
    """The analyst's noise-corrected AUC and CI for every replication (NaN where the moments are missing)."""
    B = batch.size
    mean0, mean1 = grouped_mean(pv0, g1, n_groups=B), grouped_mean(pv1, g0, n_groups=B)
    if tau == 0.0:
        correction, noise = np.zeros(B), np.zeros(B)
    else:
        correction = grouped_deconvolution_correction(released0, g0, released1, g1, tau, tau, n_groups=B)
        seeds = [[seed, int(rep), 0] for rep in batch.reps.tolist()]
        noise = grouped_noise_variance(released0, g0, released1, g1, tau, tau, n_groups=B, seeds=seeds)
    return noise_corrected_auc(mean_pv0=mean0, mean_pv1=mean1, correction=correction,
                               delong_variance=np.nan_to_num(var_dist), noise_variance=noise)
