"""The survival demo's pooled references, unbinned and written directly (not dsroc's binned estimators): what all test
patients in one place would give, and what the binary analysis that drops the patients censored early says.

Conventions, as the release's: at a tied time events precede censorings; the censoring survival ``G`` is the reverse
Kaplan-Meier with the events at a time leaving the risk set before its censorings; a case at ``T`` (an event by the
horizon) is weighted ``1 / G(T-)``, the controls (followed beyond the horizon) ``1 / G(t)``; patients censored before
the horizon get weight 0 in AUC(t) and Brier(t) but count in the Brier score's ``n``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["binary_dropping_censored", "censoring_left_limits", "ipcw_auc", "ipcw_brier", "pooled_survival"]


def censoring_left_limits(time, event) -> tuple[np.ndarray, float]:
    """``G(T_i-)`` for every patient and the function ``G`` itself as ``(times, values)`` of its steps."""
    time, event = np.asarray(time, dtype=np.float64), np.asarray(event, dtype=np.int64)
    order = np.lexsort((1 - event, time))  # by time, events first
    left = np.empty(time.size)
    g, at_risk, steps_t, steps_g = 1.0, time.size, [], []
    i = 0
    while i < time.size:
        t = time[order[i]]
        same = order[i:][time[order[i:]] == t]
        d = int(event[same].sum())
        c = same.size - d
        left[same] = g
        at_risk -= d  # the events at t leave before the censorings at t
        if c:
            g *= 1.0 - c / at_risk
        at_risk -= c
        steps_t.append(t)
        steps_g.append(g)
        i += same.size
    return left, (np.array(steps_t), np.array(steps_g))


def _g_at(steps, t: float) -> float:
    times, values = steps
    k = int(np.searchsorted(times, t, side="right"))
    return 1.0 if k == 0 else float(values[k - 1])


def ipcw_auc(time, event, risk, horizon: float) -> float:
    """Cumulative/dynamic AUC at ``horizon``: all pairs of a case and a control, case weights ``1 / G(T-)``, score
    ties one half."""
    time, event, risk = (np.asarray(a, dtype=np.float64) for a in (time, event, risk))
    left, _ = censoring_left_limits(time, event)
    case = (time <= horizon) & (event == 1)
    controls = np.sort(risk[time > horizon])
    below = np.searchsorted(controls, risk[case], side="left")
    ties = np.searchsorted(controls, risk[case], side="right") - below
    w = 1.0 / left[case]
    return float(np.sum(w * (below + 0.5 * ties)) / (w.sum() * controls.size))


def ipcw_brier(time, event, risk, horizon: float) -> float:
    """Graf's IPCW Brier score at ``horizon`` of the predicted risks."""
    time, event, risk = (np.asarray(a, dtype=np.float64) for a in (time, event, risk))
    left, steps = censoring_left_limits(time, event)
    case = (time <= horizon) & (event == 1)
    control = time > horizon
    return float((np.sum((1.0 - risk[case]) ** 2 / left[case]) + np.sum(risk[control] ** 2) / _g_at(steps, horizon))
                 / time.size)


def pooled_survival(time, event, risk, horizon: float) -> dict:
    """The pooled test data's values: Harrell's C (lifelines ``concordance_index``), the Kaplan-Meier at the horizon
    (lifelines ``KaplanMeierFitter``), AUC(t) and Brier(t) (this module), the mean predicted risk and O/E."""
    from lifelines import KaplanMeierFitter
    from lifelines.utils import concordance_index

    time, event, risk = (np.asarray(a, dtype=np.float64) for a in (time, event, risk))
    km = float(KaplanMeierFitter().fit(time, event).survival_function_at_times(horizon).iloc[0])
    expected = float(risk.mean())
    return {"n": int(time.size), "events": int(((time <= horizon) & (event == 1)).sum()),
            "censored_before": int(((time <= horizon) & (event == 0)).sum()),
            "harrell_c": float(concordance_index(time, -risk, event)), "auc": ipcw_auc(time, event, risk, horizon),
            "brier": ipcw_brier(time, event, risk, horizon), "km_survival": km, "observed_risk": 1.0 - km,
            "expected_risk": expected, "oe": (1.0 - km) / expected}


def binary_dropping_censored(time, event, risk, horizon: float) -> dict:
    """What the binary analysis says: patients censored before the horizon dropped, the outcome "event by the
    horizon", then the plain empirical AUC, Brier score, observed fraction and O/E of the patients kept."""
    time, event, risk = (np.asarray(a, dtype=np.float64) for a in (time, event, risk))
    kept = (time > horizon) | (event == 1)
    y, r = ((time <= horizon) & (event == 1))[kept].astype(float), risk[kept]
    pos, neg = np.sort(r[y == 1]), np.sort(r[y == 0])
    below = np.searchsorted(neg, pos, side="left")
    ties = np.searchsorted(neg, pos, side="right") - below
    observed = float(y.mean())
    return {"n": int(kept.sum()), "dropped": int((~kept).sum()),
            "auc": float(np.sum(below + 0.5 * ties) / (pos.size * neg.size)), "brier": float(np.mean((y - r) ** 2)),
            "observed_risk": observed, "expected_risk": float(r.mean()), "oe": observed / float(r.mean())}
