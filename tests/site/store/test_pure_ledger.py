"""The ledger of pure epsilon-DP releases (histogram, survival) composes them in closed form: charging, holding and
counting them never imports dp-accounting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_histogram_ledger_path_never_imports_dp_accounting(tmp_path):
    """A histogram and a survival release planned, charged, held and counted on a real SQLite ledger, in a fresh
    interpreter: dp-accounting (1.3 CPU-s to import) stays out of it."""
    script = f"""
import sys
from site_node.protocols.histogram.release import LAPLACE
from site_node.store.ledger import ReleaseKey, SqliteLedger
from site_node.config import Policy
from dsroc.histogram.stages import laplace_release_scales
from dsroc.privacy.accounting import DiscreteLaplace, discretization_for
from dsroc.survival.release import survival_release_scales

policy = Policy(budget_epsilon=20.0, budget_delta=1e-5)
interval = discretization_for(policy.budget_epsilon)
ledger = SqliteLedger({str(tmp_path / "ledger.sqlite")!r}, interval=interval)
c, s, _ = laplace_release_scales(5.0, score_sums=True, interval=interval)
t, r = survival_release_scales(5.0, risk_sums=True, interval=interval)
for name, events in (("h", (DiscreteLaplace(c), DiscreteLaplace(s, 2))),
                     ("s", (DiscreteLaplace(t), DiscreteLaplace(r, 2), DiscreteLaplace(r, 2)))):
    key = ReleaseKey("pop", "col:pred", "y", name, "{{}}")
    hold = ledger.reserve(key, dataset="d", analyst="a", events=events, epsilon=5.0, delta=1e-6,
                          fingerprint="f", policy=policy)
    ledger.release(key, dataset="d", analyst="a", events=events, epsilon=5.0, delta=1e-6, rule="r",
                   fingerprint="f", policy=policy, make=lambda seed: (b"x", 1, 1), store=True,
                   reservation=hold.reservation_id)
status = ledger.budget("pop", policy)
left = ledger.releases_left("pop", policy, events)
print(status.releases, status.accounting == "pure epsilon-dp (basic composition)", round(status.epsilon_spent, 6), left, "dp_accounting" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    releases, accounting, spent, left0, left1, imported = out.stdout.split()
    assert (releases, accounting, imported) == ("2", "True", "False")
    # two releases at 5 composed to at most 10 on the grid; 20 - 10 leaves two more survival releases
    assert 10.0 - 2e-3 <= float(spent) <= 10.0 + 5 * 5e-4
    assert (left0, left1) == ("(2,", "False)")


def test_a_ledger_charges_pure_releases_across_the_switch_and_refuses_where_the_pld_refuses(tmp_path):
    """Histogram releases at epsilon 1 on a real SQLite ledger at the init template's budget (20, 0.05): basic
    composition accepts 20, the PLD 35 (dp-accounting, composed here directly); the ledger accepts exactly 35, refuses
    the 36th and says which bound it charged, never below the PLD's epsilon nor above basic composition's."""
    import math

    import pytest
    from dp_accounting.pld import privacy_loss_distribution as pld

    from dsroc.histogram.stages import laplace_release_scales
    from dsroc.privacy.accounting import DiscreteLaplace, discretization_for
    from site_node.config import Policy
    from site_node.errors import ResourceExhausted
    from site_node.store.ledger import ReleaseKey, SqliteLedger

    policy = Policy(budget_epsilon=20.0, budget_delta=0.05)
    interval = discretization_for(policy.budget_epsilon)
    counts, sums, _ = laplace_release_scales(1.0, score_sums=True, interval=interval)
    events = (DiscreteLaplace(counts), DiscreteLaplace(sums, 2))
    steps = sum(math.ceil(e.epsilon / interval) for e in events) * interval  # one release on the grid

    def direct(k):
        out = None
        for e in events:
            one = pld.from_discrete_laplace_mechanism(1.0 / e.scale, sensitivity=e.sensitivity,
                                                      value_discretization_interval=interval).self_compose(k)
            out = one if out is None else out.compose(one)
        return out

    assert direct(35).get_delta_for_epsilon(20.0) <= 0.05 < direct(36).get_delta_for_epsilon(20.0)
    ledger = SqliteLedger(tmp_path / "ledger.sqlite", interval=interval)
    assert ledger.releases_left("pop", policy, events) == (35, False)

    def release(k):
        key = ReleaseKey("pop", "col:pred", "y", "histogram", f'{{"k": {k}}}')
        return ledger.release(key, dataset="d", analyst="a", events=events, epsilon=1.0, delta=0.0, rule="r",
                              fingerprint="f", policy=policy, make=lambda seed: (b"x", 1, 1), store=True)

    for k in range(1, 36):
        assert release(k)[1]
        status = ledger.budget("pop", policy)
        basic = k * steps <= 20.0 - math.log1p(-0.05) + 1e-12
        assert status.releases == k and status.accounting == (
            "pure epsilon-dp (basic composition)" if basic else "privacy loss distribution (pessimistic)")
        if k not in (1, 20, 21, 28, 34, 35):  # where the bound changes and at its ends
            continue
        pld_epsilon, sum_epsilon = direct(k).get_epsilon_for_delta(0.05), k * steps + math.log1p(-0.05)
        assert pld_epsilon - 1e-9 <= status.epsilon_spent <= sum_epsilon + 1e-9
        # the bound it says it used: basic composition's while it suffices, the PLD's after
        assert status.epsilon_spent == pytest.approx(sum_epsilon if basic else pld_epsilon, rel=1e-9)
        assert status.delta_spent <= 0.05
        assert ledger.releases_left("pop", policy, events) == (35 - k, False)
    assert k * steps > 20.1  # the history crossed basic composition's reach
    with pytest.raises(ResourceExhausted, match="would exceed the total budget"):
        release(36)
    assert ledger.budget("pop", policy).releases == 35  # nothing charged
