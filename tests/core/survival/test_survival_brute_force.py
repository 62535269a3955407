"""The binned survival estimators against plain per-patient loops of the stated conventions (ties on purpose).

The patients' times are already the grid's right edges and their risks the score bins' midpoints, so the
binned analysis loses nothing and must agree with the loops to rounding.
"""

import numpy as np
import pytest

from dsroc.survival import (
    SurvivalHistogram, brier_score, calibration_at, censoring_survival, cumulative_dynamic_auc, harrell_c,
    integrated_brier_score, kaplan_meier, scaled_brier, sum_histograms, uno_c,
)

TIME_EDGES = np.array([0.0, 1.0, 2.0, 3.5, 5.0, 6.0, 8.0, 10.0, np.inf])
LAST_TIME = 12.0  # the documented stand-in for the open last bin: 2 * 10 - 8
SCORE_EDGES = np.array([0.0, 0.1, 0.25, 0.4, 0.6, 0.8, 1.0])
TOL = 1e-12


def _data(seed=3, n=160):
    rng = np.random.default_rng(seed)
    points = np.r_[TIME_EDGES[1:-1], LAST_TIME]
    points = points[points != 5.0]  # an empty time bin: nobody at risk changes there
    mids = 0.5 * (SCORE_EDGES[:-1] + SCORE_EDGES[1:])
    j = rng.integers(0, mids.size, n)
    k = np.minimum(rng.geometric(0.12 + 0.25 * mids[j]) - 1, points.size - 1)  # higher risk, earlier time
    event = (rng.uniform(size=n) < 0.35 + 0.6 * mids[j]).astype(int)
    return points[k], event, mids[j]


@pytest.fixture(scope="module")
def data():
    time, event, risk = _data()
    hist = SurvivalHistogram.from_patients(time, event, risk, time_edges=TIME_EDGES, score_edges=SCORE_EDGES)
    no_sums = SurvivalHistogram(hist.counts, TIME_EDGES, SCORE_EDGES)
    return time, event, risk, hist, no_sums


# --- per-patient references -------------------------------------------------------------------------

def km_loop(time, event, t):
    """Life-table S(t) and Greenwood variance: the events of a bin among all followed into it, less half of
    those censored in it."""
    s, green = 1.0, 0.0
    for u in np.unique(time):
        if u > t:
            break
        n = np.sum(time >= u) - 0.5 * np.sum((time == u) & (event == 0))
        d = np.sum((time == u) & (event == 1))
        s *= 1.0 - d / n
        green += d / (n * (n - d)) if n > d else 0.0
    return s, (s * s * green if s > 0 else 0.0), green


def g_loop(time, event, t, *, left=False):
    """Censoring survival G(t) (or G(t-)): half of a bin's events are at risk of its censorings."""
    g = 1.0
    for u in np.unique(time):
        if u > t or (left and u == t):
            break
        at_risk = np.sum(time >= u) - 0.5 * np.sum((time == u) & (event == 1))
        if at_risk > 0:
            g *= 1.0 - np.sum((time == u) & (event == 0)) / at_risk
    return g


def case_g(time, event, u):
    """G at a case's time inside her bin: the geometric mean of G at the bin's edges."""
    return np.sqrt(g_loop(time, event, u, left=True) * g_loop(time, event, u))


def ordered(ri, rj):
    return 1.0 if ri > rj else 0.5 if ri == rj else 0.0


def auc_loop(time, event, risk, t):
    cases = [i for i in range(time.size) if event[i] == 1 and time[i] <= t]
    controls = [j for j in range(time.size) if time[j] > t]
    w = {i: 1.0 / case_g(time, event, time[i]) for i in cases}
    total_w = sum(w.values())
    auc = sum(w[i] * ordered(risk[i], risk[j]) for i in cases for j in controls) / (total_w * len(controls))
    p = {i: np.mean([ordered(risk[i], risk[j]) for j in controls]) for i in cases}
    q = {j: sum(w[i] * ordered(risk[i], risk[j]) for i in cases) / total_w for j in controls}
    variance = sum(w[i] ** 2 * (p[i] - auc) ** 2 for i in cases) / total_w**2 + \
        sum((q[j] - auc) ** 2 for j in controls) / len(controls) ** 2
    return auc, variance


def c_loop(time, event, risk, *, uno=False, tau=np.inf):
    num = den = 0.0
    for i in range(time.size):
        if event[i] != 1 or time[i] >= tau:
            continue
        w = 1.0 / case_g(time, event, time[i]) ** 2 if uno else 1.0
        for j in range(time.size):
            # one time bin: either order, so half a comparable pair
            o = 1.0 if time[i] < time[j] else 0.5 if time[i] == time[j] and i != j else 0.0
            num += o * w * ordered(risk[i], risk[j])
            den += o * w
    return num / den


def brier_loop(time, event, risk, t):
    total = 0.0
    for ti, di, ri in zip(time, event, risk):
        if ti <= t and di == 1:
            total += (1.0 - ri) ** 2 / case_g(time, event, ti)
        elif ti > t:
            total += ri**2 / g_loop(time, event, t)
    return total / time.size


# --- the comparisons --------------------------------------------------------------------------------

def test_binning_puts_every_patient_in_its_cell(data):
    time, event, risk, hist, _ = data
    assert hist.counts.sum() == time.size
    assert np.array_equal(hist.time_points, np.r_[TIME_EDGES[1:-1], LAST_TIME])
    assert hist.counts[3].sum() == 0  # the empty bin (time 5)
    k = 2
    in_cell = (time == hist.time_points[k]) & (event == 1) & (risk == 0.5)
    assert hist.counts[k, 1, 3] == in_cell.sum() > 0
    assert hist.score_sum[k, 1, 3] == pytest.approx(0.5 * in_cell.sum(), abs=TOL)
    # a time strictly inside a bin, or on its right edge, lands in the same bin (e_{k-1} < T <= e_k)
    inside = SurvivalHistogram.from_patients(np.array([0.0, 1.0, 1.5, 2.0, 11.0]), np.ones(5, int), np.full(5, 0.2),
                                             time_edges=TIME_EDGES, score_edges=SCORE_EDGES)
    assert inside.counts[:, 1, 1].tolist() == [2, 2, 0, 0, 0, 0, 0, 1]


def test_kaplan_meier_and_censoring_survival(data):
    time, event, _, hist, _ = data
    km, g = kaplan_meier(hist), censoring_survival(hist)
    for k, t in enumerate(hist.time_points):
        s, var, _ = km_loop(time, event, t)
        assert km.survival[k] == pytest.approx(s, abs=TOL)
        assert km.variance[k] == pytest.approx(var, abs=TOL)
        assert g.survival[k] == pytest.approx(g_loop(time, event, t), abs=TOL)
        assert g.left_limits[k] == pytest.approx(g_loop(time, event, t, left=True), abs=TOL)
    assert km.at(6.5) == km.survival[4] and km.at(0.5) == 1.0


def test_kaplan_meier_log_log_interval(data):
    time, event, _, hist, _ = data
    km = kaplan_meier(hist, level=0.9)
    z = 1.6448536269514722
    for k, t in enumerate(hist.time_points[:-1]):
        s, _, green = km_loop(time, event, t)
        theta = np.log(-np.log(s))
        sd = np.sqrt(green) / -np.log(s)
        assert km.lower[k] == pytest.approx(np.exp(-np.exp(theta + z * sd)), abs=TOL)
        assert km.upper[k] == pytest.approx(np.exp(-np.exp(theta - z * sd)), abs=TOL)


@pytest.mark.parametrize("horizon", [1.0, 3.5, 6.5, 10.0])
def test_cumulative_dynamic_auc_and_its_variance(data, horizon):
    time, event, risk, hist, _ = data
    result = cumulative_dynamic_auc(hist, horizon)
    auc, variance = auc_loop(time, event, risk, horizon)
    assert result.value == pytest.approx(auc, abs=TOL)
    assert result.variance == pytest.approx(variance, abs=TOL)
    assert result.lower < auc < result.upper


def test_harrell_and_uno_concordance(data):
    time, event, risk, hist, _ = data
    assert harrell_c(hist) == pytest.approx(c_loop(time, event, risk), abs=TOL)
    assert uno_c(hist) == pytest.approx(c_loop(time, event, risk, uno=True), abs=TOL)
    for tau in (3.5, 7.0, 10.0):
        assert uno_c(hist, tau) == pytest.approx(c_loop(time, event, risk, uno=True, tau=tau), abs=TOL)


@pytest.mark.parametrize("horizon", [1.0, 3.5, 6.5, 10.0])
def test_brier_and_scaled_brier(data, horizon):
    time, event, risk, hist, no_sums = data
    expected = brier_loop(time, event, risk, horizon)
    assert brier_score(hist, horizon) == pytest.approx(expected, abs=TOL)
    assert brier_score(no_sums, horizon) == pytest.approx(expected, abs=TOL)  # risks are the midpoints
    null = brier_loop(time, event, np.full(time.size, 1.0 - km_loop(time, event, horizon)[0]), horizon)
    assert scaled_brier(hist, horizon) == pytest.approx(1.0 - expected / null, abs=TOL)


def test_brier_from_score_sums_is_exact_for_any_risk_in_the_bin(data):
    time, event, _, _, _ = data
    risk = np.random.default_rng(8).uniform(size=time.size)
    hist = SurvivalHistogram.from_patients(time, event, risk, time_edges=TIME_EDGES, score_edges=SCORE_EDGES)
    assert brier_score(hist, 3.5) == pytest.approx(brier_loop(time, event, risk, 3.5), abs=TOL)


def test_integrated_brier_is_the_trapezoid_over_the_grid_points(data):
    time, event, risk, hist, _ = data
    points = hist.time_points[(hist.time_points >= 2.0) & (hist.time_points <= 8.0)]
    scores = [brier_loop(time, event, risk, t) for t in points]
    area = sum(0.5 * (scores[i] + scores[i + 1]) * (points[i + 1] - points[i]) for i in range(points.size - 1))
    assert integrated_brier_score(hist, 8.0, start=2.0) == pytest.approx(area / (points[-1] - points[0]), abs=TOL)
    assert integrated_brier_score(hist, 9.0, start=1.5) == integrated_brier_score(hist, 8.0, start=2.0)


def test_calibration_by_risk_group(data):
    time, event, risk, hist, _ = data
    result = calibration_at(hist, 6.0, [0, 2, 5, 6], level=0.95)
    z = 1.959963984540054
    mids = 0.5 * (SCORE_EDGES[:-1] + SCORE_EDGES[1:])
    for group, (a, b) in zip(result.groups + (result.overall,), [(0, 2), (2, 5), (5, 6), (0, 6)]):
        member = (risk >= mids[a] - 1e-9) & (risk <= mids[b - 1] + 1e-9)
        s, var, green = km_loop(time[member], event[member], 6.0)
        observed, expected = 1.0 - s, risk[member].mean()
        assert group.score_bins == (a, b) and group.patients == member.sum()
        assert group.observed == pytest.approx(observed, abs=TOL)
        assert group.expected == pytest.approx(expected, abs=TOL)
        assert group.ratio == pytest.approx(observed / expected, abs=TOL)
        half = z * np.sqrt(var) / observed
        assert group.ratio_lower == pytest.approx(observed / expected * np.exp(-half), abs=TOL)
        assert group.ratio_upper == pytest.approx(observed / expected * np.exp(half), abs=TOL)
        sd = np.sqrt(green) / -np.log(s)
        assert group.observed_lower == pytest.approx(1.0 - np.exp(-np.exp(np.log(-np.log(s)) - z * sd)), abs=TOL)
        assert group.observed_lower < observed < group.observed_upper


def test_pooled_sites_equal_the_pooled_patients(data):
    time, event, risk, hist, _ = data
    parts = [SurvivalHistogram.from_patients(time[s], event[s], risk[s], time_edges=TIME_EDGES, score_edges=SCORE_EDGES)
             for s in (slice(0, 50), slice(50, 120), slice(120, None))]
    pooled = sum_histograms(parts)
    assert np.array_equal(pooled.counts, hist.counts)
    assert np.allclose(pooled.score_sq_sum, hist.score_sq_sum, rtol=0, atol=TOL)
    assert np.array_equal((parts[0] + parts[1] + parts[2]).counts, hist.counts)
    assert harrell_c(pooled) == pytest.approx(harrell_c(hist), abs=TOL)


def test_the_open_last_bin_stands_for_its_documented_time(data):
    time, event, risk, hist, _ = data
    closed = SurvivalHistogram(hist.counts, np.r_[TIME_EDGES[:-1], LAST_TIME], SCORE_EDGES)
    assert np.array_equal(kaplan_meier(closed).survival, kaplan_meier(hist).survival)
    assert integrated_brier_score(closed, 10.0) == pytest.approx(integrated_brier_score(hist, 10.0), abs=TOL)
    assert uno_c(closed, 11.0) == uno_c(hist, 11.0)
