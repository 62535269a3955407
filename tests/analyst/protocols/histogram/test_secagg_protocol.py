"""The secagg protocol end to end over five real TLS sites: the sum equals brute force under negligible
noise, the analyst never holds one site's counts, and a compromised site's garbage vector aborts the round."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from analyst.protocols.histogram.secagg_rounds import (SecAggAborted, advertise_round, collect_secagg, mask_round,
                                             sum_round, verify_masked)
from dsroc.secagg import masked_digest, receipt_message
from dsroc.v1 import site_pb2 as pb
from site_node.cli.init import link_peers
from site_node.config import load_config
from site_node.security.signing import ensure_signing_key
from site_node.testing import running_server


def _binned_truth(frames, edges):
    s = np.concatenate([f["pred"].to_numpy() for f in frames])
    y = np.concatenate([f["y"].to_numpy() for f in frames])
    s = np.clip(s, edges[0], edges[-1])
    idx = np.array([min(int(np.sum(v >= edges[1:-1])), edges.size - 2) for v in s])  # by direct comparison
    return np.bincount(idx[y == 0], minlength=edges.size - 1), np.bincount(idx[y == 1], minlength=edges.size - 1)


@pytest.fixture(scope="module")
def exact_sites(tmp_path_factory, pki, helpers):
    """Five peered TLS sites whose test policy allows a huge epsilon (the shares are 0 with overwhelming probability)."""
    yield from _peered_sites(tmp_path_factory.mktemp("secagg"), helpers.site_frames(seed=7), pki, helpers)


@pytest.fixture(scope="module")
def rare_sites(tmp_path_factory, pki, helpers):
    """Three such sites where about one patient in ten is a positive (a tenth of the positives kept)."""
    frames = [f[(f["y"] == 0) | (np.arange(len(f)) % 10 == 0)].reset_index(drop=True)
              for f in helpers.site_frames(seed=8)[:3]]
    yield from _peered_sites(tmp_path_factory.mktemp("secagg-rare"), frames, pki, helpers)


def _peered_sites(root, frames, pki, helpers):
    with contextlib.ExitStack() as stack:
        paths = []
        for k, f in enumerate(frames):
            path = helpers.write_site(root / f"s{k}", f"s{k}", f, pki)
            path.write_text(path.read_text().replace("max_epsilon = 10.0", "max_epsilon = 5000.0")
                            .replace("budget_epsilon = 200.0", "budget_epsilon = 100000.0"))
            paths.append(path)
        link_peers(paths)
        servers = [stack.enter_context(running_server(p)) for p in paths]
        yield frames, [s.bound_address for s in servers], paths


def test_the_sum_equals_brute_force_and_repeats_are_free(exact_sites, pki, helpers):
    frames, addresses, _ = exact_sites
    with helpers.federation(addresses, pki) as fed, fed.session("test", "y", score="pred") as s:
        total = collect_secagg(s, epsilon=4000.0, delta=0.01, n_bins=20)
        h0, h1 = _binned_truth(frames, total.edges)
        np.testing.assert_array_equal(total.counts0, h0)
        np.testing.assert_array_equal(total.counts1, h1)
        assert total.colluders == 0 and all(not r.repeated for r in total.sites.values())
        again = collect_secagg(s, epsilon=4000.0, delta=0.01, n_bins=20)
        np.testing.assert_array_equal(again.counts0, h0)
        assert all(r.repeated for r in again.sites.values())


def test_a_garbage_vector_of_a_compromised_site_aborts_the_round(exact_sites, pki, helpers):
    frames, addresses, paths = exact_sites
    key = ensure_signing_key(load_config(paths[4]).signing_key_path)  # s4 is compromised
    with helpers.federation(addresses, pki) as fed, fed.session("test", "y", score="pred") as s:
        r = mask_round(s, advertise_round(s, epsilon=4000.0, delta=0.01, n_bins=12, spacing="equal", colluders=0))
        honest = r.masked["s4"]
        garbage = np.random.default_rng(3).integers(0, 2**63, 24, dtype=np.uint64)
        # a relay that alters a vector is caught by the receipt before any seed is revealed
        r.masked["s4"] = pb.SecAggMaskResponse(masked=garbage.astype("<u8").tobytes(), receipt=honest.receipt)
        with pytest.raises(SecAggAborted, match="do not match its receipt"):
            verify_masked(r)
        # s4 itself signs a receipt for garbage: the others accept it and reveal, and the sum is refused
        digest = masked_digest(garbage)
        forged = pb.SecAggReceipt(site="s4", masked_sha256=digest, commitment=honest.receipt.commitment,
                                  signature=key.sign(receipt_message("s4", r.transcript, digest,
                                                                     honest.receipt.commitment)))
        r.masked["s4"] = pb.SecAggMaskResponse(masked=garbage.astype("<u8").tobytes(), receipt=forged)
        verify_masked(r)
        receipts = [m.receipt for m in r.masked.values()]
        r.unmasked = {}
        for conn in s.connections:  # s4 (compromised) reveals its seed whatever the others were told
            told = receipts if conn.name != "s4" else receipts[:4] + [honest.receipt]
            r.unmasked[conn.name] = conn.call("SecAggUnmask", pb.SecAggUnmaskRequest(
                session_id=s.session_ids[conn.name], round_id=r.round_id, receipts=told))
        with pytest.raises(SecAggAborted, match="aborted"):
            sum_round(r)


def test_validate_by_secagg_gives_the_histogram_report_without_per_site_counts(exact_sites, pki, helpers, tmp_path):
    frames, addresses, _ = exact_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, protocol="secagg", n_bins=20,
                           spacing="equal", score_sums=False)
        plain = fed.validate("test", "y", score="pred", epsilon=4000.0, delta=0.01, protocol="histogram", n_bins=20,
                             score_sums=False, spacing="equal")
    h0, h1 = _binned_truth(frames, res.detail.validation.edges)
    np.testing.assert_array_equal(res.detail.validation.counts0, h0)
    np.testing.assert_array_equal(res.detail.validation.counts1, h1)
    # the same estimates as the histogram protocol on the same (noise-free) counts
    assert res.auc == pytest.approx(plain.auc, abs=1e-12) and res.n == plain.n == sum(len(f) for f in frames)
    text = res.summary(verbose=True)
    assert "protocol: secagg" in text and "unavailable by design" in text
    assert all(np.isnan(p.n) for p in res.privacy.values())
    report = json.loads(res.to_json())
    helpers.check_schema(report)
    assert report["protocol"] == "secagg" and "only the sum" in report["guarantee"]
    assert report["detail"]["per_site"].startswith("per-site results are unavailable by design")
    assert report["detail"]["colluders"] == 0


def test_the_cli_runs_secagg(exact_sites, pki, helpers, tmp_path):
    from analyst.cli import main

    _, addresses, _ = exact_sites
    federation = tmp_path / "federation.toml"
    federation.write_text("".join(
        f'[[sites]]\nname = "s{k}"\naddress = "{a}"\ntoken = "{helpers.TOKEN}"\nca_file = "{pki.ca_cert}"\n\n'
        for k, a in enumerate(addresses)))
    out = tmp_path / "report"
    assert main(["validate", "--federation", str(federation), "--dataset", "test", "--outcome", "y", "--score",
                 "pred", "--epsilon", "1000", "--delta", "0.01", "--protocol", "secagg", "--colluders", "1",
                 "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["protocol"] == "secagg" and report["detail"]["colluders"] == 1


def test_the_default_secagg_validation_sums_two_rounds_with_score_sums(exact_sites, pki, helpers):
    """Quantile grid and score sums (the defaults): a first round on the fine grid places the bins, the second
    sums counts and score offsets; under negligible noise both equal brute force, the sums within the random
    rounding (half a bin width per patient), and the report is as complete as the histogram protocol's."""
    frames, addresses, _ = exact_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=1000.0, delta=0.01, protocol="secagg")
    d = res.detail
    assert d.spacing == "quantile" and d.grid_round is not None and d.grid_round.sums0 is None
    # the first round: per-class counts on the sites' fine logit grid
    g0, g1 = _binned_truth(frames, d.grid_round.edges)
    np.testing.assert_array_equal(d.grid_round.counts0, g0)
    np.testing.assert_array_equal(d.grid_round.counts1, g1)
    np.testing.assert_allclose(d.grid_round.edges, helpers.default_fine(), rtol=0, atol=1e-12)
    # the second: its interior edges are the policy's edges nearest the quantiles of the mean of the two classes'
    # score CDFs (by brute force, interpolated inside a fine bin), 12 of them at negligible noise (the most dsroc.histogram.stages.second_stage_bins gives);
    # its counts brute force, its sums the offsets' within rounding
    edges = d.round.edges
    fine = d.grid_round.edges
    s = np.concatenate([f["pred"].to_numpy() for f in frames])
    y = np.concatenate([f["y"].to_numpy() for f in frames])
    np.testing.assert_allclose(edges, helpers.balanced_edges(s, y, fine, 12), rtol=0, atol=1e-12)
    assert d.n_bins == edges.size - 1 == 12
    h0, h1 = _binned_truth(frames, edges)
    np.testing.assert_array_equal(d.round.counts0, h0)
    np.testing.assert_array_equal(d.round.counts1, h1)
    s = np.clip(np.concatenate([f["pred"].to_numpy() for f in frames]), edges[0], edges[-1])
    y = np.concatenate([f["y"].to_numpy() for f in frames])
    idx = np.minimum(np.searchsorted(edges, s, side="right") - 1, edges.size - 2)
    offset = (s - edges[idx]) / np.diff(edges)[idx]
    for cls, sums, counts in ((0, d.round.sums0, h0), (1, d.round.sums1, h1)):
        exact = np.bincount(idx[y == cls], weights=offset[y == cls], minlength=edges.size - 1)
        assert np.all(np.abs(sums - exact) <= 0.5 * counts + 1e-9)
    assert res.n == sum(len(f) for f in frames)
    assert res.calibration.predicted_from.startswith("within-bin mean score")
    assert np.isfinite(d.validation.auc_resolved) and "AUC (resolved)" in res.summary(verbose=True)
    assert "at the class-balanced quantiles of a first round" in res.summary(verbose=True) and "unavailable by design" in res.summary(verbose=True)
    report = json.loads(res.to_json())
    helpers.check_schema(report)
    assert report["detail"]["score_sums"] and len(report["detail"]["grid_round"]["edges"]) == helpers.default_fine().size
    # The first round reaches the estimators, as the histogram protocol's: the slope's interval spans the unbinned
    # fit's range from the score sums and the fine counts and holds the patient-level fit (statsmodels) ...
    import statsmodels.api as sm
    from scipy.special import logit

    from dsroc.histogram.slope import BINNING_INCLUDED
    from dsroc.histogram.validation import histogram_validation

    truth = sm.Logit(y, sm.add_constant(logit(np.clip(s, 1e-12, 1 - 1e-12)))).fit(disp=0).params[1]
    slope = res.calibration.slope
    assert slope.lower <= truth <= slope.upper and slope.includes == BINNING_INCLUDED
    # ... and the resolved AUC is the one of the fine counts of all scores (brute force), not the one without them
    sums = dict(sums0=d.round.sums0, sums1=d.round.sums1, sums_sigma=d.round.sums_sd)
    with_first = histogram_validation(h0, h1, edges, sigma=d.round.noise_sd, **sums, grid_edges=fine,
                                      grid_counts=g0 + g1, grid_sigma=np.sqrt(2) * d.grid_round.noise_sd)
    alone = histogram_validation(h0, h1, edges, sigma=d.round.noise_sd, **sums)
    assert d.validation.auc_resolved == pytest.approx(with_first.auc_resolved, abs=1e-12)
    # (at negligible noise and 12 bins few pairs share a bin, so the two differ by about 1e-6: far beyond rounding)
    assert abs(alone.auc_resolved - with_first.auc_resolved) > 1e-9


def test_the_secagg_quantile_grid_takes_its_bin_count_from_the_class_sizes_over_the_summed_noise(exact_sites, pki,
                                                                                               helpers):
    """At epsilon 1, delta 0.01 the second round's summed noise SD is about 2.07: n_eff = (n0^-2 + n1^-2)^(-1/2) of
    the 2 000 patients (about 707) over it is about 340, between 200 and 400 noise SDs: 7 bins (the rule on the
    estimate of n before gave 8), each edge one of the policy's, both rounds new releases."""
    from dsroc.histogram.stages import two_stage_plan

    frames, addresses, _ = exact_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=1.0, delta=0.01, protocol="secagg")
    d = res.detail
    y = np.concatenate([f["y"].to_numpy() for f in frames])
    ratio = (np.sum(y == 0) ** -2.0 + np.sum(y == 1) ** -2.0) ** -0.5 / two_stage_plan(1.0, 0.01).sigma2
    assert 240 < ratio < 360  # far enough from 200 and 400 that the first round's noise cannot move it across
    assert d.n_bins == d.round.edges.size - 1 == 7
    from dsroc.histogram import histogram_edges

    allowed = np.concatenate([histogram_edges(k, lo=0.0001, hi=0.9999, spacing="logit")
                              for k in (5, 8, 10, 12, 20, 50, 100, 200)])
    assert np.isin(d.round.edges[1:-1], allowed).all()
    assert all(not a.repeated for a in (*d.round.sites.values(), *d.grid_round.sites.values()))


def test_at_a_low_prevalence_the_secagg_grid_gives_the_positives_half_of_the_bins(rare_sites, pki, helpers):
    """About 10 % positives: the second round's edges are the policy's edges nearest the quantiles of the mean of the
    two classes' score CDFs (brute force; the noise is negligible), not those of all scores, which leave most
    positives in the top bins."""
    frames, addresses, _ = rare_sites
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=1000.0, delta=0.01, protocol="secagg")
    d = res.detail
    fine, edges = d.grid_round.edges, d.round.edges
    s = np.clip(np.concatenate([f["pred"].to_numpy() for f in frames]), fine[0], fine[-1])
    y = np.concatenate([f["y"].to_numpy() for f in frames])
    assert 0.05 < y.mean() < 0.15
    balanced = np.array([0.5 * np.mean(s[y == 0] < e) + 0.5 * np.mean(s[y == 1] < e) for e in fine[1:-1]])
    pooled = np.array([np.mean(s < e) for e in fine[1:-1]])
    b = d.n_bins
    for share, same in ((balanced, True), (pooled, False)):
        expected = helpers.balanced_edges(s, y, fine, b, share=share)
        assert (expected.shape == edges.shape and np.allclose(edges, expected, rtol=0, atol=1e-12)) == same
    # the positives spread over the bins: no bin holds a third of them
    h1 = np.bincount(np.minimum(np.searchsorted(edges, s, side="right") - 1, b - 1)[y == 1], minlength=b)
    np.testing.assert_array_equal(d.round.counts1, h1)
    assert h1.max() < y.sum() / 3


def test_a_calibration_cache_file_serves_the_next_process_and_the_sites_still_check(exact_sites, pki, helpers,
                                                                                     tmp_path):
    """With ``calibration_cache`` the analyst stores the budget split and both rounds' share sigmas; a federation
    opened on the same file (another process's) reads them and adds nothing, proposes the same shares, and every
    site checks them (a share sigma edited into the file, its hash made to match, is refused by the sites)."""
    from dsroc.histogram.stages import release_parts, two_stage_plan
    from dsroc.secagg import share_sigma
    from dsroc.secagg.calibrations import CalibrationCache, _digest, calibration_key

    path = tmp_path / "calibrations.json"
    frames, addresses, _ = exact_sites
    with helpers.federation(addresses, pki, calibration_cache=path) as fed:
        first = fed.validate("test", "y", score="pred", epsilon=900.0, delta=0.01, protocol="secagg")
    stored = path.read_bytes()
    cache = CalibrationCache.loads(stored)
    plan = two_stage_plan(900.0, 0.01)
    assert len(cache) == 3
    honest = len(addresses)
    key = calibration_key("share_sigma", epsilon=plan.epsilon2, delta=plan.delta2, honest=honest,
                          parts=tuple(release_parts(score_sums=True)), hint=plan.sigma2 / honest**0.5)
    assert cache.get(key) == first.detail.round.share_sigma
    assert first.detail.round.share_sigma == share_sigma(plan.epsilon2, plan.delta2, honest,
                                                         parts=tuple(release_parts(score_sums=True)),
                                                         hint=plan.sigma2 / honest**0.5)
    with helpers.federation(addresses, pki, calibration_cache=path) as fed:
        again = fed.validate("test", "y", score="pred", epsilon=900.0, delta=0.01, protocol="secagg")
    assert path.read_bytes() == stored  # nothing new to store
    assert again.detail.round.share_sigma == first.detail.round.share_sigma
    body = json.loads(stored)
    for entry in body["entries"]:  # a share too small for its round, its hash made to match (the analyst's file)
        if json.loads(entry["key"])["kind"] == "share_sigma":
            entry["value"] = repr(float(entry["value"]) * 0.5)
            entry["sha256"] = _digest(entry["key"], float(entry["value"]))
    path.write_text(json.dumps(body))
    with helpers.federation(addresses, pki, calibration_cache=path) as fed, \
            pytest.raises(Exception, match="share_sigma .* is too small"):
        fed.validate("test", "y", score="pred", epsilon=900.0, delta=0.01, protocol="secagg")
