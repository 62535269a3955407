"""The exact sampler's parts: integer thresholds of exp(-x) against mpmath, ties decided by more bits, the geometric
and Bernoulli draws against their pmfs, and the whole sampler at large sigma (every table layout)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy.stats import binomtest, chisquare

from dsroc.privacy import exact
from dsroc.privacy.exact import exact_variance, sample_exact_discrete_gaussian
from dsroc.privacy.exp_bits import WORD_BITS, LazyUniform, exp_floor, exp_floor_table


def _mp_floor(num, den, bits):
    with mpmath.workdps(120):
        return int(mpmath.floor(mpmath.exp(-mpmath.mpf(num) / den) * mpmath.mpf(2) ** bits))


def test_exp_floor_equals_mpmath_at_120_digits():
    rng = np.random.default_rng(5)
    cases = [(0, 1, 32), (1, 1, 32), (22, 1, 32), (23, 1, 32), (1, 3, 200), (10**15, 10**15 + 1, 64), (5, 2**40, 128)]
    cases += [(int(n), int(d), int(b)) for n, d, b in zip(rng.integers(0, 10**9, 60), rng.integers(1, 10**8, 60),
                                                            rng.choice([32, 64, 96], 60))]
    for num, den, bits in cases:
        assert exp_floor(num, den, bits) == _mp_floor(num, den, bits), (num, den, bits)
    with pytest.raises(ValueError, match="num >= 0"):
        exp_floor(-1, 1, 32)


@pytest.mark.parametrize("step, den, count", [(1, 7, 64), (2**15, 37428084, 800), (1, 136164184, 4096)])
def test_a_threshold_table_equals_the_entries_computed_alone(step, den, count):
    table = exp_floor_table(step, den, count)
    expected = [min(_mp_floor(d * step, den, WORD_BITS), 2**WORD_BITS - 1) for d in range(count)]
    assert table.tolist() == expected
    assert table[0] == 2**WORD_BITS - 1 and not table.flags.writeable


def test_a_tied_prefix_is_decided_with_the_probability_of_the_missing_bits():
    """A 4-bit prefix equal to floor(p 16) is below p with probability p 16 - floor(p 16); other prefixes decide alone."""
    num, den = 1, 3
    p = math.exp(-num / den)
    tie = math.floor(p * 16)
    n = 20_000
    below = sum(LazyUniform(tie, 4).below_exp(num, den) for _ in range(n))
    assert binomtest(below, n, p * 16 - tie).pvalue > 1e-4
    assert LazyUniform(tie - 1, 4).below_exp(num, den) and not LazyUniform(tie + 1, 4).below_exp(num, den)
    assert LazyUniform(2**WORD_BITS - 1).below_exp(0, 5)  # exp(0) = 1: always below


class _Words:
    """A keystream whose first words are given (then AES-CTR as usual)."""

    def __init__(self, first):
        self.first, self.stream = np.asarray(first, dtype=np.uint32), exact._Keystream()

    def words(self, count):
        head, self.first = self.first[:count], self.first[count:]
        return np.concatenate([head, self.stream.words(count - head.size)])

    def bits(self, count):
        return self.stream.bits(count)


def test_the_geometric_draw_has_its_pmf_and_decides_tied_words_by_more_bits():
    v = exact._geometric(1_000_000, exact._Keystream())
    p = np.exp(-np.arange(12.0)) * (1 - math.exp(-1))
    observed = np.bincount(v, minlength=40)
    assert chisquare(np.append(observed[:12], observed[12:].sum()), np.append(p, 1 - p.sum()) * v.size).pvalue > 1e-4
    # Words equal to floor(exp(-2) 2^32): V is 2 with probability frac(exp(-2) 2^32), else 1.
    threshold = exp_floor(2, 1, WORD_BITS)
    n = 4000
    tied = exact._geometric(n, _Words(np.full(n, threshold)))
    assert set(np.unique(tied)) <= {1, 2}
    with mpmath.workdps(50):
        frac = float(mpmath.exp(-2) * 2**WORD_BITS - threshold)
    assert binomtest(int((tied == 2).sum()), n, frac).pvalue > 1e-4
    assert exact._geometric(3, _Words([threshold - 1, threshold + 1, 2**32 - 1])).tolist() == [2, 1, 0]


def test_the_bernoulli_draw_has_its_probability_and_decides_tied_words_by_more_bits():
    den = 1000
    num = np.array([0, 1, 700, 2300, 5000, 22_999, 23_000, 10**9], dtype=np.int64)
    n = 40_000
    hits = sum(exact._bernoulli_exp(num, den, exact._Keystream()).astype(int) for _ in range(n // 8))
    for x, h in zip(num, hits):
        assert binomtest(int(h), n // 8, math.exp(-x / den)).pvalue > 1e-4, x
    # Words equal to the highest position's threshold: that factor succeeds with probability frac(exp(-x_top) 2^32),
    # the others (fresh words) with their exp(-x).
    n, number = 4000, 1234
    k, tables = exact._exp_digits(den, exact._positions(den, n))
    top = k * (len(tables) - 1)
    threshold = int(tables[0][number >> top])
    tied = exact._bernoulli_exp(np.full(n, number), den, _Words(np.full(n, threshold)))
    with mpmath.workdps(50):
        frac = mpmath.exp(-mpmath.mpf((number >> top) << top) / den) * 2**WORD_BITS - threshold
        p = float(frac * mpmath.exp(-mpmath.mpf(number & ((1 << top) - 1)) / den))
    assert 0.01 < p < 0.99 and threshold == exp_floor((number >> top) << top, den, WORD_BITS)
    assert binomtest(int(tied.sum()), n, p).pvalue > 1e-4


@pytest.mark.parametrize("variance", [1, 12, 870_000])
def test_the_staircase_acceptance_is_a_probability_and_its_table_is_exact(variance):
    """N(y) >= 0 with equality somewhere, N(y) >= 23 D from the table's end on, and table entries equal to mpmath's."""
    stair = exact._Staircase.of(variance)
    size = stair.table_size()
    exponents = [stair.exponent(y) for y in range(size + 3 * stair.s)]
    assert min(exponents) == 0 and min(exponents[size:]) >= 23 * stair.den
    table = exact._acceptance_table(variance)
    assert table.size == size + 1 and table[-1] == 0
    for y in sorted(set(range(min(size, 40))) | set(np.linspace(0, size - 1, 40).astype(int).tolist())):
        assert int(table[y]) == min(_mp_floor(stair.exponent(y), stair.den, WORD_BITS), 2**WORD_BITS - 1), y
    assert exact._use_table(stair, 740_000)  # a release of 400 000 scores at sigma <= 1000 uses it


@pytest.mark.parametrize("sigma, positions", [(8250.0, 2), (20_000.0, 3), (900.0, 6)])
def test_the_exact_sampler_at_large_sigma(sigma, positions, monkeypatch):
    """Every digit layout (the path without the acceptance table): tables of 2^16 entries, three positions, and
    the many small tables of a small release."""
    t, r = exact_variance(sigma)
    n = 300_000
    assert exact._layout(2 * t * r, positions)[0] <= 16
    monkeypatch.setattr(exact, "_positions", lambda den, proposals: positions)
    monkeypatch.setattr(exact, "_use_table", lambda stair, proposals: False)
    draws = sample_exact_discrete_gaussian(t, r, n)
    variance = t * r
    x = np.arange(-int(12 * sigma), int(12 * sigma) + 1)
    p = np.exp(-(x.astype(float) ** 2) / (2 * variance))
    cdf = np.cumsum(p / p.sum())
    cuts = x[np.searchsorted(cdf, np.arange(1, 40) / 40)]
    expected = np.diff(np.concatenate([[0.0], cdf[np.searchsorted(x, cuts)], [1.0]])) * n
    observed = np.bincount(np.searchsorted(cuts, draws, side="left"), minlength=40)
    assert chisquare(observed, expected).pvalue > 1e-4
    assert draws.var() / variance == pytest.approx(1.0, abs=6 * math.sqrt(2 / n))
    assert draws.size == n and draws.dtype == np.int64


def test_a_word_tied_with_the_acceptance_table_is_decided_by_more_bits():
    """Variance 1 (s = 1, D = 2, N(0) = 1): proposals forced to y = 0 and acceptance words equal to T[0]; a positive
    0 is then kept with probability frac(exp(-1/2) 2^32), a negative 0 never."""
    n = 4000
    stair = exact._Staircase.of(1)
    assert (stair.s, stair.den, stair.exponent(0)) == (1, 2, 1) and exact._use_table(stair, n)
    threshold = int(exact._acceptance_table(1)[0])
    words = np.concatenate([np.zeros(n), np.full(n, 2**32 - 1), np.full(n, threshold)])  # U, V, acceptance
    kept = exact._candidates(1, 1, n, _Words(words))
    with mpmath.workdps(50):
        frac = float(mpmath.exp(mpmath.mpf(-1) / 2) * 2**WORD_BITS - threshold)
    assert np.all(kept == 0)
    assert binomtest(kept.size, n, frac / 2).pvalue > 1e-4
