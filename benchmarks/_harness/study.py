"""The simulation study's batched paper-mode replication against a minimal numpy one of the same replication."""

from __future__ import annotations

import time

import numpy as np

__all__ = ["minimal_replication", "study_worker"]


def minimal_replication(s, y, z, taus, grid):
    """One replication of the paper-mode study in plain numpy, all settings at once (a row per setting).

    The anchor of the study's batched code: noise ``tau * z`` on every score, truncated to [0, 1]; the
    strict placement values by one integer sort per row (the class counts at the end of each tie block); the
    ROC-GLM counts, fit and the noisy DeLong variance with its logit CI around the empirical AUC, and the
    area between the empirical and the fitted curve without noise (the first setting). Returns the AUC,
    gamma, CI ends and the noisy variance per setting.
    """
    from dsroc import auc_ci_batch, delong_variance, empirical_auc, fit_rocglm_batch

    try:
        from simulations.common.curves import roc_area_between
    except ImportError:  # a --baseline tree from before the study packages
        from simulations.curves import roc_area_between

    n = y.size
    n1 = int(y.sum())
    n0 = n - n1
    noisy = np.where(taus[:, None] == 0.0, s, np.clip(s + taus[:, None] * z, 0.0, 1.0))
    # One integer sort per row: the bits of a non-negative double order like its value; the label in the
    # lowest bit puts the negatives first within ties.
    keys = np.sort((noisy.view(np.int64) << 1) | y, axis=1)
    pos = (keys & 1).astype(bool)
    c1 = np.cumsum(pos, axis=1)
    pv0 = ((n0 - (np.arange(1, n + 1) - c1)) / n0)[pos].reshape(-1, n1)  # positives: #{negatives > s} / n0
    v = keys >> 1
    last = np.ones(v.shape, dtype=bool)
    np.not_equal(v[:, 1:], v[:, :-1], out=last[:, :-1])
    end = np.minimum.accumulate(np.where(last, np.arange(n), n)[:, ::-1], axis=1)[:, ::-1]
    pv1 = ((n1 - np.take_along_axis(c1, end, axis=1)) / n1)[~pos].reshape(-1, n0)  # negatives: #{positives > s}
    nt = grid.size
    first = np.searchsorted(grid, pv0) + (nt + 1) * np.arange(taus.size)[:, None]
    counts = np.cumsum(np.bincount(first.ravel(), minlength=taus.size * (nt + 1)).reshape(-1, nt + 1)[:, :nt], axis=1)
    fit = fit_rocglm_batch(counts, np.full(taus.size, n1), grid)
    var = np.var(pv1, axis=1, ddof=1) / n0 + np.var(pv0, axis=1, ddof=1) / n1
    auc = empirical_auc(s, y)
    delong_variance(s, y)  # the reference CI of the true scores, as every replication computes it
    ci = auc_ci_batch(np.full(taus.size, auc), var)
    if np.isfinite(fit.params[0]).all():
        roc_area_between(s, y, fit.params[0])
    return fit.auc, fit.params, ci.lower, ci.upper, var


def study_worker(reps: int, rounds: int) -> dict:
    """Milliseconds per replication (all settings) of the study's batched paper mode and of
    :func:`minimal_replication` on the same replications, interleaved; and their largest difference."""
    from dsroc import rocglm_grid

    try:
        from simulations.common.dgp import generate_batch
        from simulations.common.records import tau_of
        from simulations.common.settings import all_settings
        from simulations.paper.published import run_paper_chunk
    except ImportError:  # a --baseline tree from before the study packages
        from simulations.dgp import generate_batch
        from simulations.paper import run_paper_chunk
        from simulations.records import tau_of
        from simulations.settings import all_settings

    settings = all_settings("paper")
    taus = np.array([tau_of(s) for s in settings])
    grid = rocglm_grid(None)
    run_paper_chunk(1, range(1), settings)  # warm-up: imports, tau root finding
    batch = generate_batch(1, range(reps))
    bounds = np.concatenate(([0], np.cumsum(batch.n)))

    def minimal():
        return [minimal_replication(batch.scores[a:b], batch.labels[a:b], batch.noise[a:b], taus, grid)
                for a, b in zip(bounds[:-1], bounds[1:])]

    batched_ms, minimal_ms = [], []
    for r in range(rounds):
        for name in (("batched", "minimal") if r % 2 == 0 else ("minimal", "batched")):
            t = time.perf_counter()
            out = run_paper_chunk(1, range(reps), settings) if name == "batched" else minimal()
            ms = 1e3 * (time.perf_counter() - t) / reps
            (batched_ms if name == "batched" else minimal_ms).append(ms)
            if name == "batched":
                frame = out
            else:
                mine = out
    # The two must compute the same numbers.
    worst = 0.0
    for j, setting in enumerate(settings):
        rows = frame[frame["setting"] == setting.name].sort_values("rep")
        ours = np.array([m[0][j] for m in mine])
        theirs = rows["auc_rocglm"].to_numpy()
        ok = np.isfinite(ours) & np.isfinite(theirs)
        worst = max(worst, float(np.abs(ours[ok] - theirs[ok]).max(initial=0.0)),
                    float(np.abs(np.array([m[4][j] for m in mine]) - rows["var_dist"].to_numpy()).max()))
    return {"batched_ms": float(np.median(batched_ms)), "minimal_ms": float(np.median(minimal_ms)),
            "max_difference": worst, "reps": reps, "settings": len(settings)}
