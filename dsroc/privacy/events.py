"""The privacy events an accountant composes: a mechanism's parameters, its PLD and its ledger record."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

__all__ = ["Gaussian", "DiscreteGaussian", "DiscreteGaussianSum", "DiscreteLaplace", "Laplace", "RandomizedResponse",
           "PureEpsilon", "ApproximateDp", "Event", "positive", "encode_event", "decode_event"]


def positive(name: str, value) -> float:
    """``value`` as a float, or ValueError naming ``name`` unless it is finite and positive."""
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
        positive("sigma", self.sigma)
        positive("sensitivity", self.sensitivity)

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
        positive("sigma", self.sigma)
        if isinstance(self.sensitivity, bool) or not isinstance(self.sensitivity, int) or self.sensitivity < 1:
            raise ValueError(f"sensitivity must be a positive integer, got {self.sensitivity!r}")

    def pld(self, interval: float):
        from .pld_kernels import discrete_gaussian_pld

        # The PLD is built on +-(40 sigma + 2): the mass outside is below exp(-800); it can move delta by
        # at most (1 + e^eps) times that, below exp(-100) for every epsilon a check uses (<= 700).
        bound = int(math.ceil(40.0 * self.sigma)) + 2
        return discrete_gaussian_pld(self.sigma, self.sensitivity, bound, interval)


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
        positive("sigma", self.sigma)
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
        positive("scale", self.scale)
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
        positive("scale", self.scale)
        positive("sensitivity", self.sensitivity)

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
