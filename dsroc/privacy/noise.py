"""Integer noise for the histogram protocol: the discrete Gaussian (Canonne, Kamath and Steinke 2020)."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .request import check_privacy_request

__all__ = [
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma",
    "joint_discrete_gaussian_sigma",
    "discrete_gaussian_variance",
    "sample_discrete_gaussian",
    "discrete_gaussian_noise",
    "opendp_integer_noise",
]

# Support of the summations: +-(40 sigma + 40) holds all but exp(-800) of the mass.
_TAIL_SIGMAS = 40.0


def _check_sigma(sigma: float) -> float:
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0.0):
        raise ValueError(f"sigma must be a finite positive number, got {sigma}")
    return sigma


def _check_sensitivity(sensitivity: int) -> int:
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, (int, np.integer)) or sensitivity < 1:
        raise ValueError(f"sensitivity must be a positive integer (the noise is integer), got {sensitivity!r}")
    return int(sensitivity)


def _log_pmf(sigma: float, extra: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Integers ``x`` of the (numerically) whole support and ``log P[X = x]`` for ``X ~ N_Z(0, sigma^2)``."""
    bound = int(math.ceil(_TAIL_SIGMAS * sigma)) + 40 + extra
    x = np.arange(-bound, bound + 1)
    log_w = -0.5 * (x / sigma) ** 2
    from scipy.special import logsumexp

    return x, log_w - logsumexp(log_w)


def discrete_gaussian_delta(sigma: float, epsilon: float, *, sensitivity: int = 1) -> float:
    """The exact delta at which the discrete Gaussian mechanism is (epsilon, delta)-DP.

    Canonne, Kamath and Steinke 2020, Theorem 7: adding ``X ~ N_Z(0, sigma^2)`` to an integer query of
    sensitivity ``D`` is (epsilon, delta)-DP exactly for
    ``delta = P[X > eps sigma^2 / D - D / 2] - exp(eps) P[X > eps sigma^2 / D + D / 2]``.
    Also the exact delta of a histogram under add/remove-one (one cell changes by one).
    """
    sigma = _check_sigma(sigma)
    sensitivity = _check_sensitivity(sensitivity)
    epsilon = float(epsilon)
    if not (math.isfinite(epsilon) and epsilon >= 0.0):
        raise ValueError(f"epsilon must be finite and non-negative, got {epsilon}")
    x, log_p = _log_pmf(sigma, sensitivity)
    threshold = epsilon * sigma**2 / sensitivity
    upper = x > threshold - sensitivity / 2.0
    lower = x > threshold + sensitivity / 2.0
    if not upper.any():
        return 0.0
    from scipy.special import logsumexp

    log_a = logsumexp(log_p[upper])
    log_b = epsilon + logsumexp(log_p[lower]) if lower.any() else -math.inf
    if log_b >= log_a:
        return 0.0
    return float(math.exp(log_a) * -math.expm1(log_b - log_a))


@lru_cache(maxsize=256)
def discrete_gaussian_sigma(epsilon: float, delta: float, *, sensitivity: int = 1, interval: float | None = None) -> float:
    """Smallest discrete-Gaussian parameter sigma whose release is (epsilon, delta)-DP by the site's accountant.

    Calibrated by the privacy-loss-distribution accountant (:class:`dsroc.privacy.accounting.Accountant`,
    pessimistic, never below the exact value), so that a single release at the budget's (epsilon,
    delta) fits the budget as the ledger checks it. The exact curve
    (:func:`discrete_gaussian_delta`, Canonne, Kamath and Steinke 2020, Thm 7) is the cross-check:
    at the returned sigma it is at most ``delta``, and within 1e-3 relative of it.

    ``interval`` is the accountant's privacy-loss grid (default: :func:`dsroc.privacy.accounting.discretization_for`
    of ``epsilon``); a ledger passes its own so that its check and this calibration agree.
    """
    from .accounting import DiscreteGaussian, discretization_for  # the accountant imports this module

    epsilon, delta = check_privacy_request(epsilon, delta, zero_delta=False)
    sensitivity = _check_sensitivity(sensitivity)
    interval = discretization_for(epsilon) if interval is None else float(interval)
    return calibrate_scale(lambda sigma: [DiscreteGaussian(sigma=sigma, sensitivity=sensitivity)], epsilon, delta,
                      _exact_sigma(epsilon, delta, sensitivity), interval)


def joint_discrete_gaussian_sigma(epsilon: float, delta: float, parts, *, interval: float | None = None) -> float:
    """Scale ``t`` of a release made of several discrete-Gaussian parts whose composition is (epsilon, delta)-DP.

    ``parts`` lists ``(sensitivity, ratio)`` per part: part ``i`` is an integer query of l2-sensitivity
    ``sensitivity_i`` released with noise ``N_Z(0, (ratio_i sensitivity_i t)^2)``. A patient moves every part
    at once, so the release's privacy loss is the composition of the parts' (the accountant's, as the
    ledger charges it); in noise units the patient's l2 shift is ``sqrt(sum 1 / ratio_i^2) / t``. One part
    ``(1, 1)`` gives :func:`discrete_gaussian_sigma`.
    """
    epsilon, delta = check_privacy_request(epsilon, delta, zero_delta=False)
    parts = [(_check_sensitivity(k), float(r)) for k, r in parts]
    if not parts or any(not (math.isfinite(r) and r > 0.0) for _, r in parts):
        raise ValueError(f"parts must be a non-empty list of (sensitivity, ratio > 0), got {parts!r}")
    if parts == [(1, 1.0)]:
        return discrete_gaussian_sigma(epsilon, delta, interval=interval)
    return _joint_sigma(epsilon, delta, tuple(parts), interval)


@lru_cache(maxsize=64)
def _joint_sigma(epsilon: float, delta: float, parts: tuple, interval: float | None) -> float:
    """:func:`joint_discrete_gaussian_sigma`, cached per process (a daemon answers repeated requests at once)."""
    from .accounting import Accountant, DiscreteGaussian, discretization_for

    interval = discretization_for(epsilon) if interval is None else float(interval)

    @lru_cache(maxsize=None)  # the search's last point is checked again: once is enough
    def excess(log_t: float) -> float:
        t = math.exp(log_t)
        accountant = Accountant([DiscreteGaussian(sigma=r * k * t, sensitivity=k) for k, r in parts],
                                value_discretization_interval=interval)
        return math.log(max(accountant.delta(epsilon), 1e-300)) - math.log(delta)

    # Secant steps on log t from the Gaussian-like start (log delta is smooth and decreasing in log t: a few
    # accountant evaluations instead of a bracketing search), then up by 1e-6 until the release fits.
    a = math.log(_exact_sigma(epsilon, delta, 1) * math.sqrt(sum(1.0 / r**2 for _, r in parts)))
    try:
        b = _secant(excess, a)
        while excess(b) > 0.0:
            b += 1e-6
        return math.exp(b)
    except (ValueError, ArithmeticError, TypeError, IndexError, MemoryError):  # outside the accountant: bracketing
        return calibrate_scale(lambda t: [DiscreteGaussian(sigma=r * k * t, sensitivity=k) for k, r in parts], epsilon,
                          delta, math.exp(a), interval)


def _secant(f, a: float, *, tol: float = 1e-7, steps: int = 30) -> float:
    """Root of a smooth decreasing ``f`` by secant steps from ``a`` and ``a + 0.01``; ArithmeticError if none."""
    start = a
    b = a + 0.01
    fa, fb = f(a), f(b)
    for _ in range(steps):
        if abs(b - a) < tol:
            return b
        if fb == fa:
            break
        a, b, fa = b, b - fb * (b - a) / (fb - fa), fb
        if abs(b - start) > 3.0:  # a step far from the start: the accountant's figures are not smooth there
            break
        fb = f(b)
    raise ArithmeticError("the secant steps did not converge")


def calibrate_scale(events, epsilon: float, delta: float, start: float, interval: float) -> float:
    """Smallest sigma with ``Accountant(events(sigma))`` (epsilon, delta)-DP (delta decreases with sigma)."""
    from scipy.optimize import brentq

    from .accounting import Accountant

    @lru_cache(maxsize=None)  # brentq's answer and the bracket's end are checked again: once is enough
    def excess(log_sigma: float) -> float:
        accountant = Accountant(events(math.exp(log_sigma)), value_discretization_interval=interval)
        return math.log(max(accountant.delta(epsilon), 1e-300)) - math.log(delta)

    try:
        # The answer lies within a factor e^3 of the continuous Gaussian's start; past that the accountant's
        # figures are numerical failures, and a larger sigma would only grow its arrays without bound.
        lo, hi = math.log(start) - 0.05, math.log(start) + 0.05
        while excess(lo) <= 0.0:
            lo -= 0.5
            if lo < math.log(start) - 3.0:
                raise ArithmeticError("no lower bracket")
        while excess(hi) > 0.0:
            hi += 0.5
            if hi > math.log(start) + 3.0:
                raise ArithmeticError("no upper bracket")
        log_sigma = brentq(excess, lo, hi, xtol=1e-10)
        # brentq's answer may sit a hair below the root: a few steps up, then the bracket's upper end, which meets
        # the target (checked above), so the search ends whatever the accountant's figures do between them
        for _ in range(4):
            if excess(log_sigma) <= 0.0:
                return math.exp(log_sigma)
            log_sigma += 1e-9
        return math.exp(hi)
    except (TypeError, IndexError, ArithmeticError, MemoryError):
        # dp-accounting's loss distributions of near-noiseless events overflow into object arrays (TypeError) or
        # compose to nothing (IndexError) at a very large epsilon: a clear refusal instead of a crash.
        raise ValueError(f"epsilon {epsilon:g} with delta {delta:g} is too large: the accountant cannot calibrate "
                         "noise that small (ask for a smaller epsilon)") from None


def _exact_sigma(epsilon: float, delta: float, sensitivity: int) -> float:
    """The smallest sigma of the exact curve (Thm 7); delta decreases with sigma."""
    from scipy.optimize import brentq

    def gap(log_sigma: float) -> float:
        return math.log(max(discrete_gaussian_delta(math.exp(log_sigma), epsilon, sensitivity=sensitivity),
                            1e-300)) - math.log(delta)

    lo, hi = math.log(sensitivity) - 1.0, math.log(sensitivity) + 1.0
    while gap(lo) <= 0.0:
        lo -= 1.0
    while gap(hi) > 0.0:
        hi += 1.0
    return math.exp(brentq(gap, lo, hi, xtol=1e-12))


def discrete_gaussian_variance(sigma: float) -> float:
    """Variance of ``N_Z(0, sigma^2)`` (slightly below ``sigma^2`` for small sigma; CKS 2020, Cor. 9)."""
    x, log_p = _log_pmf(_check_sigma(sigma))
    return float(np.sum(np.exp(log_p) * x.astype(np.float64) ** 2))


def sample_discrete_gaussian(sigma: float, size: int) -> np.ndarray:
    """``size`` independent draws of ``N_Z(0, sigma^2)`` from an exact sampler (the site's noise).

    OpenDP's ``make_gaussian`` on an integer vector domain: the sampler of Canonne, Kamath and
    Steinke 2020 (Algorithm 3) run in exact rational arithmetic on OpenDP's cryptographically secure
    randomness, so no floating-point artefact reveals the noiseless value (Mironov 2012; Jin et al.
    2022). Proof: docs.opendp.org, proofs of ``make_gaussian`` (0.16).
    """
    return opendp_integer_noise("gaussian", _check_sigma(sigma), size)


def opendp_integer_noise(mechanism: str, scale: float, size: int) -> np.ndarray:
    """``size`` draws of OpenDP's exact integer noise: ``"gaussian"`` (``make_gaussian``, l2) or ``"laplace"``
    (``make_laplace``, l1) of parameter ``scale`` on an integer vector domain."""
    # OpenDP's own modules, not its prelude: the prelude imports its scikit-learn, polars and pandas extras (2 CPU-s).
    from opendp.domains import atom_domain, vector_domain
    from opendp.measurements import make_gaussian, make_laplace
    from opendp.metrics import l1_distance, l2_distance
    from opendp.mod import enable_features

    size = int(size)
    if size < 0:
        raise ValueError(f"size must be non-negative, got {size}")
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    enable_features("contrib")
    make, distance = {"gaussian": (make_gaussian, l2_distance), "laplace": (make_laplace, l1_distance)}[mechanism]
    measurement = make(vector_domain(atom_domain(T="i64")), distance(T="i64"), scale=float(scale))
    return np.asarray(measurement([0] * size), dtype=np.int64)


def discrete_gaussian_noise(sigma: float, size, rng: np.random.Generator) -> np.ndarray:
    """Vectorised draws of ``N_Z(0, sigma^2)`` from ``rng`` (studies; the same distribution as the site's).

    The rejection sampler of Canonne, Kamath and Steinke 2020 (Algorithm 3) in numpy floating point:
    a discrete Laplace proposal with scale ``t = floor(sigma) + 1`` (the difference of two geometric
    variables), accepted with probability ``exp(-(|y| - sigma^2 / t)^2 / (2 sigma^2))``. Fast and
    reproducible; not for releasing real data (use :func:`sample_discrete_gaussian`).
    """
    sigma = _check_sigma(sigma)
    shape = tuple(np.atleast_1d(np.asarray(size, dtype=np.int64)).tolist()) if np.ndim(size) else (int(size),)
    total = int(np.prod(shape))
    t = math.floor(sigma) + 1
    p = -math.expm1(-1.0 / t)  # geometric success probability of the discrete Laplace's halves
    out = np.empty(total, dtype=np.int64)
    filled = 0
    while filled < total:
        m = int((total - filled) * 1.6) + 16  # acceptance is at least about 0.65
        y = rng.geometric(p, m) - rng.geometric(p, m)
        accept = rng.random(m) < np.exp(-((np.abs(y) - sigma**2 / t) ** 2) / (2.0 * sigma**2))
        take = y[accept][: total - filled]
        out[filled:filled + take.size] = take
        filled += take.size
    return out.reshape(shape)
