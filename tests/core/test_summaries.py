"""Brier score, calibration (with suppression), confusion matrix and two-pass moments against pandas/numpy."""

import numpy as np
import pandas as pd
import pytest

from dsroc import (
    DisclosureError,
    aggregate_brier,
    aggregate_calibration,
    aggregate_confusion,
    brier_parts,
    brier_score,
    calibration_edges,
    calibration_parts,
    confusion_parts,
    mean_parts,
    pooled_mean,
    pooled_sq_dev,
    pooled_variance,
    sq_dev_parts,
)


def _sample(seed, n=3000):
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 3, n)
    y = (rng.random(n) < s).astype(int)
    return s, y


def test_brier_matches_definition_and_pools_over_sites():
    s, y = _sample(1)
    assert brier_score(s, y) == pytest.approx(np.mean((y - s) ** 2), rel=1e-12)
    sites = np.array_split(np.arange(s.size), 4)
    assert aggregate_brier(brier_parts(s[i], y[i]) for i in sites) == pytest.approx(brier_score(s, y), rel=1e-12)
    with pytest.raises(ValueError, match=r"\[0.0, 1.0\]"):
        brier_score([0.2, 1.2], [0, 1])


def test_calibration_bins_match_pandas_cut():
    s, y = _sample(2)
    s[:3] = [0.0, 1.0, 0.1]  # boundary scores have a bin
    edges = calibration_edges(10)
    curve = aggregate_calibration([calibration_parts(s, y, edges, privacy_level=1)])
    frame = pd.DataFrame({"s": s, "y": y, "bin": pd.cut(s, edges, right=False, include_lowest=True)})
    frame.loc[frame.s == 1.0, "bin"] = frame["bin"].cat.categories[-1]
    ref = frame.groupby("bin", observed=False).agg(n=("y", "size"), obs=("y", "mean"), pred=("s", "mean"))
    np.testing.assert_array_equal(curve.count, ref.n.to_numpy())
    np.testing.assert_allclose(curve.observed, ref.obs.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(curve.predicted, ref.pred.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(curve.lower, edges[:-1])
    np.testing.assert_allclose(curve.upper, edges[1:])
    assert curve.count.sum() == s.size


def test_suppressed_cells_release_nothing_and_are_listed():
    # two sparse bins holding 3 + 3 >= q together: no secondary suppression needed
    s = np.r_[np.full(7, 0.05), np.full(3, 0.45), np.full(3, 0.55), np.full(6, 0.95)]
    y = np.r_[np.zeros(7), np.zeros(3), np.ones(3), np.ones(6)].astype(int)
    parts = calibration_parts(s, y, calibration_edges(10), privacy_level=5)
    assert parts.bins.tolist() == [0, 9]
    assert parts.count.tolist() == [7, 6]
    assert 5 in parts.suppressed.tolist() and len(parts.suppressed) == 8
    assert len(parts.sum_score) == len(parts.sum_label) == 2  # nothing about bin 5 travels
    other = calibration_parts(np.full(10, 0.55), np.ones(10, int), calibration_edges(10), privacy_level=5)
    curve = aggregate_calibration([parts, other], site_names=["a", "b"])
    assert ("a", 5) in curve.suppressed and ("b", 5) not in curve.suppressed
    assert curve.count[5] == 10 and curve.observed[5] == 1.0  # only b's cell enters the aggregate
    assert np.isnan(curve.observed[3])  # no site released bin 3
    assert curve.per_site["a"].bins.tolist() == [0, 9]


def test_calibration_validation():
    with pytest.raises(ValueError, match="strictly increasing"):
        calibration_edges(edges=[0, 0.5, 0.5, 1])
    with pytest.raises(ValueError, match="privacy_level"):
        calibration_parts([0.1], [1], calibration_edges(2), privacy_level=0)
    a = calibration_parts([0.1] * 5, [1] * 5, calibration_edges(2), privacy_level=1)
    b = calibration_parts([0.1] * 5, [1] * 5, calibration_edges(4), privacy_level=1)
    with pytest.raises(ValueError, match="same bin edges"):
        aggregate_calibration([a, b])


def test_confusion_matches_crosstab_and_refuses_small_cells():
    s, y = _sample(3)
    parts = [confusion_parts(s[i], y[i], 0.4, privacy_level=5) for i in np.array_split(np.arange(s.size), 3)]
    pooled = aggregate_confusion(parts)
    tab = pd.crosstab(s >= 0.4, y)
    assert (pooled.tp, pooled.fp, pooled.fn, pooled.tn) == (tab.loc[True, 1], tab.loc[True, 0], tab.loc[False, 1], tab.loc[False, 0])
    assert pooled.sensitivity == pytest.approx(np.mean(s[y == 1] >= 0.4))
    assert pooled.specificity == pytest.approx(np.mean(s[y == 0] < 0.4))
    assert pooled.ppv == pytest.approx(np.mean(y[s >= 0.4]))
    assert pooled.npv == pytest.approx(np.mean(1 - y[s < 0.4]))
    with pytest.raises(DisclosureError) as err:
        confusion_parts([0.1, 0.2, 0.9, 0.95, 0.99], [0, 0, 1, 1, 1], 0.5, privacy_level=3)
    assert "q = 3" in str(err.value) and "2" not in str(err.value).replace("q = 3", "")


def test_two_pass_moments_equal_numpy():
    rng = np.random.default_rng(4)
    x = rng.normal(1e6, 1.0, 10_000)  # large offset: the one-pass formula would lose digits
    sites = np.array_split(x, 5)
    mean, n = pooled_mean(mean_parts(v) for v in sites)
    assert n == x.size and mean == pytest.approx(x.mean(), rel=1e-14)
    var = pooled_variance((sq_dev_parts(v, mean) for v in sites), n)
    assert var == pytest.approx(x.var(ddof=1), rel=1e-9)
    with pytest.raises(ValueError, match="n >= 2"):
        pooled_variance([0.0], 1)
    # One pass: each site's squared deviations from its own mean, pooled by the parallel update.
    local = [sq_dev_parts(v, v.mean()) for v in sites]
    one_pass = pooled_sq_dev([mean_parts(v) for v in sites], local)
    assert one_pass == pytest.approx(((x - x.mean()) ** 2).sum(), rel=1e-9)
    uneven = [x[:3], x[3:10], x[10:]]
    assert pooled_sq_dev([mean_parts(v) for v in uneven], [sq_dev_parts(v, v.mean()) for v in uneven]) == \
        pytest.approx(((x - x.mean()) ** 2).sum(), rel=1e-9)
    with pytest.raises(ValueError, match="one local sum"):
        pooled_sq_dev([mean_parts(x)], [])


def test_secondary_suppression_hides_a_sparse_bin_from_the_complement():
    # 3 patients in bin 5 (< q): n minus the released counts would reveal them, so the smallest released
    # bin is withheld too, and the withheld bins together hold at least q patients.
    s = np.r_[np.full(20, 0.05), np.full(6, 0.35), np.full(3, 0.55), np.full(9, 0.95)]
    y = np.r_[np.zeros(20), np.ones(6), np.ones(3), np.ones(9)].astype(int)
    parts = calibration_parts(s, y, calibration_edges(10), privacy_level=5)
    assert parts.bins.tolist() == [0, 9]
    assert 3 in parts.suppressed.tolist() and 5 in parts.suppressed.tolist()
    assert s.size - parts.count.sum() == 9  # what the complement reveals: 3 + 6 >= q
    # Nothing sparse: nothing extra withheld.
    full = calibration_parts(s[s != 0.55], y[s != 0.55], calibration_edges(10), privacy_level=5)
    assert full.bins.tolist() == [0, 3, 9]
