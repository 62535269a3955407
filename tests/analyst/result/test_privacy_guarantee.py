"""The result's privacy statement is computed from what the ledgers charged: for validations with strata, a second
model and by-site analyses over real TLS daemons, the stated epsilon per site and overall equals the accountant's
composition of the releases each site's SQLite ledger recorded for it (read here from the file); epsilon(delta)
never rises with delta; no Gaussian-DP mu is shown for histogram releases."""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from dsroc.privacy.accounting import PLD, Accountant, decode_event, discretization_for
from site_node.cli.init import link_peers
from site_node.testing import running_server

N_SITES, N = 3, 300
BUDGET_EPSILON = 200.0  # the test sites' policy (site_node.testing.configs.POLICY)


def _frames(seed=3):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(N_SITES):
        age = rng.normal(60, 10, N).round()
        y = rng.integers(0, 2, N)
        x = rng.normal(1.2 * y, 1.0)
        out.append(pd.DataFrame({"age": age, "pred": expit(x - 0.5), "pred2": expit(0.7 * x + rng.normal(0, 0.8, N)),
                                 "y": y}))
    return out


@pytest.fixture(scope="module")
def sites(tmp_path_factory, pki, helpers):
    root = tmp_path_factory.mktemp("guarantee")
    with contextlib.ExitStack() as stack:
        configs, ledgers = [], []
        for k, frame in enumerate(_frames()):
            path = helpers.write_site(root / f"s{k}", f"s{k}", frame, pki)
            text = path.read_text().replace('scores = ["pred"]', 'scores = ["pred", "pred2"]')
            path.write_text(text + "\n[policy.strata]\nage = [60.0]\n")
            configs.append(path)
            ledgers.append(root / f"s{k}" / "state" / "ledger.sqlite")
        link_peers(configs)  # the paper protocol's signed releases
        servers = [stack.enter_context(running_server(path)) for path in configs]
        yield [s.bound_address for s in servers], ledgers


def _rows(ledger) -> dict[str, list]:
    """release_id -> decoded events of every release in a site's ledger file."""
    with contextlib.closing(sqlite3.connect(ledger)) as db:
        return {rid: [decode_event(e) for e in json.loads(text)]
                for rid, text in db.execute("SELECT release_id, events FROM releases")}


def _accountant(events) -> Accountant:
    return Accountant(events, value_discretization_interval=discretization_for(BUDGET_EPSILON))


def _composed(events, history, delta: float) -> float:
    """``events`` composed at ``delta`` by the bound the ledger's ``history`` is reported by (the privacy-loss
    distribution where the budget check rests on it, else basic composition for pure releases)."""
    tight = _accountant(history).accounting(BUDGET_EPSILON, 0.05) == PLD
    return _accountant(events).epsilon(delta, tight=tight)


CASES = {  # epsilon and options (another epsilon each: no release of one case is a free replay of another's)
    "strata and by site": (0.7, dict(strata="age", by_site=True)),
    "a second model and by site": (0.75, dict(compare="pred2", by_site=True)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_stated_epsilon_is_the_accountants_composition_of_what_each_ledger_charged(sites, pki, helpers, case):
    addresses, ledgers = sites
    before = [set(_rows(path)) for path in ledgers]
    (epsilon, options), delta = CASES[case], 1e-5
    with helpers.federation(addresses, pki) as fed:
        res = fed.validate("test", "y", score="pred", epsilon=epsilon, delta=delta, **options)
    per_site = {}
    for name, path, old in zip(res.sites, ledgers, before):
        rows = _rows(path)
        new = {rid: events for rid, events in rows.items() if rid not in old}
        # the quantile grid's two stages and the partitioned release: three releases charged at every site
        assert len(new) == 3
        per_site[name] = _composed([e for events in new.values() for e in events],
                                   [e for events in rows.values() for e in events], delta)
        p = res.privacy[name]
        assert p.releases == 3 and p.epsilon == pytest.approx(per_site[name], abs=1e-9)
        assert p.accounting.startswith("pure epsilon-dp") or p.accounting.startswith("privacy loss")
        assert math.isnan(p.mu_spent) and math.isnan(p.mu_remaining)  # not accounted as Gaussian DP
    overall = max(per_site.values())
    assert res.guarantee_epsilon == pytest.approx(overall, abs=1e-9)
    # the stages split epsilon, the partitioned release takes it whole: about twice the request, not the request
    assert 1.9 * epsilon < overall < 2.05 * epsilon
    # each site's whole history at delta by the same bound: this validation's part is never more
    assert all(p.epsilon <= p.epsilon_spent_at_delta + 1e-12 for p in res.privacy.values())
    report = res.to_dict()
    helpers.check_schema(report)
    assert report["guarantee_epsilon"] == pytest.approx(overall, abs=1e-9)
    assert all(report["privacy"][n]["epsilon"] == pytest.approx(per_site[n], abs=1e-9) for n in res.sites)
    text = " ".join(str(res).split())  # the one-screen summary wraps its privacy line
    assert f"this validation: epsilon {overall:.4g} at delta {delta:g} per patient (3 releases per site" in text
    assert "Gaussian DP" not in text and "whole answer is epsilon-DP" not in " ".join(text.split())
    frame = res.to_frame("sites")
    assert frame["mu_spent"].isna().all()
    np.testing.assert_allclose(frame["epsilon"], [per_site[n] for n in res.sites], atol=1e-9)


def test_epsilon_spent_never_rises_with_delta_on_a_mixed_history(sites, pki, helpers):
    """A paper (Gaussian) release on top of histogram (pure) releases: every view of the history at a delta comes
    from one bound of the site's accountant, so a larger delta never shows a larger epsilon."""
    addresses, ledgers = sites
    with helpers.federation(addresses, pki) as fed:
        fed.validate("test", "y", score="pred", epsilon=2.0, delta=1e-5, n_bins=10, spacing="equal")
        res = fed.validate("test", "y", score="pred", epsilon=5.0, delta=0.01, protocol="paper")
        views = {d: fed.budget("test", epsilon=1.0, delta=d) for d in (1e-5, 0.01, 0.05)}
    for name, path in zip(res.sites, ledgers):
        events = [e for events in _rows(path).values() for e in events]
        spent = [views[d][name]["epsilon_at_delta"] for d in sorted(views)]
        assert spent[0] >= spent[1] >= spent[2] > 0
        budget = views[0.05][name]
        assert spent[2] == pytest.approx(budget["epsilon_spent"], abs=1e-9)  # 0.05 is the budget's delta
        tight = budget["accounting"].startswith("privacy loss")
        interval = discretization_for(BUDGET_EPSILON)
        for d in views:  # the accountant's own value, at each delta, from the ledger file
            assert views[d][name]["epsilon_at_delta"] == pytest.approx(
                Accountant(events, value_discretization_interval=interval).epsilon(d, tight=tight), abs=1e-9)
        p = res.privacy[name]
        # this validation alone: one Gaussian release calibrated to (5, 0.01)
        assert p.releases == 1 and p.epsilon == pytest.approx(5.0, abs=1e-3)
        assert p.epsilon_spent_at_delta == pytest.approx(views[0.01][name]["epsilon_at_delta"], abs=1e-9)
        assert p.epsilon_spent_at_delta >= p.epsilon_spent - 1e-9  # at 0.01, never below the value at 0.05
        assert math.isnan(p.mu_spent)  # a mixed history: a Gaussian mu would leave out the histogram releases


def test_unknown_release_ids_are_refused_naming_the_field(sites, pki, helpers):
    import grpc

    from analyst.connection import SiteError
    from dsroc.v1 import site_pb2 as pb

    addresses, ledgers = sites
    with helpers.federation(addresses, pki) as fed:
        conn = fed.connections[0]
        with pytest.raises(SiteError) as err:
            conn.call("Budget", pb.BudgetRequest(dataset="test", delta=1e-5, release_ids=["0" * 32]))
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "release_ids" in err.value.message
        with pytest.raises(SiteError) as err:
            conn.call("Budget", pb.BudgetRequest(dataset="test", delta=1.5))
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "delta" in err.value.message
