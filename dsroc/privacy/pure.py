"""Pure epsilon-DP histories in closed form: basic composition on the accountant's privacy-loss grid, and a floor."""

from __future__ import annotations

import math

__all__ = ["grid_steps", "pure_delta", "pure_epsilon", "top_loss_log_probability", "pure_delta_floor"]


def grid_steps(epsilon: float, interval: float) -> int:
    """One pure ``epsilon``-DP release's epsilon in steps of the privacy-loss grid ``interval``, rounded up.

    ``ceil(epsilon / interval)``: the largest loss the accountant's pessimistic privacy-loss distribution of the
    release has (dp-accounting rounds every loss up onto the grid the same way), so a history's sum of steps is
    never below what that distribution would compose to.
    """
    return math.ceil(float(epsilon) / float(interval))


def pure_delta(total: float, epsilon: float) -> float:
    """The delta at which a ``total``-DP history is (``epsilon``, delta)-DP: ``1 - exp(epsilon - total)``, 0 from
    ``total`` on.

    Valid for every mechanism whose privacy loss never exceeds ``total``: its hockey-stick divergence
    ``E[(1 - exp(epsilon - L))_+]`` has every term at most that bound. So it is never below the privacy-loss
    distribution's own answer for a history of pure releases composed to at most ``total``.
    """
    gap = float(epsilon) - float(total)
    return 0.0 if gap >= 0.0 else -math.expm1(gap)


def pure_epsilon(total: float, delta: float) -> float:
    """The smallest epsilon at which a ``total``-DP history is (epsilon, ``delta``)-DP by :func:`pure_delta`:
    ``total + log(1 - delta)``, at least 0."""
    return max(0.0, float(total) + math.log1p(-float(delta)))


def top_loss_log_probability(rate: float) -> float:
    """``log P[L = epsilon]``: the log-probability that a release's privacy loss takes its largest value.

    For discrete Laplace noise ``P[X = x]`` proportional to ``exp(-rate |x|)`` on a query moved by its sensitivity
    (the loss is largest on one side of both means) and for the worst-case pair of a pure ``rate``-DP event
    (randomized response, whose loss is ``+-rate``) alike: ``1 / (1 + exp(-rate))``.
    """
    return -math.log1p(math.exp(-float(rate)))


def pure_delta_floor(total: float, log_top: float, epsilon: float) -> float:
    """A lower bound on the delta at ``epsilon`` of independent pure releases whose largest losses sum to ``total``
    and whose :func:`top_loss_log_probability` sum to ``log_top``: ``exp(log_top) (1 - exp(epsilon - total))_+``.

    The composed loss is ``total`` with probability ``exp(log_top)`` (every release at its largest loss), and that
    term alone of the hockey-stick divergence ``E[(1 - exp(epsilon - L))_+]`` gives the bound. It holds for the exact
    loss and so for the pessimistic privacy-loss distribution, which is never below it: where it exceeds a budget's
    delta, that distribution refuses too, and need not be built.
    """
    return math.exp(float(log_top)) * pure_delta(total, epsilon)
