"""Uno's C under a minimum censoring survival: where tau is truncated, against a life table and bins counted by hand,
and what the validation reports (the value at the tau used, the note naming the rule), per site too."""

from __future__ import annotations

import numpy as np
import pytest

from dsroc.survival import SiteRelease, SurvivalHistogram, censoring_survival, survival_validation, uno_c, uno_truncation

EDGES = np.concatenate([np.arange(0.0, 3001.0, 250.0), [np.inf]])
SCORES = np.linspace(0.0, 1.0, 11)


def cohort(n: int, seed: int, *, censoring_end: float = 3000.0):
    """Exponential event times whose rate rises with the risk, uniform censoring on (0, censoring_end)."""
    rng = np.random.default_rng(seed)
    risk = rng.uniform(0.05, 0.95, n)
    t = rng.exponential(1500.0 * (1.1 - risk))
    c = rng.uniform(0.0, censoring_end, n)
    return np.minimum(np.minimum(t, c), 2999.0), (t <= c).astype(int), risk


def histogram(n: int = 4000, seed: int = 1, **kw) -> SurvivalHistogram:
    return SurvivalHistogram.from_patients(*cohort(n, seed, **kw), time_edges=EDGES, score_edges=SCORES)


def life_table_g(counts: np.ndarray) -> np.ndarray:
    """Censoring survival G at each bin's right edge, one bin at a time: the censorings are the events, each bin's
    events count half at risk of its censorings."""
    per_bin = counts.sum(axis=2)  # (K, 2): censored, events
    g, out = 1.0, []
    for k in range(per_bin.shape[0]):
        at_risk = per_bin[k:].sum() - 0.5 * per_bin[k, 1]
        g *= 1.0 - per_bin[k, 0] / at_risk if at_risk > 0 else 1.0
        out.append(g)
    return np.array(out)


def test_tau_moves_to_the_first_time_point_whose_censoring_survival_falls_below_the_minimum():
    h = histogram()
    g = life_table_g(h.counts)
    np.testing.assert_allclose(censoring_survival(h).survival, g, rtol=0, atol=1e-12)
    points = h.time_points
    for minimum in (0.3, 0.5, 0.7):
        for tau in (1000.0, 1600.0, 2500.0, 3000.0):
            used = uno_truncation(censoring_survival(h), tau, minimum)
            counted = [k for k in range(points.size) if points[k] < tau]  # the bins whose events Uno's C counts
            asked = g[counted[-1]] if counted else 1.0
            assert used.tau == tau and used.censoring_asked == pytest.approx(asked, abs=1e-12)
            if asked >= minimum:
                assert used.used == tau and not used.truncated
                continue
            kept = [k for k in counted if g[k] >= minimum]
            assert kept == list(range(len(kept)))  # a prefix of the bins
            assert used.truncated and used.used == points[len(kept)]
            assert used.censoring_used == pytest.approx(g[kept[-1]], abs=1e-12) and used.censoring_used >= minimum
            # the truncated C counts exactly the kept bins' events: the same as at any tau just past the last kept
            assert uno_c(h, used.used) == pytest.approx(uno_c(h, points[kept[-1]] + 1e-6), abs=1e-12)


def test_no_minimum_keeps_tau_and_a_first_bin_below_it_leaves_no_uno_c():
    h = histogram()
    assert uno_truncation(censoring_survival(h), 2800.0, 0.0).used == 2800.0
    assert uno_truncation(censoring_survival(h), 100.0, 0.99).used == 100.0  # no bin before tau: G(tau-) = 1
    g1 = life_table_g(h.counts)[0]
    none = uno_truncation(censoring_survival(h), 2800.0, min(0.999, g1 + 0.01))
    assert np.isnan(none.used) and none.truncated
    for bad, match in (((-1.0, 0.2), "tau must be a positive finite time"), ((np.inf, 0.2), "tau must be a positive"),
                       ((1000.0, 1.0), r"minimum censoring survival must lie in \[0, 1\)"),
                       (("1000", 0.2), "tau must be a number")):
        with pytest.raises(ValueError, match=match):
            uno_truncation(censoring_survival(h), *bad)


def test_the_validation_reports_uno_c_at_the_truncated_tau_with_the_rule():
    h = histogram()
    g = life_table_g(h.counts)
    minimum = float(g[6] + g[7]) / 2.0  # between the 7th and 8th bins: tau 2500 truncated to the 8th time point, 2000
    v = survival_validation(h, 1000.0, count_sd=0.0, tau=2500.0, min_censoring=minimum, draws=20)
    assert v.tau == h.time_points[7] == 2000.0
    assert v.uno_c.value == pytest.approx(uno_c(h, 2000.0), abs=1e-12)
    (note,) = [n for n in v.notes if "truncated at tau = 2000 instead of 2500" in n]  # G(2500-): the 9th bin
    assert f"G(2500-) = {g[8]:.3f} is below the minimum {minimum:g} (policy: survival_min_censoring_survival)" in note
    plain = survival_validation(h, 1000.0, count_sd=0.0, tau=2500.0, draws=20)
    assert plain.tau == 2500.0 and plain.uno_c.value == pytest.approx(uno_c(h, 2500.0), abs=1e-12)
    assert not any("instead of" in n for n in plain.notes)
    gone = survival_validation(h, 1000.0, count_sd=0.0, tau=2500.0, min_censoring=min(0.999, g[0] + 0.01), draws=20)
    assert np.isnan(gone.tau) and np.isnan(gone.uno_c.value) and gone.uno_c.lower != gone.uno_c.lower
    assert any("Uno's C is not reported" in n and "already at the first time point" in n for n in gone.notes)
    assert np.isfinite(gone.harrell_c.value) and np.isfinite(gone.auc.value)  # nothing else is touched


def test_each_site_needs_its_own_minimum_at_the_pooled_tau():
    """Site b's censoring ends at 1600: at the pooled tau its own G is below its minimum, its Uno's C is withheld and
    left out of the pooling; site a's stays."""
    a, b = histogram(3000, 2), histogram(3000, 3, censoring_end=1800.0)
    ga, gb = life_table_g(a.counts), life_table_g(b.counts)
    tau = 1500.0  # the events of the bins up to 1250 count
    assert ga[4] > 0.4 > gb[4]
    sites = {"a": SiteRelease(a, 0.0, min_censoring=0.4), "b": SiteRelease(b, 0.0, min_censoring=0.4)}
    v = survival_validation(a + b, 1000.0, count_sd=0.0, tau=tau, sites=sites, draws=20)
    assert v.tau == tau  # the pooled minimum (0 here) does not bind
    by_site = {s.site: s for s in v.sites}
    assert by_site["a"].uno_c.value == pytest.approx(uno_c(a, tau), abs=1e-12)
    assert np.isnan(by_site["b"].uno_c.value) and np.isfinite(by_site["b"].harrell_c.value)
    gb_tau = gb[int(np.searchsorted(b.time_points, tau)) - 1]
    assert (f"site b: its own Uno's C is not reported: its released censoring survival G(1500-) = {gb_tau:.3f} is "
            "below the minimum 0.4 (policy: survival_min_censoring_survival)") in v.notes
    assert not any(n.startswith("site a") for n in v.notes)
    assert "uno_c" not in v.pooled and "harrell_c" in v.pooled  # one site left: no pooling of Uno's C

