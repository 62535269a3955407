"""Exact numpy equivalents of the two pure-Python loops that dominate composing dp-accounting 0.6's PLDs.

Composing two privacy-loss distributions in dp-accounting 0.6 turns a sparse pmf (a dict keyed by loss index)
into a dense one by a list comprehension over every index (``common.dictionary_to_list``), and truncates the
composed pmf's tails by summing it element by element in Python (``pld_pmf._truncate_tails``). At the loss grids
the accountant uses they are three quarters of a secure-aggregation calibration's CPU time (a 10^5-entry pmf per
composition). :func:`install` replaces both with numpy versions that give the same numbers bit for bit: the same
entries in the same places (missing ones 0.0), and the prefix sums in the same order (``np.cumsum`` adds one
entry after another, as the loop does). Installed only on the pinned version they were checked against
(``tests/core/test_pld_kernels.py``); any other version keeps its own code.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHECKED_VERSION", "dictionary_to_list", "find_prefix_to_truncate", "install", "installed",
           "truncate_tails"]

#: The dp-accounting release whose two helpers these reproduce.
CHECKED_VERSION = "0.6.0"

_ORIGINALS: dict = {}


def dictionary_to_list(input_dictionary):
    """``dp_accounting.pld.common.dictionary_to_list``: ``(offset, values)`` with ``values[i]`` the dictionary's
    value at ``offset + i`` (0.0 where it has none), as a float array instead of a list (every caller in
    dp-accounting makes an array of it, or convolves it as one)."""
    offset, top = min(input_dictionary), max(input_dictionary)
    try:
        keys = np.fromiter(input_dictionary.keys(), dtype=np.int64, count=len(input_dictionary))
        values = np.fromiter(input_dictionary.values(), dtype=np.float64, count=len(input_dictionary))
    except (TypeError, ValueError, OverflowError):  # not float values on int64 keys: dp-accounting's own loop
        from dp_accounting.pld import common

        return _ORIGINALS.get("dictionary_to_list", common.dictionary_to_list)(input_dictionary)
    out = np.zeros(int(top) - int(offset) + 1, dtype=np.float64)
    out[keys - offset] = values
    return offset, out


def find_prefix_to_truncate(arr, threshold: float) -> int:
    """The length of the longest prefix of ``arr`` whose running sum (added one entry after another) stays at most
    ``threshold``: dp-accounting's loop inside ``_truncate_tails``, by ``np.cumsum`` on float64 entries."""
    values = np.asarray(arr)
    if values.dtype != np.float64:  # the loop's own arithmetic on anything else
        s = 0
        for i, val in enumerate(arr):
            s += val
            if s > threshold:
                return i
        return len(arr)
    # by blocks, growing, each one's running sum started from the sum so far (so every partial sum is the loop's):
    # the prefix is usually short, and the pmf up to 10^6 entries
    start, size, s = 0, 1024, 0.0
    while start < values.size:
        block = np.cumsum(np.concatenate(([s], values[start:start + size])))[1:]
        above = np.flatnonzero(block > threshold)
        if above.size:
            return start + int(above[0])
        start, size, s = start + block.size, 4 * size, block[-1]
    return len(values)


def truncate_tails(probs, tail_mass_truncation: float, pessimistic_estimate: bool):
    """``dp_accounting.pld.pld_pmf._truncate_tails`` of 0.6.0, line for line, with :func:`find_prefix_to_truncate`
    instead of its Python loop."""
    if tail_mass_truncation == 0:
        return 0, probs, 0
    left_idx = find_prefix_to_truncate(probs, tail_mass_truncation / 2)
    right_idx = len(probs) - find_prefix_to_truncate(np.flip(probs), tail_mass_truncation / 2)
    right_idx = max(right_idx, left_idx + 1)
    left_mass = np.sum(probs[:left_idx])
    right_mass = np.sum(probs[right_idx:])
    truncated_probs = probs[left_idx:right_idx]
    if pessimistic_estimate:
        truncated_probs[0] += left_mass
        return left_idx, truncated_probs, right_mass
    truncated_probs[-1] += right_mass
    return left_idx, truncated_probs, 0


def installed() -> bool:
    """Whether dp-accounting runs these helpers (it is the checked version and :func:`install` ran)."""
    return bool(_ORIGINALS)


def install() -> bool:
    """Make dp-accounting use these helpers if it is :data:`CHECKED_VERSION` (once per process; idempotent).
    Returns whether they are in use. Called wherever dsroc builds a privacy-loss distribution."""
    if _ORIGINALS:
        return True
    from importlib.metadata import PackageNotFoundError, version

    try:
        if version("dp-accounting") != CHECKED_VERSION:
            return False
    except PackageNotFoundError:
        return False
    from dp_accounting.pld import common, pld_pmf

    _ORIGINALS.update(dictionary_to_list=common.dictionary_to_list, truncate_tails=pld_pmf._truncate_tails)
    common.dictionary_to_list = dictionary_to_list
    pld_pmf._truncate_tails = truncate_tails
    return True


def original(name: str):
    """dp-accounting's own helper ``name`` (``"dictionary_to_list"`` or ``"truncate_tails"``), for the tests that
    check these against it; None before :func:`install`."""
    return _ORIGINALS.get(name)


def vector_inverse(cls):
    """``cls`` (a dp-accounting 0.6 discrete additive-noise privacy loss) whose ``get_delta_for_epsilon`` finds
    every epsilon's cut-off at once by ``cls._inverse_losses`` (an int64 array from an array of losses, the same
    integers as the per-loss inverse) instead of one Python call per epsilon: the connect-the-dots construction
    asks it for some ten thousand epsilons. The rest is the parent's code; any case but no subsampling with
    remove adjacency (the only one dsroc builds) is the parent's as well."""
    import numbers

    from dp_accounting.pld import privacy_loss_mechanism as plm

    def get_delta_for_epsilon(self, epsilon):
        if self.sampling_prob != 1.0 or self.adjacency_type != plm.AdjacencyType.REMOVE:
            return super(out, self).get_delta_for_epsilon(epsilon)
        is_scalar = isinstance(epsilon, numbers.Number)
        epsilons = np.array([epsilon]) if is_scalar else np.asarray(epsilon)
        deltas = np.zeros_like(epsilons, dtype=float)
        inverse_indices = epsilons > -np.inf  # log1p(-sampling_prob) with sampling_prob 1
        other_indices = np.logical_not(inverse_indices)
        deltas[other_indices] = -np.expm1(epsilons[other_indices])
        chosen = epsilons[inverse_indices]
        x_cutoffs = self._inverse_losses(chosen) if chosen.size else np.array([])
        deltas[inverse_indices] = (self.mu_upper_cdf(x_cutoffs) -
                                   np.exp(epsilons[inverse_indices] + self.mu_lower_log_cdf(x_cutoffs)))
        deltas = np.clip(deltas, 0, 1)
        return float(deltas[0]) if is_scalar else deltas

    out = type(cls.__name__, (cls,), {"get_delta_for_epsilon": get_delta_for_epsilon,
                                      "__doc__": cls.__doc__, "__module__": cls.__module__})
    return out


def _discrete_gaussian_class():
    from dp_accounting.pld import privacy_loss_mechanism as plm

    class DiscreteGaussianLoss(plm.DiscreteGaussianPrivacyLoss):
        """dp-accounting's discrete Gaussian privacy loss, its inverse over an array of losses at once."""

        def _losses_of(self, x: np.ndarray) -> np.ndarray:
            # s (-s / 2 - x) / sigma^2, the parent's expression in its order; -inf above T - s, inf below -T
            s, bound = self.sensitivity, self._truncation_bound
            loss = s * (-0.5 * s - x) / (self._sigma**2)
            return np.where(x > bound - s, -np.inf, np.where(x < -bound, np.inf, loss))

        def _inverse_losses(self, losses: np.ndarray) -> np.ndarray:
            # floor(clip(-s / 2 - loss sigma^2 / s, -T - 1, T - s)), the parent's expression in its order; -inf: T - s
            s, bound = self.sensitivity, self._truncation_bound
            x = np.floor(np.clip(-0.5 * s - losses * (self._sigma**2) / s, -bound - 1, bound - s)).astype(np.int64)
            return np.where(losses == -np.inf, bound - s, x)

    return vector_inverse(DiscreteGaussianLoss)


_CLASSES: dict = {}


def discrete_gaussian_pld(sigma: float, sensitivity: int, truncation_bound: int, interval: float):
    """``privacy_loss_distribution.from_discrete_gaussian_mechanism(sigma, sensitivity, truncation_bound=...,
    value_discretization_interval=interval, use_connect_dots=True)`` (pessimistic, no subsampling): the same
    distribution, its connect-the-dots deltas found by one vectorised inverse."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    install()
    if "discrete_gaussian" not in _CLASSES:
        _CLASSES["discrete_gaussian"] = _discrete_gaussian_class()
    loss = _CLASSES["discrete_gaussian"](sigma, sensitivity=sensitivity, truncation_bound=truncation_bound)
    return pld.PrivacyLossDistribution(connect_dots_pmf(loss, interval))


def connect_dots_pmf(loss, interval: float):
    """``privacy_loss_distribution._create_pld_pmf_from_monotone_privacy_loss(loss, pessimistic_estimate=True,
    value_discretization_interval=interval, use_connect_dots=True)`` for a discrete privacy loss of
    :func:`vector_inverse`'s kind with a ``_losses_of`` (the losses at an array of points): the same pmf, its
    rounded losses found at once instead of one Python step per point. The rounded losses are dp-accounting's list:
    the floor and the ceiling of each point's loss over the interval, from the largest point down, each kept when it
    exceeds every one before it."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as pld

    bounds = loss.connect_dots_bounds()
    points = np.arange(bounds.upper_x, bounds.lower_x - 1, -1, dtype=np.int64)
    scaled = loss._losses_of(points) / interval
    if points.size == 0 or not np.all(np.isfinite(scaled)):  # dp-accounting's own loop (and its errors)
        return pld._create_pld_pmf_from_monotone_privacy_loss(loss, pessimistic_estimate=True,
                                                               value_discretization_interval=interval,
                                                               use_connect_dots=True)
    both = np.empty(2 * points.size)
    both[0::2], both[1::2] = np.floor(scaled), np.ceil(scaled)
    record = np.empty(both.size, dtype=bool)
    record[0] = True
    record[1:] = both[1:] > np.maximum.accumulate(both)[:-1]
    rounded = both[record].astype(np.int64)
    deltas = loss.get_delta_for_epsilon(rounded * interval)
    return pld_pmf.create_pmf_pessimistic_connect_dots(interval, rounded, deltas)
