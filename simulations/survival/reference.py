"""The pooled, unbinned, noise-free estimates of a cohort: per-patient sorting and counting, independent of dsroc.

What the sites' data would give if pooled in one place, by the conventions dsroc states (events precede
censorings at a time; a case at ``T`` weighted ``1 / G(T-)``, a control at horizon ``t`` ``1 / G(t)``; pairs
tied in score count one half), on per-patient times. Nothing here reads a histogram: the pair counts come from
a bottom-up merge sort over the patients ordered by time (``O(n log^2 n)``, vectorised per level), so a cohort of
10^5 takes a fraction of a second. Times are assumed tie-free (continuous); scores may tie.
"""

from __future__ import annotations

import numpy as np

__all__ = ["censoring_left_limits", "kaplan_meier_at", "later_lower_scores", "pooled_estimates"]


def censoring_left_limits(time, event) -> np.ndarray:
    """``G(T_i-)`` for every patient: the reverse Kaplan-Meier just before her time (tie-free times)."""
    order = np.argsort(time, kind="stable")
    censored = 1 - np.asarray(event)[order]
    at_risk = time.size - np.arange(time.size)
    factors = 1.0 - censored / at_risk  # an event at its own time leaves the risk set first: no factor
    left = np.concatenate([[1.0], np.cumprod(factors)[:-1]])
    out = np.empty(time.size)
    out[order] = left
    return out


def _reverse_km_at(time, event, t) -> float:
    """``G(t)``: the product over the censorings at or before ``t``."""
    order = np.argsort(time, kind="stable")
    sorted_time, censored = time[order], 1 - np.asarray(event)[order]
    at_risk = time.size - np.arange(time.size)
    keep = sorted_time <= t
    return float(np.prod(1.0 - censored[keep] / at_risk[keep]))


def kaplan_meier_at(time, event, t) -> float:
    """Kaplan-Meier ``S(t)`` of the events (tie-free times)."""
    order = np.argsort(time, kind="stable")
    sorted_time, events = time[order], np.asarray(event)[order]
    at_risk = time.size - np.arange(time.size)
    keep = sorted_time <= t
    return float(np.prod(1.0 - events[keep] / at_risk[keep]))


def later_lower_scores(time, score) -> np.ndarray:
    """For each patient ``i``: ``#{j : T_j > T_i, r_j < r_i} + 1/2 #{j : T_j > T_i, r_j = r_i}`` (tie-free times).

    Bottom-up merge sort over the patients in time order: at the level of block width ``w``, each patient in an
    even block counts the patients of the next (later) block below her score, by one ``searchsorted`` over the
    later blocks' scores keyed by their block pair.
    """
    order = np.argsort(time, kind="stable")
    n = time.size
    _, rank = np.unique(np.asarray(score)[order], return_inverse=True)
    rank = rank.astype(np.int64)
    position = np.arange(n)
    counts = np.zeros(n)
    width = 1
    while width < n:
        block = position // width
        pair = block // 2
        later = block % 2 == 1
        keys = np.sort(pair[later] * (n + 1) + rank[later])
        early = ~later
        base = pair[early] * (n + 1)
        below = np.searchsorted(keys, base + rank[early], side="left")
        at_or_below = np.searchsorted(keys, base + rank[early], side="right")
        counts[np.flatnonzero(early)] += 0.5 * (below + at_or_below) - np.searchsorted(keys, base, side="left")
        width *= 2
    out = np.empty(n)
    out[order] = counts
    return out


def _concordance(time, event, score, weights) -> float:
    lower = later_lower_scores(time, score)
    later = time.size - 1 - np.argsort(np.argsort(time, kind="stable"), kind="stable")  # tie-free: T_j > T_i
    use = (np.asarray(event) == 1) & (weights > 0.0)
    return float(np.sum(weights[use] * lower[use]) / np.sum(weights[use] * later[use]))


def pooled_estimates(time, event, risk, *, auc_time: float, tau: float, horizon: float) -> dict:
    """The five study statistics of one pooled cohort: AUC at ``auc_time``, Uno's C at ``tau``, Harrell's C,
    Brier and O/E at ``horizon``."""
    time, event, risk = (np.asarray(v, dtype=np.float64) for v in (time, event, risk))
    if np.unique(time).size != time.size:
        raise ValueError("time: the unbinned reference needs tie-free follow-up times")
    g_left = censoring_left_limits(time, event)
    is_event = event == 1
    # cumulative/dynamic AUC: weighted cases against the controls' sorted scores
    cases = is_event & (time <= auc_time)
    controls = np.sort(risk[time > auc_time])
    below = 0.5 * (np.searchsorted(controls, risk[cases], side="left")
                   + np.searchsorted(controls, risk[cases], side="right"))
    w = 1.0 / g_left[cases]
    auc = float(np.sum(w * below) / (np.sum(w) * controls.size))
    harrell = _concordance(time, event, risk, np.ones(time.size))
    uno = _concordance(time, event, risk, np.where(time < tau, 1.0 / g_left**2, 0.0))
    # Graf's Brier score and the observed-over-expected risk at the horizon
    early = is_event & (time <= horizon)
    late = time > horizon
    g_h = _reverse_km_at(time, event, horizon)
    brier = float((np.sum((1.0 - risk[early]) ** 2 / g_left[early]) + np.sum(risk[late] ** 2) / g_h) / time.size)
    oe = (1.0 - kaplan_meier_at(time, event, horizon)) / float(np.mean(risk))
    return {"auc": auc, "uno": uno, "harrell": harrell, "brier": brier, "oe": oe}
