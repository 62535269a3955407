"""The assembled survival validation against independent references: scikit-survival, lifelines, statsmodels, brute force.

On a per-patient grid (an edge at every follow-up time, a score edge between every two risks) the histogram loses
nothing, so the assembled estimates must equal the unbinned references. scikit-survival is GPL and only imported
here. The grouped proportional-hazards calibration fit is checked against statsmodels' binomial GLM with the
complementary log-log link on the person-period cells, written out here.
"""

import dataclasses

import numpy as np
import pytest

lifelines = pytest.importorskip("lifelines")
sm = pytest.importorskip("statsmodels.api")
sksurv_metrics = pytest.importorskip("sksurv.metrics")
from lifelines.utils import concordance_index  # noqa: E402
from sksurv.nonparametric import kaplan_meier_estimator  # noqa: E402
from sksurv.util import Surv  # noqa: E402

from dsroc.privacy.laplace import discrete_laplace_noise, discrete_laplace_sd  # noqa: E402
from dsroc.survival import SiteRelease, SurvivalHistogram, grouped_calibration, survival_validation  # noqa: E402
from dsroc.survival.release import draw_survival_release, survival_release_scales  # noqa: E402
from dsroc.histogram.stages import SUMS_RESOLUTION  # noqa: E402

HORIZON = 1.0


def cohort(seed, n, *, slope=1.0, cap=1.99):
    """Weibull times with a proportional-hazards covariate; ``risk`` is the true risk by t = 1 when ``slope`` is 1."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    t = rng.weibull(1.5, n) * np.exp(-0.7 * x / 1.5)  # cumulative hazard t^1.5 exp(0.7 x)
    c = rng.exponential(2.0, n)
    time, event = np.minimum(np.minimum(t, c), cap), (t <= c).astype(int)
    risk = 1.0 - np.exp(-np.exp(0.7 * x * slope))
    return time, event, np.clip(risk, 1e-9, 1 - 1e-9)


@pytest.fixture(scope="module")
def exact():
    time, event, risk = cohort(7, 150, cap=np.inf)
    assert np.unique(time).size == time.size
    r = np.sort(risk)
    hist = SurvivalHistogram.from_patients(time, event, risk, time_edges=np.r_[0.0, np.sort(time)],
                                           score_edges=np.r_[0.0, 0.5 * (r[1:] + r[:-1]), 1.0])
    return time, event, risk, hist, survival_validation(hist, HORIZON, count_sd=0.0, draws=2, tau=1.5)


def test_every_estimate_equals_the_unbinned_references(exact):
    time, event, risk, _, v = exact
    y = Surv.from_arrays(event.astype(bool), time)
    auc, _ = sksurv_metrics.cumulative_dynamic_auc(y, y, risk, times=np.array([HORIZON]), tied_tol=0.0)
    assert abs(v.auc.value - auc[0]) < 1e-12
    assert abs(v.harrell_c.value - concordance_index(time, -risk, event)) < 1e-12
    assert abs(v.uno_c.value - sksurv_metrics.concordance_index_ipcw(y, y, risk, tau=1.5, tied_tol=0.0)[0]) < 1e-12
    _, bs = sksurv_metrics.brier_score(y, y, (1.0 - risk)[:, None], np.array([HORIZON]))
    assert abs(v.brier.value - bs[0]) < 1e-12
    km = lifelines.KaplanMeierFitter().fit(time, event)
    assert np.max(np.abs(v.survival.values - km.survival_function_at_times(v.survival.times).to_numpy())) < 1e-12
    _, g = kaplan_meier_estimator(event.astype(bool), time, reverse=True)
    assert np.max(np.abs(v.censoring.values - g)) < 1e-12
    # the AUC(t) curve at each of its times, against sksurv at those times
    times = v.auc_curve.times[(v.auc_curve.times > time.min()) & (v.auc_curve.times < np.sort(time)[-2])][::15]
    ref, _ = sksurv_metrics.cumulative_dynamic_auc(y, y, risk, times=times, tied_tol=0.0)
    ours = np.interp(times, v.auc_curve.times, v.auc_curve.values)
    assert np.max(np.abs(ours - ref)) < 1e-12


def test_the_auc_curve_at_asked_times_equals_scikit_survival(exact):
    time, event, risk, hist, _ = exact
    asked = (0.4, 0.8, 1.2)  # inside bins of the per-patient grid: read as the horizon is, i.e. the unbinned AUC(t)
    v = survival_validation(hist, HORIZON, count_sd=0.0, draws=2, tau=1.5, auc_times=asked)
    y = Surv.from_arrays(event.astype(bool), time)
    ref, _ = sksurv_metrics.cumulative_dynamic_auc(y, y, risk, times=np.array(asked), tied_tol=0.0)
    assert v.auc_curve.times.tolist() == list(asked)
    assert np.max(np.abs(v.auc_curve.values - ref)) < 1e-12
    with pytest.raises(ValueError, match=r"auc_times must lie in \(0, "):
        survival_validation(hist, HORIZON, count_sd=0.0, draws=2, auc_times=(0.5, 1e9))


def test_risk_groups_and_roc_against_brute_force(exact):
    time, event, risk, hist, v = exact
    for g in v.groups:
        inside = (risk >= g.lower_score) & (risk < g.upper_score)
        km = lifelines.KaplanMeierFitter().fit(time[inside], event[inside])
        assert abs(g.observed.value - (1.0 - km.survival_function_at_times(HORIZON).iloc[0])) < 1e-12
        assert abs(g.expected.value - risk[inside].mean()) < 1e-12
        assert g.patients == inside.sum()
    assert sum(g.patients for g in v.groups) == time.size
    # IPCW ROC at the horizon: cases weighted 1 / G(T-), controls T > t, brute force at every score edge
    order = np.argsort(time)
    g_left = np.empty(time.size)
    at_risk, g_now = time.size, 1.0
    for i in order:  # reverse KM left limits, events first at a tie (no ties here)
        g_left[i] = g_now
        if event[i] == 0:
            g_now *= 1.0 - 1.0 / at_risk
        at_risk -= 1
    case = (time <= HORIZON) & (event == 1)
    control = time > HORIZON
    fpr, tpr = v.roc
    for c in hist.score_edges[1:-1:20]:
        brute_tpr = np.sum(case * (risk >= c) / g_left) / np.sum(case / g_left)
        brute_fpr = np.mean(risk[control] >= c)
        k = np.argmin(np.abs(fpr - brute_fpr) + np.abs(tpr - brute_tpr))
        assert abs(fpr[k] - brute_fpr) < 1e-12 and abs(tpr[k] - brute_tpr) < 1e-12
    assert v.risk_events.sum() == case.sum() and v.risk_event_free.sum() == control.sum()


def _person_period_glm(hist, offset):
    """statsmodels' cloglog binomial GLM on the (time bin, score bin) cells up to the horizon, written out."""
    kh = hist.horizon_index(HORIZON)
    c = hist.counts
    n_j = c.sum(axis=(0, 1))
    with np.errstate(invalid="ignore"):  # an empty score bin has no cells below
        x = np.log(-np.log1p(-np.clip(hist.score_sum.sum(axis=(0, 1)) / n_j, 1e-6, 1 - 1e-6)))
    rows = []
    for k in range(kh):
        d = c[k, 1]
        if d.sum() == 0:
            continue
        at_risk = c[k:].sum(axis=(0, 1))
        rows += [(k, j, d[j], at_risk[j]) for j in range(x.size) if at_risk[j] > 0]
    rows = np.array(rows)
    ks = np.unique(rows[:, 0]).astype(int)
    design = (rows[:, :1] == ks[None, :]).astype(float)
    xs = x[rows[:, 1].astype(int)]
    endog = np.column_stack([rows[:, 2], rows[:, 3] - rows[:, 2]])
    family = sm.families.Binomial(link=sm.families.links.CLogLog())
    if offset:
        fit = sm.GLM(endog, design, offset=xs, family=family).fit(tol=1e-13)
        return np.log(np.exp(fit.params).sum())
    return sm.GLM(endog, np.column_stack([design, xs]), family=family).fit(tol=1e-13).params[-1]


@pytest.mark.parametrize("slope", [1.0, 0.6])
def test_the_grouped_calibration_fit_is_statsmodels_cloglog_glm(slope):
    time, event, risk = cohort(3, 4000, slope=slope)
    hist = SurvivalHistogram.from_patients(time, event, risk, time_edges=np.r_[np.linspace(0, 2, 21), np.inf],
                                           score_edges=np.linspace(0, 1, 21))
    fit = grouped_calibration(hist, HORIZON)
    assert abs(fit.intercept - _person_period_glm(hist, offset=True)) < 1e-8
    assert abs(fit.slope - _person_period_glm(hist, offset=False)) < 1e-8
    if slope == 1.0:  # the true risks: intercept 0 and slope 1 up to sampling and binning
        assert abs(fit.intercept) < 0.1 and abs(fit.slope - 1.0) < 0.1
    else:  # risks too flat (x shrunk by 0.6): the slope sees it
        assert fit.slope > 1.4


def test_the_intervals_include_the_noise_and_the_sites_are_pooled():
    time, event, risk = cohort(11, 3000)
    edges, scores = np.r_[np.linspace(0, 2, 11), np.inf], np.linspace(0, 1, 11)
    rng = np.random.default_rng(4)
    sigma, sums_sigma = survival_release_scales(2.0, risk_sums=True)
    sites = 3
    rel = draw_survival_release(time, event, risk, time_edges=edges, score_edges=scores, rng=rng, sigma=sigma,
                                noise=lambda s, shape: discrete_laplace_noise(s, shape, rng), risk_sums=True,
                                sums_sigma=sums_sigma, groups=np.arange(time.size) % sites, n_groups=sites)
    sd, sums_sd = discrete_laplace_sd(sigma), discrete_laplace_sd(sums_sigma) / SUMS_RESOLUTION
    hist = rel.histogram(edges, scores)
    own = {f"s{i}": SiteRelease(type(rel)(rel.counts[i:i + 1], rel.offsets[i:i + 1], rel.squares[i:i + 1])
                                .histogram(edges, scores), sd, sums_sd) for i in range(sites)}
    noisy = survival_validation(hist, HORIZON, count_sd=sd * np.sqrt(sites), sums_sd=sums_sd * np.sqrt(sites),
                                sites=own, draws=60)
    quiet = survival_validation(hist, HORIZON, count_sd=0.0, draws=60, groups=[g.score_bins[0] for g in noisy.groups]
                                + [hist.shape[2]])
    assert noisy.brier.se > 1.1 * quiet.brier.se and noisy.auc.se > quiet.auc.se
    for e in (noisy.auc, noisy.uno_c, noisy.brier, noisy.oe, noisy.calibration_slope):
        assert e.lower < e.value < e.upper
    assert set(noisy.pooled) == {"auc", "harrell_c", "uno_c", "oe"}
    pooled = noisy.pooled["auc"]
    assert pooled.sites == sites and pooled.prediction_lower <= pooled.lower <= pooled.estimate <= pooled.upper
    assert min(s.auc.value for s in noisy.sites) <= pooled.estimate <= max(s.auc.value for s in noisy.sites)
    assert "privacy noise" in noisy.includes
    with pytest.raises(dataclasses.FrozenInstanceError):
        noisy.horizon = 2.0
    with pytest.raises(ValueError, match="horizon must lie in"):
        survival_validation(hist, 5.0, count_sd=1.0, draws=2)
