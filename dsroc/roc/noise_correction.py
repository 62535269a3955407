"""Noise-corrected AUC of the paper protocol: extrapolation of the known Gaussian release noise to zero, and its CI.

In the paper's distributed procedure the sites place their *true* scores under the pooled *released*
scores (``s + tau z``). The mean placement values then estimate the AUC of the true scores blurred by
noise of variance ``tau^2``, and the AUC among the released scores themselves (which the analyst holds)
the AUC blurred by ``2 tau^2``. For scores whose difference ``D = s1 - s0`` has a smooth density
``f`` at 0, ``A(sigma) = P(D + sigma Z > 0) = A(0) - sigma^2 f'(0) / 2 + O(sigma^4)``, so the linear
extrapolation in ``sigma^2``

    A_c = 2 A(tau) - A(sqrt(2) tau)

removes the noise's bias to first order (for piecewise linear densities, e.g. uniform scores, up to
Gaussian tail terms). It needs nothing beyond what the protocol already releases or answers: the
placement moments' means and the released scores. With ``tau = 0`` it is the exact empirical AUC.
Different noise levels per site cancel the same way (each pair's blur adds the variances).

Its variance is the DeLong variance (sampling) plus the noise's own variance, estimated by redrawing
the known noise around the released scores (a parametric bootstrap on what the analyst already holds).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import is_sorted
from .auc import BatchCI, auc_ci_batch, placement_values
from .batch import check_groups, group_sizes, grouped_mean, grouped_placement_values

__all__ = ["NoiseCorrectedAUC", "noise_corrected_auc", "released_auc", "noise_variance", "grouped_noise_variance"]

DEFAULT_DRAWS = 6
DEFAULT_MAX_SIZE = 4_000  # released scores per data set used by the noise bootstrap (variance scaled to n)


class NoiseCorrectedAUC(NamedTuple):
    """The noise-corrected AUC, its variance and CI (arrays when the inputs are arrays).

    ``auc_tau``: AUC of the true scores against the released ones (from the mean placement values);
    ``auc_released``: AUC among the released scores; ``noise_variance``: the noise's share of ``variance``.
    """

    auc: float | np.ndarray
    variance: float | np.ndarray
    ci: BatchCI
    auc_tau: float | np.ndarray
    auc_released: float | np.ndarray
    noise_variance: float | np.ndarray


def noise_corrected_auc(*, mean_pv0, mean_pv1, auc_released, delong_variance, noise_variance, level: float = 0.95,
                        method: str = "logit") -> NoiseCorrectedAUC:
    """``A_c = 2 A(tau) - A(sqrt 2 tau)`` with ``A(tau) = (1 - mean PV0 + mean PV1) / 2``, and its CI.

    Parameters
    ----------
    mean_pv0 : float or array
        Mean over the positives of ``PV0 = S~0(s1)``, their true scores placed under the released negatives.
    mean_pv1 : float or array
        Mean over the negatives of ``PV1 = S~1(s0)``.
    auc_released : float or array
        Empirical AUC of the released positives against the released negatives (:func:`released_auc`).
    delong_variance : float or array
        DeLong variance from the placement values' moments (the sampling part).
    noise_variance : float or array
        Variance of ``A_c`` due to the noise (:func:`noise_variance`).
    level, method
        As for :func:`dsroc.auc_ci`; where the interval does not exist (``A_c`` outside (0, 1) with the
        logit method) ``ci.defined`` is False and the bounds are NaN.
    """
    values = {"mean_pv0": mean_pv0, "mean_pv1": mean_pv1, "auc_released": auc_released}
    for name, value in values.items():
        v = np.asarray(value, dtype=np.float64)
        if not (np.isfinite(v).all() and ((v >= 0) & (v <= 1)).all()):
            raise ValueError(f"{name} must lie in [0, 1], got {value}")
    for name, value in (("delong_variance", delong_variance), ("noise_variance", noise_variance)):
        v = np.asarray(value, dtype=np.float64)
        if not (np.isfinite(v).all() and (v >= 0).all()):
            raise ValueError(f"{name} must be a finite non-negative variance, got {value}")
    auc_tau = 0.5 * (1.0 - np.asarray(mean_pv0, dtype=np.float64) + np.asarray(mean_pv1, dtype=np.float64))
    auc = 2.0 * auc_tau - np.asarray(auc_released, dtype=np.float64)
    variance = np.asarray(delong_variance, dtype=np.float64) + np.asarray(noise_variance, dtype=np.float64)
    inside = (auc >= 0.0) & (auc <= 1.0)
    ci = auc_ci_batch(np.where(inside, auc, np.nan), variance, level=level, method=method)
    scalar = np.ndim(auc) == 0
    out = (auc, variance, auc_tau, np.asarray(auc_released, dtype=np.float64), np.asarray(noise_variance, dtype=np.float64))
    if scalar:
        auc, variance, auc_tau, released, noise = (float(v) for v in out)
        ci = BatchCI(float(ci.lower), float(ci.upper), bool(ci.defined))
        return NoiseCorrectedAUC(auc, variance, ci, auc_tau, released, noise)
    return NoiseCorrectedAUC(out[0], out[1], ci, out[2], out[3], out[4])


def released_auc(released0, released1) -> float:
    """Empirical (Mann-Whitney, mid-rank) AUC of the released positives against the released negatives."""
    return float(1.0 - placement_values(released0, released1).mean())


def noise_variance(released0, released1, tau0, tau1, *, draws: int = DEFAULT_DRAWS,
                   max_size: int = DEFAULT_MAX_SIZE, seed=0) -> float:
    """Variance of the noise-corrected AUC due to the release noise, by redrawing the known noise.

    The released scores stand in for the true ones: each draw adds fresh ``N(0, tau^2)`` noise to them,
    computes ``A_c`` as the protocol would, and the variance over the draws is the estimate. It is
    approximate: the stand-ins are already blurred, and in our tests it came out 20-40 % below the
    noise variance seen over repeated releases -- which is itself about 1 % of the DeLong variance, so
    the interval's width is hardly affected. At most ``max_size`` scores (a random subset, class
    proportions kept in expectation) are used and the variance is scaled to the full size (the noise
    variance is inversely proportional to n). Deterministic for a given ``seed``.

    Parameters
    ----------
    released0, released1 : array_like
        The pooled released negatives and positives.
    tau0, tau1 : float or array_like
        Noise standard deviation of each released negative / positive (a scalar when all sites used
        the same).
    seed : int or sequence of int
        Seed of the redrawn noise (``numpy.random.default_rng``).
    """
    r0, r1 = np.asarray(released0, dtype=np.float64), np.asarray(released1, dtype=np.float64)
    return float(grouped_noise_variance(r0, np.zeros(r0.size, dtype=np.int64), r1, np.zeros(r1.size, dtype=np.int64),
                                        tau0, tau1, n_groups=1, draws=draws, max_size=max_size, seeds=[seed])[0])


def _by_group(groups: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """Indices of each group's elements, in their order."""
    order = np.argsort(groups, kind="stable")
    return np.split(order, np.cumsum(group_sizes(groups, n_groups))[:-1])


def grouped_noise_variance(released0, groups0, released1, groups1, tau0, tau1, *, n_groups: int, seeds,
                           draws: int = DEFAULT_DRAWS, max_size: int = DEFAULT_MAX_SIZE) -> np.ndarray:
    """:func:`noise_variance` of many data sets at once (group ids as in :mod:`dsroc.roc.batch`), one sort per term.

    ``seeds`` holds one seed per group, so each group's value equals :func:`noise_variance` on that
    group alone with its seed (however the groups are batched).
    """
    if isinstance(draws, bool) or int(draws) != draws or draws < 2:
        raise ValueError(f"draws must be an integer >= 2, got {draws!r}")
    if isinstance(max_size, bool) or int(max_size) != max_size or max_size < 4:
        raise ValueError(f"max_size must be an integer >= 4, got {max_size!r}")
    if len(seeds) != n_groups:
        raise ValueError(f"seeds must hold one seed per group ({n_groups}), got {len(seeds)}")
    r0, r1 = np.asarray(released0, dtype=np.float64), np.asarray(released1, dtype=np.float64)
    g0, g1 = check_groups(groups0, r0.size, n_groups, name="groups0"), check_groups(groups1, r1.size, n_groups, name="groups1")
    t0, t1 = (np.broadcast_to(np.asarray(t, dtype=np.float64), r.shape) for t, r in ((tau0, r0), (tau1, r1)))
    if not (np.isfinite(t0).all() and np.isfinite(t1).all() and (t0 >= 0).all() and (t1 >= 0).all()):
        raise ValueError("tau must be finite and non-negative")
    d = int(draws)
    n = group_sizes(g0, n_groups) + group_sizes(g1, n_groups)
    # Per group, from its own generator: a random subset of at most ~max_size scores, then d noise draws
    # per kept score. Cell (group, draw) = group * d + draw holds one redrawn data set.
    parts = {0: [], 1: []}
    kept = np.zeros(n_groups)
    for g, (i0, i1), seed in zip(range(n_groups), zip(_by_group(g0, n_groups), _by_group(g1, n_groups)), seeds):
        rng = np.random.default_rng(seed)
        p = min(1.0, max_size / max(int(n[g]), 1))
        for cls, idx, r, t in ((0, i0, r0, t0), (1, i1, r1, t1)):
            if not is_sorted(r[idx]):  # canonical order: the result ignores the input order
                idx = idx[np.argsort(r[idx], kind="stable")]
            idx = idx[rng.random(idx.size) < p] if p < 1.0 else idx
            kept[g] += idx.size
            s = np.repeat(r[idx][None, :], d, axis=0)  # (draws, kept)
            x = s + t[idx] * rng.standard_normal(s.shape)
            parts[cls].append((s.ravel(), x.ravel(), np.repeat(g * d + np.arange(d), idx.size)))
    (s0, x0, c0), (s1, x1, c1) = ([np.concatenate(col) for col in zip(*parts[cls])] for cls in (0, 1))
    cells = n_groups * d
    pv0 = grouped_placement_values(x0, c0, s1, c1, n_groups=cells)  # stand-in positives under noisy negatives
    pv1 = grouped_placement_values(x1, c1, s0, c0, n_groups=cells)
    both = grouped_placement_values(x0, c0, x1, c1, n_groups=cells)
    mean0, mean1 = grouped_mean(pv0, c1, n_groups=cells), grouped_mean(pv1, c0, n_groups=cells)
    corrected = (1.0 - mean0 + mean1) - (1.0 - grouped_mean(both, c1, n_groups=cells))
    var = corrected.reshape(n_groups, d).var(axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return var * kept / n
