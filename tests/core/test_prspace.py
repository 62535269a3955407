"""PR space (dsroc.pr.space, dsroc.pr.estimators): Boyd's test vectors T1-T4 and T14, and brute-force checks of every estimator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dsroc.pr import estimators as A
from dsroc.pr import space as P

# T1: Boyd 2014 Table 4.1 -- 20 scores 0.95 ... 0.00, positives at 0.95, 0.80, 0.75, 0.50, 0.15 (n1=5, n0=15).
T1_SCORES = np.round(np.arange(0.95, -0.01, -0.05), 2)
T1_LABELS = np.isin(T1_SCORES, [0.95, 0.80, 0.75, 0.50, 0.15]).astype(int)


def test_t1_table_4_1_estimators_and_intervals():
    assert T1_SCORES.size == 20 and T1_LABELS.sum() == 5
    pts = P.pr_points(T1_SCORES, T1_LABELS)
    # The printed precision column (one row per prefix): 1.00, .50, .33, .50, .60, ..., .25.
    assert np.round(pts.precision[1:6], 2).tolist() == [1.00, 0.50, 0.33, 0.50, 0.60]
    assert round(pts.precision[-1], 2) == 0.25
    assert round(P.average_precision(T1_SCORES, T1_LABELS), 6) == 0.558824
    assert round(A.aucpr_lower_trapezoid(pts), 6) == 0.321078
    assert round(A.aucpr_upper_trapezoid(pts), 6) == 0.383333
    assert round(A.aucpr_interpolated(pts, aggregate="median"), 6) == 0.320083
    assert round(A.aucpr_interpolated(pts, aggregate="median", first_segment=True), 6) == 0.420083
    assert round(A.aucpr_interpolated(pts, aggregate="mean"), 6) == 0.333334
    assert round(P.ap_min(5, 15), 6) == 0.161468
    binomial = A.aucpr_interval(T1_SCORES, T1_LABELS, method="binomial")
    assert (round(binomial.lower, 4), round(binomial.upper, 4)) == (0.1236, 0.9940)
    logit = A.aucpr_interval(T1_SCORES, T1_LABELS, method="logit")
    assert (round(logit.lower, 4), round(logit.upper, 4)) == (0.1782, 0.8810)


def test_t2_slides_toy():
    scores = np.array([1, 0.8, 0.7, 0.6, 0.5, 0.3, 0.2, 0.1])
    labels = np.array([1, 1, 0, 1, 0, 0, 1, 0])
    pts = P.pr_points(scores, labels)
    at = {float(c): (tp, fp) for c, tp, fp in zip(pts.thresholds, pts.tp, pts.fp)}
    assert at[0.8] == (2, 0) and at[0.2] == (4, 3)
    assert round(P.average_precision(scores, labels), 6) == 0.830357


def test_t3_aucpr_min_and_ap_min():
    expected = {0.01: 0.005017, 0.04: 0.020272, 0.1: 0.051755, 0.25: 0.136954, 1 / 3: 0.189070, 0.5: 0.306853}
    for pi, value in expected.items():
        assert round(P.aucpr_min(pi), 6) == value
    # Quoted ranges: pi=0.5 [0.31, 1]; pi=0.05 [0.02, 1] (truncated, not rounded: 0.0254); pi=0.1 about 0.05.
    assert round(P.aucpr_min(0.5), 2) == 0.31 and math.floor(100 * P.aucpr_min(0.05)) / 100 == 0.02
    assert round(P.aucpr_min(0.1), 2) == 0.05
    assert round(P.aucpr_min(0.5) - P.aucpr_min(0.01), 1) == 0.3
    assert round(P.ap_min(1000, 1000), 6) == 0.307103
    assert P.aucpr_min(0.0) == 0.0 and P.aucpr_min(1.0) == 1.0
    # Against the integral of the minimum precision curve, on [0, 1] and on a recall range.
    for pi in (0.03, 0.3, 0.8):
        full = integrate.quad(lambda r: P.pr_min_precision(r, pi), 0, 1)[0]
        part = integrate.quad(lambda r: P.pr_min_precision(r, pi), 0.2, 0.7)[0]
        assert P.aucpr_min(pi) == pytest.approx(full, abs=1e-12)
        assert P.aucpr_min(pi, recall_range=(0.2, 0.7)) == pytest.approx(part, abs=1e-12)
    # AP_MIN brute force: the all-negatives-first ranking.
    scores = np.arange(37.0)
    labels = (scores < 12).astype(int)  # the 12 positives get the lowest scores
    assert P.ap_min(12, 25) == pytest.approx(P.average_precision(scores, labels), abs=1e-14)


def test_t4_table_3_3_aucnpr():
    # Boyd 2014 Table 3.3, every row: ratio 1:k gives pi = 1/(1+k) (downsampled), pi = 1/25 (original skew).
    # The thesis normalised unrounded AUCPRs, so each printed AUCNPR must lie within the image of the printed
    # AUCPR's rounding interval [a - 0.0005, a + 0.0005] (widened by the AUCNPR's own rounding).
    table = {1: (0.851, 0.785, 0.330, 0.316), 2: (0.740, 0.680, 0.329, 0.315), 3: (0.678, 0.627, 0.343, 0.329),
             4: (0.701, 0.665, 0.314, 0.299), 5: (0.599, 0.560, 0.334, 0.320), 10: (0.383, 0.352, 0.258, 0.242),
             24: (0.363, 0.349, 0.363, 0.349)}
    for k, (down, down_n, orig, orig_n) in table.items():
        for pi, value, expected in ((1 / (1 + k), down, down_n), (1 / 25, orig, orig_n)):
            lo, hi = P.aucnpr(value - 0.0005, pi), P.aucnpr(value + 0.0005, pi)
            assert lo - 0.0005 <= expected <= hi + 0.0005, (k, pi, value, expected, lo, hi)
    assert round(P.aucnpr(0.851, 0.5), 3) == 0.785  # (0.363 at pi = 0.04 gives 0.3498, printed 0.349)
    assert P.aucnpr(0.4, 0.0) == 0.0 and P.aucnpr(0.4, 1.0) == 1.0


def test_t5_table_3_1_achievable_precision():
    # n1=100, n0=200: precision 0.2 is achievable up to recall 0.5 and no further.
    pi = 100 / 300
    assert P.pr_min_precision(0.5, pi) == pytest.approx(0.2)
    assert P.pr_min_precision(0.51, pi) > 0.2


@pytest.mark.parametrize(
    "negative, positive, expected",
    [
        (stats.norm(0, 1), stats.norm(1, 1), (0.2928, 0.7530)),
        (stats.beta(2, 5), stats.beta(5, 2), (0.8096, 0.9609)),
        (stats.uniform(0, 1), stats.uniform(0.5, 1), (0.6579, 0.8873)),
    ],
)
def test_t14_true_aucpr(negative, positive, expected):
    for pi, value in zip((0.1, 0.5), expected):
        assert round(A.aucpr_from_distributions(negative, positive, pi), 4) == value


# ---- brute force -------------------------------------------------------------------------------------


def brute_points(scores, labels):
    """Every threshold by direct counting: (tp, fp) at each distinct score, descending, after (0, 0)."""
    out = [(0, 0)]
    for c in sorted(set(scores.tolist()), reverse=True):
        out.append((sum(1 for s, y in zip(scores, labels) if s >= c and y == 1),
                    sum(1 for s, y in zip(scores, labels) if s >= c and y == 0)))
    return out


def brute_ap(scores, labels):
    pos = sorted((s for s, y in zip(scores, labels) if y == 1), reverse=True)
    neg = [s for s, y in zip(scores, labels) if y == 0]
    return sum(j / (j + sum(1 for x in neg if x >= yj)) for j, yj in enumerate(pos, start=1)) / len(pos)


def brute_extremes(points, n1):
    by_recall = {}
    for tp, fp in points[1:]:
        if tp > 0:
            by_recall.setdefault(tp / n1, []).append(tp / (tp + fp))
    return sorted(by_recall.items())


def brute_trapezoid(points, n1, upper):
    ext = brute_extremes(points, n1)
    area = 0.0
    for (r1, p1), (r2, p2) in zip(ext[:-1], ext[1:]):
        left = max(p1) if upper else min(p1)
        right = min(p2) if upper else max(p2)
        area += (left + right) / 2 * (r2 - r1)
    return area


def brute_interpolated(points, n1, agg):
    """Davis-Goadrich by interpolating the counts: from (tp1, fp1) to (tp2, fp2), fp grows linearly with tp."""
    ext = brute_extremes(points, n1)
    pick = {"max": max, "mean": lambda v: sum(v) / len(v), "median": lambda v: float(np.median(v))}[agg]
    area = 0.0
    for (r1, ps1), (r2, ps2) in zip(ext[:-1], ext[1:]):
        p1, p2 = pick(ps1), pick(ps2)
        tp1, tp2 = r1 * n1, r2 * n1
        fp1, fp2 = tp1 * (1 - p1) / p1, tp2 * (1 - p2) / p2
        slope = (fp2 - fp1) / (tp2 - tp1)
        area += integrate.quad(lambda r: r * n1 / (r * n1 + fp1 + slope * (r * n1 - tp1)), r1, r2, epsabs=1e-13)[0]
    return area


@pytest.mark.parametrize("seed", range(6))
def test_estimators_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 40))
    labels = (rng.random(n) < 0.35).astype(int)
    labels[:2] = [0, 1]
    scores = np.round(rng.normal(size=n) + labels, 1)  # rounding makes ties
    pts = P.pr_points(scores, labels)
    assert list(zip(pts.tp.astype(int).tolist(), pts.fp.astype(int).tolist())) == brute_points(scores, labels)
    by_class = P.pr_points_by_class(np.sort(scores[labels == 0]), scores[labels == 1][::-1])  # sorted or not
    for field in pts._fields:
        np.testing.assert_array_equal(getattr(by_class, field), getattr(pts, field))
    n1 = int(labels.sum())
    brute = brute_points(scores, labels)
    assert P.average_precision(scores, labels) == pytest.approx(brute_ap(scores, labels), abs=1e-12)
    assert A.aucpr_lower_trapezoid(pts) == pytest.approx(brute_trapezoid(brute, n1, False), abs=1e-12)
    assert A.aucpr_upper_trapezoid(pts) == pytest.approx(brute_trapezoid(brute, n1, True), abs=1e-12)
    for agg in ("max", "mean", "median"):
        assert A.aucpr_interpolated(pts, aggregate=agg) == pytest.approx(brute_interpolated(brute, n1, agg), abs=1e-9)


def test_binormal_estimator_against_direct_integral():
    rng = np.random.default_rng(3)
    x, y = rng.normal(0, 1, 300), rng.normal(1.2, 1.5, 100)
    scores, labels = np.concatenate([x, y]), np.r_[np.zeros(300), np.ones(100)].astype(int)
    pi = 0.25
    f = lambda t: pi * t / (pi * t + (1 - pi) * stats.norm.cdf((x.mean() - y.mean()) / x.std(ddof=1)
                                                               + y.std(ddof=1) / x.std(ddof=1) * stats.norm.ppf(t)))
    grid = np.linspace(0, 1, 200_001)[1:-1]
    direct = np.trapezoid(f(grid), grid)
    assert A.aucpr(scores, labels, estimator="binormal") == pytest.approx(direct, abs=1e-5)


def test_points_from_counts_equal_points_from_binned_scores():
    rng = np.random.default_rng(5)
    scores, labels = rng.integers(0, 8, 200).astype(float), (rng.random(200) < 0.3).astype(int)
    h0 = np.bincount(scores[labels == 0].astype(int), minlength=8)
    h1 = np.bincount(scores[labels == 1].astype(int), minlength=8)
    from_counts = P.pr_points_from_counts(h0, h1)
    from_scores = P.pr_points(scores, labels)
    keep = np.r_[True, (h0 + h1)[::-1] > 0]  # empty bins add a repeated point
    assert np.array_equal(from_counts.tp[keep], from_scores.tp) and np.array_equal(from_counts.fp[keep], from_scores.fp)
    assert P.average_precision(points=from_counts) == pytest.approx(P.average_precision(scores, labels), abs=1e-12)


def test_bootstrap_and_cross_validation_intervals():
    rng = np.random.default_rng(11)
    scores = np.r_[rng.normal(0, 1, 400), rng.normal(1.5, 1, 100)]
    labels = np.r_[np.zeros(400), np.ones(100)].astype(int)
    boot = A.aucpr_interval(scores, labels, method="bootstrap", rng=np.random.default_rng(1), n_boot=300)
    # The stratified bootstrap of AP: by hand with the same generator.
    g = np.random.default_rng(1)
    neg, pos = np.flatnonzero(labels == 0), np.flatnonzero(labels == 1)
    reps = []
    for _ in range(300):
        idx = np.concatenate([g.choice(neg, neg.size), g.choice(pos, pos.size)])
        reps.append(brute_ap(scores[idx], labels[idx]))
    assert (boot.lower, boot.upper) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])), abs=1e-12)
    assert boot.lower < boot.estimate < boot.upper
    cv = A.aucpr_interval(scores, labels, method="cross_validation", rng=np.random.default_rng(2), folds=10)
    assert cv.lower < cv.estimate < cv.upper and cv.upper - cv.lower < 0.3


@pytest.mark.parametrize(
    "scores, labels, match",
    [
        ([0.1, np.nan, 0.3], [0, 1, 1], "scores"),
        ([0.1, 0.2, 0.3], [0, 2, 1], "labels"),
        ([0.1, 0.2, 0.3], [1, 1, 1], "negatives"),
        ([0.1, 0.2, 0.3], [0, 0, 0], "positives"),
    ],
)
def test_bad_input_named(scores, labels, match):
    with pytest.raises(ValueError, match=match):
        A.aucpr(scores, labels)
    with pytest.raises(ValueError, match=match):
        P.average_precision(scores, labels)


def test_bad_options_named():
    with pytest.raises(ValueError, match="prevalence"):
        P.aucpr_min(1.5)
    with pytest.raises(ValueError, match="recall_range"):
        P.aucpr_min(0.3, recall_range=(0.5, 0.2))
    with pytest.raises(ValueError, match="estimator"):
        A.aucpr([0.1, 0.9], [0, 1], estimator="roc")
    with pytest.raises(ValueError, match="rng"):
        A.aucpr_interval([0.1, 0.9, 0.3, 0.7], [0, 1, 0, 1], method="bootstrap")
    assert math.isfinite(A.aucpr([0.1, 0.9], [0, 1]))


def test_batched_average_precision_equals_the_single_data_set_form():
    rng = np.random.default_rng(17)
    n_groups = 12
    groups = np.sort(rng.integers(0, n_groups, 600))
    groups[:n_groups] = np.arange(n_groups)
    groups = np.sort(groups)
    labels = (rng.random(600) < 0.3).astype(int)
    scores = np.round(rng.normal(size=600) + labels, 1)
    got = P.grouped_average_precision(scores, labels, groups, n_groups=n_groups)
    for g in range(n_groups):
        s, y = scores[groups == g], labels[groups == g]
        expected = brute_ap(s, y) if y.sum() else np.nan
        assert got[g] == pytest.approx(expected, abs=1e-12, nan_ok=True)
    h0 = rng.random((4, 7)) * 10
    h1 = rng.random((4, 7)) * 5
    batched = P.average_precision_from_counts(h0, h1)
    for i in range(4):
        assert batched[i] == pytest.approx(P.average_precision(points=P.pr_points_from_counts(h0[i], h1[i])), abs=1e-13)
