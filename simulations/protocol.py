"""Protocol mode: what the deployed system computes -- five sites, released noisy scores, distributed fit and CI.

The network is replaced by direct calls. Each step is the computation ``site_node.site.Site`` performs
for that call, on the same :mod:`dsroc` functions (the daemon's methods need a configured site with a
ledger and sessions, so the study calls the functions they are built on): a release draws both
classes' noise from one generator with ``add_gaussian_noise``; placement values come from
``SurvivorFunction`` (mid-rank ties); the ROC-GLM parts from ``RocGlmParts.from_placements``, summed
over sites by ``fit_rocglm``; the CI from the two-pass ``mean_parts`` / ``sq_dev_parts`` moments and
``delong_variance_from_moments``; the privacy level from the site guard's ``require_privacy_level``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from dsroc import (
    RocGlmParts,
    SurvivorFunction,
    add_gaussian_noise,
    auc_ci,
    delong_variance,
    delong_variance_from_moments,
    empirical_auc,
    fit_rocglm,
    mean_parts,
    pooled_mean,
    pooled_variance,
    rocglm_grid,
    sq_dev_parts,
)

from site_node.errors import PermissionDenied
from site_node.guard import require_privacy_level

from .dgp import N_SITES, generate_replication
from .records import setting_frame, tau_of

__all__ = ["PRIVACY_LEVEL", "run_protocol_chunk", "release_scores"]

PRIVACY_LEVEL = 5  # q: the site default of SPEC section 3


def release_scores(negatives, positives, tau: float, seed: int, rep: int, site: int):
    """A site's release: both classes plus ``N(0, tau^2)`` noise, drawn from one generator as the site does.

    The generator depends on (seed, replication, site) only, so positives and negatives get independent
    noise and settings differ only by ``tau`` (common random numbers across settings).
    """
    if tau == 0.0:
        return negatives, positives
    rng = np.random.default_rng([seed, rep, 1 + site])
    return add_gaussian_noise(negatives, tau, rng), add_gaussian_noise(positives, tau, rng)


def _pooled_variance_of(parts_per_site) -> tuple[float, int]:
    """Two-pass distributed sample variance of values held by the sites."""
    mean, n = pooled_mean(mean_parts(v) for v in parts_per_site)
    return pooled_variance([sq_dev_parts(v, mean) for v in parts_per_site], n), n


def _one_setting(seed, rep, sites, tau, grid):
    """Distributed ROC-GLM and CI of one replication at noise level ``tau``; returns a dict of results."""
    released = [release_scores(s0, s1, tau, seed, rep, k) for k, (s0, s1) in enumerate(sites)]
    # The analyst pools the released scores into the global survivor functions and sends them back.
    surv0 = SurvivorFunction(np.concatenate([r[0] for r in released]))
    surv1 = SurvivorFunction(np.concatenate([r[1] for r in released]))
    # Each site places its true scores under them.
    pv0 = [surv0(s1, ties="mid") for _, s1 in sites]
    pv1 = [surv1(s0, ties="mid") for s0, _ in sites]
    out = {"failure": ""}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            fit = fit_rocglm([RocGlmParts.from_placements(p, grid) for p in pv0])
    except ValueError:
        out.update(failure="separation", auc_rocglm=np.nan, gamma1=np.nan, gamma2=np.nan, iterations=0, converged=False)
        return out
    out.update(auc_rocglm=fit.auc, gamma1=fit.params[0], gamma2=fit.params[1], iterations=fit.iterations, converged=fit.converged)
    if not fit.converged:
        out["failure"] = "no convergence"
    var_pv0, n1 = _pooled_variance_of(pv0)
    var_pv1, n0 = _pooled_variance_of(pv1)
    out["var_dist"] = delong_variance_from_moments(var_pv0=var_pv0, n1=n1, var_pv1=var_pv1, n0=n0)
    out["ci_dist"] = auc_ci(fit.auc, out["var_dist"])
    return out


def run_protocol_chunk(seed: int, reps, settings, *, grid=None, privacy_level: int = PRIVACY_LEVEL) -> pd.DataFrame:
    """Run replications ``reps`` in every setting through the deployed procedure, in process.

    Per replication the data are split over five sites. Per setting each site releases its negatives
    and positives with independent Gaussian noise (not truncated); the pooled released negatives form
    ``S~0`` and positives ``S~1``; each site places its true positives under ``S~0`` (mid-rank ties) and
    contributes its ``RocGlmParts``; the sum drives Fisher scoring; the CI is centred at the ROC-GLM
    AUC with the DeLong variance from the distributed two-pass moments of the placement values. The
    reference is the empirical AUC of the pooled true scores with its DeLong logit CI. A site with
    fewer than ``privacy_level`` negatives or positives refuses (failure ``"disclosure"``).
    """
    grid = rocglm_grid(grid)
    rows = {setting: [] for setting in settings}
    for rep in reps:
        data = generate_replication(seed, rep)
        s, y = data.scores, data.labels
        auc_emp = empirical_auc(s, y)
        var_true = delong_variance(s, y)
        try:
            ref = auc_ci(auc_emp, var_true)
        except ValueError:
            ref = (np.nan, np.nan)
        sites = [(s[(data.sites == k) & (y == 0)], s[(data.sites == k) & (y == 1)]) for k in range(N_SITES)]
        try:  # each site releases, and aggregates, only over at least q negatives and q positives
            for s0, s1 in sites:
                require_privacy_level(s0.size, privacy_level, "each class of a release (negatives)")
                require_privacy_level(s1.size, privacy_level, "each class of a release (positives)")
            refused = False
        except PermissionDenied:
            refused = True
        base = {"rep": rep, "n": s.size, "n1": int(y.sum()), "auc_emp": auc_emp, "var_true": var_true,
                "ci_lower": ref[0], "ci_upper": ref[1]}
        for setting in settings:
            if refused:
                res = {"failure": "disclosure", "auc_rocglm": np.nan, "gamma1": np.nan, "gamma2": np.nan,
                       "iterations": 0, "converged": False}
            else:
                res = _one_setting(seed, rep, sites, tau_of(setting), grid)
            if not np.isfinite(ref[0]) and res["failure"] == "":
                res["failure"] = "ci undefined"
            lo, hi = res.pop("ci_dist", (np.nan, np.nan))
            res.update(ci_lower_dist=lo, ci_upper_dist=hi, delta_ci=abs(lo - ref[0]) + abs(hi - ref[1]))
            res.setdefault("var_dist", np.nan)
            rows[setting].append({**base, **res})
    frames = []
    for setting, records in rows.items():
        columns = {name: np.array([r[name] for r in records]) for name in records[0]}
        columns["delta_auc"] = columns["auc_emp"] - columns["auc_rocglm"]
        frames.append(setting_frame(setting, columns))
    return pd.concat(frames, ignore_index=True)
