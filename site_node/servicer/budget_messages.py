"""The budget's records as ``dsroc.v1`` messages (and the analyst's planned releases from them)."""

from __future__ import annotations

from dsroc.v1 import site_pb2 as pb

from ..protocols.budget import ReleaseQuery, check_query_count
from ..store.ledger import BudgetStatus

__all__ = ["budget_message", "query_message", "planned_releases"]


def budget_message(b: BudgetStatus) -> pb.BudgetStatus:
    """A population's :class:`~site_node.store.ledger.BudgetStatus` as ``dsroc.v1.BudgetStatus``."""
    return pb.BudgetStatus(
        dataset=b.dataset, budget_epsilon=b.budget_epsilon, budget_delta=b.budget_delta, mu_budget=b.mu_budget,
        mu_spent=b.mu_spent, mu_remaining=b.mu_remaining, epsilon_spent=b.epsilon_spent, releases=b.releases,
        delta_spent=b.delta_spent, epsilon_remaining=b.epsilon_remaining,
        accounting=b.accounting, reservations=b.reservations,
        left=[pb.ReleasesLeft(query=query_message(x.query), releases=x.releases, at_least=x.at_least,
                              refused=x.refused) for x in b.left],
    )


def planned_releases(messages) -> list[ReleaseQuery]:
    """``dsroc.v1.ReleaseQuery`` messages as :class:`~site_node.protocols.budget.ReleaseQuery` records (at most
    :data:`~site_node.protocols.budget.MAX_QUERIES`, checked before any is read)."""
    check_query_count(len(messages))
    return [ReleaseQuery(q.protocol, q.epsilon, q.delta, tuple(q.scalars), q.count_share, q.score_sums)
            for q in messages]


def query_message(q: ReleaseQuery) -> pb.ReleaseQuery:
    """A :class:`~site_node.protocols.budget.ReleaseQuery` as ``dsroc.v1.ReleaseQuery``."""
    return pb.ReleaseQuery(protocol=q.protocol, epsilon=q.epsilon, delta=q.delta, scalars=list(q.scalars),
                           count_share=q.count_share, score_sums=q.score_sums)
