"""What every protocol shares: the request, the options' base, the strategy interface and the common fields."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

from analyst.result.parts import SitePrivacy, TestResult
from analyst.session import ValidationSession

__all__ = ["Protocol", "ProtocolOptions", "ValidationRequest", "a0_test", "check_a0", "site_privacy_from_budget",
           "HISTOGRAM_ONLY"]

#: options only the histogram protocol has, and why the others refuse them
HISTOGRAM_ONLY = {
    name: ("they need one more histogram release split by strata or by a second model's bins, which only the "
           "histogram protocol makes (the paper protocol's exact answers per stratum or per pair of models would be "
           "new q-protected questions about fewer patients; secagg sums one grid of one model)")
    for name in ("strata", "compare")
} | {"thresholds": ("decision thresholds are put on the histogram protocol's quantile grid only (the paper protocol "
                    "answers one --threshold on its lattice; secagg's grid is advertised without them)")}


@dataclass(frozen=True)
class ValidationRequest:
    """The arguments every protocol gets: what to validate, the privacy request and the confidence level (and for a
    survival validation the time column; ``outcome`` is then the event column)."""

    dataset: str
    outcome: str
    score: str | None
    model: Any
    epsilon: float
    delta: float
    level: float
    progress: Callable | None = None
    time: str | None = None

    def common(self, session, protocol: "Protocol") -> dict[str, Any]:
        """The :class:`analyst.ValidationResult` fields that do not depend on the protocol's answers."""
        return dict(protocol=protocol.name, guarantee=protocol.guarantee, privacy_unit=protocol.privacy_unit,
                    dataset=self.dataset, outcome=self.outcome, score_source=session.score_source,
                    sites=tuple(session.sites), epsilon=float(self.epsilon), delta=float(self.delta),
                    level=float(self.level))


def check_a0(a0) -> None:
    """``a0`` of the test ``H0: AUC <= a0`` must be None or lie in [0, 1]."""
    if a0 is not None and not 0 <= a0 <= 1:
        raise ValueError(f"a0 must lie in [0, 1], got {a0}")


def a0_test(a0, level: float, ci) -> TestResult | None:
    """The test of ``H0: AUC <= a0`` (None without ``a0`` or without a finite CI)."""
    import dsroc

    if a0 is None or not all(math.isfinite(v) for v in ci):
        return None
    return TestResult(a0, level, dsroc.auc_test(ci, a0))


@dataclass(frozen=True)
class ProtocolOptions:
    """Base of a protocol's typed options; ``from_kwargs`` builds one from keyword arguments."""

    @classmethod
    def from_kwargs(cls, protocol: str, kwargs: Mapping[str, Any]) -> "ProtocolOptions":
        """``cls(**kwargs)``, with an error naming the options that do not belong to ``protocol``."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            why = "; ".join(sorted({HISTOGRAM_ONLY[k] for k in unknown if k in HISTOGRAM_ONLY}))
            raise ValueError(f"option(s) {', '.join(unknown)} do not apply to the {protocol} protocol "
                             f"(its options: {', '.join(names)})" + (f": {why}" if why else ""))
        return cls(**kwargs)


class Protocol:
    """A validation protocol at the analyst: one per algorithm, the same interface (a strategy).

    A subclass names itself, its guarantee and its options type, and turns an open
    :class:`analyst.session.ValidationSession` plus its options into an :class:`analyst.ValidationResult`.
    Opening, the budget and closing are the session's; :meth:`analyst.Federation.validate` checks the
    common arguments, opens the session and dispatches here.
    """

    name: ClassVar[str]
    guarantee: ClassVar[str]
    privacy_unit: ClassVar[str]
    options_type: ClassVar[type[ProtocolOptions]]
    #: open the sessions with each site's sensitivity (the paper protocol needs it)
    with_sensitivity: ClassVar[bool] = False
    #: the session :meth:`run` is given: the generic one, or a subclass with the protocol's steps
    session_type: ClassVar[type[ValidationSession]] = ValidationSession

    def hold_request(self, request: "ValidationRequest", options: ProtocolOptions):
        """The release (``dsroc.v1.PrepareRequest``) the sites hold with their sessions, or None (held later)."""
        return None

    def options(self, options: ProtocolOptions | None, kwargs: Mapping[str, Any]) -> ProtocolOptions:
        """The options object: ``options``, or one built from keyword arguments (not both)."""
        if options is not None:
            if kwargs:
                raise ValueError(f"give the {self.name} protocol's options either as options= or as keywords "
                                 f"({', '.join(sorted(kwargs))}), not both")
            if not isinstance(options, self.options_type):
                raise ValueError(f"options for the {self.name} protocol must be a {self.options_type.__name__}, "
                                 f"got {type(options).__name__}")
            return options
        return self.options_type.from_kwargs(self.name, kwargs)

    def check(self, request: ValidationRequest, options: ProtocolOptions) -> None:
        """Refuse a request before any site is asked (the default checks nothing more)."""

    def run(self, session, request: ValidationRequest, options: ProtocolOptions, *, executor=None):
        """Run the protocol over an open session; returns an :class:`analyst.ValidationResult`."""
        raise NotImplementedError


def site_privacy_from_budget(budget, **release) -> SitePrivacy:
    """A :class:`SitePrivacy` from a site's release fields and its ``BudgetStatus`` after the release."""
    return SitePrivacy(**release, epsilon_spent=budget.epsilon_spent, budget_epsilon=budget.budget_epsilon,
                       budget_delta=budget.budget_delta, mu_spent=budget.mu_spent, mu_remaining=budget.mu_remaining)
