"""Benchmark of the dsroc core: ROC-GLM versus statsmodels on the expanded data, and 1e6-score timings.

Run from the repository root: ``python -m benchmarks.core`` (or after ``pip install -e .``). Prints figures measured in this one run.
"""

from __future__ import annotations

import time

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


def main() -> None:
    rng = np.random.default_rng(2024)
    grid = rocglm_grid()

    # 1. fit_rocglm from placement values vs statsmodels' GLM on the expanded indicator data (n1 x nT rows).
    neg, pos = rng.normal(size=2000), rng.normal(1.0, size=2000)
    pv0 = placement_values(neg, pos)
    u = (pv0[:, None] <= grid[None, :]).astype(float).ravel()
    X = sm.add_constant(np.tile(ndtri(grid), pv0.size))
    family = sm.families.Binomial(link=sm.families.links.Probit())
    ours = fit_rocglm(RocGlmParts.from_placements(pv0, grid))
    theirs = sm.GLM(u, X, family=family).fit()
    t_ours = best_of(lambda: fit_rocglm(RocGlmParts.from_placements(pv0, grid)), 20)
    t_sm = best_of(lambda: sm.GLM(u, X, family=family).fit(), 3)
    print(f"ROC-GLM, n0 = n1 = 2000, {grid.size}-point grid ({u.size} expanded rows)")
    print(f"  dsroc fit_rocglm (counts + Fisher scoring): {t_ours * 1e3:8.2f} ms")
    print(f"  statsmodels GLM on the expanded data:        {t_sm * 1e3:8.2f} ms")
    print(f"  speed ratio statsmodels / dsroc:             {t_sm / t_ours:8.0f}x")
    print(f"  max |param difference|:                      {np.abs(ours.params - theirs.params).max():.2e}")

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
