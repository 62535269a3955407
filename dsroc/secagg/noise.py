"""Each site's share of the distributed discrete Gaussian noise, sized for the coalitions it must survive."""

from __future__ import annotations

import math
from functools import lru_cache

from ..privacy.request import check_privacy_request

__all__ = ["honest_shares", "share_sigma", "shares_meet"]


def honest_shares(n_sites: int, colluders: int) -> int:
    """Shares of the noise no coalition of ``colluders`` sites and the analyst knows: ``n_sites - colluders``.

    Raises ``ValueError`` unless ``0 <= colluders < n_sites`` (the protected site's own share is always honest).
    """
    for name, value in (("n_sites", n_sites), ("colluders", colluders)):
        if isinstance(value, bool) or int(value) != value:
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if n_sites < 1 or not 0 <= colluders < n_sites:
        raise ValueError(f"colluders must lie in [0, n_sites - 1] = [0, {n_sites - 1}], got {colluders}")
    return int(n_sites) - int(colluders)


# A hinted share is taken when 0.1 % less would not meet the target.
_HINT_TOLERANCE = 1e-3


@lru_cache(maxsize=256)
def share_sigma(epsilon: float, delta: float, honest: int, *, interval: float | None = None,
                parts: tuple = ((1, 1.0),), hint: float | None = None) -> float:
    """The smallest share parameter whose ``honest`` shares summed make a release (epsilon, delta)-DP.

    Each site adds ``N_Z(0, sigma^2)`` with this sigma; whatever the coalition, the ``honest`` shares it does
    not know stay in the sum, and their sum alone meets the target by the site's accountant
    (:class:`dsroc.privacy.accounting.DiscreteGaussianSum`, the ledger's check).

    ``parts``: ``(sensitivity, ratio)`` of each part of the release (as
    :func:`dsroc.privacy.noise.joint_discrete_gaussian_sigma`): part ``i`` gets shares of parameter
    ``ratio_i sensitivity_i sigma``, and the composition of all parts' sums meets the target. The
    default is one sensitivity-1 part (counts only).

    ``hint``: a guess (e.g. a central calibration's sigma over ``sqrt(honest)``); returned as it is when two
    evaluations of the accountant show it meets the target and 0.1 % less does not (within 0.1 % of the
    smallest), instead of a search of about ten evaluations.
    """
    from dsroc.privacy.accounting import discretization_for
    from dsroc.privacy.gaussian import analytic_gaussian_sigma
    from dsroc.privacy.noise import calibrate_scale

    epsilon, delta = check_privacy_request(epsilon, delta, zero_delta=False)
    honest = honest_shares(honest, 0)
    interval = discretization_for(epsilon) if interval is None else float(interval)
    parts = _check_parts(parts)
    # a hint far above the answer (small shares, whose sum is no longer near a Gaussian) fails the first check
    # (the hint first: one evaluation settles a hint too small, the usual miss)
    if hint is not None and shares_meet(hint, epsilon, delta, honest, interval=interval, parts=parts) and \
            not shares_meet(hint * (1 - _HINT_TOLERANCE), epsilon, delta, honest, interval=interval, parts=parts):
        return float(hint)
    # the sum of the shares is within a hair of a discrete Gaussian, itself of the continuous one: the analytic
    # Gaussian's sigma split over the shares (in noise units a patient moves the parts by sqrt(sum 1 / ratio^2))
    # starts the search next to the answer
    start = analytic_gaussian_sigma(epsilon, delta, 1.0) * math.sqrt(sum(r**-2 for _, r in parts) / honest)
    try:
        return calibrate_scale(lambda s: _events(s, honest, parts), epsilon, delta, start, interval)
    except IndexError:  # dp-accounting cannot compose the loss distributions of near-noiseless parts
        raise ValueError(f"epsilon {epsilon} is too large: the accountant cannot calibrate shares that small for a "
                         f"release of {len(parts)} parts (ask for a smaller epsilon)") from None


def shares_meet(sigma: float, epsilon: float, delta: float, honest: int, *, interval: float | None = None,
                parts: tuple = ((1, 1.0),)) -> bool:
    """Whether ``honest`` shares of parameter ``sigma`` (per part as in :func:`share_sigma`) summed make the release
    (epsilon, delta)-DP by the accountant: one evaluation, where :func:`share_sigma` searches (a site checks the
    share the analyst proposes instead of calibrating its own)."""
    from dsroc.privacy.accounting import Accountant, discretization_for

    epsilon, delta = check_privacy_request(epsilon, delta, zero_delta=False)
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0.0):
        raise ValueError(f"a share's sigma must be a finite positive number, got {sigma!r}")
    interval = discretization_for(epsilon) if interval is None else float(interval)
    honest, parts = honest_shares(honest, 0), _check_parts(parts)
    # a release is no more private than any of its parts: the part of the smallest share may settle it
    if _certainly_short(min(r * k for k, r in parts) * sigma, epsilon, delta, honest):
        return False
    try:
        accountant = Accountant(_events(sigma, honest, parts),
                                value_discretization_interval=interval)
    except IndexError:  # near-noiseless parts: the accountant cannot say
        return False
    return accountant.delta(epsilon) <= delta


def _certainly_short(sigma: float, epsilon: float, delta: float, honest: int) -> bool:
    """Whether ``honest`` shares of ``N_Z(0, sigma^2)`` summed are certainly not (epsilon, delta)-DP for a count of
    sensitivity 1, by a bound the accountant is not needed for (and below which its arrays overflow).

    With ``u = 1 / (2 sigma^2)``, one share is not 0 with probability ``q <= 2 sum_{k >= 1} exp(-k^2 u) <=
    2 exp(-u) / (1 - exp(-u))`` (its normaliser is at least 1), so the sum ``S`` is 0 with probability at least
    ``1 - h q`` and is -1 with probability at most ``h q``. The output ``c`` separates the neighbouring counts
    ``c`` and ``c + 1``: ``delta(epsilon) >= P[S = 0] - e^epsilon P[S = -1] >= 1 - h q (1 + e^epsilon)``, above
    ``delta`` when ``log(h q (1 + e^epsilon)) < log(1 - delta)``. The same holds for a part of sensitivity ``k``
    (outputs ``c`` and ``c + k``) with its own share's sigma.
    """
    u = 0.5 / (sigma * sigma) if sigma > 1e-150 else math.inf
    if u <= 1.0:  # a share this large is never certainly short
        return False
    log_q = math.log(2.0) - u - math.log1p(-math.exp(-u))
    return math.log(honest) + log_q + max(epsilon, 0.0) + math.log1p(math.exp(-epsilon)) < math.log1p(-delta)


def _check_parts(parts) -> tuple:
    parts = tuple((int(k), float(r)) for k, r in parts)
    if not parts or any(k < 1 or not (math.isfinite(r) and r > 0.0) for k, r in parts):
        raise ValueError(f"parts must be a non-empty tuple of (sensitivity >= 1, ratio > 0), got {parts!r}")
    return parts


def _events(sigma: float, honest: int, parts: tuple) -> list:
    from dsroc.privacy.accounting import DiscreteGaussianSum

    return [DiscreteGaussianSum(r * k * sigma, honest, k) for k, r in parts]
