"""Boyd's per-site release combined by the analyst (analyst.boyd) over five real TLS sites."""

from __future__ import annotations

import numpy as np
import pytest

from analyst.boyd import boyd_validation


def strict_auc(s, y):
    x, z = s[y == 0], s[y == 1]
    return float((x[:, None] < z[None, :]).mean())


def test_combined_release_estimates_the_stratified_auc(five_sites, pki, helpers):
    frames, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        result = boyd_validation(fed, "test", "y", score="pred", epsilon=10.0, delta=0.01)
    pairs = [(f["y"] == 1).sum() * (f["y"] == 0).sum() for f in frames]
    stratified = sum(p * strict_auc(f["pred"].to_numpy(), f["y"].to_numpy()) for p, f in zip(pairs, frames)) / sum(pairs)
    scale = max(r.auc_scale for r in result.sites.values())
    assert abs(result.auc - stratified) < 10 * scale
    assert set(result.sites) == {f"s{k}" for k in range(5)}
    assert all(r.n == 400 for r in result.sites.values())
    assert "bounded DP" in result.privacy_unit and "stratified" in str(result)
    assert 0.0 <= result.average_precision <= 1.0
    with helpers.federation(addresses, pki) as fed:
        again = boyd_validation(fed, "test", "y", score="pred", epsilon=10.0, delta=0.01)
    assert again.auc == result.auc and all(r.repeated for r in again.sites.values())


def test_bad_requests_fail_before_any_site_is_asked(five_sites, pki, helpers):
    _, addresses, _ = five_sites
    with helpers.federation(addresses, pki) as fed:
        for kw, match in (({"epsilon": 0.0, "delta": 0.01}, "epsilon"), ({"epsilon": 1.0, "delta": 0.0}, "delta"),
                          ({"epsilon": 1.0, "delta": 1.0}, "delta")):
            with pytest.raises(ValueError, match=match):
                boyd_validation(fed, "test", "y", score="pred", **kw)
