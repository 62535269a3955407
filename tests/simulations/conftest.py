"""The per-replication protocol-mode reference: one site at a time, as the deployed daemons compute.

This is the straightforward loop that :func:`simulations.protocol.pipeline.run_protocol_chunk` batches; the tests
compare the batched study against it. Each step is the computation ``site_node.protocols.paper`` performs for
that call, on the same :mod:`dsroc` functions: a release draws both classes' noise from one generator
with ``add_gaussian_noise``; placement values come from ``SurvivorFunction`` (mid-rank ties); the
ROC-GLM parts from ``RocGlmParts.from_placements``, summed over sites by ``fit_rocglm``; the CI from
the two-pass ``mean_parts`` / ``sq_dev_parts`` moments and ``delong_variance_from_moments``; the
privacy level from ``dsroc.require_privacy_level``, the rule the site guard applies.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pandas as pd
import pytest

from dsroc import (
    DisclosureError,
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
    require_privacy_level,
    rocglm_grid,
    sq_dev_parts,
)
from dsroc.roc.noise_correction import deconvolution_correction, noise_corrected_auc, noise_variance
from simulations.common.dgp import N_SITES, generate_replication, population_auc
from simulations.protocol.pipeline import PRIVACY_LEVEL
from simulations.common.records import setting_frame, tau_of


def release_scores(negatives, positives, tau: float, seed: int, rep: int, site: int):
    """A site's release: both classes plus ``N(0, tau^2)`` noise, drawn from one generator as the site does."""
    if tau == 0.0:
        return negatives, positives
    rng = np.random.default_rng([seed, rep, 1 + site])
    return add_gaussian_noise(negatives, tau, rng), add_gaussian_noise(positives, tau, rng)


def site_classes(data):
    """Each site's (true negatives, true positives) of one replication."""
    s, y = data.scores, data.labels
    return [(s[(data.sites == k) & (y == 0)], s[(data.sites == k) & (y == 1)]) for k in range(N_SITES)]


def _pooled_variance_of(parts_per_site) -> tuple[float, int]:
    """Two-pass distributed sample variance of values held by the sites."""
    mean, n = pooled_mean(mean_parts(v) for v in parts_per_site)
    return pooled_variance([sq_dev_parts(v, mean) for v in parts_per_site], n), n


def site_fit_parts(seed, rep, sites, tau, grid):
    """Per site: its ``RocGlmParts`` and its true scores' placement values (PV0 of positives, PV1 of negatives)."""
    released = [release_scores(s0, s1, tau, seed, rep, k) for k, (s0, s1) in enumerate(sites)]
    surv0 = SurvivorFunction(np.concatenate([r[0] for r in released]))
    surv1 = SurvivorFunction(np.concatenate([r[1] for r in released]))
    pv0 = [surv0(s1, ties="mid") for _, s1 in sites]
    pv1 = [surv1(s0, ties="mid") for s0, _ in sites]
    return [RocGlmParts.from_placements(p, grid) for p in pv0], pv0, pv1


def _corrected(seed, rep, sites, tau, pv0, pv1, var_dist):
    """The analyst's noise-corrected AUC: pass-1 means, the deconvolved blur and the redrawn noise variance."""
    released = [release_scores(s0, s1, tau, seed, rep, k) for k, (s0, s1) in enumerate(sites)]
    r0, r1 = np.concatenate([r[0] for r in released]), np.concatenate([r[1] for r in released])
    mean0, _ = pooled_mean(mean_parts(v) for v in pv0)
    mean1, _ = pooled_mean(mean_parts(v) for v in pv1)
    noise = 0.0 if tau == 0.0 else noise_variance(r0, r1, tau, tau, seed=[seed, rep, 0])
    correction = 0.0 if tau == 0.0 else deconvolution_correction(r0, r1, tau, tau)
    c = noise_corrected_auc(mean_pv0=mean0, mean_pv1=mean1, correction=correction,
                            delong_variance=var_dist, noise_variance=noise)
    return {"auc_corr": c.auc, "var_corr": c.variance, "ci_lower_corr": c.ci.lower, "ci_upper_corr": c.ci.upper}


def _one_setting(seed, rep, sites, tau, grid):
    parts, pv0, pv1 = site_fit_parts(seed, rep, sites, tau, grid)
    out = {"failure": ""}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            fit = fit_rocglm(parts)
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
    out.update(_corrected(seed, rep, sites, tau, pv0, pv1, out["var_dist"]))
    return out


def run_protocol_reference(seed: int, reps, settings, *, grid=None, privacy_level: int = PRIVACY_LEVEL) -> pd.DataFrame:
    """Protocol mode one replication, setting and site at a time (the pre-batching implementation)."""
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
        sites = site_classes(data)
        try:
            for s0, s1 in sites:
                require_privacy_level(s0.size, privacy_level, "each class of a release (negatives)")
                require_privacy_level(s1.size, privacy_level, "each class of a release (positives)")
            refused = False
        except DisclosureError:
            refused = True
        base = {"rep": rep, "n": s.size, "n1": int(y.sum()), "auc_emp": auc_emp, "var_true": var_true,
                "auc_pop": float(population_auc(np.floor(data.gamma * s.size) / s.size)),
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
            for name in ("auc_corr", "var_corr", "ci_lower_corr", "ci_upper_corr"):
                res.setdefault(name, np.nan)
            rows[setting].append({**base, **res})
    frames = []
    for setting, records in rows.items():
        columns = {name: np.array([r[name] for r in records]) for name in records[0]}
        columns["delta_auc"] = columns["auc_emp"] - columns["auc_rocglm"]
        frames.append(setting_frame(setting, columns))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture
def protocol_reference():
    """The per-replication reference implementation of protocol mode and its per-site steps."""
    return types.SimpleNamespace(
        run=run_protocol_reference,
        release_scores=release_scores,
        site_classes=site_classes,
        site_fit_parts=site_fit_parts,
    )


@pytest.fixture(scope="session")
def policy_grids():
    """The default site policy's grids, by hand: the first release's explicit grid (the score range's ends, the
    10-bin logit grid's edges outside [0.005, 0.995] and the 100-bin grid's inside, on the logit range [0.0001,
    0.9999]) and every edge an explicit grid may use (the edges of its logit grids of 5 to 200 bins)."""
    from scipy.special import expit, logit

    z = {k: np.linspace(logit(0.0001), logit(0.9999), k + 1) for k in (5, 8, 10, 12, 20, 50, 100, 200)}
    core = (z[100] >= logit(0.005) - 1e-9) & (z[100] <= logit(0.995) + 1e-9)
    tails = (z[10] < logit(0.005)) | (z[10] > logit(0.995))
    fine = np.concatenate([[0.0], expit(np.sort(np.concatenate([z[100][core], z[10][tails]]))), [1.0]])
    return fine, np.unique(expit(np.concatenate(list(z.values()))))


@pytest.fixture
def policy_before_range16(monkeypatch):
    """The study under the default site policy before range16 (logit range [0.005, 0.995], bins up to 100, the
    uniform 50-bin first release): the releases in which tests found the cases they replay."""
    import simulations.stress.study as stress

    monkeypatch.setattr(stress, "POLICY_BINS", (5, 8, 10, 12, 20, 50, 100))
    monkeypatch.setattr(stress, "POLICY_LOGIT_RANGE", (0.005, 0.995))
