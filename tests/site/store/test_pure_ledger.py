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
print(status.releases, status.pure, round(status.epsilon_spent, 6), left, "dp_accounting" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    releases, pure, spent, left0, left1, imported = out.stdout.split()
    assert (releases, pure, imported) == ("2", "True", "False")
    # two releases at 5 composed to at most 10 on the grid; 20 - 10 leaves two more survival releases
    assert 10.0 - 2e-3 <= float(spent) <= 10.0 + 5 * 5e-4
    assert (left0, left1) == ("(2,", "False)")
