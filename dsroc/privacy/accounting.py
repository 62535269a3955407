"""The privacy accountant of every mechanism: PLDs, with closed forms for all-Gaussian and all-pure histories."""

from __future__ import annotations

import math
from functools import cached_property, lru_cache
from typing import Iterable

from .events import (ApproximateDp, DiscreteGaussian, DiscreteGaussianSum, DiscreteLaplace, Event, Gaussian, Laplace,
                     PureEpsilon, RandomizedResponse, decode_event, encode_event, positive)
from .gaussian import gdp_delta, gdp_epsilon
from .pld_kernels import install as install_pld_kernels
from .pure import grid_steps, pure_delta, pure_delta_floor, pure_epsilon, top_loss_log_probability

__all__ = ["Gaussian", "DiscreteGaussian", "DiscreteGaussianSum", "DiscreteLaplace", "Laplace", "RandomizedResponse",
           "PureEpsilon", "ApproximateDp", "Event", "Accountant", "VALUE_DISCRETIZATION", "MAX_DISCRETIZATION",
           "discretization_for", "encode_event", "decode_event", "EXACT_GAUSSIAN", "BASIC_COMPOSITION", "PLD"]

# Which bound an accountant's budget check rests on (Accountant.accounting), as a budget status names it.
EXACT_GAUSSIAN = "gaussian-dp (exact)"
BASIC_COMPOSITION = "pure epsilon-dp (basic composition)"
PLD = "privacy loss distribution (pessimistic)"

# Privacy-loss grid of the PLDs (connect-the-dots, pessimistic): the epsilon of composed Gaussian
# releases comes out within 1e-6 relative of the exact value (tests/core/test_accounting.py), and
# composing one more release onto a history takes a few tens of milliseconds.
VALUE_DISCRETIZATION = 5e-4
# The coarsest grid any budget gets (reached at epsilon 40): at it a release at epsilon 1 still
# calibrates within 1e-6 of the finest grid's sigma (tests/core/test_accounting.py).
MAX_DISCRETIZATION = 1e-2
# The PLD's own floating-point evaluation can land 1e-13 below a pessimistic value; report onto the
# safe side of it.
_ROUND_UP = 1.0 + 1e-10


def discretization_for(epsilon: float) -> float:
    """The privacy-loss grid for histories up to ``epsilon``: VALUE_DISCRETIZATION, coarser up to MAX_DISCRETIZATION.

    Losses of high-epsilon releases span hundreds of nats; a grid proportional to epsilon keeps a
    check within milliseconds. It stops growing at MAX_DISCRETIZATION whatever the budget: the
    pessimistic rounding of each release's loss onto the grid costs up to one interval of epsilon,
    so a grid that grew with a budget of epsilon 100 000 (25 nats) made every release's noise
    calibrate as if at epsilon below 0 (sigma 39 894 instead of 3.74 at epsilon 1).
    """
    return VALUE_DISCRETIZATION * min(max(1.0, positive("epsilon", epsilon) / 2.0), MAX_DISCRETIZATION / VALUE_DISCRETIZATION)


def _pure_epsilon(event) -> tuple[float, float] | None:
    """The epsilon of a pure epsilon-DP event the accountant composes in closed form and the rate of its noise
    (:func:`dsroc.privacy.pure.top_loss_log_probability`); None for any other event."""
    if isinstance(event, DiscreteLaplace):
        return event.epsilon, 1.0 / float(event.scale)
    if isinstance(event, ApproximateDp) and float(event.delta) == 0.0:
        return float(event.epsilon), float(event.epsilon)
    return None


@lru_cache(maxsize=512)
def _event_pld(event, interval: float):
    install_pld_kernels()  # the accountant composes what it builds: by the exact numpy helpers
    return event.pld(interval)


@lru_cache(maxsize=512)
def _gaussian_pld(mu: float, interval: float):
    from dp_accounting.pld import privacy_loss_distribution as pld

    install_pld_kernels()
    return pld.from_gaussian_mechanism(1.0 / mu, value_discretization_interval=interval)


class Accountant:
    """The composed privacy loss of a history of releases (an immutable value; :meth:`add` makes a new one).

    Continuous Gaussian releases compose exactly into one Gaussian of ``mu = sqrt(sum mu_i^2)``
    (Dong, Roth and Su 2019). A history of Gaussians only is therefore reported by the exact GDP
    closed form (:func:`dsroc.gdp_delta`). A history of pure epsilon-DP releases only (discrete
    Laplace, :class:`PureEpsilon`) has two valid bounds, and the budget check uses the tighter one it
    needs: basic composition, ``sum epsilon_i``-DP with each epsilon rounded up to the grid as the
    privacy-loss distribution rounds it (:func:`dsroc.privacy.pure.pure_delta`: no distribution is
    built), while it accepts; else the privacy-loss distribution of those releases (far tighter at
    delta > 0 for many small ones), built only then, unless the history's top loss alone exceeds the
    budget (:func:`dsroc.privacy.pure.pure_delta_floor`: that distribution refuses too). Any other
    history by ``dp-accounting``'s privacy-loss distribution (connect-the-dots, pessimistic: never
    below the exact value), composed incrementally: adding a release convolves one new distribution
    with the cached one.

    Parameters
    ----------
    events : iterable of Event
    value_discretization_interval : float, default VALUE_DISCRETIZATION
    exact_gaussians : bool, default True
        False accounts continuous Gaussians by their privacy-loss distribution too: the cross-check
        of the PLD against the closed form.
    """

    def __init__(self, events: Iterable[Event] = (), *, value_discretization_interval: float = VALUE_DISCRETIZATION,
                 exact_gaussians: bool = True):
        events = tuple(events)  # read twice below: an iterator would leave the history empty
        self._interval = positive("value_discretization_interval", value_discretization_interval)
        self._exact_gaussians = bool(exact_gaussians)
        self._events: tuple = ()
        self._mu2 = 0.0
        self._other = None  # composed PLD of the non-Gaussian events (of the pure ones once the history is mixed)
        # The pure events' epsilons in grid steps, their exact sum and the log-probability of their top losses, and
        # those events while nothing else is in the history (their PLD is built only when a check needs it).
        self._pure_steps, self._pure_total, self._pure_log_top, self._pure = 0, 0.0, 0.0, ()
        # Equal events are composed by repeated squaring (a ledger's history repeats its calibrations).
        counts: dict = {}
        for event in events:
            counts[event] = counts.get(event, 0) + 1
        for event, count in counts.items():
            self._absorb(event, count)
        self._events = events

    def _absorb(self, event, count: int = 1) -> None:
        pure = _pure_epsilon(event)
        if pure is not None:
            epsilon, rate = pure
            self._pure_steps += count * grid_steps(epsilon, self._interval)
            self._pure_total += count * epsilon
            self._pure_log_top += count * top_loss_log_probability(rate)
            if self._other is None and self._mu2 == 0.0:
                self._pure += ((event, count),)
            else:
                self._compose(event, count)
        elif isinstance(event, Gaussian):
            self._mu2 += count * event.mu**2
            self._mixed()
        elif isinstance(event, (DiscreteGaussian, DiscreteGaussianSum, Laplace, RandomizedResponse, ApproximateDp)):
            self._mixed()
            self._compose(event, count)
        else:
            raise TypeError(f"not a privacy event: {event!r}")

    def _compose(self, event, count: int) -> None:
        new = _event_pld(event, self._interval)
        if count > 1:
            new = new.self_compose(count)
        self._other = new if self._other is None else self._other.compose(new)

    def _mixed(self) -> None:
        """The history holds more than pure events: compose the pure ones' PLDs into the rest."""
        pending, self._pure = self._pure, ()
        if pending:
            self._other = self._pure_pld(pending)

    def _pure_pld(self, pending: tuple):
        """The PLD of the pure events ``pending`` (``(event, count)`` pairs), equal events composed together."""
        counts: dict = {}
        for event, count in pending:
            counts[event] = counts.get(event, 0) + count
        out = None
        for event, count in counts.items():
            new = _event_pld(event, self._interval)
            if count > 1:
                new = new.self_compose(count)
            out = new if out is None else out.compose(new)
        return out

    def add(self, event: Event, count: int = 1) -> "Accountant":
        """A new accountant with ``count`` releases of ``event`` composed onto this history (this one is unchanged)."""
        out = Accountant.__new__(Accountant)
        out._interval, out._exact_gaussians = self._interval, self._exact_gaussians
        out._mu2, out._other = self._mu2, self._other
        out._pure_steps, out._pure_total, out._pure_log_top = self._pure_steps, self._pure_total, self._pure_log_top
        out._pure = self._pure
        out._absorb(event, count)
        out._events = self._events + (event,) * count
        return out

    def releases_left(self, events: Iterable[Event], epsilon: float, delta: float, *, cap: int = 1000) -> tuple[int, bool]:
        """How many more releases of ``events`` (one release: all of them) keep the history (epsilon, delta)-DP.

        Returns ``(k, stopped)``: the largest ``k <= cap`` such that the history with ``k`` more such
        releases is :meth:`within` the budget, and whether ``cap`` of them still fit (then at least
        ``cap`` do). The count is the ledger's own check, so the ``k``-th release is accepted and
        the next refused. Found by doubling and bisection (about ``2 log2 k`` compositions).
        """
        events = tuple(events)
        if not events:
            raise ValueError("a release has at least one privacy event")

        def fits(k: int) -> bool:
            after = self
            for event in events:
                after = after.add(event, k)
            return after.within(epsilon, delta)

        if not fits(1):
            return 0, False
        lo = 1
        while lo < cap:
            hi = min(2 * lo, cap)
            if not fits(hi):
                break
            lo = hi
        else:
            return cap, True
        while hi - lo > 1:  # fits(lo), not fits(hi)
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo, False

    @property
    def events(self) -> tuple:
        """The history, oldest first."""
        return self._events

    @property
    def gaussian_mu(self) -> float:
        """The Gaussian-DP mu of the history's continuous Gaussian releases."""
        return math.sqrt(self._mu2)

    @property
    def exact(self) -> bool:
        """True when the history holds continuous Gaussian releases only (exact GDP closed form)."""
        return self._other is None and not self._pure and self._exact_gaussians

    @property
    def pure(self) -> bool:
        """True when the history holds pure epsilon-DP releases only (basic composition or their PLD)."""
        return bool(self._pure)

    @property
    def pure_epsilon(self) -> float:
        """The summed epsilon of the history's pure releases, each rounded up to the privacy-loss grid."""
        return self._pure_steps * self._interval

    @cached_property
    def _pld(self):
        if self.pure:
            return self._pure_pld(self._pure)
        if self.exact:
            return None
        if self._other is None:
            return _gaussian_pld(self.gaussian_mu, self._interval)
        if self._mu2 == 0.0:
            return self._other
        return _gaussian_pld(self.gaussian_mu, self._interval).compose(self._other)

    def _pld_delta(self, epsilon: float) -> float:
        return min(float(self._pld.get_delta_for_epsilon(epsilon)) * _ROUND_UP, 1.0)

    def delta(self, epsilon: float, *, tight: bool = False) -> float:
        """The smallest delta at which the history is (epsilon, delta)-DP.

        A pure history answers by basic composition, or with ``tight`` by the smaller of that and its privacy-loss
        distribution's answer (both valid bounds; the distribution is built for it).
        """
        epsilon = float(epsilon)
        if not (math.isfinite(epsilon) and epsilon >= 0.0):
            raise ValueError(f"epsilon must be finite and non-negative, got {epsilon}")
        if not self._events:
            return 0.0
        if self.pure:
            basic = pure_delta(self.pure_epsilon, epsilon)
            return min(basic, self._pld_delta(epsilon)) if tight and basic > 0.0 else basic
        if self._pld is None:
            return gdp_delta(self.gaussian_mu, epsilon)
        return self._pld_delta(epsilon)

    def epsilon(self, delta: float, *, tight: bool = False) -> float:
        """The smallest epsilon at which the history is (epsilon, delta)-DP (inf when none is).

        A pure history answers by basic composition, or with ``tight`` by the smaller of that and its privacy-loss
        distribution's answer (both valid bounds; the distribution is built for it).
        """
        delta = float(delta)
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must lie strictly between 0 and 1, got {delta}")
        if not self._events:
            return 0.0
        if self.pure:
            basic = pure_epsilon(self.pure_epsilon, delta)
            return min(basic, float(self._pld.get_epsilon_for_delta(delta)) * _ROUND_UP) if tight else basic
        if self._pld is None:
            return gdp_epsilon(self.gaussian_mu, delta)
        return float(self._pld.get_epsilon_for_delta(delta)) * _ROUND_UP

    def guarantee(self, delta: float, *, tight: bool = True) -> tuple[float, str]:
        """The history's epsilon at ``delta`` and the bound it rests on (EXACT_GAUSSIAN, BASIC_COMPOSITION or PLD).

        :meth:`epsilon` with ``tight``: a pure history by the smaller of basic composition and its privacy-loss
        distribution, or (``tight=False``) by basic composition alone. Non-increasing in ``delta``, as each bound
        is. The guarantee of a set of releases (one validation's), apart from any budget.
        """
        epsilon = self.epsilon(delta, tight=tight)
        if self.exact:
            return epsilon, EXACT_GAUSSIAN
        if self.pure and epsilon >= pure_epsilon(self.pure_epsilon, float(delta)):
            return epsilon, BASIC_COMPOSITION
        return epsilon, PLD

    def accounting(self, epsilon: float, delta: float) -> str:
        """Which bound the budget check at (epsilon, delta) rests on: EXACT_GAUSSIAN, BASIC_COMPOSITION or PLD.

        A pure history is BASIC_COMPOSITION while basic composition alone keeps it within (epsilon, delta), PLD
        beyond (its privacy-loss distribution is the bound that accepts it, or refuses it).
        """
        if self.exact:
            return EXACT_GAUSSIAN
        if self.pure and self.delta(epsilon) <= float(delta):
            return BASIC_COMPOSITION
        return PLD

    def within(self, epsilon: float, delta: float) -> bool:
        """Whether the history is (epsilon, delta)-DP: the ledger's budget check (no slack).

        A pure history is accepted by basic composition where it suffices, refused where its top loss alone
        exceeds the budget (:func:`dsroc.privacy.pure.pure_delta_floor`, with a factor 2 of margin for the
        distribution's floating point), and checked by its privacy-loss distribution in between: so it is refused
        exactly where that distribution refuses, and that distribution is built only in between.
        """
        delta = float(delta)
        if self.pure:
            if self.delta(epsilon) <= delta:
                return True
            if pure_delta_floor(self._pure_total, self._pure_log_top, epsilon) > 2.0 * delta:
                return False
            return self._pld_delta(float(epsilon)) <= delta
        return self.delta(epsilon) <= delta
