"""Benchmark of the dsroc core: ROC-GLM versus statsmodels on the expanded data, and 1e6-score timings.

Run from the repository root: ``python -m benchmarks.core`` (or after ``pip install -e .``). Prints figures measured in this one run.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import statsmodels.api as sm
from scipy.special import ndtri

from dsroc import RocGlmParts, delong_variance, empirical_auc, fit_rocglm, placement_values, rocglm_grid


def best_of(fn, repeat: int) -> float:
    """Smallest wall time of ``repeat`` calls (the least disturbed by the rest of the machine)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def per_call(fn, calls: int, repeat: int) -> float:
    """Smallest mean wall time per call over ``repeat`` loops of ``calls`` calls."""
    return best_of(lambda: [fn() for _ in range(calls)], repeat) / calls


def fisher_evaluations(evaluate, xtol: float = 1e-10, tol: float = 1e-8, max_iter: int = 50) -> int:
    """Evaluations plain Fisher scoring from the diagonal needs to R's rule and a relative step below
    ``xtol`` (the distributed fit before the moment step and secant correction), counted here."""
    theta, p, evaluations = np.array([0.0, 1.0]), evaluate(np.array([0.0, 1.0])), 1
    for _ in range(max_iter):
        step = np.linalg.solve(p.information, p.score)
        theta = theta + step
        new, evaluations = evaluate(theta), evaluations + 1
        rule = abs(new.deviance - p.deviance) / (abs(new.deviance) + 0.1) < tol
        p = new
        if rule and np.abs(step).max() <= xtol * max(np.abs(theta).max(), 1.0):
            break
    return evaluations


def distributed_evaluations(grid) -> None:
    """Evaluations (round trips to every site) per distributed fit over five sites, on hard and easy data."""
    rng = np.random.default_rng(7)
    cases = {
        "binormal, n0 = n1 = 2000": (rng.normal(size=2000), rng.normal(1.0, size=2000)),
        "held-out, misspecified": (rng.exponential(size=3000), rng.gamma(2.5, size=500) + rng.uniform(-1, 0, 500)),
        "AUC near 0.5": (rng.normal(size=500), rng.normal(0.0, size=500)),
        "AUC near 0.99": (rng.normal(size=1000), rng.normal(3.3, size=1000)),
        "steep curve (sd ratio 3)": (rng.normal(size=800), rng.normal(1.0, 1 / 3, size=800)),
        "tiny: 30 + 20 over 5 sites": (rng.normal(size=30), rng.normal(1.0, size=20)),
    }
    print("Distributed fit over 5 sites: evaluations (each a round trip to every site) to the MLE")
    print(f"  {'data':30s} {'Fisher':>7s} {'dsroc':>6s} {'ratio':>6s}  |dsroc - local MLE|")
    for name, (neg, pos) in cases.items():
        pv0 = placement_values(neg, pos)
        site = rng.integers(0, 5, pv0.size)
        sites = [RocGlmParts.from_placements(pv0[site == k], grid) for k in range(5)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            fit = fit_rocglm(sites)
            local = fit_rocglm(RocGlmParts.from_placements(pv0, grid))
        fisher = fisher_evaluations(lambda th: sum((p.evaluate(th) for p in sites[1:]), sites[0].evaluate(th)))
        print(f"  {name:30s} {fisher:7d} {fit.evaluations:6d} {fisher / fit.evaluations:5.1f}x  "
              f"{np.abs(fit.params - local.params).max():.1e}")


def main() -> None:
    rng = np.random.default_rng(2024)
    grid = rocglm_grid()

    # 1. fit_rocglm from placement values vs statsmodels' GLM on the expanded indicator data (n1 x nT rows).
    neg, pos = rng.normal(size=2000), rng.normal(1.0, size=2000)
    pv0 = placement_values(neg, pos)
    u = (pv0[:, None] <= grid[None, :]).astype(float).ravel()
    X = sm.add_constant(np.tile(ndtri(grid), pv0.size))
    family = sm.families.Binomial(link=sm.families.links.Probit())
    parts = RocGlmParts.from_placements(pv0, grid)
    ours = fit_rocglm(parts)
    theirs = sm.GLM(u, X, family=family).fit()
    t_sm = best_of(lambda: sm.GLM(u, X, family=family).fit(), 3)
    t_fit = per_call(lambda: fit_rocglm(parts), 200, 15)
    t_parts = per_call(lambda: fit_rocglm(RocGlmParts.from_placements(pv0, grid)), 50, 15)
    print(f"ROC-GLM, n0 = n1 = 2000, {grid.size}-point grid ({u.size} expanded rows)")
    print(f"  dsroc fit_rocglm on one set of parts:        {t_fit * 1e3:8.3f} ms per fit ({ours.evaluations} evaluations)")
    print(f"  dsroc parts from placement values + fit:     {t_parts * 1e3:8.3f} ms")
    print(f"  statsmodels GLM on the expanded data:        {t_sm * 1e3:8.2f} ms")
    print(f"  speed ratio statsmodels / dsroc fit:         {t_sm / t_fit:8.0f}x (parts + fit: {t_sm / t_parts:.0f}x)")
    print(f"  max |param difference|:                      {np.abs(ours.params - theirs.params).max():.2e}")
    distributed_evaluations(grid)

    # 2. One million scores (half negatives, half positives).
    n = 1_000_000
    scores = np.r_[rng.normal(size=n // 2), rng.normal(0.8, size=n // 2)]
    labels = np.r_[np.zeros(n // 2), np.ones(n // 2)]
    t_auc = best_of(lambda: empirical_auc(scores, labels), 3)
    t_delong = best_of(lambda: delong_variance(scores, labels), 3)

    def rocglm_from_scores():
        fit_rocglm(RocGlmParts.from_placements(placement_values(scores[: n // 2], scores[n // 2 :]), grid))

    t_rocglm = best_of(rocglm_from_scores, 3)
    print("1 000 000 scores")
    print(f"  empirical_auc:                                      {t_auc:6.3f} s")
    print(f"  delong_variance:                                    {t_delong:6.3f} s")
    print(f"  fit_rocglm incl. placement values and counts:       {t_rocglm:6.3f} s")


if __name__ == "__main__":
    main()
