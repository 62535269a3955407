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
from analyst.protocols.histogram.secagg_rounds import (advertise_round, collect_secagg, mask_round, next_round, sum_round,
                                             unmask_round)
from dsroc.histogram.stages import two_stage_plan
from site_node.cli.init import link_peers
from site_node.testing import running_server

C = grpc.StatusCode


def _ledger(config) -> tuple[int, int]:
    """(releases, unexpired holds) in a site's ledger file, read directly."""
    with sqlite3.connect(config.parent / "state" / "ledger.sqlite") as db:
        releases = db.execute("SELECT COUNT(*) FROM releases").fetchone()[0]
        holds = db.execute("SELECT COUNT(*) FROM reservations WHERE expires > ?", (time.time(),)).fetchone()[0]
    return releases, holds


@contextlib.contextmanager
def _running_sites(root, pki, helpers, *, count: int, seed: int):
    """``count`` peered running sites; the last has a budget of epsilon 3 (and at most 3 per release)."""
    paths = []
    for k, frame in enumerate(helpers.site_frames(seed=seed)[:count]):
        path = helpers.write_site(root / f"s{k}", f"s{k}", frame, pki)
        if k == count - 1:
            path.write_text(path.read_text().replace("budget_epsilon = 200.0", "budget_epsilon = 3.0")
                            .replace("max_epsilon = 10.0", "max_epsilon = 3.0"))
        paths.append(path)
    link_peers(paths)
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(running_server(p)) for p in paths]
        yield paths, [s.bound_address for s in servers]


@pytest.fixture
def three_sites(tmp_path, pki, helpers):
    """Three peered running sites; s2 has a budget of epsilon 3 (and at most 3 per release)."""
    with _running_sites(tmp_path, pki, helpers, count=3, seed=31) as sites:
        yield sites


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


def test_a_budget_that_fits_the_first_round_only_charges_no_site(three_sites, pki, helpers):
    """Issue 20, gap 2: the two rounds were held one after the other, so s2 was charged the first round and then
    refused the second (as were s0 and s1, for a grid nobody used). Both rounds are held at the first mask.
    After a release at epsilon 2.5, s2's budget of epsilon 3 fits the first round at epsilon 3 (composed: 1.77 at
    delta 0.05) but not both rounds (3.27)."""
    paths, addresses = three_sites
    with helpers.federation(addresses[2:], pki) as alone:
        alone.validate("test", "y", score="pred", epsilon=2.5, delta=0.01, protocol="histogram", n_bins=10,
                       spacing="equal")
    with helpers.federation(addresses, pki) as fed:
        with pytest.raises(SiteError) as err:
            fed.validate("test", "y", score="pred", epsilon=3.0, delta=0.01, protocol="secagg")
    assert err.value.site == "s2" and err.value.code == C.RESOURCE_EXHAUSTED
    assert "nothing was charged at any site" in err.value.message
    assert [_ledger(p) for p in paths] == [(0, 0), (0, 0), (1, 0)]


def test_the_second_round_is_held_from_the_first_and_charged_once(three_sites, pki, helpers):
    """Round 1's mask holds both rounds; a release that fits s2's budget beside round 1 but not beside both is
    refused between the rounds; round 2 takes over the held budget and each round is charged once."""
    paths, addresses = three_sites
    with helpers.federation(addresses, pki) as fed, fed.session("test", "y", score="pred") as s:
        stages = two_stage_plan(3.0, 0.01, score_sums=True)
        nxt = next_round(s, epsilon=stages.epsilon2, delta=stages.delta2, colluders=0, score_sums=True,
                         summed_sigma=stages.sigma2)
        first = mask_round(s, advertise_round(s, epsilon=stages.epsilon1, delta=stages.delta1, n_bins=50,
                                              spacing="logit", colluders=0, next_round=nxt))
        assert all(m.follow_up_reservation_id for m in first.masked.values())
        assert [_ledger(p) for p in paths] == [(0, 2)] * 3
        sum_round(unmask_round(s, first))
        assert [_ledger(p) for p in paths] == [(1, 1)] * 3
        with helpers.federation(addresses[2:], pki) as alone:  # epsilon 2.5 fits beside round 1 alone (1.77)
            with pytest.raises(SiteError) as err:
                alone.validate("test", "y", score="pred", epsilon=2.5, delta=0.01, protocol="histogram", n_bins=10,
                               spacing="equal")
        assert err.value.code == C.RESOURCE_EXHAUSTED and "held by validations in progress" in err.value.message
        second = mask_round(s, advertise_round(s, epsilon=stages.epsilon2, delta=stages.delta2, colluders=0,
                                               interior=[0.2, 0.4, 0.6, 0.8], score_sums=True,
                                               summed_sigma=stages.sigma2), follow_ups=first.follow_ups)
        assert [_ledger(p) for p in paths] == [(1, 1)] * 3  # the follow-up hold became round 2's
        sum_round(unmask_round(s, second))
    assert [_ledger(p) for p in paths] == [(2, 0)] * 3
    with sqlite3.connect(paths[0].parent / "state" / "ledger.sqlite") as db:
        kinds = [k for (k,) in db.execute("SELECT kind FROM releases")]
    assert kinds == ["secagg", "secagg"]


def test_an_abandoned_first_round_returns_both_holds(three_sites, pki, helpers):
    paths, addresses = three_sites
    with helpers.federation(addresses, pki) as fed, fed.session("test", "y", score="pred") as s:
        nxt = next_round(s, epsilon=1.0, delta=0.005, colluders=0, score_sums=True)
        first = mask_round(s, advertise_round(s, epsilon=0.3, delta=0.005, n_bins=10, spacing="equal",
                                              colluders=0, next_round=nxt))
        assert [_ledger(p) for p in paths] == [(0, 2)] * 3
        s.cancel(first.holds)
        s.cancel(first.follow_ups)
        assert [_ledger(p) for p in paths] == [(0, 0)] * 3


def test_a_follow_up_hold_is_only_taken_over_by_the_release_it_was_held_for(three_sites, pki, helpers):
    """The analyst cannot move a follow-up hold to another release: round 2 with other privacy parameters than the
    ones held is refused, and nothing is held or charged for it."""
    paths, addresses = three_sites
    with helpers.federation(addresses, pki) as fed, fed.session("test", "y", score="pred") as s:
        nxt = next_round(s, epsilon=1.0, delta=0.005, colluders=0, score_sums=True)
        first = mask_round(s, advertise_round(s, epsilon=0.3, delta=0.005, n_bins=10, spacing="equal",
                                              colluders=0, next_round=nxt))
        sum_round(unmask_round(s, first))
        other = advertise_round(s, epsilon=1.2, delta=0.005, colluders=0, interior=[0.3, 0.7], score_sums=True)
        with pytest.raises(SiteError) as err:
            mask_round(s, other, follow_ups=first.follow_ups)
        assert err.value.code == C.INVALID_ARGUMENT and "follow_up_reservation_id" in err.value.message
        assert [_ledger(p) for p in paths] == [(1, 0)] * 3  # the refused round returned every follow-up hold


def test_a_site_that_drops_out_of_a_round_with_dropouts_is_left_out_and_not_charged(tmp_path, pki, helpers):
    """With ``dropouts=1`` a site that refuses to mask (here: out of budget) no longer aborts the validation: the
    other three sites' sum is recovered without it (the survivors reveal their pairwise seeds with it), the
    second round runs over the survivors and takes over their holds, and the site that dropped is charged nothing."""
    with _running_sites(tmp_path, pki, helpers, count=4, seed=33) as (paths, addresses):
        with helpers.federation(addresses[3:], pki) as alone:  # spend s3's budget
            alone.validate("test", "y", score="pred", epsilon=3.0, delta=0.05, protocol="histogram", n_bins=10,
                           spacing="equal")
        with helpers.federation(addresses, pki) as fed:
            res = fed.validate("test", "y", score="pred", epsilon=2.0, delta=0.01, protocol="secagg", dropouts=1)
    frames = helpers.site_frames(seed=33)[:4]
    d = res.detail
    assert d.grid_round.dropped == ("s3",) and d.round.dropped == () and set(d.round.sites) == {"s0", "s1", "s2"}
    assert all(a.honest_shares == 3 for a in d.round.sites.values())  # 4 sites less 1 dropout, no colluder
    assert [_ledger(p) for p in paths] == [(2, 0)] * 3 + [(1, 0)]
    n3, n4 = sum(len(f) for f in frames[:3]), len(frames[3])
    assert abs(res.n - n3) < 0.25 * n4  # s3's patients are not in the sum
    assert "dropped out" in res.summary(verbose=True) and res.to_dict()["detail"]["dropped"] == ["s3"]


def test_a_site_unreachable_at_the_advertisement_is_left_out_of_a_round_with_dropouts(tmp_path, pki, helpers):
    """Dropout at the first step: s3 goes down after the session opened; with ``dropouts=1`` the round is advertised
    again over the others (nothing was held) and their sum is charged; s3's ledger is untouched."""
    frames = helpers.site_frames(seed=34)[:4]
    paths = [helpers.write_site(tmp_path / f"s{k}", f"s{k}", f, pki) for k, f in enumerate(frames)]
    link_peers(paths)
    with contextlib.ExitStack() as stack, contextlib.ExitStack() as last:
        servers = [stack.enter_context(running_server(p)) for p in paths[:3]] + [
            last.enter_context(running_server(paths[3]))]
        with helpers.federation([s.bound_address for s in servers], pki) as fed, \
                fed.session("test", "y", score="pred") as s:
            last.close()  # s3 is gone
            total = collect_secagg(s, epsilon=2.0, delta=0.01, n_bins=10, spacing="equal", dropouts=1)
    assert total.dropped == ("s3",) and set(total.sites) == {"s0", "s1", "s2"}
    assert all(a.honest_shares == 3 for a in total.sites.values())
    assert [_ledger(p) for p in paths] == [(1, 0)] * 3 + [(0, 0)]


def test_a_round_refused_after_a_charged_round_is_not_told_nothing_was_charged(three_sites, pki, helpers):
    """Before: a round abandoned at the masks said "nothing was charged at any site" although an earlier round of
    the same validation had charged every site."""
    paths, addresses = three_sites
    with helpers.federation(addresses, pki) as fed, fed.session("test", "y", score="pred") as s:
        sum_round(unmask_round(s, mask_round(s, advertise_round(s, epsilon=3.0, delta=0.01, n_bins=10,
                                                                spacing="equal", colluders=0))))
        with pytest.raises(SiteError) as err:  # s2's budget of epsilon 3 does not fit a second round at 3
            mask_round(s, advertise_round(s, epsilon=3.0, delta=0.01, n_bins=8, spacing="equal", colluders=0))
    assert err.value.site == "s2" and err.value.code == C.RESOURCE_EXHAUSTED
    assert "nothing was charged" not in err.value.message and "replays" not in err.value.message
    assert err.value.message.endswith("charged so far: s0 1 release at epsilon 3, s1 1 release at epsilon 3, "
                                      "s2 1 release at epsilon 3")
    assert [_ledger(p) for p in paths] == [(1, 0)] * 3
