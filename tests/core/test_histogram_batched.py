"""The histogram protocol's batched computations against one-at-a-time and independent ones (statsmodels, scipy)."""

import warnings

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.optimize import root
from scipy.special import expit
from scipy.stats import norm

from dsroc.histogram.auc import histogram_rocglm
from dsroc.histogram.grid import consistent_counts, survivor_at_edges
from dsroc.histogram.resolved import SUBPOINTS, fine_base, logistic_classes
from dsroc.roc.rocglm_fit import fit_rocglm_batch


def _noisy_rows(seed, rows=40, bins=9):
    """Consistent noisy counts whose rows use different numbers of edges (empty bins, ties, thin tails)."""
    rng = np.random.default_rng(seed)
    p0 = rng.dirichlet(np.full(bins, 0.6), size=rows)
    p1 = np.sort(rng.dirichlet(np.full(bins, 0.6), size=rows), axis=1)
    c0 = rng.multinomial(700, p0) + 3.0 * rng.standard_normal((rows, bins))
    c1 = rng.multinomial(300, p1) + 3.0 * rng.standard_normal((rows, bins))
    c0[:4, 2:5] = 0.0  # repeated FPRs at neighbouring edges
    return consistent_counts(c0), consistent_counts(c1)


def _usable(s0, s1, n0, n1, tail):
    """Brute force: the inner edges with FPR in (0, 1) and (``tail > 0``) ``tail`` patients of each class on each
    side, one per FPR (the lowest edge), as (FPR, TPR) pairs in increasing FPR."""
    by_fpr = {}
    for j in range(s0.size):
        thick = tail == 0 or (min(s0[j], 1 - s0[j]) * n0 >= tail and min(s1[j], 1 - s1[j]) * n1 >= tail)
        if 0 < s0[j] < 1 and thick:
            by_fpr.setdefault(s0[j], s1[j])
    return np.array(sorted(by_fpr)), np.array([by_fpr[f] for f in sorted(by_fpr)])


@pytest.mark.parametrize("tail", [0.0, 6.0])
def test_batched_rocglm_equals_statsmodels_probit_glm_row_by_row(tail):
    c0, c1 = _noisy_rows(1)
    fit = histogram_rocglm(c0, c1, tail_count=tail)
    assert len(set(fit.points.tolist())) > 2  # the batch mixes rows fitted through different numbers of edges
    for r in range(c0.shape[0]):
        n0, n1 = c0[r].sum(), c1[r].sum()
        fpr, tpr = _usable(survivor_at_edges(c0[r])[1:-1], survivor_at_edges(c1[r])[1:-1], n0, n1, tail)
        assert fit.points[r] == fpr.size
        if fpr.size < 2:
            assert np.isnan(fit.params[r]).all()
            continue
        glm = sm.GLM(np.clip(tpr, 0, 1), sm.add_constant(norm.ppf(fpr)),
                     family=sm.families.Binomial(sm.families.links.Probit()),
                     var_weights=np.full(fpr.size, n1)).fit(tol=1e-13)
        assert fit.params[r] == pytest.approx(glm.params, rel=1e-6, abs=1e-8)


def test_a_grid_per_row_fits_each_row_as_its_own_one_row_fit():
    rng = np.random.default_rng(2)
    grids = np.sort(rng.uniform(0.02, 0.98, size=(25, 6)), axis=1)
    n = rng.integers(20, 400, 25).astype(float)
    k = np.sort(rng.binomial(n[:, None].astype(int), np.sqrt(grids)), axis=1).astype(float)
    k[0] = [0, 0, 0, n[0], n[0], n[0]]  # separated: no finite fit
    batch = fit_rocglm_batch(k, n, grids)
    for r in range(25):
        one = fit_rocglm_batch(k[r : r + 1], n[r : r + 1], grids[r])
        assert batch.converged[r] == one.converged[0] and batch.degenerate[r] == one.degenerate[0]
        np.testing.assert_allclose(batch.params[r], one.params[0], rtol=1e-11, atol=1e-12)
    assert batch.degenerate[0] and np.isnan(batch.params[0]).all()
    with pytest.raises(ValueError, match="newton"):
        fit_rocglm_batch(k, n, grids, newton=False)
    with pytest.raises(ValueError, match="strictly increasing"):
        fit_rocglm_batch(k, n, grids[:, ::-1])


def test_logistic_classes_solve_their_moment_equations_as_scipy_does():
    rng = np.random.default_rng(3)
    fine_edges = np.r_[0.0, np.sort(rng.uniform(0.01, 0.99, 39)), 1.0]
    edges = np.r_[0.0, np.sort(rng.choice(fine_edges[1:-1], 4, replace=False)), 1.0]
    g = rng.poisson(30, (6, 40)).astype(float)
    z, base = fine_base(edges, fine_edges, g)
    share, du = rng.uniform(0.05, 0.95, (6, 5)), rng.normal(0, 0.05, (6, 5))
    f0, f1 = logistic_classes(z, base, share, du)
    steps = (np.arange(SUBPOINTS) + 0.5) / SUBPOINTS
    for r in range(6):
        for b in range(5):
            w = base[r, b] / base[r, b].sum()
            zs = (z[b] - z[b].mean()) / (z[b].std() + 1e-12)

            def equations(theta):
                p = expit(theta[0] + theta[1] * zs)
                s = (w * p).sum()
                return [s - share[r, b], (w * p * steps).sum() / s - (w * (1 - p) * steps).sum() / (1 - s) - du[r, b]]

            theta = root(equations, [np.log(share[r, b] / (1 - share[r, b])), 0.0], tol=1e-14).x
            p = expit(theta[0] + theta[1] * zs)
            np.testing.assert_allclose(f1[r, b], w * p / (w * p).sum(), rtol=1e-7, atol=1e-12)
            np.testing.assert_allclose(f0[r, b], w * (1 - p) / (w * (1 - p)).sum(), rtol=1e-7, atol=1e-12)


def test_tilted_shapes_have_the_released_mean_as_brentq_finds_it():
    """Each bin's tilted shape (Newton inside a bracket) against scipy's brentq root of the tilted mean; means beyond
    what a tilt of 60 reaches stay at the bracket's end, as the bisection did."""
    from scipy.optimize import brentq

    from dsroc.histogram.slope import _tilted

    rng = np.random.default_rng(4)
    base = rng.gamma(0.3, size=(3, 4, SUBPOINTS)) + 1e-9
    base[0, 0, :] = 1e-9
    base[0, 0, 7] = 1.0  # nearly all of the bin at one sub-point: a steep, almost flat-then-steep mean
    mean = rng.uniform(0.02, 0.98, (3, 4))
    mean[2, 3] = 0.999999  # beyond the largest tilt
    w = _tilted(base, mean)
    steps = (np.arange(SUBPOINTS) + 0.5) / SUBPOINTS

    def tilt(b, lam):
        v = b * np.exp(lam * (steps - 0.5))
        return v / v.sum()

    for i in range(3):
        for j in range(4):
            f = lambda lam: (tilt(base[i, j], lam) * steps).sum() - mean[i, j]  # noqa: E731
            lam = 60.0 if f(60.0) < 0 else brentq(f, -60.0, 60.0, xtol=1e-14, rtol=1e-15)
            np.testing.assert_allclose(w[i, j], tilt(base[i, j], lam), rtol=1e-9, atol=1e-15)
    assert (w[:2] * steps).sum(-1) == pytest.approx(mean[:2], abs=1e-12)


def test_reconstructed_logistic_fits_equal_statsmodels_row_by_row():
    """The slope's batched Newton fits (rows stopping one by one) against statsmodels' weighted GLM on the same
    covariates: the moment equations ``sum w (1, z) expit(a + s z) = (n1, T)``."""
    from dsroc.histogram.slope import _fit

    rng = np.random.default_rng(6)
    z = np.linspace(-4, 3, 40)
    w = rng.gamma(2.0, 10.0, (12, 40))
    truth = np.stack([rng.normal(-1, 0.5, 12), rng.uniform(0.3, 2.0, 12)], -1)
    p = expit(truth[:, :1] + truth[:, 1:] * z)
    n1, T = (w * p).sum(-1), (w * p * z).sum(-1)
    theta, inv = _fit(z, w, n1, T)
    np.testing.assert_allclose(theta, truth, rtol=1e-8)
    for r in range(12):
        # A GLM whose responses are the fitted probabilities solves the same score equations.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # statsmodels calls fitted probabilities near 0 or 1 separation
            glm = sm.GLM(p[r], sm.add_constant(z), family=sm.families.Binomial(), freq_weights=w[r]).fit(tol=1e-13)
        np.testing.assert_allclose(theta[r], glm.params, rtol=1e-8)
        np.testing.assert_allclose(inv[r], glm.cov_params(), rtol=1e-6)
