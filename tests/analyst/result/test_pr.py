"""Precision-recall for a validation (analyst.result.pr): post-processing of the release, over real TLS sites, and the plot."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import dsroc
from analyst.result.pr import PrecisionRecallPlot, pr_from_counts, pr_from_released_scores


def brute_ap(scores, labels):
    pos = sorted((s for s, y in zip(scores, labels) if y == 1), reverse=True)
    neg = [s for s, y in zip(scores, labels) if y == 0]
    return sum(j / (j + sum(1 for x in neg if x >= yj)) for j, yj in enumerate(pos, start=1)) / len(pos)


def test_released_scores_summary_against_brute_force():
    rng = np.random.default_rng(1)
    s0, s1 = rng.normal(0, 1, 150), rng.normal(1, 1, 50)
    pr = pr_from_released_scores(s0, s1)
    scores, labels = np.r_[s0, s1], np.r_[np.zeros(150), np.ones(50)].astype(int)
    assert pr.ap == pytest.approx(brute_ap(scores, labels), abs=1e-12)
    assert pr.prevalence == 0.25 and pr.n1 == 50 and pr.n0 == 150
    assert pr.aucpr_min == pytest.approx(1 + 0.75 * np.log(0.75) / 0.25)
    assert pr.ap_min == pytest.approx(sum(i / (i + 150) for i in range(1, 51)) / 50)
    assert pr.aucnpr == pytest.approx((pr.ap - pr.aucpr_min) / (1 - pr.aucpr_min))
    lo, hi = dsroc.aucpr_interval(scores, labels, method="logit")[1:3]
    assert pr.ap_ci == pytest.approx((lo, hi))
    assert "sampling only" in pr.notes[0]


def test_histogram_summary_from_counts():
    h0, h1 = np.array([40.0, 30.5, 20.0, 9.5]), np.array([2.0, 5.0, 10.0, 13.0])
    pr = pr_from_counts(h0, h1, np.linspace(0, 1, 5))
    binned = np.repeat(np.arange(4.0), [42, 35, 30, 23])
    # Integer check with rounded counts against the brute force on binned scores.
    pr_int = pr_from_counts(np.array([40, 30, 20, 10]), h1, np.linspace(0, 1, 5))
    labels = np.concatenate([np.r_[np.zeros(a), np.ones(b)] for a, b in zip([40, 30, 20, 10], [2, 5, 10, 13])])
    assert pr_int.ap == pytest.approx(brute_ap(binned, labels.astype(int)), abs=1e-12)
    assert pr.n0 == 100.0 and 0 < pr.ap < 1 and np.isfinite(pr.ap_min)


def test_display_shades_the_unachievable_region(tmp_path):
    rng = np.random.default_rng(2)
    pr = pr_from_released_scores(rng.normal(0, 1, 300), rng.normal(1.2, 1, 100))
    display = PrecisionRecallPlot(pr, "test").plot()
    ax = display.ax_
    shaded = ax.collections[0].get_paths()[0].vertices
    # The shaded polygon's top edge is the minimum PR curve: at recall 1 it reaches the prevalence.
    assert shaded[:, 1].max() == pytest.approx(pr.prevalence, abs=1e-9)
    assert any(abs(line.get_ydata()[0] - pr.prevalence) < 1e-12 for line in ax.get_lines())
    path = tmp_path / "pr.png"
    ax.figure.savefig(path)
    assert path.stat().st_size > 5000


def test_matplotlib_is_imported_only_when_drawing():
    code = "import sys, analyst.result.pr; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_validation_returns_pr_from_the_release(five_sites, pki, helpers):
    frames, addresses, _ = five_sites
    pooled = pd.concat(frames, ignore_index=True)
    with helpers.federation(addresses, pki) as fed:
        result = fed.validate("test", "y", protocol="paper", score="pred", epsilon=5, delta=0.01)
    # Negligible noise (Delta = 1e-9, no ties): the released ranking is the true one.
    s, y = pooled["pred"].to_numpy(), pooled["y"].to_numpy()
    assert result.pr.ap == pytest.approx(dsroc.average_precision(s, y), abs=1e-9)
    assert result.pr.n1 == result.n1 and result.pr.prevalence == pytest.approx(result.n1 / result.n)
    report = result.to_dict()["pr"]
    assert report["ap"] == pytest.approx(result.pr.ap) and len(report["recall"]) == len(report["precision"])
    assert "PR (paper protocol" in result.summary(verbose=True)
    assert PrecisionRecallPlot.from_result(result).summary is result.pr


def test_histogram_protocol_returns_pr_from_the_histograms(five_sites, pki, helpers):
    frames, addresses, _ = five_sites
    pooled = pd.concat(frames, ignore_index=True)
    with helpers.federation(addresses, pki) as fed:
        result = fed.validate("test", "y", score="pred", epsilon=5, delta=0.01, protocol="histogram")
    pr = result.pr
    edges = result.detail.validation.edges
    assert pr.n1 == pytest.approx(result.detail.validation.n1) and pr.source.startswith("histogram protocol")
    # The true binned AP (each bin one tie block, negatives first) by brute force; the noise moves it a little.
    bins = dsroc.histogram.grid.bin_index(pooled["pred"].to_numpy(), edges).astype(float)
    assert pr.ap == pytest.approx(brute_ap(bins, pooled["y"].to_numpy()), abs=0.03)
    assert PrecisionRecallPlot.from_result(result).summary.ap == pr.ap


def test_a_long_curve_keeps_evenly_spaced_points_and_every_summary():
    # 5000 released scores per class: the summaries use all 10 001 points (the AP as the mean precision at
    # each positive of the descending ranking, no ties here), the curve keeps CURVE_POINTS of them, among
    # them the first and the last.
    from analyst.result.pr import CURVE_POINTS

    rng = np.random.default_rng(4)
    s0, s1 = rng.normal(size=5000), rng.normal(0.7, size=5000)
    summary = pr_from_released_scores(s0, s1)
    points = dsroc.pr_points_by_class(s0, s1)
    y, s = np.r_[np.zeros(5000), np.ones(5000)], np.r_[s0, s1]
    ranked = y[np.argsort(-s)]
    hits = np.cumsum(ranked)[ranked == 1]
    assert summary.ap == pytest.approx(np.mean(hits / (np.flatnonzero(ranked == 1) + 1)), abs=1e-12)
    assert summary.recall.size == summary.precision.size == CURVE_POINTS < points.tp.size
    full = set(zip(points.recall.tolist(), np.nan_to_num(points.precision, nan=-1).tolist()))
    assert set(zip(summary.recall.tolist(), np.nan_to_num(summary.precision, nan=-1).tolist())) <= full
    assert summary.recall[0] == 0.0 and summary.recall[-1] == 1.0 and summary.precision[-1] == 0.5
