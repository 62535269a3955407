"""The validation's one bootstrap gives every estimate and every replicate of the per-statistic functions, same seed.

The reference replays :func:`survival_replicates` (the same draws for the same seed) and evaluates each public
estimator on each replicate histogram on its own; the validation must reproduce the estimates and the intervals
(so the spread of every replicate column) to 1e-12.
"""

import numpy as np
import pytest

from dsroc.survival import (
    SurvivalHistogram, brier_score, calibration_at, censoring_survival, cumulative_dynamic_auc, harrell_c,
    integrated_brier_score, kaplan_meier, scaled_brier, uno_c,
)
from dsroc.survival.bootstrap import interval_from
from dsroc.survival.intervals import survival_replicates
from dsroc.survival.pooling import SiteRelease
from dsroc.survival.recalibration import grouped_calibration
from dsroc.survival.validation import survival_validation

TIME_EDGES = np.concatenate([np.linspace(0.0, 3.0, 13), [np.inf]])
SCORE_EDGES = np.linspace(0.0, 1.0, 7)
HORIZON, TAU = 1.5, 2.0


def _cohort(rng, n):
    x = rng.normal(size=n)
    t = rng.weibull(1.3, n) * np.exp(-0.8 * x / 1.3)
    c = rng.uniform(0.2, 3.5, n)
    risk = 1.0 - np.exp(-(HORIZON**1.3) * np.exp(0.8 * x))
    return np.minimum(np.minimum(t, c), 3.5), (t <= c).astype(int), np.clip(risk, 0.0, 1.0)


def _site(rng, n, count_sd, sums_sd, with_sums):
    time, event, risk = _cohort(rng, n)
    exact = SurvivalHistogram.from_patients(time, event, risk, time_edges=TIME_EDGES, score_edges=SCORE_EDGES)
    counts = exact.counts + rng.normal(0.0, count_sd, exact.shape) if count_sd > 0 else exact.counts
    if not with_sums:
        return SurvivalHistogram(counts, TIME_EDGES, SCORE_EDGES)
    w = np.diff(SCORE_EDGES)
    sums = exact.score_sum + w * rng.normal(0.0, sums_sd, exact.shape) if sums_sd > 0 else exact.score_sum
    return SurvivalHistogram(counts, TIME_EDGES, SCORE_EDGES, score_sum=sums, score_sq_sum=exact.score_sq_sum)


def _nan(fn):
    try:
        return float(fn())
    except ValueError:
        return float("nan")


def _reference(h, auc_times, groups):
    """Every estimate of the validation, each from its own public function."""
    cal = calibration_at(h, HORIZON, groups)
    fit = grouped_calibration(h, HORIZON, groups)
    return np.concatenate([
        kaplan_meier(h).survival, censoring_survival(h).survival,
        [_nan(lambda t=t: cumulative_dynamic_auc(h, t).value) for t in auc_times],
        [_nan(lambda: cumulative_dynamic_auc(h, HORIZON).value), _nan(lambda: harrell_c(h)),
         _nan(lambda: uno_c(h, TAU)), _nan(lambda: brier_score(h, HORIZON)),
         _nan(lambda: integrated_brier_score(h, HORIZON)), _nan(lambda: scaled_brier(h, HORIZON)),
         cal.overall.ratio, cal.overall.expected, cal.overall.observed, fit.intercept, fit.slope],
        [g.observed for g in cal.groups], [g.expected for g in cal.groups], [g.ratio for g in cal.groups]])


def _replicates(h, statistic, count_sd, sums_sd, draws, seed):
    rows = []
    survival_replicates(h, lambda x: rows.append(statistic(x)) or 0.0, count_sd=count_sd, sums_sd=sums_sd,
                        draws=draws, seed=seed)
    return np.vstack(rows)


def _same(got, want):
    for field in ("value", "se", "lower", "upper", "draws"):
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=0, atol=1e-12, err_msg=field)


def _same_band(band, values, reps, level):
    want = [interval_from(v, reps[:, i], level, bounds=(0.0, 1.0)) for i, v in enumerate(values)]
    np.testing.assert_allclose(band.values, [w.value for w in want], rtol=0, atol=1e-12)
    np.testing.assert_allclose(band.se, [w.se for w in want], rtol=0, atol=1e-12)
    np.testing.assert_allclose(band.lower, [w.lower for w in want], rtol=0, atol=1e-12)
    np.testing.assert_allclose(band.upper, [w.upper for w in want], rtol=0, atol=1e-12)


CASES = {  # n per site, count SD per site, sums SD per site, risk sums released
    "noise-free with sums": (800, 0.0, 0.0, True),
    "noisy, midpoints": (600, 1.5, 0.0, False),
    "noisy with noisy sums": (600, 1.5, 1.2, True),
    "sparse and noisy": (60, 2.0, 1.0, True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_validation_reproduces_every_statistic_on_every_replicate(case):
    n, sd, sums_sd, with_sums = CASES[case]
    rng = np.random.default_rng(sorted(CASES).index(case))
    sites = {f"s{k}": SiteRelease(_site(rng, n, sd, sums_sd, with_sums), sd, sums_sd if with_sums else 0.0)
             for k in range(3)}
    hist = sites["s0"].histogram + sites["s1"].histogram + sites["s2"].histogram
    count_sd, total_sums_sd = sd * np.sqrt(3), (sums_sd if with_sums else 0.0) * np.sqrt(3)
    draws, seed, level = 30, 7, 0.9
    v = survival_validation(hist, HORIZON, count_sd=count_sd, sums_sd=total_sums_sd, sites=sites, tau=TAU,
                            level=level, draws=draws, seed=seed)

    groups = [v.groups[0].score_bins[0]] + [g.score_bins[1] for g in v.groups]
    k, g = hist.shape[0], len(v.groups)
    all_times = hist.time_points[hist.time_points <= TIME_EDGES[-2]]
    keep = np.unique(np.round(np.linspace(0, all_times.size - 1, min(all_times.size, 8))).astype(int))
    auc_times = all_times[keep]
    stat = lambda x: _reference(x, auc_times, groups)  # noqa: E731
    value, reps = stat(hist), _replicates(hist, stat, count_sd, total_sums_sd, draws, seed)

    _same_band(v.survival, value[:k], reps[:, :k], level)
    _same_band(v.censoring, value[k:2 * k], reps[:, k:2 * k], level)
    m = auc_times.size
    auc_values, auc_reps = value[2 * k:2 * k + m], reps[:, 2 * k:2 * k + m]
    ok = np.isfinite(auc_values)
    np.testing.assert_array_equal(v.auc_curve.times, auc_times[ok])
    _same_band(v.auc_curve, auc_values[ok], auc_reps[:, ok], level)
    s = 2 * k + m
    unit, positive, anything = (0.0, 1.0), (0.0, np.inf), (-np.inf, np.inf)
    scalars = [("auc", unit), ("harrell_c", unit), ("uno_c", unit), ("brier", unit), ("integrated_brier", unit),
               ("scaled_brier", (-np.inf, 1.0)), ("oe", positive), ("expected", unit), ("observed", unit),
               ("calibration_intercept", anything), ("calibration_slope", anything)]
    for i, (name, bounds) in enumerate(scalars):
        _same(getattr(v, name), interval_from(value[s + i], reps[:, s + i], level, bounds=bounds))
    s += len(scalars)
    for j, group in enumerate(v.groups):
        for part, (field, bounds) in enumerate((("observed", unit), ("expected", unit), ("ratio", positive))):
            c = s + part * g + j
            _same(getattr(group, field), interval_from(value[c], reps[:, c], level, bounds=bounds))

    site_stat = lambda x: np.array([  # noqa: E731
        _nan(lambda: cumulative_dynamic_auc(x, HORIZON).value), _nan(lambda: harrell_c(x)), _nan(lambda: uno_c(x, TAU)),
        _nan(lambda: brier_score(x, HORIZON)), _nan(lambda: calibration_at(x, HORIZON, [0, x.shape[2]]).overall.ratio)])
    for row, (name, site) in zip(v.sites, sites.items()):
        h = site.histogram
        sv, sr = site_stat(h), _replicates(h, site_stat, site.count_sd, site.sums_sd, max(20, draws // 2), seed)
        for i, (field, bounds) in enumerate((("auc", unit), ("harrell_c", unit), ("uno_c", unit), ("brier", unit),
                                             ("oe", positive))):
            _same(getattr(row, field), interval_from(sv[i], sr[:, i], level, bounds=bounds))


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_stacked_statistic_is_its_public_function_on_each_replicate(case):
    from dsroc.survival.bootstrap import bootstrap

    n, sd, sums_sd, with_sums = CASES[case]
    rng = np.random.default_rng(10 + sorted(CASES).index(case))
    hist = _site(rng, 3 * n, sd, sums_sd, with_sums)
    kh, j = hist.horizon_index(HORIZON), hist.shape[2]
    want = lambda x: np.concatenate([  # noqa: E731
        [_nan(lambda t=t: cumulative_dynamic_auc(x, t).value) for t in x.time_points[:-1]],
        [_nan(lambda: harrell_c(x)), _nan(lambda: uno_c(x, TAU)), _nan(lambda: brier_score(x, HORIZON)),
         _nan(lambda: integrated_brier_score(x, HORIZON)), _nan(lambda: scaled_brier(x, HORIZON)),
         calibration_at(x, HORIZON, [0, 2, j]).groups[1].ratio], kaplan_meier(x).survival,
        censoring_survival(x).survival])
    got = lambda s: np.column_stack([  # noqa: E731
        s.auc(np.arange(1, hist.shape[0])), s.harrell_c(), s.uno_c(TAU), s.brier(kh), s.integrated_brier(kh),
        s.scaled_brier(kh), s.observed_expected(kh, 2, j)[2], s.survival, s.censoring.survival])
    value, reps = bootstrap(hist, got, count_sd=sd, sums_sd=sums_sd if with_sums else 0.0, draws=25, seed=3)
    np.testing.assert_allclose(value, want(hist), rtol=0, atol=1e-12)
    np.testing.assert_allclose(reps, _replicates(hist, want, sd, sums_sd if with_sums else 0.0, 25, 3), rtol=0,
                               atol=1e-12)
