"""The secagg protocol end to end over five real TLS sites: the sum equals brute force under negligible
noise, the analyst never holds one site's counts, and a compromised site's garbage vector aborts the round."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from analyst.protocols.secagg_rounds import (SecAggAborted, advertise_round, collect_secagg, mask_round,
                                             sum_round, verify_masked)
from dsroc.secagg import masked_digest, receipt_message
from dsroc.v1 import site_pb2 as pb
from site_node.init import link_peers
from site_node.config import load_config
from site_node.signing import ensure_signing_key
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
    root = tmp_path_factory.mktemp("secagg")
    frames = helpers.site_frames(seed=7)
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
    text = str(res)
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
    assert d.grid_round.edges.size - 1 == 50
    # the second: its interior edges are fine edges, its counts brute force, its sums the offsets' within rounding
    edges = d.round.edges
    assert np.isin(edges[1:-1], d.grid_round.edges).all()
    assert d.n_bins == edges.size - 1 == 12  # dsroc.secagg.secagg_n_bins for negligible noise: the study's 12
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
    assert np.isfinite(d.validation.auc_resolved) and "AUC (resolved)" in str(res)
    assert "at the quantiles of a first round" in str(res) and "unavailable by design" in str(res)
    report = json.loads(res.to_json())
    helpers.check_schema(report)
    assert report["detail"]["score_sums"] and len(report["detail"]["grid_round"]["edges"]) == 51
