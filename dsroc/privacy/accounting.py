"""One privacy accountant for every mechanism: privacy-loss distributions, exact for all-Gaussian histories."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Iterable, Union

from .gaussian import gdp_delta, gdp_epsilon

__all__ = ["Gaussian", "DiscreteGaussian", "DiscreteGaussianSum", "DiscreteLaplace", "Laplace", "RandomizedResponse",
           "PureEpsilon", "ApproximateDp", "Event", "Accountant", "VALUE_DISCRETIZATION", "MAX_DISCRETIZATION",
           "discretization_for", "encode_event", "decode_event"]

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
    return VALUE_DISCRETIZATION * min(max(1.0, _positive("epsilon", epsilon) / 2.0), MAX_DISCRETIZATION / VALUE_DISCRETIZATION)


def _positive(name: str, value) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{name} must be a finite positive number, got {value}")
    return value


@dataclass(frozen=True)
class Gaussian:
    """Continuous Gaussian noise of standard deviation ``sigma`` on an l2-sensitivity ``sensitivity`` query."""

    sigma: float
    sensitivity: float = 1.0

    def __post_init__(self):
        _positive("sigma", self.sigma)
        _positive("sensitivity", self.sensitivity)

    @property
    def mu(self) -> float:
        """Gaussian-DP parameter ``sensitivity / sigma``."""
        return float(self.sensitivity) / float(self.sigma)


@dataclass(frozen=True)
class DiscreteGaussian:
    """Discrete Gaussian ``N_Z(0, sigma^2)`` noise on an integer query of (integer) l2-sensitivity.

    A histogram under add/remove-one changes in one cell by one: the loss is that of one coordinate
    with ``sensitivity = 1`` (the other cells' noise is the same on both sides).
    """

    sigma: float
    sensitivity: int = 1

    def __post_init__(self):
        _positive("sigma", self.sigma)
        if isinstance(self.sensitivity, bool) or not isinstance(self.sensitivity, int) or self.sensitivity < 1:
            raise ValueError(f"sensitivity must be a positive integer, got {self.sensitivity!r}")

    def pld(self, interval: float):
        from dp_accounting.pld import privacy_loss_distribution as pld

        # The PLD is built on +-(40 sigma + 2): the mass outside is below exp(-800); it can move delta by
        # at most (1 + e^eps) times that, below exp(-100) for every epsilon a check uses (<= 700).
        bound = int(math.ceil(40.0 * self.sigma)) + 2
        return pld.from_discrete_gaussian_mechanism(self.sigma, sensitivity=self.sensitivity, truncation_bound=bound,
                                                    value_discretization_interval=interval, use_connect_dots=True)


@dataclass(frozen=True)
class DiscreteGaussianSum:
    """The sum of ``count`` independent ``N_Z(0, sigma^2)`` shares on an integer query (secure aggregation).

    Not itself a discrete Gaussian: its privacy-loss distribution is built from the exact pmf of the sum
    (:func:`dsroc.privacy.distributed.summed_noise_pld`). ``count`` is the number of shares no coalition knows.
    """

    sigma: float
    count: int
    sensitivity: int = 1

    def __post_init__(self):
        _positive("sigma", self.sigma)
        for name in ("count", "sensitivity"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")

    def pld(self, interval: float):
        from .distributed import summed_noise_pld

        return summed_noise_pld(self.sigma, self.count, self.sensitivity, interval)


@dataclass(frozen=True)
class DiscreteLaplace:
    """Discrete Laplace noise, ``P[X = x]`` proportional to ``exp(-|x| / scale)``, on an integer query of l1-sensitivity
    ``sensitivity``: pure epsilon-DP with ``epsilon = sensitivity / scale`` (the geometric mechanism, Ghosh,
    Roughgarden and Sundararajan 2009)."""

    scale: float
    sensitivity: int = 1

    def __post_init__(self):
        _positive("scale", self.scale)
        if isinstance(self.sensitivity, bool) or not isinstance(self.sensitivity, int) or self.sensitivity < 1:
            raise ValueError(f"sensitivity must be a positive integer, got {self.sensitivity!r}")

    @property
    def epsilon(self) -> float:
        """The pure epsilon of one release, ``sensitivity / scale``."""
        return self.sensitivity / float(self.scale)

    def pld(self, interval: float):
        from dp_accounting.pld import privacy_loss_distribution as pld

        # dp-accounting's parameter is the inverse scale: P[X = x] proportional to exp(-parameter |x|).
        return pld.from_discrete_laplace_mechanism(1.0 / float(self.scale), sensitivity=self.sensitivity,
                                                   value_discretization_interval=interval)


@dataclass(frozen=True)
class Laplace:
    """Laplace noise of scale ``scale`` on an l1-sensitivity ``sensitivity`` query."""

    scale: float
    sensitivity: float = 1.0

    def __post_init__(self):
        _positive("scale", self.scale)
        _positive("sensitivity", self.sensitivity)

    def pld(self, interval: float):
        from dp_accounting.pld import privacy_loss_distribution as pld

        return pld.from_laplace_mechanism(self.scale, sensitivity=self.sensitivity,
                                          value_discretization_interval=interval)


@dataclass(frozen=True)
class RandomizedResponse:
    """k-ary randomized response: the true value with probability ``1 - p``, else uniform over ``num_buckets``.

    Replace-one adjacency of one person's value (dp-accounting's convention).
    """

    noise_parameter: float
    num_buckets: int

    def __post_init__(self):
        if not 0.0 < float(self.noise_parameter) <= 1.0:
            raise ValueError(f"noise_parameter must lie in (0, 1], got {self.noise_parameter!r}")
        if isinstance(self.num_buckets, bool) or not isinstance(self.num_buckets, int) or self.num_buckets < 2:
            raise ValueError(f"num_buckets must be an integer >= 2, got {self.num_buckets!r}")

    def pld(self, interval: float):
        from dp_accounting.pld import privacy_loss_distribution as pld

        return pld.from_randomized_response(float(self.noise_parameter), self.num_buckets,
                                            value_discretization_interval=interval)


@dataclass(frozen=True)
class ApproximateDp:
    """Any mechanism proven (epsilon, delta)-DP, accounted by its worst-case privacy-loss distribution."""

    epsilon: float
    delta: float

    def __post_init__(self):
        if not (math.isfinite(float(self.epsilon)) and float(self.epsilon) >= 0.0):
            raise ValueError(f"epsilon must be finite and non-negative, got {self.epsilon!r}")
        if not 0.0 <= float(self.delta) < 1.0:
            raise ValueError(f"delta must lie in [0, 1), got {self.delta!r}")

    def pld(self, interval: float):
        from dp_accounting.pld import common
        from dp_accounting.pld import privacy_loss_distribution as pld

        return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(float(self.epsilon), float(self.delta)),
                                           value_discretization_interval=interval)


@dataclass(frozen=True)
class PureEpsilon(ApproximateDp):
    """A pure epsilon-DP mechanism (delta = 0)."""

    delta: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        if self.delta != 0.0:
            raise ValueError("a pure-epsilon event has delta = 0")


Event = Union[Gaussian, DiscreteGaussian, DiscreteGaussianSum, DiscreteLaplace, Laplace, RandomizedResponse, ApproximateDp]


@lru_cache(maxsize=512)
def _event_pld(event, interval: float):
    return event.pld(interval)


@lru_cache(maxsize=512)
def _gaussian_pld(mu: float, interval: float):
    from dp_accounting.pld import privacy_loss_distribution as pld

    return pld.from_gaussian_mechanism(1.0 / mu, value_discretization_interval=interval)


class Accountant:
    """The composed privacy loss of a history of releases (an immutable value; :meth:`add` makes a new one).

    Continuous Gaussian releases compose exactly into one Gaussian of ``mu = sqrt(sum mu_i^2)``
    (Dong, Roth and Su 2019). A history of Gaussians only is therefore reported by the exact GDP
    closed form (:func:`dsroc.gdp_delta`); any other history by ``dp-accounting``'s privacy-loss
    distribution (connect-the-dots, pessimistic: never below the exact value), composed
    incrementally: adding a release convolves one new distribution with the cached one.

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
        self._interval = _positive("value_discretization_interval", value_discretization_interval)
        self._exact_gaussians = bool(exact_gaussians)
        self._events: tuple = ()
        self._mu2 = 0.0
        self._other = None  # composed PLD of the non-Gaussian events
        # Equal events are composed by repeated squaring (a ledger's history repeats its calibrations).
        counts: dict = {}
        for event in events:
            counts[event] = counts.get(event, 0) + 1
        for event, count in counts.items():
            self._absorb(event, count)
        self._events = tuple(events)

    def _absorb(self, event, count: int = 1) -> None:
        if isinstance(event, Gaussian):
            self._mu2 += count * event.mu**2
        elif isinstance(event, (DiscreteGaussian, DiscreteGaussianSum, DiscreteLaplace, Laplace, RandomizedResponse,
                                ApproximateDp)):
            new = _event_pld(event, self._interval)
            if count > 1:
                new = new.self_compose(count)
            self._other = new if self._other is None else self._other.compose(new)
        else:
            raise TypeError(f"not a privacy event: {event!r}")


    def add(self, event: Event, count: int = 1) -> "Accountant":
        """A new accountant with ``count`` releases of ``event`` composed onto this history (this one is unchanged)."""
        out = Accountant.__new__(Accountant)
        out._interval, out._exact_gaussians = self._interval, self._exact_gaussians
        out._mu2, out._other = self._mu2, self._other
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
        return self._other is None and self._exact_gaussians

    @cached_property
    def _pld(self):
        if self.exact:
            return None
        if self._other is None:
            return _gaussian_pld(self.gaussian_mu, self._interval)
        if self._mu2 == 0.0:
            return self._other
        return _gaussian_pld(self.gaussian_mu, self._interval).compose(self._other)

    def delta(self, epsilon: float) -> float:
        """The smallest delta at which the history is (epsilon, delta)-DP."""
        epsilon = float(epsilon)
        if not (math.isfinite(epsilon) and epsilon >= 0.0):
            raise ValueError(f"epsilon must be finite and non-negative, got {epsilon}")
        if not self._events:
            return 0.0
        if self._pld is None:
            return gdp_delta(self.gaussian_mu, epsilon)
        return min(float(self._pld.get_delta_for_epsilon(epsilon)) * _ROUND_UP, 1.0)

    def epsilon(self, delta: float) -> float:
        """The smallest epsilon at which the history is (epsilon, delta)-DP (inf when none is)."""
        delta = float(delta)
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must lie strictly between 0 and 1, got {delta}")
        if not self._events:
            return 0.0
        if self._pld is None:
            return gdp_epsilon(self.gaussian_mu, delta)
        return float(self._pld.get_epsilon_for_delta(delta)) * _ROUND_UP

    def within(self, epsilon: float, delta: float) -> bool:
        """Whether the history is (epsilon, delta)-DP: the ledger's budget check (no slack)."""
        return self.delta(epsilon) <= float(delta)


_KINDS = {"gaussian": Gaussian, "discrete_gaussian": DiscreteGaussian, "discrete_gaussian_sum": DiscreteGaussianSum,
          "discrete_laplace": DiscreteLaplace, "laplace": Laplace,
          "randomized_response": RandomizedResponse, "approximate_dp": ApproximateDp, "pure_epsilon": PureEpsilon}


def encode_event(event: Event) -> dict:
    """A JSON-ready description of an event (what a ledger stores); :func:`decode_event` inverts it."""
    for kind, cls in _KINDS.items():
        if type(event) is cls:
            return {"kind": kind, **{name: getattr(event, name) for name in cls.__dataclass_fields__}}
    raise TypeError(f"not a privacy event: {event!r}")


def decode_event(data: dict) -> Event:
    """The event described by :func:`encode_event`'s output."""
    fields = dict(data)
    kind = fields.pop("kind", None)
    if kind not in _KINDS:
        raise ValueError(f"unknown privacy event kind {kind!r} (known: {sorted(_KINDS)})")
    return _KINDS[kind](**fields)
