"""The survival release: cells against a patient-by-patient loop, the risk sums it rebuilds, its sensitivity."""

import numpy as np
import pytest

from dsroc.histogram.stages import SUMS_RESOLUTION
from dsroc.privacy.laplace import discrete_laplace_noise
from dsroc.survival import SurvivalHistogram
from dsroc.survival.release import (decode_survival_release, draw_survival_release, encode_survival_release,
                                    survival_release_parts, survival_release_scales)

TIME_EDGES = np.array([0.0, 100.0, 250.0, 400.0, 730.0, np.inf])
SCORE_EDGES = np.array([0.0, 0.1, 0.2, 0.4, 0.7, 1.0])


def _zero(scale, shape):
    return np.zeros(shape, dtype=np.int64)


def _patients(seed=0, n=400):
    rng = np.random.default_rng(seed)
    t = np.round(rng.exponential(500.0, n), 0)
    t[:5] = [0.0, 100.0, 250.0, 730.0, 5000.0]  # on the edges: each in the bin it closes
    return t, (rng.random(n) < 0.6).astype(int), rng.beta(2, 5, n), rng


def test_counts_match_a_loop_over_patients():
    t, d, r, rng = _patients()
    rel = draw_survival_release(t, d, r, time_edges=TIME_EDGES, score_edges=SCORE_EDGES, noise=_zero, rng=rng,
                                sigma=1.0)
    loop = np.zeros((5, 2, 5), dtype=int)
    for ti, di, ri in zip(t, d, r):
        k = 0 if ti == 0 else next(i for i in range(5) if TIME_EDGES[i] < ti <= TIME_EDGES[i + 1])
        j = min(next(i for i in range(5) if ri < SCORE_EDGES[i + 1] or i == 4), 4)
        loop[k, di, j] += 1
    assert np.array_equal(rel.counts[0], loop)
    h = SurvivalHistogram.from_patients(t, d, r, time_edges=TIME_EDGES, score_edges=SCORE_EDGES)
    assert np.array_equal(rel.histogram(TIME_EDGES, SCORE_EDGES).counts, h.counts)


def test_risk_sums_are_rebuilt_within_the_rounding():
    t, d, r, rng = _patients(n=2000)
    exact = SurvivalHistogram.from_patients(t, d, r, time_edges=TIME_EDGES, score_edges=SCORE_EDGES)
    sums = []
    for seed in range(200):
        rel = draw_survival_release(t, d, r, time_edges=TIME_EDGES, score_edges=SCORE_EDGES, noise=_zero,
                                    rng=np.random.default_rng(seed), sigma=1.0, risk_sums=True, sums_sigma=1.0)
        h = rel.histogram(TIME_EDGES, SCORE_EDGES)
        w = np.diff(SCORE_EDGES)
        # one rounding step per patient of each sum, in bin widths
        assert np.all(np.abs(h.score_sum - exact.score_sum) <= exact.counts * w / SUMS_RESOLUTION + 1e-9)
        sums.append([h.score_sum.sum(), h.score_sq_sum.sum()])
    mean = np.mean(sums, axis=0)
    # unbiased rounding: the mean of 200 draws within 4 SEs (each offset's rounding SD <= 1/4 bin width <= 0.075)
    se = 0.075 * np.sqrt(r.size) / np.sqrt(200)
    assert abs(mean[0] - exact.score_sum.sum()) < 4 * se
    assert abs(mean[1] - exact.score_sq_sum.sum()) < 4 * 2 * se


def test_one_patient_moves_one_count_and_each_sum_by_at_most_its_sensitivity():
    t, d, r, _ = _patients(n=200)
    kw = dict(time_edges=TIME_EDGES, score_edges=SCORE_EDGES, noise=_zero, sigma=1.0, risk_sums=True, sums_sigma=1.0)
    full = draw_survival_release(t, d, r, rng=np.random.default_rng(3), **kw)
    for drop in (0, 3, 77, 199):
        keep = np.arange(200) != drop
        # the same rounding for the others: draw the full data's rounding, then drop her from it
        less = draw_survival_release(t[keep], d[keep], r[keep], rng=np.random.default_rng(3), **kw)
        assert np.abs(full.counts - less.counts).sum() == 1
    # the worst case of one patient's own terms is the resolution (offsets and squares in [0, 1])
    one = draw_survival_release(t[:1], d[:1], np.array([0.7 - 1e-12]), rng=np.random.default_rng(0), **kw)
    assert one.offsets.max() <= SUMS_RESOLUTION and one.squares.max() <= SUMS_RESOLUTION


def test_the_parts_compose_to_the_release_epsilon():
    for eps in (0.5, 1.0, 5.0):
        for sums in (False, True):
            c, s = survival_release_scales(eps, risk_sums=sums)
            parts = survival_release_parts(risk_sums=sums)
            spent = 1.0 / c + (2 * SUMS_RESOLUTION / s if sums else 0.0)
            assert spent <= eps * (1 + 1e-9)
            assert spent > eps * 0.99  # only the ledger's grid is lost
            assert len(parts) == (3 if sums else 1)


def test_noise_is_added_to_every_cell_and_the_payload_round_trips():
    t, d, r, rng = _patients()
    rel = draw_survival_release(t, d, r, time_edges=TIME_EDGES, score_edges=SCORE_EDGES,
                                noise=lambda sc, sh: discrete_laplace_noise(sc, sh, rng), rng=rng, sigma=3.0,
                                risk_sums=True, sums_sigma=5.0)
    exact = draw_survival_release(t, d, r, time_edges=TIME_EDGES, score_edges=SCORE_EDGES, noise=_zero, rng=rng,
                                  sigma=1.0)
    assert np.mean(rel.counts != exact.counts) > 0.7
    back = decode_survival_release(encode_survival_release(rel), time_bins=5, score_bins=5, risk_sums=True)
    for a, b in ((back.counts, rel.counts), (back.offsets, rel.offsets), (back.squares, rel.squares)):
        assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="payload"):
        decode_survival_release(encode_survival_release(rel), time_bins=4, score_bins=5, risk_sums=True)


def test_groups_are_separate_releases():
    t, d, r, rng = _patients()
    site = np.arange(t.size) % 3
    rel = draw_survival_release(t, d, r, time_edges=TIME_EDGES, score_edges=SCORE_EDGES, noise=_zero, rng=rng,
                                sigma=1.0, groups=site, n_groups=3)
    for k in range(3):
        alone = draw_survival_release(t[site == k], d[site == k], r[site == k], time_edges=TIME_EDGES,
                                      score_edges=SCORE_EDGES, noise=_zero, rng=rng, sigma=1.0)
        assert np.array_equal(rel.counts[k], alone.counts[0])
    with pytest.raises(ValueError, match="one group"):
        encode_survival_release(rel)
