"""Result objects and displays, built from a pooled dsroc computation (no server needed)."""

import json

import numpy as np
import pytest
from scipy.stats import norm

import dsroc
from analyst.display import CalibrationDisplay, RocCurveDisplay
from analyst.report import write_report
from analyst.result import SitePrivacy, TestResult, ValidationResult


def make_result(seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 400)
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.15), 0, 1)
    fit = dsroc.fit_rocglm(dsroc.RocGlmParts.from_placements(
        dsroc.placement_values(s[y == 0], s[y == 1]), None))
    var = dsroc.delong_variance(s, y)
    ci = dsroc.auc_ci(fit.auc, var)
    halves = [np.arange(200), np.arange(200, 400)]
    cal = dsroc.aggregate_calibration(
        [dsroc.calibration_parts(s[h], y[h], dsroc.calibration_edges(10), privacy_level=5) for h in halves],
        site_names=["a", "b"])
    priv = {name: SitePrivacy(0.1, "value", True, 0.02, 5.0, 0.01, 5.0, 10.0, 1e-3, 6.0, 1.2, "configured")
            for name in ("a", "b")}
    return ValidationResult(
        calibration_hierarchy=dsroc.calibration_hierarchy(cal),
        dataset="test", outcome="y", score_source="column 'pred'", sites=("a", "b"), n=400,
        n0=int((y == 0).sum()), n1=int((y == 1).sum()), auc=fit.auc, auc_ci=ci, auc_variance=var, level=0.95,
        ci_method="logit", rocglm=fit, brier=dsroc.brier_score(s, y), calibration=cal, privacy=priv,
        grid=dsroc.rocglm_grid(None), epsilon=5.0, delta=0.01, test=TestResult(0.6, 0.95, dsroc.auc_test(ci, 0.6)))


def test_to_dict_has_the_report_keys_and_round_trips_json(tmp_path):
    res = make_result()
    d = json.loads(res.to_json(tmp_path / "r.json"))
    assert json.loads((tmp_path / "r.json").read_text()) == d
    for key in ("auc", "auc_ci", "rocglm", "brier", "calibration", "privacy", "confusion", "test"):
        assert key in d
    assert d["auc"] == pytest.approx(res.auc)
    assert d["rocglm"]["params"] == pytest.approx(list(res.rocglm.params))
    assert set(d["rocglm"]) >= {"params", "iterations", "converged", "deviance_trace"}
    assert len(d["calibration"]["bins"]) == 10
    assert set(d["calibration"]["bins"][0]) >= {"lower", "upper", "observed", "predicted"}
    assert set(d["privacy"]["a"]) >= {"sensitivity", "tau", "epsilon", "delta", "mu_remaining", "epsilon_spent"}
    # suppressed cells carry no numbers anywhere in the report
    for cell in d["calibration"]["suppressed"]:
        assert all(row["bin"] != cell["bin"] for row in d["calibration"]["per_site"][cell["site"]])


def test_summary_text_names_the_key_numbers():
    res = make_result()
    text = str(res)
    assert f"{res.auc:.4f}" in text and f"{res.brier:.4f}" in text
    assert "Privacy per site" in text and "H0: AUC <= 0.6" in text


def test_summary_labels_bins_half_open_and_names_the_ci_and_the_test():
    from dataclasses import replace

    from analyst.result import bin_labels

    res = make_result()
    text = str(res)
    rows = [line.split()[:2] for line in text.splitlines() if line.startswith("  [")]
    assert [" ".join(r) for r in rows] == [f"[{k / 10:.2f}, {(k + 1) / 10:.2f}{']' if k == 9 else ')'}"
                                          for k in range(10)]
    assert "logit-scale CI, distributed DeLong SE " + f"{np.sqrt(res.auc_variance):.4f}" in text
    verdict = "rejected" if res.test.reject else "not rejected"
    assert f"H0: AUC <= 0.6   {verdict}" in text and "one-sided level 0.025" in text
    assert "Wald (AUC-scale) CI" in str(replace(res, ci_method="wald"))
    assert "Warnings" not in text
    assert "Warnings\n  - look out" in str(replace(res, warnings=("look out",)))
    assert bin_labels([0.0, 0.05, 0.125], [0.05, 0.125, 1.0]) == ["[0.000, 0.050)", "[0.050, 0.125)",
                                                                  "[0.125, 1.000]"]


def test_a_bin_no_site_released_shows_no_count():
    rng = np.random.default_rng(3)
    s, y = rng.uniform(0, 0.5, 60), rng.integers(0, 2, 60)  # nothing above 0.5: the upper bins are withheld
    cal = dsroc.aggregate_calibration([dsroc.calibration_parts(s, y, dsroc.calibration_edges(10), privacy_level=5)],
                                      site_names=["a"])
    from dataclasses import replace

    text = str(replace(make_result(), calibration=cal))
    top = next(line for line in text.splitlines() if line.startswith("  [0.90, 1.00]"))
    assert top.split()[2:4] == ["-", "-"] and "withheld by every site" in top


def test_roc_band_is_the_pointwise_band_of_the_fitted_curve():
    res = make_result()
    disp = RocCurveDisplay.from_result(res)
    t = np.linspace(0, 1, 201)
    lo, hi = disp.band(t)
    np.testing.assert_array_equal(np.column_stack([lo, hi]),
                                  np.column_stack(dsroc.rocglm_band(res.rocglm.params, res.rocglm.cov, t)))
    assert np.all(lo <= disp.curve(t)) and np.all(disp.curve(t) <= hi)
    g1, g2 = res.rocglm.params
    assert np.allclose(disp.curve(t[1:-1]), norm.cdf(g1 + g2 * norm.ppf(t[1:-1])))


def test_improper_curves_are_warned_and_marked():
    from dataclasses import replace

    from analyst.hierarchy import improper_warning

    res = make_result()
    assert improper_warning(res.rocglm.params) is None
    bad = replace(res.rocglm, params=np.array([0.5, 3.15]))
    text = improper_warning(bad.params)
    assert "below the diagonal" in text and "0.01 to 0.41" in text  # crossing at Phi(-0.5 / 2.15) = 0.408
    disp = RocCurveDisplay.from_result(replace(res, rocglm=bad)).plot()
    labels = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
    assert any("below chance for FPR in [0.01, 0.41]" in t for t in labels)
    assert disp.ax_.patches  # the marked span


def test_titles_and_legends():
    res = make_result()
    roc, cal = res.plot()
    for disp in (roc, cal):
        title = disp.ax_.get_title()
        assert "n = 400" in title and "= 5" in title and "= 0.01" in title and "paper protocol" in title
    fig = roc.figure_
    fig.canvas.draw()
    legend = roc.ax_.get_legend().get_window_extent()
    assert legend.y1 <= roc.ax_.get_window_extent().y0  # below the axes: it covers no curve
    assert cal.hist_ax_.get_ylabel() == "patients"
    h = res.calibration_hierarchy
    assert cal.summary.startswith(f"O/E {h.oe.value:.2f}")


def test_report_folder_and_plots(tmp_path):
    res = make_result()
    paths = write_report(res, tmp_path / "out", extra={"pooled": {"auc": 0.5}})
    assert json.loads(paths["json"].read_text())["pooled"] == {"auc": 0.5}
    for kind in ("roc", "calibration"):
        assert paths[kind].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "AUC (ROC-GLM)" in paths["summary"].read_text()
    axes = res.plot()
    assert axes[0].ax_.get_title().startswith("ROC curve") and axes[1].ax_.get_title().startswith("Calibration")
    legend = [t.get_text() for t in axes[0].ax_.get_legend().get_texts()]
    assert any("logit-scale DeLong" in t and f"{res.auc_ci[0]:.3f}" in t for t in legend)
    cal = CalibrationDisplay.from_result(res)
    assert set(cal.per_site) == {"a", "b"}
    # one value per bin, NaN exactly where the site withheld the bin (so the plotted line breaks there)
    assert res.calibration.suppressed  # the extreme bins have fewer than q patients at some site
    for name, sc in res.calibration.per_site.items():
        pred, obs = cal.per_site[name]
        assert pred.size == 10 and np.array_equal(np.flatnonzero(np.isfinite(pred)), np.sort(sc.bins))
        assert np.allclose(obs[sc.bins], sc.observed) and np.allclose(pred[sc.bins], sc.predicted)
        assert {b for s, b in res.calibration.suppressed if s == name} <= set(np.flatnonzero(np.isnan(pred)))


def test_notebook_views():
    res = make_result()
    assert len(repr(res).splitlines()) == 1 and f"AUC={res.auc:.4f}" in repr(res)
    page = res._repr_html_()
    assert page.count("<table") == 3 and f"{res.auc:.4f}" in page and "calibration slope" in page
    roc = res.to_frame("roc", points=11)
    assert list(roc.columns) == ["fpr", "tpr", "tpr_lower", "tpr_upper"] and len(roc) == 11
    np.testing.assert_allclose(roc["tpr"], dsroc.rocglm_curve(res.rocglm.params, np.linspace(0, 1, 11)))
    cal = res.to_frame("calibration")
    assert len(cal) == 10 and cal["n"].sum() == res.calibration.count.sum()
    assert (cal["observed_lower"] <= cal["observed"]).all() and (cal["observed"] <= cal["observed_upper"]).all()
    withheld = {b for _, b in res.calibration.suppressed}
    assert {i for i, w in enumerate(cal["withheld_by"]) if w} == withheld
    sites = res.to_frame("sites")
    assert list(sites.index) == ["a", "b"] and sites.loc["a", "tau"] == 0.02
    assert sites["calibration_patients"].sum() == res.calibration.count.sum()
    with pytest.raises(ValueError, match="kind must be one of"):
        res.to_frame("nope")
