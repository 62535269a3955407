"""Figures to publish: a one-line title with privacy in the caption, a forest plot with estimate [CI], n and weight
columns and a drawn prediction interval, a decision curve with sane axes (as rms val.prob, metafor and dcurves)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from analyst.display import pyplot
from analyst.protocols.histogram.protocol import HISTOGRAM_GUARANTEE, HistogramOptions, histogram_result
from analyst.protocols.histogram.release import HistogramSite
from analyst.result.brief import plain
from tests.analyst.results import common


def by_site_result(sites, n=1500, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(0.35 + 0.25 * y, 0.15), 0.001, 0.999)
    edges = np.linspace(0, 1, 11)
    releases, budgets = {}, {}
    for k, name in enumerate(sites):
        part = slice(k * n // len(sites), (k + 1) * n // len(sites))
        c0, c1 = (np.histogram(s[part][y[part] == c], edges)[0] for c in (0, 1))
        releases[name] = HistogramSite(c0, c1, 0.0, 0.0, 5.0, 0.01, f"r{k}", False, 0.5, {}, 0.0)
        budgets[name] = SimpleNamespace(epsilon_spent=0.5, budget_epsilon=10.0, budget_delta=0.05, mu_spent=0.0,
                                        mu_remaining=2.0)
    return histogram_result(common("histogram", HISTOGRAM_GUARANTEE, "add or remove one patient", sites), edges,
                            releases, budgets, HistogramOptions(by_site=True, decision_curve=True))


@pytest.fixture(scope="module")
def five():
    return by_site_result(("s1", "s2", "s3", "s4", "s5"))


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]


def test_the_validation_figure_has_a_one_line_title_and_privacy_in_its_caption(five, tmp_path):
    fig = five.plot()
    title = fig._suptitle.get_text()
    assert "\n" not in title and len(title) < 130 and "histogram protocol" in title and "n = ~1500" in title
    caption = " ".join(fig._supxlabel.get_text().split())
    assert caption.startswith("Privacy: ") and plain(HISTOGRAM_GUARANTEE) in caption
    assert [ax.get_title() for ax in fig.axes[:2]] == ["ROC curve", "Calibration"]
    fig.savefig(tmp_path / "v.png")
    pyplot().close(fig)


def test_the_forest_plot_lists_estimate_ci_n_and_weight_and_draws_the_prediction_interval(five):
    h = five.heterogeneity
    fig = five.plot_forest()
    texts = _texts(fig)
    p = h.auc
    # the weights: 1 / (v + tau^2) on the logit scale, computed here from the per-site rows
    v = np.array([s.auc_variance / (s.auc * (1 - s.auc)) ** 2 for s in h.sites])
    w = 1 / (v + p.tau2)
    assert h.auc_weights() == pytest.approx(list(w / w.sum()), rel=1e-9)
    for s, share in zip(h.sites, w / w.sum()):
        assert f"{s.auc:.3f} [{s.auc_lower:.3f}, {s.auc_upper:.3f}]" in texts
        assert f"{100 * share:.1f}%" in texts and f"{s.n:.0f}" in texts
    assert {"Site", "n", "Weight"} <= set(texts) and any(t.startswith("AUC [95% CI]") for t in texts)
    assert f"[{p.prediction_lower:.3f}, {p.prediction_upper:.3f}]" in " ".join(texts)
    ax = fig.axes[0]
    # the prediction interval is drawn: a segment from its lower to its upper limit on its own row
    segments = [seg for c in ax.collections for seg in getattr(c, "get_segments", lambda: [])()]
    assert any(np.allclose(sorted(seg[:, 0]), [p.prediction_lower, p.prediction_upper]) and np.allclose(seg[:, 1], -1)
               for seg in segments)
    assert ax.get_legend() is None  # every row is labelled: no legend entry for something not drawn
    footer = " ".join(t for t in texts if "tau" in t)
    assert f"= {p.tau2:.3g}" in footer and f"= {100 * p.i2:.0f}%" in footer
    pyplot().close(fig)


def test_with_two_sites_no_prediction_interval_is_claimed():
    res = by_site_result(("a", "b"))
    fig = res.plot_forest()
    texts = " ".join(_texts(fig))
    assert "prediction interval (new site)" not in texts and "needs at least 3 sites" in texts
    assert res.heterogeneity.auc.tau2 > 0 or res.heterogeneity.auc.i2 == 0  # I^2 from the same tau^2
    pyplot().close(fig)


def test_the_decision_curve_keeps_sane_axes_at_extreme_thresholds(five):
    dc = five.decision_curve
    t = 1 / (1 + np.exp(-np.linspace(-5, 5, 21)))[1:-1]  # 20 logit-spaced edges: most below 6 % or above 70 %
    treat_all = dc.prevalence - (1 - dc.prevalence) * t / (1 - t)
    wide = dataclasses.replace(dc, thresholds=t, net_benefit=np.interp(t, dc.thresholds, dc.net_benefit),
                               lower=np.interp(t, dc.thresholds, dc.lower) - t / (1 - t), upper=np.interp(
                                   t, dc.thresholds, dc.upper), treat_all=treat_all)
    assert wide.lower.min() < -50 and treat_all.min() < -40  # the old axis went down to the lowest limit
    fig = dataclasses.replace(five, decision_curve=wide).plot_decision_curve()
    ax = fig.axes[0]
    bottom, top = ax.get_ylim()
    assert -0.3 < bottom < 0 and max(dc.prevalence, np.max(wide.upper)) <= top < 1.2
    assert ax.get_xlim() == pytest.approx((0.0, min(1.0, t.max() + 0.05)))
    line = next(x for x in ax.lines if x.get_label() == "model")
    assert np.allclose(line.get_xdata(), t)  # drawn at the thresholds the result holds
    pyplot().close(fig)
