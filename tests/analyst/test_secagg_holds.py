"""All or nothing in the secagg protocol over three real TLS sites: every site holds its budget when it masks,
so no site is charged unless every site answers, and a release competing for a held budget is refused.

Real TLS site servers on loopback, real SQLite ledgers read directly.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time

import grpc
import pytest

from analyst.connection import SiteError
from analyst.protocols.secagg_rounds import advertise_round, mask_round, sum_round, unmask_round
from site_node.init import link_peers
from site_node.testing import running_server

C = grpc.StatusCode


def _ledger(config) -> tuple[int, int]:
    """(releases, unexpired holds) in a site's ledger file, read directly."""
    with sqlite3.connect(config.parent / "state" / "ledger.sqlite") as db:
        releases = db.execute("SELECT COUNT(*) FROM releases").fetchone()[0]
        holds = db.execute("SELECT COUNT(*) FROM reservations WHERE expires > ?", (time.time(),)).fetchone()[0]
    return releases, holds


@pytest.fixture
def three_sites(tmp_path, pki, helpers):
    """Three peered running sites; s2 has a budget of epsilon 3 (and at most 3 per release)."""
    frames = helpers.site_frames(seed=31)[:3]
    paths = []
    for k, frame in enumerate(frames):
        path = helpers.write_site(tmp_path / f"s{k}", f"s{k}", frame, pki)
        if k == 2:
            path.write_text(path.read_text().replace("budget_epsilon = 200.0", "budget_epsilon = 3.0")
                            .replace("max_epsilon = 10.0", "max_epsilon = 3.0"))
        paths.append(path)
    link_peers(paths)
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(running_server(p)) for p in paths]
        yield paths, [s.bound_address for s in servers]


def test_a_site_out_of_budget_charges_no_site_and_the_holds_return(three_sites, pki, helpers):
    paths, addresses = three_sites
    with helpers.federation(addresses[2:], pki) as fed:  # spend s2's budget alone
        fed.validate("test", "y", score="pred", epsilon=3.0, delta=0.05, protocol="histogram", n_bins=10,
                     spacing="equal")
    assert _ledger(paths[2]) == (1, 0)
    with helpers.federation(addresses, pki) as fed:
        with pytest.raises(SiteError) as err:
            fed.validate("test", "y", score="pred", epsilon=2.0, delta=0.01, protocol="secagg")
    assert err.value.site == "s2" and err.value.code == C.RESOURCE_EXHAUSTED
    assert "nothing was charged at any site" in err.value.message
    # s0 and s1 masked and held their budget; the analyst returned the holds at once
    assert _ledger(paths[0]) == (0, 0) and _ledger(paths[1]) == (0, 0) and _ledger(paths[2]) == (1, 0)


def test_a_held_budget_refuses_a_competing_release_and_the_round_completes(three_sites, pki, helpers):
    """Between the masks and the seeds another release at s2 would spend the budget the round needs; it is
    refused (the hold counts as spent), and the round charges every site once (without holds s2 would have
    refused to reveal its seed after s0 and s1 were charged)."""
    paths, addresses = three_sites
    with helpers.federation(addresses, pki) as fed, fed.session("test", "y", score="pred") as s:
        r = mask_round(s, advertise_round(s, epsilon=2.0, delta=0.01, n_bins=10, spacing="equal", colluders=0))
        assert all(m.reservation_id for m in r.masked.values())
        assert [_ledger(p) for p in paths] == [(0, 1)] * 3
        with helpers.federation(addresses[2:], pki) as alone:
            with pytest.raises(SiteError) as err:
                alone.validate("test", "y", score="pred", epsilon=3.0, delta=0.05, protocol="histogram", n_bins=10,
                               spacing="equal")
        assert err.value.code == C.RESOURCE_EXHAUSTED and "held by validations in progress" in err.value.message
        total = sum_round(unmask_round(s, r))
    assert total.counts0.sum() + total.counts1.sum() > 0
    assert [_ledger(p) for p in paths] == [(1, 0)] * 3
