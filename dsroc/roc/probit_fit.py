"""The binomial probit on threshold counts fitted to its maximum-likelihood estimate in few evaluations, batched over rows."""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from .probit import OneCounts, ProbitTerms, moment_step

__all__ = ["Iteration", "OneFit", "iterate_to_mle", "newton_one", "stop_before_evaluating"]

_WORSE = 1e-10  # a step that raises the deviance by more than this (relative) is taken back and damped


class Iteration(NamedTuple):
    """Outcome of :func:`iterate_to_mle` (arrays with one entry per row)."""

    theta: np.ndarray
    iterations: np.ndarray  # steps taken, the last one possibly not evaluated (see stop_before_evaluating)
    evaluations: np.ndarray  # evaluations of the likelihood (a remote fit: round trips to every site)
    deviance_rule: np.ndarray  # R's deviance rule met by the last step (predicted when not evaluated)
    converged: np.ndarray
    trace: list  # deviance per evaluation, (B,) arrays
    info: np.ndarray  # expected information at the last evaluation, (B, 3)
    deviance: np.ndarray
    last_step: np.ndarray  # size of the last step taken, relative to the parameters


def stop_before_evaluating(size, previous, xtol, order: int):
    """Whether the step just computed ends the fit, so that its end point need not be evaluated.

    ``size`` is the step's size relative to the parameters and ``previous`` the size of the step before
    (NaN for none). The fit stops when the step is below ``xtol``, or when the steps shrink so fast
    (ratio ``q <= 1/2``) that the error left after this step, estimated as ``size * q**order``, is below
    ``xtol``. Newton steps converge quadratically (``order = 2``): the error after a step is ``K e**2``
    with ``K`` estimated by ``size / previous**2``. The secant steps converge superlinearly (``order = 1``):
    the ratio of successive steps falls from one step to the next, so the steps still to come are
    below ``q * size``. The estimate must be below ``xtol / 10``: it is a rate read off two steps, not a
    bound (with ``xtol`` itself, 3 % of the study's fits ended 1.1e-10 from R's MLE at ``xtol = 1e-10``:
    ``benchmarks/r_reference.py``). Works on floats and on arrays.
    """
    q = size / previous
    return (size <= xtol) | ((q <= 0.5) & (size * q**order <= 0.1 * xtol))


def iterate_to_mle(evaluate: Callable[[np.ndarray], ProbitTerms], theta0: np.ndarray, *, tol: float, xtol: float,
                   max_iter: int, observed: Callable[[ProbitTerms], np.ndarray] | None = None,
                   x: np.ndarray | None = None) -> Iteration:
    """Fit to the maximum-likelihood estimate, or with ``xtol = 0`` to R's ``glm`` estimate.

    ``evaluate(theta[B, 2]) -> ProbitTerms``; rows are independent.

    ``xtol = 0``: Fisher scoring ``theta <- theta + I(theta)^-1 V(theta)`` with the expected information
    ``I`` until ``|dev_m - dev_{m-1}| / (|dev_m| + 0.1) < tol``, R's ``glm`` rule and iteration.

    ``xtol > 0``: steps to the MLE, as few evaluations as possible (each is a round trip to every site
    when the parts are remote):

    - with ``observed`` (the counts are at hand: a :class:`~dsroc.roc.probit.ProbitCounts`) Newton steps with
      the observed information, which converge quadratically;
    - otherwise (only the score, expected information and deviance are known at each theta) a first
      :func:`~dsroc.roc.probit.moment_step` when the grid probits ``x`` are known, then quasi-Newton steps
      with ``I(theta) - A``: ``A`` estimates the difference between expected and observed information
      from the change of the score along the steps taken (the symmetric secant update of Powell,
      ``A s = (I_k + I_{k+1}) s / 2 - (V_k - V_{k+1})``), which converge superlinearly where Fisher
      scoring converges linearly. Nothing but the quantities already returned is used.

    A step that raises the deviance is taken back and the row continues with half a Fisher step; a row
    whose step is not finite stops where it is. The fit stops, without evaluating the end point of its
    last step, once :func:`stop_before_evaluating` says the step just computed reaches the MLE to
    ``xtol`` (relative to the parameters) and R's rule holds for that step: its deviance change,
    predicted by the quadratic model as ``|V . step|``, is below ``tol`` relative to the deviance.
    """
    if xtol == 0:
        return _fisher_to_r_rule(evaluate, theta0, tol=tol, max_iter=max_iter)
    theta = np.array(theta0, dtype=np.float64)
    rows = theta.shape[0]
    terms = evaluate(theta)
    trace = [terms.deviance.copy()]
    iterations = np.zeros(rows, dtype=np.int64)
    evaluations = np.ones(rows, dtype=np.int64)
    rule, converged, done = (np.zeros(rows, dtype=bool) for _ in range(3))
    last_step, previous = np.full(rows, np.inf), np.full(rows, np.nan)  # NaN: no step before the first
    fisher, damp = np.zeros(rows, dtype=bool), np.ones(rows)
    correction = np.zeros((rows, 3))  # A = I - J estimated by secant updates (remote parts)
    moment = x is not None and observed is None
    order = 1 if observed is None else 2
    for it in range(max_iter):
        active = ~done
        if observed is not None:
            curvature = np.where(fisher[:, None], terms.info, observed(terms))
        else:
            curvature = _positive_or_fisher(terms.info - correction, terms.info)
        step = _solve(curvature, terms.score) * damp[:, None]
        if moment and it == 0:
            jump = moment_step(theta, terms.score, terms.info, x) - theta
            ok = np.isfinite(jump).all(1)
            step[ok] = jump[ok]
        finite = np.isfinite(step).all(1)
        with np.errstate(divide="ignore", invalid="ignore"):
            size = np.abs(step).max(1) / np.maximum(np.abs(theta + step).max(1), 1.0)
            # R's rule on this last step, its deviance change predicted by the quadratic model: -V.s
            change = np.abs(np.vecdot(terms.score, step)) / (np.abs(terms.deviance) + 0.1)
            stop = active & finite & (change < tol) & stop_before_evaluating(size, previous, xtol, order)
        theta[stop] += step[stop]
        iterations += stop
        last_step[stop] = size[stop]
        converged |= stop
        rule |= stop
        done |= stop | (active & ~finite)
        move = active & ~done
        if not move.any():
            break
        step[~move] = 0.0
        trial = theta + step
        new = evaluate(trial)
        iterations += move
        evaluations += move
        worse = move & (new.deviance - terms.deviance > _WORSE * (np.abs(terms.deviance) + 0.1))
        accept = move & ~worse
        rel = np.abs(new.deviance - terms.deviance) / (np.abs(new.deviance) + 0.1)
        rule = np.where(accept, rel < tol, rule & ~worse)
        if observed is None:
            learn = accept & ~fisher & (it > 0 or not moment) & (size > 1e-12)
            with np.errstate(divide="ignore", invalid="ignore"):
                correction = np.where(learn[:, None], _secant_update(correction, step, terms, new), correction)
            correction[worse] = 0.0
        theta[accept] = trial[accept]
        last_step[accept] = previous[accept] = size[accept]
        fisher = worse | (fisher & ~accept)
        damp = np.where(worse, 0.5 * damp, np.where(accept, 1.0, damp))
        terms = new if accept.all() else _keep(new, terms, accept)
        trace.append(terms.deviance.copy())
    return Iteration(theta, iterations, evaluations, rule, converged, trace, terms.info, terms.deviance, last_step)


class OneFit(NamedTuple):
    """Outcome of a one-row fit in Python floats (:func:`newton_one`, or row 0 of an :class:`Iteration`)."""

    g1: float
    g2: float
    iterations: int
    evaluations: int
    deviance_rule: bool
    converged: bool
    trace: list  # deviance per evaluation
    info: tuple  # (I00, I01, I11) at the last evaluation
    last_step: float

    @classmethod
    def row(cls, fit: Iteration) -> "OneFit":
        """Row 0 of a batched fit."""
        g1, g2 = fit.theta[0].tolist()
        return cls(g1, g2, int(fit.iterations[0]), int(fit.evaluations[0]), bool(fit.deviance_rule[0]),
                   bool(fit.converged[0]), [float(d[0]) for d in fit.trace], tuple(fit.info[0].tolist()),
                   float(fit.last_step[0]))


def newton_one(model: OneCounts, g1: float, g2: float, *, tol: float, xtol: float, max_iter: int) -> OneFit:
    """:func:`iterate_to_mle` with ``observed`` (Newton steps) for a single row, in Python floats.

    The same steps, rule and safeguards as the batched loop (a batched fit of the same counts takes the
    same decisions), without its per-step array bookkeeping: a 28-point fit is a few evaluations.
    """
    v0, v1, j, dev, m = model(g1, g2)
    trace = [dev]
    iterations, evaluations, rule, converged, fisher, damp = 0, 1, False, False, False, 1.0
    last_step, previous = math.inf, math.nan
    for _ in range(max_iter):
        a, b, d = model.information(m) if fisher else j
        det = a * d - b * b
        s0 = (d * v0 - b * v1) / det * damp if det else math.nan
        s1 = (a * v1 - b * v0) / det * damp if det else math.nan
        if not (math.isfinite(s0) and math.isfinite(s1)):
            break
        size = max(abs(s0), abs(s1)) / max(abs(g1 + s0), abs(g2 + s1), 1.0)
        change = abs(v0 * s0 + v1 * s1) / (abs(dev) + 0.1)
        if change < tol and stop_before_evaluating(size, previous, xtol, 2):
            g1, g2, last_step, converged, rule = g1 + s0, g2 + s1, size, True, True
            iterations += 1
            break
        new = model(g1 + s0, g2 + s1)
        iterations += 1
        evaluations += 1
        if new[3] - dev > _WORSE * (abs(dev) + 0.1):
            rule, fisher, damp = False, True, 0.5 * damp
        else:
            rule = abs(new[3] - dev) / (abs(new[3]) + 0.1) < tol
            g1, g2, last_step, previous, fisher, damp = g1 + s0, g2 + s1, size, size, False, 1.0
            v0, v1, j, dev, m = new
        trace.append(dev)
    return OneFit(g1, g2, iterations, evaluations, rule, converged, trace, model.information(m), last_step)


def _fisher_to_r_rule(evaluate, theta0, *, tol: float, max_iter: int) -> Iteration:
    """Fisher scoring until R's deviance rule, as R's ``glm`` iterates."""
    theta = np.array(theta0, dtype=np.float64)
    terms = evaluate(theta)
    trace = [terms.deviance.copy()]
    rows = theta.shape[0]
    iterations = np.zeros(rows, dtype=np.int64)
    rule = np.zeros(rows, dtype=bool)
    last_step = np.full(rows, np.inf)
    for _ in range(max_iter):
        step = _solve(terms.info, terms.score)
        active = ~rule & np.isfinite(step).all(1)
        if not active.any():
            break
        step[~active] = 0.0
        theta = theta + step
        new = evaluate(theta)
        iterations += active
        rel = np.abs(new.deviance - terms.deviance) / (np.abs(new.deviance) + 0.1)
        last_step = np.where(active, np.abs(step).max(1) / np.maximum(np.abs(theta).max(1), 1.0), last_step)
        rule |= active & (rel < tol)
        terms = new if active.all() else _keep(new, terms, active)
        trace.append(terms.deviance.copy())
    return Iteration(theta, iterations, iterations + 1, rule, rule.copy(), trace, terms.info, terms.deviance, last_step)


def _solve(info: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Solve the symmetric 2 x 2 systems ``[[a, b], [b, d]] step = score`` row by row, in closed form."""
    a, b, d = info[:, 0], info[:, 1], info[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        det = a * d - b * b
        return np.stack([d * score[:, 0] - b * score[:, 1], a * score[:, 1] - b * score[:, 0]], axis=1) / det[:, None]


def _positive_or_fisher(curvature: np.ndarray, info: np.ndarray) -> np.ndarray:
    """The quasi-Newton curvature where it is safely positive definite (smallest eigenvalue at least 1e-3
    of the information's largest), the expected information elsewhere."""
    def eigen(m, sign):
        half_trace = 0.5 * (m[:, 0] + m[:, 2])
        return half_trace + sign * np.hypot(0.5 * (m[:, 0] - m[:, 2]), m[:, 1])

    ok = eigen(curvature, -1.0) > 1e-3 * eigen(info, 1.0)
    return np.where(ok[:, None], curvature, info)


def _secant_update(correction: np.ndarray, step: np.ndarray, old: ProbitTerms, new: ProbitTerms) -> np.ndarray:
    """Powell's symmetric (PSB) update of ``A`` so that ``A s = z``, ``z = (I_old + I_new) s / 2 - (V_old - V_new)``:
    the score changes by the observed information along the step, the mean information predicts it."""
    s0, s1 = step[:, 0], step[:, 1]
    info = 0.5 * (old.info + new.info)
    y = old.score - new.score
    a, b, d = (correction[:, i] for i in range(3))
    r0 = info[:, 0] * s0 + info[:, 1] * s1 - y[:, 0] - (a * s0 + b * s1)  # r = z - A s
    r1 = info[:, 1] * s0 + info[:, 2] * s1 - y[:, 1] - (b * s0 + d * s1)
    ss = s0 * s0 + s1 * s1
    rs = (r0 * s0 + r1 * s1) / ss
    return np.stack([a + (2.0 * r0 * s0 - rs * s0 * s0) / ss,
                     b + (r0 * s1 + r1 * s0 - rs * s0 * s1) / ss,
                     d + (2.0 * r1 * s1 - rs * s1 * s1) / ss], axis=1)


def _keep(new: ProbitTerms, old: ProbitTerms, active: np.ndarray) -> ProbitTerms:
    """The new terms for active rows, the old ones for the others."""
    def pick(a, b):
        return np.where(active.reshape((-1,) + (1,) * (a.ndim - 1)), a, b)

    state = tuple(pick(a, b) for a, b in zip(new.state, old.state)) if new.state is not None else None
    return ProbitTerms(pick(new.score, old.score), pick(new.info, old.info), pick(new.deviance, old.deviance), state)
