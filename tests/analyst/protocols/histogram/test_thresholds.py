"""Decision thresholds as first-class (issue 35, item 3) over real TLS sites on loopback: the clinician's thresholds
are edges of the quantile grid exactly, the net benefit and the confusion table there equal the brute-force pooled
values (huge epsilon: no noise) and hold them within the stated noise (epsilon 1); a threshold that no site's policy
allows, or too many of them, is refused before any site holds or charges anything (their SQLite ledgers read
directly); the CLI's --thresholds reaches the same options."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from site_node.testing import running_server

THRESHOLDS = (0.1, 0.2, 0.3)


@contextlib.contextmanager
def _sites(root, frames, pki, helpers, *, policy=""):
    """One running TLS site per frame, each allowing a huge epsilon; ``policy``: lines that replace the default
    ``histogram_bins``. Yields (addresses, config paths)."""
    with contextlib.ExitStack() as stack:
        paths, servers = [], []
        for k, f in enumerate(frames):
            path = helpers.write_site(root / f"s{k}", f"s{k}", f, pki)
            text = (path.read_text().replace("max_epsilon = 10.0", "max_epsilon = 5000.0")
                    .replace("budget_epsilon = 200.0", "budget_epsilon = 100000.0"))
            path.write_text(text if not policy else text.replace("[policy]", "[policy]\n" + policy, 1))
            paths.append(path)
            servers.append(stack.enter_context(running_server(path)))
        yield [s.bound_address for s in servers], paths


@pytest.fixture(scope="module")
def sites(tmp_path_factory, pki, helpers):
    frames = helpers.site_frames(seed=7)
    with _sites(tmp_path_factory.mktemp("thresholds"), frames, pki, helpers) as (addresses, paths):
        yield frames, addresses, paths


def _pooled(frames):
    s = np.concatenate([f["pred"].to_numpy() for f in frames])
    y = np.concatenate([f["y"].to_numpy() for f in frames]).astype(bool)
    return s, y


def test_the_thresholds_are_edges_and_the_net_benefit_there_is_the_pooled_one(sites, pki, helpers):
    frames, addresses, _ = sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, thresholds=[0.3, 0.1, 0.2])
        plain = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01)
    edges = res.detail.validation.edges
    assert set(THRESHOLDS) <= set(edges.tolist())  # exactly, as floats: the sites put them on the grid as asked
    assert not set(THRESHOLDS) <= set(plain.detail.validation.edges.tolist())  # the default grid alone misses them
    # the quantile edges of the default grid are kept beside the thresholds
    assert set(plain.detail.validation.edges.tolist()) - set(edges.tolist()) <= set()
    s, y = _pooled(frames)
    dc = res.decision_curve  # given at the thresholds without being asked for
    assert dc.thresholds.tolist() == list(THRESHOLDS)
    brute = [np.mean(y & (s >= t)) - np.mean(~y & (s >= t)) * t / (1 - t) for t in THRESHOLDS]
    np.testing.assert_allclose(dc.net_benefit, brute, rtol=0, atol=1e-9)
    for t, tp, fp, fn, tn in zip(THRESHOLDS, dc.tp, dc.fp, dc.fn, dc.tn):
        assert (tp, fp, fn, tn) == pytest.approx((np.sum(y & (s >= t)), np.sum(~y & (s >= t)),
                                                  np.sum(y & (s < t)), np.sum(~y & (s < t))), abs=1e-6)
    assert dc.sensitivity == pytest.approx([np.mean(s[y] >= t) for t in THRESHOLDS], abs=1e-9)
    frame = res.to_frame("decision_curve")
    assert frame["threshold"].tolist() == list(THRESHOLDS) and {"tp", "fp", "fn", "tn"} <= set(frame.columns)
    report = res.to_dict()
    helpers.check_schema(report)
    assert report["decision_curve"]["tp"] == pytest.approx(list(dc.tp))


def test_with_real_noise_the_net_benefit_interval_holds_the_pooled_value(sites, pki, helpers):
    frames, addresses, _ = sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=1.0, delta=1e-5, thresholds=THRESHOLDS)
    assert set(THRESHOLDS) <= set(res.detail.validation.edges.tolist())
    s, y = _pooled(frames)
    dc = res.decision_curve
    brute = np.array([np.mean(y & (s >= t)) - np.mean(~y & (s >= t)) * t / (1 - t) for t in THRESHOLDS])
    se = (dc.upper - dc.lower) / (2 * 1.959963984540054)
    assert np.all(np.abs(dc.net_benefit - brute) <= 3.5 * se), (dc.net_benefit, brute, se)


def test_a_threshold_off_every_allowed_grid_is_refused_before_anything_is_held(sites, pki, helpers):
    frames, addresses, paths = sites
    before = [helpers.ledger_counts(p) for p in paths]
    with helpers.federation(addresses, pki) as fed:
        with pytest.raises(ValueError, match=r"thresholds: 0\.1234 is not an edge of a grid site s0's policy allows "
                                             r"\(histogram_bins \[5, 8, 10, 12, 20, 50, 100, 200\]"):
            fed.validate("test", "y", score="pred", epsilon=1.0, delta=1e-5, thresholds=[0.1, 0.1234])
    assert [helpers.ledger_counts(p) for p in paths] == before


def test_more_thresholds_than_the_policies_bins_are_refused_before_anything_is_held(tmp_path, pki, helpers):
    frames = helpers.site_frames(seed=7)[:2]
    fit = np.arange(1, 50) * 0.02  # 49 thresholds, each an edge of the 50-bin equal grid: 50 bins
    with _sites(tmp_path, frames, pki, helpers, policy="histogram_bins = [5, 10, 20, 50]") as (addresses, paths):
        with helpers.federation(addresses, pki) as fed:
            with pytest.raises(ValueError, match=r"thresholds: 50 thresholds make 51 bins, more than the 50 every "
                                                 r"site's policy allows .*histogram_bins"):
                fed.validate("test", "y", score="pred", epsilon=1.0, delta=1e-5, thresholds=[*fit, 0.05])
            assert [helpers.ledger_counts(p) for p in paths] == [(0, 0)] * 2
            # 49 fit: the quantile edges give way, the grid has the policy's 50 bins, the thresholds all
            res = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, thresholds=fit)
    edges = res.detail.validation.edges
    assert edges.size - 1 == 50 and set(fit.tolist()) <= set(edges.tolist())


def test_a_site_checks_the_thresholds_on_its_own_score_range_with_the_first_hold(tmp_path, pki, helpers):
    """Site s1 declares the score range [0, 1.25]: 0.105 is an edge of the default policy's 200-bin grid on [0, 1]
    (the analyst's check passes) but of no equal grid on s1's range. s1 refuses it with the first stage's hold, which
    carries the thresholds as the second stage's known edges: no site holds or charges anything."""
    import grpc

    from analyst.connection import SiteError

    frames = helpers.site_frames(seed=7)[:2]
    with contextlib.ExitStack() as stack:
        paths = []
        for k, f in enumerate(frames):
            path = helpers.write_site(tmp_path / f"s{k}", f"s{k}", f, pki)
            if k == 1:
                path.write_text(path.read_text().replace('scores = ["pred"]', 'scores = ["pred"]\nscore_range = [0.0, 1.25]'))
            paths.append(path)
        addresses = [stack.enter_context(running_server(p)).bound_address for p in paths]
        with helpers.federation(addresses, pki) as fed:
            with pytest.raises(SiteError) as err:
                fed.validate("test", "y", score="pred", epsilon=1.0, delta=1e-5, thresholds=[0.1, 0.105])
    assert err.value.site == "s1" and err.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert "every explicit edge must be an edge of a grid this site allows" in err.value.message
    assert "0.105" in err.value.message and "is not" in err.value.message and "nothing was released or charged at any site" in err.value.message
    assert [helpers.ledger_counts(p) for p in paths] == [(0, 0)] * 2


def test_thresholds_need_risks_and_the_quantile_grid(sites, pki, helpers):
    from analyst import HistogramOptions

    with pytest.raises(ValueError, match=r"thresholds must lie strictly between 0 and 1"):
        HistogramOptions(thresholds=[0.1, 1.0])
    with pytest.raises(ValueError, match=r"thresholds must be distinct"):
        HistogramOptions(thresholds=[0.1, 0.1])
    with pytest.raises(ValueError, match=r"thresholds need spacing='quantile'"):
        HistogramOptions(thresholds=[0.1], spacing="equal")
    assert HistogramOptions(thresholds=[0.3, 0.1]).thresholds == (0.1, 0.3)


def test_the_cli_passes_thresholds_and_refuses_them_for_the_paper_protocol():
    from analyst.cli import parser as build_parser
    from analyst.cli.validate import protocol_options

    common = ["validate", "--federation", "f.toml", "--dataset", "d", "--outcome", "y", "--score", "p",
              "--epsilon", "1", "--delta", "1e-5", "--out", "o"]
    args = build_parser().parse_args([*common, "--thresholds", "0.1,0.2,0.3"])
    assert protocol_options(args).thresholds == THRESHOLDS
    args = build_parser().parse_args([*common, "--thresholds", "0.1", "--protocol", "paper"])
    with pytest.raises(ValueError, match=r"--thresholds: not an option of --protocol paper \(decision thresholds"):
        protocol_options(args)
