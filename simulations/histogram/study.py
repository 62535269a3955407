"""Histogram mode, batched: five sites release noisy per-class histograms; the analyst's estimates for all replications.

Each step is what the deployed system computes (the per-replication reference in the tests calls
:func:`dsroc.histogram_validation`, the analyst's entry point, and must agree):

- site ``k`` of replication ``rep`` counts its negatives and positives on the public grid (scores clipped
  into it) and adds discrete Laplace noise of the setting's per-site scale (a counts-only release at the setting's
  epsilon, as the site calibrates it; the setting's delta is only checked by a site's policy) to every cell, drawn
  by :func:`dsroc.privacy.laplace.discrete_laplace_noise` from ``default_rng([seed, rep, 1 + k, salt])``
  (negatives' cells, then positives'; ``salt`` identifies the setting, so a setting's releases do not depend on
  which other settings run); with secure aggregation each site's share of a distributed discrete Gaussian;
- the analyst sums the five releases per class and calls :func:`dsroc.histogram.estimates.histogram_auc_estimates`
  (the AUC part of ``histogram_validation``, batched) with ``sigma = sqrt(5 var)``, ``var`` the noise's exact
  variance, and the replication's bootstrap seed ``[seed, rep]``.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from dsroc.histogram.grid import histogram_edges, recommended_n_bins
from dsroc.histogram.release import draw_release
from dsroc.histogram.estimates import DEFAULT_ESTIMATOR, histogram_auc_estimates
from dsroc.privacy.laplace import discrete_laplace_noise, discrete_laplace_sd, discrete_laplace_variance
from dsroc.privacy.noise import discrete_gaussian_noise, discrete_gaussian_variance
from dsroc.secagg import share_sigma

from ..common.dgp import N_SITES, Batch, generate_batch
from ..common.records import failure_codes, replication_columns, setting_frame, tau_of
from ..common.truth import pooled_truth

__all__ = ["NOISE", "NOISE_DRAWS", "release_histograms", "summed_sigma", "histogram_frame", "run_histogram_chunk"]

NOISE_DRAWS = 40  # bootstrap draws for the ROC-GLM's noise variance per replication (the analyst uses 100)
# Each protocol's integer noise: a sampler (scale, shape, rng) and the variance of one draw. The histogram protocol's
# sites add discrete Laplace noise (pure epsilon-DP); the secagg protocol's their shares of a discrete Gaussian.
NOISE = {"laplace": (discrete_laplace_noise, discrete_laplace_variance),
         "gaussian": (discrete_gaussian_noise, discrete_gaussian_variance)}


def release_histograms(batch: Batch, edges, sigma: float, seed: int, salt: int, noise: str = "laplace"
                       ) -> np.ndarray:
    """Every site's noisy release (the sites' own draw, :func:`dsroc.histogram.release.draw_release`), summed over
    sites: shape (R, 2, B) (float), with ``noise`` (:data:`NOISE`) of parameter ``sigma`` per cell, each site of
    each replication from its own stream. ``sigma = 0``: exact counts."""
    draw = NOISE[noise][0]
    streams = [(rep, k) for rep in np.asarray(batch.reps).tolist() for k in range(N_SITES)]

    def site_noise(scale, shape):
        return np.stack([draw(scale, shape[1:], np.random.default_rng([seed, rep, 1 + k, salt])) for rep, k in streams])

    release = draw_release(batch.scores, batch.labels, edges, noise=site_noise, rng=np.random.default_rng(seed),
                           sigma=sigma, groups=batch.groups * N_SITES + batch.sites, n_groups=batch.size * N_SITES)
    m = np.asarray(edges).size - 1
    return release.counts.reshape(batch.size, N_SITES, 2, m).sum(axis=1).astype(np.float64)


def summed_sigma(site_sigma: float, sites: int = N_SITES, noise: str = "laplace") -> float:
    """SD of the sum of ``sites`` independent cells of ``noise`` (:data:`NOISE`) of parameter ``site_sigma``."""
    return 0.0 if site_sigma == 0.0 else float(np.sqrt(sites * NOISE[noise][1](site_sigma)))


def _salt(name: str) -> int:
    return zlib.crc32(name.encode())


def histogram_frame(batch: Batch, seed: int, settings, *, n_bins: int | None = None,
                    estimator: str = DEFAULT_ESTIMATOR, noise_draws: int = NOISE_DRAWS,
                    secure_aggregation: bool = False) -> pd.DataFrame:
    """Histogram-protocol results of ``batch`` in every setting, columns :data:`simulations.common.records.COLUMNS`.

    The grid is ``n_bins`` equal-width bins on [0, 1], by default :func:`dsroc.histogram.grid.recommended_n_bins`
    of the per-site noise SD of a count (20 bins without noise). ``auc_rocglm`` holds the reported AUC
    (``estimator``'s), ``gamma1, gamma2`` the ROC-GLM through the edges, ``ci_*_dist`` the reported interval.

    ``secure_aggregation=True`` simulates the secagg protocol (the analyst sees only the sum): each site
    adds its share of the distributed discrete Gaussian, :func:`dsroc.secagg.share_sigma` of the setting's
    (epsilon, delta) for five honest shares (no coalition), as the sites do; the summed noise meets the
    setting exactly (the comparison with FedCurve, which assumes secure aggregation).
    """
    auc_emp, var_true, ref = pooled_truth(batch)
    frames = []
    for setting in settings:
        noise = "gaussian" if secure_aggregation else "laplace"
        site_sigma = (share_sigma(setting.epsilon, setting.delta, N_SITES)
                      if secure_aggregation and not setting.noise_free else tau_of(setting))
        site_sd = discrete_laplace_sd(site_sigma) if noise == "laplace" else site_sigma
        bins = n_bins if n_bins is not None else (20 if site_sigma == 0.0 else recommended_n_bins(site_sd))
        edges = histogram_edges(bins)
        released = release_histograms(batch, edges, site_sigma, seed, _salt(setting.name),
                                      noise)
        est = histogram_auc_estimates(released[:, 0], released[:, 1], sigma=summed_sigma(site_sigma, noise=noise),
                                      estimator=estimator, noise_draws=noise_draws,
                                      seeds=[[seed, int(r)] for r in batch.reps])
        fitted = np.isfinite(est.auc)
        columns = {
            **replication_columns(batch, auc_emp),
            "auc_rocglm": est.auc,
            "delta_auc": auc_emp - est.auc,
            "gamma1": est.rocglm_params[:, 0],
            "gamma2": est.rocglm_params[:, 1],
            "iterations": np.zeros(batch.size, dtype=np.int64),
            "converged": fitted,
            "failure": failure_codes(np.zeros(batch.size, bool), np.ones(batch.size, bool), ref.defined,
                                     too_noisy=~fitted),
            "ci_lower": ref.lower,
            "ci_upper": ref.upper,
            "ci_lower_dist": est.lower,
            "ci_upper_dist": est.upper,
            "delta_ci": np.abs(est.lower - ref.lower) + np.abs(est.upper - ref.upper),
            "var_true": var_true,
            "var_dist": est.variance,
        }
        frames.append(setting_frame(setting, columns))
    return pd.concat(frames, ignore_index=True)


def run_histogram_chunk(seed: int, reps, settings, *, n_bins: int | None = None, n: int | None = None) -> pd.DataFrame:
    """Run replications ``reps`` of the paper's data (:func:`simulations.common.dgp.generate_batch`, ``n`` patients
    each if given) through the histogram protocol in every setting; see :func:`histogram_frame`."""
    return histogram_frame(generate_batch(seed, reps, n), seed, settings, n_bins=n_bins)
