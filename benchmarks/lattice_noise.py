"""The paper protocol's lattice noise: its cost at a million scores and its effect on the estimates.

Cost: the exact lattice sampler (``dsroc.privacy.lattice``) against numpy's floating-point Gaussian and
OpenDP's exact sampler (one draw at a time, timed on 10^5 and scaled), and the sealed ledger payload
(``site_node.protocols.paper.sealed``) against the raw float64 values. Statistics: on the study's data
(``simulations.common.dgp``, all sites pooled, as the pooled survivor functions are), the ROC-GLM AUC with its
DeLong CI from releases with the continuous Gaussian (SD tau0) and with the lattice noise (the same
data), against the pooled truth (the empirical AUC of the true scores): bias, MAE, CI coverage, and the
paired difference. Run from the repository root:

    python -m benchmarks.lattice_noise            # 10^6 scores; 300 replications x 3 settings (a few minutes)
    python -m benchmarks.lattice_noise --reps 100
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings

import numpy as np

import dsroc
from dsroc.privacy.lattice import lattice_gaussian
from dsroc.privacy.noise import sample_discrete_gaussian
from simulations.common.dgp import generate_replication
from site_node.store.ledger_api import ReleaseKey
from site_node.security.noise_key import NoiseKey
from site_node.protocols.paper.sealed import open_points, seal_points

SETTINGS = ((0.01, 1.0, 1e-5), (0.1, 5.0, 1e-3), (0.1, 1.0, 1e-5))  # (sensitivity, epsilon, delta)


def cost(n: int) -> None:
    """Time and size of one release of ``n`` scores per class (both classes)."""
    rng = np.random.default_rng(1)
    scores = [rng.uniform(0, 1, n), rng.uniform(0, 1, n)]
    noise = lattice_gaussian(1.0, 1e-5, 0.1)
    start = time.perf_counter()
    continuous = [np.sort(dsroc.add_gaussian_noise(s, noise.sigma, rng)) for s in scores]
    t_float = time.perf_counter() - start
    start = time.perf_counter()
    points = [np.sort(noise.noisy_points(s)) for s in scores]
    t_exact = time.perf_counter() - start
    start = time.perf_counter()
    sample_discrete_gaussian(noise.sigma / noise.step, 100_000)
    t_opendp = (time.perf_counter() - start) * (2 * n / 100_000)
    with tempfile.TemporaryDirectory() as folder:
        key = NoiseKey(f"{folder}/noise.key")
        release = ReleaseKey("p", "column:pred", "y", "scores", '{"epsilon": 1.0}')
        start = time.perf_counter()
        sealed = seal_points(key, release, *points)
        t_seal = time.perf_counter() - start
        start = time.perf_counter()
        opened = open_points(key, release, sealed)
        t_open = time.perf_counter() - start
    assert all(np.array_equal(a, b) for a, b in zip(opened, points))
    raw = sum(c.nbytes for c in continuous)
    print(f"one release of {n:,} scores per class (sigma {noise.sigma:.4g}, step 2^{np.log2(noise.step):.0f}):")
    print(f"  numpy float Gaussian  {t_float:7.2f} s (1.00)")
    print(f"  exact lattice sampler {t_exact:7.2f} s ({t_exact / t_float:.1f} x numpy)")
    print(f"  OpenDP exact sampler  {t_opendp:7.2f} s ({t_opendp / t_float:.0f} x numpy; timed on 1e5 draws, scaled)")
    print(f"  seal {t_seal:.2f} s, open {t_open:.2f} s; ledger payload {len(sealed) / 1e6:.2f} MB "
          f"(raw float64 {raw / 1e6:.1f} MB: {len(sealed) / raw:.3f})")


def _estimate(released0, released1, negatives, positives, grid):
    pv0 = dsroc.SurvivorFunction(released0)(positives, ties="mid")
    pv1 = dsroc.SurvivorFunction(released1)(negatives, ties="mid")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        fit = dsroc.fit_rocglm([dsroc.RocGlmParts.from_placements(pv0, grid)])
    variance = dsroc.delong_variance_from_moments(var_pv0=pv0.var(ddof=1), n1=pv0.size, var_pv1=pv1.var(ddof=1),
                                                  n0=pv1.size)
    return fit.auc, dsroc.auc_ci(fit.auc, variance)


def study(reps: int, seed: int) -> None:
    """Bias, MAE and CI coverage with continuous and lattice noise on the same replications."""
    grid = dsroc.rocglm_grid(None)
    print(f"\nROC-GLM AUC against the pooled truth, {reps} replications (seed {seed}):")
    print(f"{'setting':>26} {'noise':>10} {'tau':>8} {'bias':>9} {'MAE':>8} {'coverage':>8}  paired diff (SE)")
    for sensitivity, epsilon, delta in SETTINGS:
        noise = lattice_gaussian(epsilon, delta, sensitivity)
        tau0 = dsroc.analytic_gaussian_sigma(epsilon, delta, sensitivity)
        rows = {"continuous": [], "lattice": []}
        for rep in range(reps):
            data = generate_replication(seed, rep)
            negatives, positives = data.scores[data.labels == 0], data.scores[data.labels == 1]
            truth = dsroc.empirical_auc(data.scores, data.labels)
            rng = np.random.default_rng([seed, rep])
            releases = {"continuous": [dsroc.add_gaussian_noise(v, tau0, rng) for v in (negatives, positives)],
                        "lattice": [noise.values(noise.noisy_points(v)) for v in (negatives, positives)]}
            for kind, (r0, r1) in releases.items():
                try:
                    auc, (lo, hi) = _estimate(r0, r1, negatives, positives, grid)
                    rows[kind].append((auc - truth, lo <= truth <= hi))
                except ValueError:  # separation: the study counts it as a failure
                    rows[kind].append((np.nan, False))
        both = ~np.isnan([e for e, _ in rows["continuous"]]) & ~np.isnan([e for e, _ in rows["lattice"]])
        rows = {k: [row for row, keep in zip(v, both) if keep] for k, v in rows.items()}
        errors = {k: np.array([e for e, _ in v]) for k, v in rows.items()}
        diff = errors["lattice"] - errors["continuous"]
        reps_used = int(both.sum())
        name = f"sens={sensitivity:g} eps={epsilon:g} d={delta:g}"
        for kind, tau in (("continuous", tau0), ("lattice", noise.sigma)):
            e, covered = errors[kind], np.array([c for _, c in rows[kind]])
            extra = (f"  {diff.mean():+.6f} ({diff.std(ddof=1) / np.sqrt(reps_used):.6f}); "
                     f"{reps - reps_used} separated" if kind == "lattice" else "")
            print(f"{name:>26} {kind:>10} {tau:8.5f} {e.mean():+9.5f} {np.abs(e).mean():8.5f} {covered.mean():8.3f}{extra}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="scores per class in the cost run")
    parser.add_argument("--reps", type=int, default=300, help="replications per setting in the study")
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args(argv)
    cost(args.n)
    study(args.reps, args.seed)


if __name__ == "__main__":
    main()
