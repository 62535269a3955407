"""One result type for both protocols: summary, JSON, tables, HTML, plots and the report folder (no server needed)."""

import json
from dataclasses import replace

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

import dsroc
from analyst.display import CalibrationPlot, RocPlot
from analyst.result.report import REPORT_FILES, write_report
from analyst.result.summary import bin_labels


@pytest.fixture(scope="module")
def both(helpers):
    return {"paper": helpers.results.paper_result(), "histogram": helpers.results.histogram_result_of(noise_sd=1.0)}


@pytest.mark.parametrize("protocol", ["paper", "histogram"])
def test_to_dict_has_the_same_keys_for_both_protocols_and_round_trips_json(both, protocol, tmp_path):
    res = both[protocol]
    d = json.loads(res.to_json(tmp_path / "r.json"))
    assert json.loads((tmp_path / "r.json").read_text()) == d
    assert set(d) == set(json.loads(both["paper"].to_json()))  # one shape for every protocol
    assert d["protocol"] == protocol and d["detail"]["protocol"] == protocol and d["schema_version"] == 2
    assert d["analysis"] == "binary" and d["time"] is None and d["horizon"] is None
    assert d["auc"]["value"] == pytest.approx(res.auc) and d["auc"]["includes"] == res.auc_ci_includes
    assert set(d["calibration"]["bins"][0]) >= {"lower", "upper", "n", "predicted", "observed", "status"}
    assert set(d["privacy"]["a"]) >= {"sensitivity", "noise_sd", "epsilon", "delta", "mu_remaining", "epsilon_spent"}


@pytest.mark.parametrize("protocol", ["paper", "histogram"])
def test_both_protocols_json_validates_against_the_packaged_schema(both, protocol, helpers):
    import jsonschema

    report = json.loads(both[protocol].to_json())
    helpers.check_schema(report)
    broken = dict(report, auc={k: v for k, v in report["auc"].items() if k != "includes"})  # the schema bites
    with pytest.raises(jsonschema.ValidationError, match="includes"):
        helpers.check_schema(broken)
    with pytest.raises(jsonschema.ValidationError):
        helpers.check_schema(dict(report, schema_version=3))
    # a version 1 report (binary, before survival validations) stays valid; version 2 requires the analysis keys
    old = {k: v for k, v in report.items() if k not in ("analysis", "time", "horizon")}
    helpers.check_schema(dict(old, schema_version=1))
    with pytest.raises(jsonschema.ValidationError, match="analysis"):
        helpers.check_schema(old)


def test_withheld_cells_carry_no_numbers_in_the_paper_report(both):
    d = both["paper"].to_dict()
    withheld = d["detail"]["withheld"]
    assert withheld  # the extreme bins have fewer than q patients at some site
    for cell in withheld:
        assert all(row["bin"] != cell["bin"] for row in d["calibration"]["per_site"][cell["site"]])


@pytest.mark.parametrize("protocol", ["paper", "histogram"])
def test_summary_names_the_numbers_and_what_the_intervals_include_in_user_words(both, protocol):
    res = both[protocol]
    text = res.summary(verbose=True)
    assert f"{res.auc:.4f}" in text and f"{res.brier.value:.4f}" in text and "Privacy per site" in text
    assert f"AUC ({res.auc_estimator})" in text and f"includes {res.auc_ci_includes}" in text
    assert "column:" not in text and "glm:" not in text and "score column 'pred'" in text
    assert "2 sites: a, b" in text and "H0: AUC <= 0.6" in text
    assert "O/E" in text and "calibration slope" in text and "binned ICI" in text
    brief = str(res)  # the one screen: the same numbers at three decimals, fewer words
    assert f"{res.auc:.3f}" in brief and f"{res.brier.value:.3f}" in brief and "Privacy per site" in brief
    assert f"AUC ({res.auc_estimator})" in brief and "2 sites: a, b" in brief and "H0: AUC <= 0.6" in brief
    assert "O/E" in brief and "calibration slope" in brief and "binned ICI" in brief and "score column 'pred'" in brief
    assert len(brief.splitlines()) <= 25 < len(text.splitlines())


def test_the_displays_do_not_shadow_scikit_learns():
    import analyst

    assert {"RocPlot", "CalibrationPlot"} <= set(analyst.__all__)
    assert not {"RocCurveDisplay", "CalibrationDisplay", "PrecisionRecallDisplay"} & set(dir(analyst))


def test_one_site_is_singular(helpers):
    res = helpers.results.histogram_result_of(sites=("only",))
    assert "  1 site: only" in str(res) and "1 sites" not in res.summary(verbose=True) and "1 sites" not in res._repr_html_()


def test_summary_labels_bins_half_open_and_names_the_ci_and_the_test(both):
    res = both["paper"]
    text = res.summary(verbose=True)
    rows = [line.split()[:2] for line in text.splitlines() if line.startswith("  [")]
    assert [" ".join(r) for r in rows] == [f"[{k / 10:.2f}, {(k + 1) / 10:.2f}{']' if k == 9 else ')'}"
                                          for k in range(10)]
    assert f"logit-scale CI, SE {np.sqrt(res.auc_variance):.4f}" in text
    verdict = "rejected" if res.test.reject else "not rejected"
    assert f"H0: AUC <= 0.6   {verdict}" in text and "one-sided level 0.025" in text
    assert "Wald (AUC-scale) CI" in replace(res, ci_method="wald").summary(verbose=True)
    assert "Warnings" not in text and "Warnings" not in str(res)
    assert "Warnings\n  - look out" in str(replace(res, warnings=("look out",)))
    assert bin_labels([0.0, 0.05, 0.125], [0.05, 0.125, 1.0]) == ["[0.000, 0.050)", "[0.050, 0.125)",
                                                                  "[0.125, 1.000]"]


def test_a_bin_no_site_released_shows_no_count(helpers):
    from analyst.protocols.paper.protocol import paper_calibration

    rng = np.random.default_rng(3)
    s, y = rng.uniform(0.01, 0.5, 60), rng.integers(0, 2, 60)  # nothing above 0.5: the upper bins are withheld
    curve = dsroc.aggregate_calibration([dsroc.calibration_parts(s, y, dsroc.calibration_edges(10), privacy_level=5)],
                                        site_names=["a"])
    res = helpers.results.paper_result(calibration=paper_calibration(curve, dsroc.calibration_hierarchy(curve)))
    top = next(line for line in res.summary(verbose=True).splitlines() if line.startswith("  [0.90, 1.00]"))
    assert top.split()[2:5] == ["-", "-", "-"] and "withheld by every site" in top


@pytest.mark.parametrize("protocol", ["paper", "histogram"])
def test_the_roc_band_has_the_auc_ci_as_its_areas(both, protocol):
    """The band is the fitted shape at the CI's limits: the area under each band curve, integrated numerically,
    is the CI's end (so the band includes what the AUC's CI includes)."""
    res = both[protocol]
    roc = res.roc
    g1, g2 = roc.params
    t = np.linspace(0, 1, 201)
    assert np.allclose(roc.curve(t[1:-1]), norm.cdf(g1 + g2 * norm.ppf(t[1:-1])))
    for g, limit in zip(roc.band, res.auc_ci):
        area = integrate.quad(lambda u: norm.cdf(g + g2 * norm.ppf(u)), 0, 1, limit=200)[0]
        assert area == pytest.approx(limit, abs=1e-7)
    lo, hi = roc.band_curves(t)
    assert np.all(lo <= roc.curve(t) + 1e-12) and np.all(roc.curve(t) <= hi + 1e-12)
    # the quoted AUC is the fitted curve's area
    assert integrate.quad(lambda u: norm.cdf(g1 + g2 * norm.ppf(u)), 0, 1, limit=200)[0] == pytest.approx(res.auc,
                                                                                                           abs=2e-3)


def test_without_a_plausible_fit_the_binned_polyline_is_the_quoted_curve(helpers):
    res = helpers.results.histogram_result_of(noise_sd=8.0)
    assert res.auc_estimator == "binned empirical" and res.roc.params is None and res.roc.band is None
    assert any("no plausible ROC-GLM fit" in w for w in res.notes) and not res.warnings  # how, not a problem
    # the binned empirical AUC is the trapezoidal area under the binned points (ties within a bin count one half)
    assert np.trapezoid(res.roc.tpr, res.roc.fpr) == pytest.approx(res.auc, abs=1e-12)
    frame = res.to_frame("roc", points=201)
    assert list(frame.columns) == ["fpr", "tpr"]
    assert np.trapezoid(frame["tpr"], frame["fpr"]) == pytest.approx(res.auc, abs=2e-3)
    plot = RocPlot(res).plot()
    labels = [" ".join(t.get_text().split()) for t in plot.ax_.get_legend().get_texts()]
    assert any(f"AUC (binned empirical) {res.auc:.3f}" in t and "binned ROC points" in t for t in labels)


def test_improper_curves_are_warned_and_marked(both):
    from analyst.hierarchy import improper_warning

    res = both["paper"]
    assert improper_warning(res.roc.params) is None
    bad = replace(res, roc=replace(res.roc, params=(0.5, 3.15)))
    text = improper_warning(bad.roc.params)
    assert "below the diagonal" in text and "0.01 to 0.41" in text  # crossing at Phi(-0.5 / 2.15) = 0.408
    plot = RocPlot(bad).plot()
    labels = [t.get_text() for t in plot.ax_.get_legend().get_texts()]
    assert any("below chance for FPR in [0.01, 0.41]" in t for t in labels)


def _boxes(fig):
    """Window extents of every title, legend and text box of a drawn figure."""
    renderer = fig.canvas.get_renderer()
    boxes = [("suptitle", fig._suptitle.get_window_extent(renderer))] if fig._suptitle else []
    for k, ax in enumerate(fig.axes):
        if ax.get_title():
            boxes.append((f"title {k}", ax.title.get_window_extent(renderer)))
        if ax.get_legend():
            boxes.append((f"legend {k}", ax.get_legend().get_window_extent(renderer)))
        boxes += [(f"text {k}", t.get_window_extent(renderer)) for t in ax.texts]
    return boxes


@pytest.mark.parametrize("protocol", ["paper", "histogram"])
def test_plot_is_one_figure_whose_texts_do_not_overlap_and_fit_inside(both, protocol):
    from matplotlib.figure import Figure

    res = both[protocol]
    fig = res.plot()
    assert isinstance(fig, Figure) and res.protocol in fig._suptitle.get_text()
    fig.canvas.draw()
    boxes = _boxes(fig)
    assert len(boxes) >= 6
    whole = fig.bbox
    for name, box in boxes:
        assert whole.x0 - 1 <= box.x0 and box.x1 <= whole.x1 + 1 and whole.y0 - 1 <= box.y0 and box.y1 <= whole.y1 + 1, name
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            assert not box_a.overlaps(box_b), (a, b)
    roc_legend = " ".join(" ".join(t.get_text().split()) for t in fig.axes[0].get_legend().get_texts())
    assert f"{res.auc_ci[0]:.3f}" in roc_legend and res.auc_estimator in roc_legend and "band" in roc_legend
    cal = fig.axes[1]
    box = cal.texts[0].get_text()
    for key in ("AUC", "Brier", "O/E", "CITL", "slope", "ICI", "Emax"):
        assert key in box


@pytest.mark.parametrize("protocol", ["paper", "histogram"])
def test_the_standalone_plots_fit_their_own_figures(both, protocol):
    res = both[protocol]
    t = np.linspace(0, 1, 50)
    references = [(t, np.sqrt(t), "a comparison curve"), (t, t**0.3, "another comparison curve")]
    for fig in (RocPlot(res).plot(references=references).figure_, CalibrationPlot(res).plot().figure_):
        fig.canvas.draw()
        whole = fig.bbox
        for name, box in _boxes(fig):
            assert whole.x0 - 1 <= box.x0 and box.x1 <= whole.x1 + 1 and whole.y0 - 1 <= box.y0, name
            assert box.y1 <= whole.y1 + 1, name


def test_the_calibration_plot_draws_what_the_result_holds(both):
    res = both["paper"]
    plot = CalibrationPlot.from_result(res).plot()
    c = res.calibration
    assert set(c.per_site) == {"a", "b"}
    for name, sc in res.detail.calibration_curve.per_site.items():
        pred, obs, _ = c.per_site[name]
        assert pred.size == 10 and np.array_equal(np.flatnonzero(np.isfinite(pred)), np.sort(sc.bins))
        assert np.allclose(obs[sc.bins], sc.observed) and np.allclose(pred[sc.bins], sc.predicted)
    # the risk histogram: events up, non-events down, per bin, summing to the released patients
    bars = plot.hist_ax_.patches
    heights = np.array([b.get_height() for b in bars])
    assert heights[heights > 0].sum() + (-heights[heights < 0]).sum() == pytest.approx(np.nansum(c.count)
                                                                                     + 0.3 * np.sum(~np.isfinite(c.count))
                                                                                     * max(1, np.nanmax(c.risk_positives)))
    legend = " ".join(t.get_text() for t in plot.hist_ax_.get_legend().get_texts())
    assert "Wilson" in legend and "withheld" in legend and "outcome 1" in legend


@pytest.mark.parametrize("protocol", ["paper", "histogram"])
def test_report_folder_holds_the_same_files_for_both_protocols(both, protocol, tmp_path):
    res = both[protocol]
    paths = write_report(res, tmp_path / "out", extra={"pooled": {"auc": 0.5}})
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(REPORT_FILES.values())
    assert json.loads(paths["json"].read_text())["pooled"] == {"auc": 0.5}
    for kind in ("figure", "roc", "calibration"):
        assert paths[kind].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"AUC ({res.auc_estimator})" in paths["summary"].read_text()


@pytest.mark.parametrize("protocol", ["paper", "histogram"])
def test_notebook_views(both, protocol):
    res = both[protocol]
    assert len(repr(res).splitlines()) == 1 and f"AUC={res.auc:.4f}" in repr(res)
    page = res._repr_html_()
    assert page.count("<table") == 3 and f"{res.auc:.4f}" in page and "calibration slope" in page
    roc = res.to_frame("roc", points=11)
    assert list(roc.columns) == ["fpr", "tpr", "tpr_lower", "tpr_upper"] and len(roc) == 11
    np.testing.assert_allclose(roc["tpr"], dsroc.rocglm_curve(res.roc.params, np.linspace(0, 1, 11)))
    cal = res.to_frame("calibration")
    c = res.calibration
    assert len(cal) == c.count.size and cal["n"].sum() == pytest.approx(np.nansum(c.count))
    ok = cal["observed"].notna()
    assert (cal["observed_lower"][ok] <= cal["observed"][ok]).all()
    assert (cal["observed"][ok] <= cal["observed_upper"][ok]).all()
    sites = res.to_frame("sites")
    assert list(sites.index) == ["a", "b"] and {"noise_sd", "epsilon", "n"} <= set(sites.columns)
    points = res.to_frame("roc_points")
    assert points["fpr"].iloc[0] == 0 and points["tpr"].iloc[-1] == pytest.approx(1)
    with pytest.raises(ValueError, match="kind must be one of"):
        res.to_frame("nope")
