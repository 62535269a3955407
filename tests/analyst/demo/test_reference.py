"""The survival demo's unbinned references against scikit-survival (tie-free data) and a brute force (GBSG2, ties)."""

import numpy as np
import pytest

sksurv_metrics = pytest.importorskip("sksurv.metrics")
from lifelines.datasets import load_gbsg2  # noqa: E402
from sksurv.util import Surv  # noqa: E402

from analyst.demo.gbsg2_survival import prepare_gbsg2_survival  # noqa: E402
from analyst.demo.reference import binary_dropping_censored, ipcw_auc, ipcw_brier, pooled_survival  # noqa: E402


def test_auc_and_brier_match_sksurv_without_ties():
    rng = np.random.default_rng(8)
    n = 800
    x = rng.normal(size=n)
    t, c = rng.weibull(1.4, n) * np.exp(-0.6 * x), rng.exponential(1.5, n)
    time, event = np.minimum(t, c), (t <= c).astype(int)
    risk = 1.0 / (1.0 + np.exp(-x))
    y = Surv.from_arrays(event.astype(bool), time)
    for h in (0.5, 1.0):
        auc, _ = sksurv_metrics.cumulative_dynamic_auc(y, y, risk, times=np.array([h]), tied_tol=0.0)
        assert abs(ipcw_auc(time, event, risk, h) - auc[0]) < 1e-12
        _, bs = sksurv_metrics.brier_score(y, y, (1 - risk)[:, None], np.array([h]))
        assert abs(ipcw_brier(time, event, risk, h) - bs[0]) < 1e-12


def brute_force(time, event, risk, h):
    """G(T-) by the product over distinct earlier times, events leaving first; all pairs for the AUC."""
    def g_before(t):  # prod over censoring times s < t of (1 - c_s / (n_s - d_s))
        g = 1.0
        for s in np.unique(time[time < t]):
            n_s = np.sum(time >= s)
            d_s = np.sum((time == s) & (event == 1))
            c_s = np.sum((time == s) & (event == 0))
            g *= 1.0 - c_s / (n_s - d_s) if c_s else 1.0
        return g
    case = np.flatnonzero((time <= h) & (event == 1))
    control = np.flatnonzero(time > h)
    w = np.array([1.0 / g_before(time[i]) for i in case])
    wins = np.array([[1.0 if risk[i] > risk[j] else 0.5 if risk[i] == risk[j] else 0.0 for j in control] for i in case])
    g_h = g_before(np.nextafter(h, np.inf))
    brier = (np.sum((1 - risk[case]) ** 2 * w) + np.sum(risk[control] ** 2) / g_h) / time.size
    return float((w[:, None] * wins).sum() / (w.sum() * control.size)), float(brier)


def test_auc_and_brier_match_a_brute_force_on_tied_gbsg2_times():
    raw = load_gbsg2().iloc[:160]
    time, event = raw["time"].to_numpy(float), raw["cens"].to_numpy()
    assert np.unique(time).size < time.size  # ties present
    risk = np.round(raw["pnodes"].to_numpy() / 40.0, 2)  # ties in score too
    auc, brier = brute_force(time, event, risk, 730.0)
    assert abs(ipcw_auc(time, event, risk, 730.0) - auc) < 1e-12
    assert abs(ipcw_brier(time, event, risk, 730.0) - brier) < 1e-12


def test_the_demo_keeps_every_patient_and_the_binary_analysis_drops_the_censored():
    d = prepare_gbsg2_survival(seed=2024)
    assert len(d.train) + len(d.test) == 686 and sum(len(s) for s in d.sites) == len(d.test)
    t, e, r = (d.test[c].to_numpy() for c in ("time", "event", "risk_2y"))
    pooled, binary = pooled_survival(t, e, r, 730.0), binary_dropping_censored(t, e, r, 730.0)
    assert pooled["n"] == len(d.test) and binary["n"] + binary["dropped"] == len(d.test)
    assert binary["dropped"] == ((t <= 730) & (e == 0)).sum() > 0
    assert 0.6 < pooled["harrell_c"] < 0.8 and 0.6 < pooled["auc"] < 0.85
    # dropping the censored patients enriches the rest for early events: the binary observed risk is higher
    assert binary["observed_risk"] > pooled["observed_risk"]
    assert d.coefficients["pnodes"] > 0  # more positive nodes, higher hazard
