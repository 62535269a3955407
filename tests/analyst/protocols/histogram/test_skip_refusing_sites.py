"""Leaving out a site too small to answer (issue 35): with ``skip_refusing_sites`` the validation goes on without a site
that refuses by the privacy-level rule, decided before any site is charged; real TLS sites on loopback, their SQLite
ledgers read directly, the pooled truth of the other sites' patients by scipy."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time

import grpc
import numpy as np
import pandas as pd
import pytest
from scipy.stats import mannwhitneyu

from analyst.cli import main
from analyst.connection import SiteError
from site_node.testing import running_server


def _ledger(config) -> tuple[set, int]:
    """(release ids, unexpired holds) of a site's ledger file."""
    with sqlite3.connect(config.parent / "state" / "ledger.sqlite") as db:
        ids = {r[0] for r in db.execute("SELECT release_id FROM releases")}
        holds = db.execute("SELECT COUNT(*) FROM reservations WHERE expires > ?", (time.time(),)).fetchone()[0]
    return ids, holds


def _sites(tmp_path, pki, helpers, *, max_epsilon=None):
    """Three sites: s0 and s1 of 400 patients, s2 with 2 events (q = 5); ``max_epsilon``: s1's limit per release."""
    frames = helpers.site_frames(seed=23)[:3]
    small = pd.concat([frames[2][frames[2]["y"] == 0], frames[2][frames[2]["y"] == 1].iloc[:2]])
    paths = [helpers.write_site(tmp_path / f"s{k}", f"s{k}", f, pki) for k, f in enumerate([*frames[:2], small])]
    if max_epsilon is not None:
        paths[1].write_text(paths[1].read_text().replace("max_epsilon = 10.0", f"max_epsilon = {max_epsilon!r}"))
    return frames[:2], paths


def test_a_site_with_two_events_is_left_out_before_any_charge_and_the_others_validate(tmp_path, pki, helpers):
    frames, paths = _sites(tmp_path, pki, helpers)
    with contextlib.ExitStack() as stack:
        addresses = [stack.enter_context(running_server(p)).bound_address for p in paths]
        with helpers.federation(addresses, pki) as fed:
            with pytest.raises(SiteError) as err:  # by default the small site still blocks, and nothing is charged
                fed.validate("test", "y", score="pred", epsilon=5.0, delta=1e-5)
            assert err.value.site == "s2" and err.value.code == grpc.StatusCode.PERMISSION_DENIED
            assert [_ledger(p) for p in paths] == [(set(), 0)] * 3
            result = fed.validate("test", "y", score="pred", epsilon=5.0, delta=1e-5, skip_refusing_sites=True)
    assert result.sites == ("s0", "s1")
    left = result.detail.left_out
    assert list(left) == ["s2"] and left["s2"].startswith("privacy level") and "positives" in left["s2"]
    assert any(w.startswith("site s2 left out") and "patients of s0, s1 only" in w for w in result.warnings)
    # s2 held and charged nothing; s0 and s1 were charged exactly the two stages whose releases the result used
    assert _ledger(paths[2]) == (set(), 0)
    for k in (0, 1):
        used = {result.detail.grid_releases[f"s{k}"].release_id, result.detail.releases[f"s{k}"].release_id}
        assert _ledger(paths[k]) == (used, 0)
    # every estimate is of s0's and s1's patients: their count, and their pooled AUC (scipy) inside the interval
    pooled = pd.concat(frames)
    assert result.n == pytest.approx(len(pooled), abs=6 * result.detail.sigma * np.sqrt(2 * result.detail.n_bins))
    pos, neg = pooled.loc[pooled["y"] == 1, "pred"], pooled.loc[pooled["y"] == 0, "pred"]
    auc = mannwhitneyu(pos, neg).statistic / (len(pos) * len(neg))
    assert result.auc_ci[0] <= auc <= result.auc_ci[1]


def test_a_site_refusing_for_another_reason_is_not_left_out(tmp_path, pki, helpers):
    """s1's policy allows epsilon 0.5 per release (PERMISSION_DENIED too, but about the request, not its size): the
    validation fails as without the option, and no site is charged."""
    _, paths = _sites(tmp_path, pki, helpers, max_epsilon=0.5)
    with contextlib.ExitStack() as stack:
        addresses = [stack.enter_context(running_server(p)).bound_address for p in paths]
        with helpers.federation(addresses, pki) as fed:
            with pytest.raises(SiteError) as err:
                fed.validate("test", "y", score="pred", epsilon=1.0, delta=1e-5, skip_refusing_sites=True)
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED and "above this site's limit" in err.value.message
    assert "nothing was released or charged at any site" in err.value.message
    assert [_ledger(p) for p in paths] == [(set(), 0)] * 3


def test_the_cli_flag_leaves_the_small_site_out_and_the_report_names_it(tmp_path, pki, helpers, capsys):
    _, paths = _sites(tmp_path, pki, helpers)
    with contextlib.ExitStack() as stack:
        addresses = [stack.enter_context(running_server(p)).bound_address for p in paths]
        (tmp_path / "analyst.token").write_text(helpers.TOKEN + "\n")
        lines = []
        for k, a in enumerate(addresses):
            lines += ["[[sites]]", f'name = "s{k}"', f'address = "{a}"', 'token_file = "analyst.token"',
                      f'ca_file = "{pki.ca_cert}"', ""]
        (tmp_path / "federation.toml").write_text("\n".join(lines))
        out = tmp_path / "report"
        assert main(["validate", "--federation", str(tmp_path / "federation.toml"), "--dataset", "test", "--outcome",
                     "y", "--score", "pred", "--epsilon", "5", "--delta", "1e-5", "--out", str(out), "--quiet",
                     "--skip-refusing"]) == 0
    report = json.loads((out / "report.json").read_text())
    helpers.check_schema(report)
    assert report["sites"] == ["s0", "s1"] and list(report["detail"]["left_out"]) == ["s2"]
    assert "site s2 left out" in " ".join((out / "summary.txt").read_text().split())
    assert _ledger(paths[2]) == (set(), 0)
