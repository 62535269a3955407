"""Validation results of both protocols built from pooled data in process (no server), for display and report tests."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import dsroc
from analyst.result.parts import Estimate, RocCurve, SitePrivacy, TestResult
from analyst.protocols.histogram.protocol import HistogramOptions, histogram_result
from analyst.protocols.histogram.release import HistogramSite
from analyst.protocols.paper.protocol import PAPER_GUARANTEE, PaperDetail, paper_calibration
from analyst.result import ValidationResult


def data(seed=0, n=400):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.15), 0.001, 0.999)
    return s, y


def common(protocol, guarantee, unit, sites=("a", "b")):
    return dict(protocol=protocol, guarantee=guarantee, privacy_unit=unit, dataset="test", outcome="y",
                score_source="column:pred", sites=tuple(sites), epsilon=5.0, delta=0.01, level=0.95)


def paper_result(seed=0, **changes) -> ValidationResult:
    """A paper-protocol result of two halves of one sample, computed as the analyst would from exact answers."""
    s, y = data(seed)
    fit = dsroc.fit_rocglm(dsroc.RocGlmParts.from_placements(dsroc.placement_values(s[y == 0], s[y == 1]), None))
    var = dsroc.delong_variance(s, y)
    ci = dsroc.auc_ci(fit.auc, var)
    halves = [np.arange(200), np.arange(200, 400)]
    curve = dsroc.aggregate_calibration(
        [dsroc.calibration_parts(s[h], y[h], dsroc.calibration_edges(10), privacy_level=5) for h in halves],
        site_names=["a", "b"])
    h = dsroc.calibration_hierarchy(curve)
    privacy = {name: SitePrivacy(5.0, 0.01, 0.02, 0.1, "value", True, 200.0, 1.2, False, 6.0, 10.0, 1e-3, 1.2, 3.0,
                                 "configured") for name in ("a", "b")}
    points = dsroc.pr_points_by_class(s[y == 0], s[y == 1])
    fields = dict(
        **common("paper", PAPER_GUARANTEE, "one patient's score"), n=400.0, n0=float((y == 0).sum()),
        n1=float((y == 1).sum()), counts_exact=True, auc=fit.auc, auc_ci=ci, auc_variance=var,
        auc_estimator="ROC-GLM", auc_ci_includes="sampling (distributed DeLong)", ci_method="logit",
        roc=RocCurve(points.fp / points.n0, points.tp / points.n1, "empirical ROC", tuple(fit.params),
                     RocCurve.band_for(fit.params, ci)),
        calibration=paper_calibration(curve, h), brier=Estimate(dsroc.brier_score(s, y), includes="exact"),
        privacy=privacy, test=TestResult(0.6, 0.95, dsroc.auc_test(ci, 0.6)),
        detail=PaperDetail(fit, dsroc.rocglm_grid(None), None, curve, h, tuple(curve.suppressed)))
    fields.update(changes)
    return ValidationResult(**fields)


def histogram_result_of(seed=0, n_bins=10, noise_sd=0.0, sites=("a", "b")) -> ValidationResult:
    """A histogram-protocol result from exact (``noise_sd`` 0) or noisy per-site histograms of one sample."""
    from analyst.protocols.histogram.protocol import HISTOGRAM_GUARANTEE

    s, y = data(seed)
    edges = np.linspace(0, 1, n_bins + 1)
    rng = np.random.default_rng(seed + 1)
    releases, budgets = {}, {}
    for k, name in enumerate(sites):
        part = slice(k * s.size // len(sites), (k + 1) * s.size // len(sites))
        counts = [np.histogram(s[part][y[part] == c], edges)[0] for c in (0, 1)]
        noisy = [c + np.rint(rng.normal(0, noise_sd, c.size)).astype(np.int64) for c in counts]
        releases[name] = HistogramSite(noisy[0], noisy[1], noise_sd, noise_sd, 5.0, 0.01, f"r{k}", False, 0.5, {}, 0.0)
        budgets[name] = SimpleNamespace(epsilon_spent=0.5, budget_epsilon=10.0, budget_delta=0.05, mu_spent=0.0,
                                        mu_remaining=2.0)
    return histogram_result(common("histogram", HISTOGRAM_GUARANTEE, "add or remove one patient", sites), edges,
                            releases, budgets, HistogramOptions(a0=0.6))
