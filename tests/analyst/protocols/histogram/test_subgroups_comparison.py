"""Subgroups (strata) and two models compared (compare) through real TLS daemons, against independent computations:
brute-force binned AUCs by direct pair comparison, DeLong's (paired) variance from its structural components
written here, and Sigma y / Sigma p per stratum on the unbinned data; the report's text, JSON, HTML, frames and
figures; the refusals before anything is released; the CLI; the paper protocol's reason."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import expit

from analyst.connection import SiteError
from site_node.testing import running_server

N_SITES, N = 3, 300
CUT = 60.0


def _frames(seed=7):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(N_SITES):
        age = rng.normal(60, 10, N).round()
        y = rng.integers(0, 2, N)
        old = age >= CUT
        x = rng.normal(np.where(old, 0.6, 1.6) * y, 1.0)  # the model discriminates less among the old
        x2 = 0.7 * x + rng.normal(0, 0.8, N)
        out.append(pd.DataFrame({"x": x, "age": age, "pred": expit(x - 0.5), "pred2": expit(x2 - 0.3), "y": y}))
    return out


@contextlib.contextmanager
def _sites(root, frames, pki, helpers, *, strata="age = [60.0]", huge=True, max_cells=None):
    with contextlib.ExitStack() as stack:
        servers = []
        for k, f in enumerate(frames):
            path = helpers.write_site(root / f"s{k}", f"s{k}", f, pki)
            text = path.read_text().replace('scores = ["pred"]', 'scores = ["pred", "pred2"]')
            if huge:
                text = text.replace("max_epsilon = 10.0", "max_epsilon = 5000.0").replace(
                    "budget_epsilon = 200.0", "budget_epsilon = 100000.0")
            if max_cells is not None:
                text = text.replace("max_epsilon = ", f"histogram_max_cells = {max_cells}\nmax_epsilon = ")
            path.write_text(text + f"\n[policy.strata]\n{strata}\n")
            servers.append(stack.enter_context(running_server(path)))
        yield [s.bound_address for s in servers]


@pytest.fixture(scope="module")
def exact(tmp_path_factory, pki, helpers):
    frames = _frames()
    with _sites(tmp_path_factory.mktemp("strata"), frames, pki, helpers) as addresses:
        yield frames, addresses


def _pooled(frames, column):
    return np.concatenate([f[column].to_numpy() for f in frames])


def _bins(s, edges):
    """Bin by direct comparison with the interior edges (the last bin closed)."""
    return np.array([min(int(np.sum(v >= edges[1:-1])), edges.size - 2) for v in np.clip(s, edges[0], edges[-1])])


def _components(s, y):
    """DeLong's structural components by direct pair comparison: V10 per positive, V01 per negative."""
    s1, s0 = s[y == 1][:, None], s[y == 0][None, :]
    psi = (s1 > s0) + 0.5 * (s1 == s0)
    return psi.mean(1), psi.mean(0)


def _auc_var(s, y):
    v10, v01 = _components(s, y)
    return v10.mean(), v10.var(ddof=1) / v10.size + v01.var(ddof=1) / v01.size


def test_subgroups_equal_brute_force_and_delong_per_stratum(exact, pki, helpers, tmp_path):
    from analyst.result.report import write_report

    frames, addresses = exact
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, n_bins=10, spacing="equal",
                           estimator="empirical", strata="age")
        budget = fed.budget("test")
    g = res.subgroups
    edges = res.detail.validation.edges
    s, y, age, p = _pooled(frames, "pred"), _pooled(frames, "y"), _pooled(frames, "age"), _pooled(frames, "pred")
    idx = _bins(s, edges)
    truth = []
    for stratum, mask in zip(g.strata, (age < CUT, age >= CUT)):
        auc, var = _auc_var(idx[mask], y[mask])
        assert stratum.auc == pytest.approx(auc, abs=1e-9)
        assert stratum.auc_variance == pytest.approx(var, rel=1e-3)  # + the noise's at a huge epsilon
        assert stratum.n == pytest.approx(mask.sum(), abs=0.5) and stratum.n1 == pytest.approx(y[mask].sum(), abs=0.5)
        # each offset is rounded (unbiased) to 1/2 bin: the expected events' error has SD at most sqrt(n) / 4 bin
        # widths; within 4 SDs (a fixed 0.5 % failed about one run in 30)
        expected = y[mask].sum() / stratum.oe
        assert abs(expected - p[mask].sum()) <= np.sqrt(mask.sum()) * np.diff(edges).max()
        truth.append((auc, var))
    assert [s.label for s in g.strata] == ["age < 60", "age >= 60"] and g.cuts == (CUT,)
    (d,) = [d for d in g.differences if d.statistic == "AUC"]
    z = stats.norm.ppf(0.975)
    diff, se = truth[1][0] - truth[0][0], np.sqrt(truth[0][1] + truth[1][1])
    assert d.difference == pytest.approx(diff, abs=1e-9) and d.se == pytest.approx(se, rel=1e-3)
    assert d.lower == pytest.approx(diff - z * se, abs=1e-4) and d.p_value == pytest.approx(
        2 * stats.norm.sf(abs(diff) / se), rel=1e-2)
    assert d.difference < 0 and d.p_value < 0.05  # the model discriminates less among the old
    # one more release per site, charged: the main release and the stratified one
    assert all(b["releases"] == 2 for b in budget.values())
    # the report: text, JSON against the schema, HTML, frames and the figure
    text = res.summary(verbose=True)
    assert "Subgroups by age" in text and "AUC age >= 60 minus age < 60" in text
    brief = str(res).splitlines()  # one screen: the AUC difference in a line, the strata in the verbose text
    assert any(x.startswith(f"Subgroups by age: AUC age >= 60 minus age < 60 {d.difference:+.3f}") for x in brief)
    assert len(brief) <= 27
    report = json.loads(res.to_json())
    helpers.check_schema(report)
    assert [s["label"] for s in report["subgroups"]["strata"]] == ["age < 60", "age >= 60"]
    assert len(report["subgroups"]["releases"]) == N_SITES and report["comparison"] is None
    frame = res.to_frame("subgroups")
    assert list(frame["stratum"]) == ["age < 60", "age >= 60"]
    np.testing.assert_allclose(frame["auc"], [t[0] for t in truth], atol=1e-12)
    assert "Subgroups by age" in res._repr_html_()
    paths = write_report(res, tmp_path / "out")
    assert paths["subgroups"].name == "subgroups.png" and paths["subgroups"].stat().st_size > 10_000
    assert "comparison" not in paths


def test_two_models_compared_equal_an_independent_paired_delong(exact, pki, helpers, tmp_path):
    from analyst.result.report import write_report

    frames, addresses = exact
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, n_bins=8, spacing="equal",
                           compare="pred2")
    c = res.comparison
    full = res.detail.validation.edges
    edges = np.array([full[0], *full[2:-1:2], full[-1]])  # the joint release: every second edge of the validation's
    assert full.size == 9 and edges.size == 5
    y = _pooled(frames, "y")
    ia, ib = _bins(_pooled(frames, "pred"), edges), _bins(_pooled(frames, "pred2"), edges)
    a10, a01 = _components(ia, y)
    b10, b01 = _components(ib, y)
    diff = a10.mean() - b10.mean()
    se = np.sqrt(np.var(a10 - b10, ddof=1) / a10.size + np.var(a01 - b01, ddof=1) / a01.size)
    assert c.auc_a == pytest.approx(a10.mean(), abs=1e-9) and c.auc_b == pytest.approx(b10.mean(), abs=1e-9)
    assert c.difference == pytest.approx(diff, abs=1e-9)
    assert c.se_sampling == pytest.approx(se, rel=1e-9) and c.se == pytest.approx(se, rel=1e-3)
    assert c.p_value == pytest.approx(2 * stats.norm.sf(abs(diff) / se), rel=1e-2)
    assert c.auc_b_lower < c.auc_b < c.auc_b_upper and c.lower < c.difference < c.upper
    for auc, lo, hi, idx in ((c.auc_a, c.auc_a_lower, c.auc_a_upper, ia), (c.auc_b, c.auc_b_lower, c.auc_b_upper, ib)):
        half = stats.norm.ppf(0.975) * np.sqrt(_auc_var(idx, y)[1])
        assert (lo, hi) == pytest.approx((auc - half, auc + half), abs=1e-4)
    assert c.model_a == "pred" and c.model_b == "pred2" and c.n_bins == 4
    text = res.summary(verbose=True)
    assert "Two models compared on the same patients" in text and "A minus B" in text
    # one screen: the paired difference, both binned AUCs and why A's differs from the headline AUC
    brief = " ".join(str(res).split())
    assert f"Compared with pred2 on the same patients: AUC difference {c.difference:+.3f}" in brief
    assert f"{c.auc_a:.3f} against {c.auc_b:.3f}" in brief and "differs from its AUC above" in brief
    report = json.loads(res.to_json())
    helpers.check_schema(report)
    assert report["comparison"]["model_b"] == "pred2" and report["subgroups"] is None
    assert res.to_frame("comparison")["what"].tolist() == ["AUC A (pred)", "AUC B (pred2)", "A minus B"]
    assert "Two models compared" in res._repr_html_()
    paths = write_report(res, tmp_path / "out")
    assert paths["comparison"].stat().st_size > 10_000


def test_on_the_default_quantile_grid_the_joint_release_keeps_every_second_edge(exact, pki, helpers):
    """The default grid (quantile, two stages): the sites accept the coarser joint grid, every edge one of the
    validation's, and both binned AUCs are those of the pooled scores on it (brute force)."""
    frames, addresses = exact
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, compare="pred2")
    full = res.detail.validation.edges
    c = res.comparison
    assert full.size - 1 >= 4 and c.n_bins == (full.size - 1 + 1) // 2
    edges = np.array([full[0], *full[2:-1:2], full[-1]])
    y = _pooled(frames, "y")
    a10, _ = _components(_bins(_pooled(frames, "pred"), edges), y)
    b10, _ = _components(_bins(_pooled(frames, "pred2"), edges), y)
    assert c.auc_a == pytest.approx(a10.mean(), abs=1e-6) and c.auc_b == pytest.approx(b10.mean(), abs=1e-6)
    assert c.difference == pytest.approx(a10.mean() - b10.mean(), abs=1e-6)


def test_refusals_come_before_anything_is_released(exact, pki, helpers):
    frames, addresses = exact
    with helpers.federation(addresses, pki) as fed:
        before = {k: b["releases"] for k, b in fed.budget("test").items()}
        with pytest.raises(ValueError, match=r"strata 'x': site s0's policy does not list it \(policy.strata: "
                                             r"\['age'\]\); nothing was released"):
            fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, strata="x")
        with pytest.raises(ValueError, match="above site s0's limit of 400"):  # 100 bins x 100 bins
            fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, n_bins=100, spacing="equal",
                         compare="pred2")
        with pytest.raises(SiteError, match="no declared score column 'nope'"):  # as a first model would be
            fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, compare="nope")
        with pytest.raises(ValueError, match="do not apply to the paper protocol.*only the histogram protocol makes"):
            fed.validate("test", "y", score="pred", epsilon=5.0, delta=0.01, protocol="paper", strata="age")
        assert {k: b["releases"] for k, b in fed.budget("test").items()} == before


def test_the_cli_writes_subgroups_and_comparison_and_refuses_them_under_the_paper_protocol(exact, pki, helpers,
                                                                                         tmp_path, capsys):
    from analyst.cli import main

    frames, addresses = exact
    (tmp_path / "analyst.token").write_text(helpers.TOKEN + "\n")
    fed_file = tmp_path / "federation.toml"
    fed_file.write_text("".join(f'[[sites]]\nname = "s{k}"\naddress = "{a}"\ntoken_file = "analyst.token"\n'
                                f'ca_file = "{pki.ca_cert}"\n\n' for k, a in enumerate(addresses)))
    common = ["validate", "--federation", str(fed_file), "--dataset", "test", "--outcome", "y", "--score", "pred",
              "--epsilon", "4000", "--delta", "0.01", "--quiet"]
    assert main([*common, "--strata", "age", "--compare", "pred2", "--n-bins", "8", "--spacing", "equal",
                 "--out", str(tmp_path / "out")]) == 0
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"subgroups.png", "comparison.png", "report.json", "summary.txt"} <= names
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["subgroups"]["column"] == "age" and report["comparison"]["model_b"] == "pred2"
    assert main([*common, "--protocol", "paper", "--strata", "age", "--out", str(tmp_path / "paper")]) == 2
    err = capsys.readouterr().err
    assert "--strata: not an option of --protocol paper" in err and "only the histogram protocol makes" in err
    assert not (tmp_path / "paper").exists()
    capsys.readouterr()
    assert main(["describe", "--federation", str(fed_file)]) == 0  # where an analyst learns the strata
    assert "strata (--strata): age cut at [60.0]; at most 400 cells per class" in capsys.readouterr().out



def test_the_quantile_grids_bin_count_stays_within_every_sites_cell_limit(exact, tmp_path, pki, helpers):
    """At negligible noise the quantile grid takes 12 bins; with strata (2 parts) and sites allowing 14 cells per class
    it takes 7, the most whose 2 x 7 cells pass, checked before any release; a limit below 2 bins x 2 parts is refused
    with nothing released."""
    frames, addresses = exact
    with helpers.federation(addresses, pki) as fed:
        assert fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, strata="age").detail.n_bins == 12
    with _sites(tmp_path / "cap", frames, pki, helpers, max_cells=14) as capped:
        with helpers.federation(capped, pki) as fed:
            res = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, strata="age")
            assert res.detail.n_bins == 7 and len(res.subgroups.strata) == 2
    with _sites(tmp_path / "tiny", frames, pki, helpers, max_cells=3) as tiny:
        with helpers.federation(tiny, pki) as fed:
            with pytest.raises(ValueError, match="4 cells per class on the validation's 2 bins is above site s0's limit "
                                                 "of 3.*nothing was released"):
                fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, strata="age")
            assert all(b["releases"] == 0 for b in fed.budget("test").values())
