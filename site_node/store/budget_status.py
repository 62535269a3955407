"""What a population's ledger history means against its budget: the spent epsilon and delta, by the bound the
budget check rests on."""

from __future__ import annotations

from dsroc.privacy.accounting import PLD, Accountant

from ..config import Policy
from .ledger_api import BudgetStatus, budget_mu

__all__ = ["budget_status"]


def budget_status(population: str, policy: Policy, accountant: Accountant, count: int, holds: int = 0, *,
            delta: float = 0.0) -> BudgetStatus:
    # The spent budget by the bound the budget check rests on: a pure history past basic composition's reach is
    # accepted by its privacy-loss distribution, and reported by it (lower: both bounds are valid); at another delta
    # by the same bound too (one curve epsilon(delta), never rising with delta).
    accounting = accountant.accounting(policy.budget_epsilon, policy.budget_delta)
    tight = accounting == PLD
    at_delta = accountant.epsilon(delta, tight=tight) if delta > 0.0 else 0.0
    return BudgetStatus(
        dataset=population, budget_epsilon=policy.budget_epsilon, budget_delta=policy.budget_delta,
        mu_budget=budget_mu(policy.budget_epsilon, policy.budget_delta), mu_spent=accountant.gaussian_mu,
        releases=count, population=population, epsilon_spent=accountant.epsilon(policy.budget_delta, tight=tight),
        delta_spent=accountant.delta(policy.budget_epsilon, tight=tight), accounting=accounting, reservations=holds,
        epsilon_at_delta=at_delta,
    )
