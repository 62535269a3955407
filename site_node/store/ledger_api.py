"""What the privacy ledger records and answers: release keys and plans, releases, holds, budget status, and its interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from dsroc import analytic_gaussian_sigma, gdp_release_mu
from dsroc.privacy.accounting import EXACT_GAUSSIAN, Accountant, Gaussian

from ..config import Policy
from ..errors import InvalidArgument

__all__ = ["ReleaseKey", "ReleasePlan", "Release", "Reservation", "BudgetStatus", "budget_mu", "Ledger",
           "HOLD_SECONDS", "MAX_RELEASES_LEFT", "MAX_VALIDATION_RELEASES", "asked_delta", "validation_ids"]

# How long a PrepareRelease holds its budget at most (the analyst's commit follows within a round trip).
HOLD_SECONDS = 60.0
# Releases-left counts stop here ("at least").
MAX_RELEASES_LEFT = 1000
# The most releases one Budget call composes for a validation (BudgetRequest.release_ids): a validation makes a few
# per site (two stages, strata, a second model), and the composition's CPU stays bounded per call.
MAX_VALIDATION_RELEASES = 64


def asked_delta(delta, release_ids) -> float:
    """BudgetRequest.delta: 0 (not asked; refused with release ids) or in (0, 1), else InvalidArgument."""
    delta = float(delta)
    if delta == 0.0 and not release_ids:
        return 0.0
    if not 0.0 < delta < 1.0:
        raise InvalidArgument(f"delta must lie strictly between 0 and 1 (the delta at which the releases' epsilon is "
                              f"reported), got {delta}")
    return delta


def validation_ids(release_ids) -> list[str]:
    """BudgetRequest.release_ids, each once and sorted, or InvalidArgument when there are too many to compose."""
    ids = sorted({str(r) for r in release_ids})
    if len(ids) > MAX_VALIDATION_RELEASES:
        raise InvalidArgument(f"release_ids: at most {MAX_VALIDATION_RELEASES} releases are composed at once, "
                              f"got {len(ids)}")
    return ids


@dataclass(frozen=True)
class ReleaseKey:
    """What makes two release requests the same release: the population's source and outcome, the
    kind of release and the request's canonical parameters (JSON)."""

    population: str
    source: str
    outcome: str
    kind: str
    request: str


@dataclass(frozen=True)
class ReleasePlan:
    """A release request that passed every check: what the ledger needs to hold, charge or replay it
    (the arguments of :meth:`Ledger.release` and :meth:`Ledger.reserve`)."""

    key: ReleaseKey
    dataset: str
    analyst: str
    events: tuple
    epsilon: float
    delta: float
    rule: str
    fingerprint: str
    make: Callable[[bytes], tuple[bytes, int, int]]
    store: bool


@dataclass(frozen=True)
class Release:
    """A release recorded in the ledger; ``payload`` is what was released (stored or regenerated)."""

    release_id: str
    key: ReleaseKey
    dataset: str
    events: tuple
    epsilon: float
    delta: float
    rule: str
    created: str
    analyst: str
    payload: bytes
    n0: int
    n1: int

    @property
    def mu(self) -> float:
        """Gaussian-DP mu of the release's continuous Gaussian noise (0 when it has none)."""
        return Accountant([e for e in self.events if isinstance(e, Gaussian)]).gaussian_mu


@dataclass(frozen=True)
class Reservation:
    """A held budget (PrepareRelease): ``reservation_id`` is empty when the release was made before (a free replay);
    ``follow_up_id`` the hold of the release that follows it (the second stage of a two-stage grid), when asked for."""

    reservation_id: str
    expires_in: float
    repeated: bool
    follow_up_id: str = ""


@dataclass(frozen=True)
class BudgetStatus:
    """Spent and remaining budget of one population (reported under a dataset's name).

    ``epsilon_spent`` is the composed history's epsilon at the budget's delta (the accountant's,
    never below the exact value); ``delta_spent`` its delta at the budget's epsilon; a new release
    fits when, composed onto the history, ``delta_spent`` stays at most ``budget_delta``. The mu
    fields describe the continuous Gaussian releases alone (Gaussian DP, exact). ``accounting``: the
    bound the budget check rests on and the spent budget is reported by
    (:meth:`dsroc.privacy.accounting.Accountant.accounting`): the exact Gaussian-DP closed form of a
    Gaussian-only history, basic composition of a pure epsilon-DP history while it suffices, else the
    privacy-loss distribution.
    """

    dataset: str
    budget_epsilon: float
    budget_delta: float
    mu_budget: float
    mu_spent: float
    releases: int
    population: str = ""
    epsilon_spent: float = 0.0
    delta_spent: float = 0.0
    accounting: str = EXACT_GAUSSIAN
    reservations: int = 0
    left: tuple = ()  # site_node.protocols.budget.ReleasesLeft per asked-for release
    # Asked with a delta: the history's epsilon at it (the bound epsilon_spent rests on); asked with release ids
    # too: those releases alone, composed by the accountant at that delta (Accountant.guarantee), and how many.
    epsilon_at_delta: float = 0.0
    validation_epsilon: float = 0.0
    validation_releases: int = 0
    validation_accounting: str = ""

    @property
    def mu_remaining(self) -> float:
        """``sqrt(mu_budget^2 - mu_spent^2)``, 0 when spent (Gaussian releases only)."""
        return float(np.sqrt(max(self.mu_budget**2 - self.mu_spent**2, 0.0)))

    @property
    def epsilon_remaining(self) -> float:
        """``budget_epsilon - epsilon_spent`` (0 when spent): an indication, as composition is not additive."""
        return max(self.budget_epsilon - self.epsilon_spent, 0.0)


@lru_cache(maxsize=64)
def budget_mu(epsilon: float, delta: float) -> float:
    """The largest Gaussian-DP mu that is (epsilon, delta)-DP: ``1 / sigma`` of the analytic mechanism at sensitivity 1
    (a root search; remembered, as every budget status of a site asks it of the same policy)."""
    return gdp_release_mu(1.0, analytic_gaussian_sigma(epsilon, delta, 1.0))


class Ledger(ABC):
    """Interface of a privacy ledger (see :class:`SqliteLedger`)."""

    @abstractmethod
    def budget(self, population: str, policy: Policy, *, delta: float = 0.0, release_ids=()) -> BudgetStatus:
        """Spent and remaining budget of ``population``; with ``delta`` (in (0, 1)) its epsilon at that delta too, and
        with ``release_ids`` (its releases) those releases composed alone (``BudgetStatus.validation_epsilon``)."""

    @abstractmethod
    def release(self, key: ReleaseKey, *, dataset: str, analyst: str, events: tuple, epsilon: float, delta: float,
                rule: str, fingerprint: str, policy: Policy, make: Callable[[bytes], tuple[bytes, int, int]],
                store: bool) -> tuple[Release, bool]:
        """Return the release for ``key``, charging and recording it first if it is new.

        ``make(seed)`` computes the released payload and its class sizes ``(payload, n0, n1)`` from a
        fresh CSPRNG seed; for a new release it runs after the budget check, inside the transaction
        that records it. With ``store`` the payload itself is kept (small releases, or noise that no
        seed reproduces, sealed by the protocol) and no seed; otherwise only the seed and the payload's digest, and a replay calls
        ``make(seed)`` again and refuses (FailedPrecondition) when the digest or the data's
        ``fingerprint`` differ. Returns the release and whether this call charged it.

        With ``reservation`` (the id of a :meth:`reserve` of the same release by the same analyst) the
        hold becomes the charge in the same transaction; an unknown, used or expired hold is refused
        (FailedPrecondition, nothing charged). Without it the release must fit beside every hold.
        """

    @abstractmethod
    def reserve(self, key: ReleaseKey, *, dataset: str, analyst: str, events: tuple, epsilon: float, delta: float,
                fingerprint: str, policy: Policy, hold_seconds: float = HOLD_SECONDS, follow_up: tuple = (),
                takes_over: str = "", session_id: str = "") -> Reservation:
        """Hold the budget of a release for ``hold_seconds`` (at most HOLD_SECONDS) without releasing anything.

        Refused (ResourceExhausted, nothing held) when the release would not fit the budget with the
        history and the other holds, or when the analyst's holds on the population would exceed the policy's
        limits (:mod:`site_node.store.hold_limits`: their number, their composed epsilon, and the hourly
        allowance of unused hold time). A release made before holds nothing (its replay is free); an
        unexpired hold of the same release by the same analyst is returned, not doubled.

        ``follow_up``: the events of a release that will follow this one and whose request is not known yet
        (the second stage of a two-stage grid, placed by this release): held too, in the same transaction and
        budget check, as a *follow-up hold* (``Reservation.follow_up_id``) that charges nothing and that only
        ``takes_over`` can turn into a release's hold. ``takes_over``: the id of such a hold of this analyst for
        this population, score and outcome; its events must equal ``events`` (InvalidArgument otherwise,
        nothing changed), and it becomes this release's hold without a new budget check (the budget it holds
        is the same). An unknown or expired follow-up hold is no refusal: the release is checked as any other.

        ``session_id``: the analyst's session the hold is made in; its new holds end with it (:meth:`end_sessions`).
        """

    @abstractmethod
    def cancel(self, reservation_id: str, analyst: str) -> bool:
        """Return a hold to the budget; False when it was unknown, used or expired."""

    @abstractmethod
    def end_sessions(self, analyst: str, session_ids) -> int:
        """Return to the budget the analyst's unexpired holds made in ``session_ids`` (closed, or expired after
        inactivity), each spending the time it was held from the analyst's allowance as a cancel does; how many."""

    @abstractmethod
    def releases_left(self, population: str, policy: Policy, events: tuple) -> tuple[int, bool]:
        """How many more releases of ``events`` fit the budget (holds counted as spent), and whether
        the count stopped at MAX_RELEASES_LEFT (at least that many)."""

    @abstractmethod
    def recorded(self, key: ReleaseKey, fingerprint: str) -> bytes | None:
        """The stored payload of the release ``key``, or None if it was never made (nothing is charged).

        Raises :class:`FailedPrecondition` when the data changed since (its ``fingerprint`` differs).
        """

    @abstractmethod
    def fits(self, population: str, events: tuple, policy: Policy) -> bool:
        """Whether ``events`` composed onto the population's history stay within its budget (nothing is charged)."""

    @abstractmethod
    def use_evaluation(self, key: tuple[str, str, str, str], cap: int, *, query: str) -> int:
        """Count one theta-evaluation on a survivor function; return how many are left after it.

        ``query`` identifies the question (grid and theta): one answered before on the same survivor
        function gets the identical answer, reveals nothing new and is not counted again, so that a
        repeated validation does not use up the cap. Raises :class:`ResourceExhausted` (and counts
        nothing) when the cap is reached.
        """

    @abstractmethod
    def evaluations_left(self, key: tuple[str, str, str, str], cap: int) -> int:
        """Theta-evaluations left on a survivor function."""

    @abstractmethod
    def record_survivors(self, keys: Sequence[tuple[str, str, str, int, str]], cap: int) -> None:
        """Record uploaded survivor functions ``(population, source, outcome, class, digest)`` in one transaction.

        A digest seen before is free; a new one beyond ``cap`` distinct ones per (population, source, outcome,
        class) raises :class:`ResourceExhausted` and records none of ``keys``.
        """

    @abstractmethod
    def record_model(self, population: str, source: str, cap: int) -> None:
        """Record an analyst's model (canonical ``source`` text) used on ``population``.

        A model seen before is free; a new one beyond ``cap`` distinct ones raises
        :class:`ResourceExhausted` and records nothing.
        """

    @abstractmethod
    def history(self) -> list[dict]:
        """Every release (without payloads or seeds), oldest first."""

    @abstractmethod
    def has_release(self, release_id: str) -> bool:
        """Whether the release ``release_id`` is in the ledger."""
