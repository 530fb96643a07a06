"""Tests for dp_spark.noise.selection: exact Bernoulli(exp(−c·gap)), permute-and-flip and the
exponential mechanism by rejection.

Statistical tests use fixed seeds and accept at p > 1e-4; each is paired with the same counts
rejected against a wrong law (the coefficient times 1.2), so they can fail. The float shortcut is
checked word for word against the all-exact rule (the same outputs and generator state)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dp_spark.noise import selection, words
from dp_spark.noise.selection import bernoulli_exp_gap, exponential_mechanism_rows, permute_and_flip_rows

P_ACCEPT = 1e-4

#: (c, gap) pairs: integer products (x = 1, 2: the M = 2^e split's exact boundaries), tiny and
#: subnormal-scale products, products near 2^-53 of an integer, GEM's grid gaps, a tiny c.
CASES = [
    (0.5, 2.0), (0.25, 4.0), (0.5, 4.0), (0.37, 0.2), (1.3, 3.7), (1.0, 1.0 + 2.0**-52),
    (1.0, 1.0 - 2.0**-53), (0.5, 1e-300), (2.0**-30, 2.0**20), (1e-3, 1e4), (0.4999999, 3.0 + 2.0**-20),
    (1.7, 5.0e-6), (3.0, 0.75),
]


def binomial_p(hits: int, n: int, p: float) -> float:
    return float(stats.binomtest(hits, n, p).pvalue)


@pytest.mark.parametrize("block", [120_000, 600])  # one call (a step per numpy call), 200 small calls (blocks)
@pytest.mark.parametrize("c, gap", CASES)
def test_bernoulli_exp_gap_has_the_exact_probability(c, gap, block):
    n = 120_000
    rng = np.random.default_rng(int(1e6 * c + gap) % 2**32)
    hits = sum(int(bernoulli_exp_gap(c, np.full(block, gap), np.zeros(block), rng).sum())
               for _ in range(n // block))
    p = math.exp(-c * gap)
    if p == 1.0:  # x below 2^-53: every trial succeeds but with probability ~x
        assert hits >= n - 2
        return
    assert binomial_p(hits, n, p) > P_ACCEPT
    if 0.02 < p < 0.98:
        assert binomial_p(hits, n, math.exp(-1.2 * c * gap)) < P_ACCEPT  # the test can fail


def test_elements_with_different_trial_counts_in_one_block():
    """Gaps 0.3 and 3.0 side by side (M = 1 and M = 4 trials), in small blocks (several trials per
    numpy call, the unused ones masked) and in one large call: each kind at its own exp(−x)."""
    n = 60_000
    for block in (2_000, n):
        gaps = np.tile([0.3, 3.0], block // 2)
        rng = np.random.default_rng(block)
        hits = sum(bernoulli_exp_gap(1.0, gaps, np.zeros(block), rng).reshape(-1, 2).sum(axis=0)
                   for _ in range(n // block))
        for kind, gap in enumerate((0.3, 3.0)):
            assert binomial_p(int(hits[kind]), n // 2, math.exp(-gap)) > P_ACCEPT, (block, gap)


def test_gaps_of_zero_accept_without_a_draw_and_huge_gaps_never_accept():
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    assert bernoulli_exp_gap(0.7, np.array([3.0, -1e300]), np.array([3.0, -1e300]), rng).all()
    assert rng.bit_generator.state == state  # nothing drawn
    top = np.array([1e300, 1e308, 2.0**61, 1.0])
    low = np.array([-1e300, -1e308, 0.0, -2.0**62])  # 2e300, an infinite float gap, 2^61, ~2^62
    assert not bernoulli_exp_gap(1.0, top, low, rng).any()
    assert bernoulli_exp_gap(1.0, np.zeros(0), np.zeros(0), rng).shape == (0,)


def _forced_exact(monkeypatch):
    """Every word through the exact rule: no float comparison decides anything."""
    monkeypatch.setattr(words, "WORD_MARGIN", math.inf)


@pytest.mark.parametrize("few", [selection._FEW, 10**9])  # blocks of steps and trials for small arrays; always
@pytest.mark.parametrize("seed", range(4))
def test_float_shortcut_decides_every_word_as_the_exact_rule(monkeypatch, seed, few):
    """Same outputs and the same generator state after, with every comparison made exactly."""
    monkeypatch.setattr(selection, "_FEW", few)
    rng = np.random.default_rng(seed)
    n = 600 if few > 4096 else 4000  # forced exact, blocks resolve up to 32 words an element
    grid = -np.round(np.abs(rng.normal(0, 8, n)) * 2**20) / 2**20  # GEM's 2^-20 grid
    ints = -np.floor(np.abs(rng.normal(0, 8, n)))  # top-k's integer counts
    odd = -np.abs(rng.standard_cauchy(n))  # any doubles
    scores = np.concatenate([grid, ints, odd])
    for c in (0.5, 0.35, 1.0 / 3.0, 2.0**-20):
        fast_rng, exact_rng = np.random.default_rng(seed + 10), np.random.default_rng(seed + 10)
        fast = bernoulli_exp_gap(c, np.zeros_like(scores), scores, fast_rng)
        with monkeypatch.context() as m:
            _forced_exact(m)
            exact = bernoulli_exp_gap(c, np.zeros_like(scores), scores, exact_rng)
        assert np.array_equal(fast, exact)
        assert fast_rng.bit_generator.state == exact_rng.bit_generator.state


def _below(word, p, rng):
    return words.below(word, p.numerator, p.denominator, rng)


class _Words:
    """A stand-in generator handing out given 64-bit words (for :func:`words.below`)."""

    def __init__(self, words):
        self.words = list(words)

    def integers(self, *args, **kwargs):
        return np.uint64(self.words.pop(0))


def test_below_compares_the_uniform_word_by_word():
    p = Fraction(1, 3)
    top = (2**64) // 3  # ⌊p·2^64⌋
    assert _below(top - 1, p, _Words([])) is True
    assert _below(top + 1, p, _Words([])) is False
    # a tie goes to the next word against frac(p·2^64) = 1/3 again
    assert _below(top, p, _Words([top - 1])) is True
    assert _below(top, p, _Words([top, top + 1])) is False
    assert _below(2**64 - 1, Fraction(1), _Words([])) is True  # p = 1: always
    assert _below(0, Fraction(0), _Words([0, 0, 5])) is False  # p = 0: never


class _Fixed:
    """A stand-in generator for :func:`words.bernoulli_bounded`: the given words first, then
    ``tail`` for every later (tie-breaking) word."""

    def __init__(self, words, tail):
        self.words, self.tail = np.asarray(words, dtype=np.uint64), tail

    def integers(self, low, high, size=None, dtype=None, endpoint=False):
        if size is None:
            return np.uint64(self.tail)
        out, self.words = self.words[:size], self.words[size:]
        return out


@pytest.mark.parametrize("q", [Fraction(2**40 * 2 + 1, 2**65),  # q·2^64 = 2^40 + 1/2: W = P is a tie
                               Fraction(1, 3), Fraction(2**53 + 1, 2**62), Fraction(7, 2**70),
                               Fraction(2**64 - 3, 2**64)])
def test_words_near_the_boundary_are_decided_as_the_exact_rule(q):
    """Words within 2^14 of ⌊q·2^64⌋ (and q·2^64's neighbours), against the float bounds the sampler
    computes from fl(q): every decision is :func:`words.below`'s (a tie goes on to a word
    above 2^63, i.e. "no" for q·2^64 − P < 1/2 ... decided exactly either way)."""
    top = (q.numerator * 2**64) // q.denominator
    offsets = np.array(sorted({*range(-40, 41), *(s * 2**e for s in (-1, 1) for e in range(6, 15))}))
    scripted = [top + int(d) for d in offsets if 0 <= top + int(d) < 2**64]
    lo, hi = selection._bounds(np.full(len(scripted), float(q)))
    for tail in (2**63 + 5, 2**63 - 5):
        got = words.bernoulli_bounded(lo, hi, lambda i: (q.numerator, q.denominator), _Fixed(scripted, tail))
        want = [_below(w, q, _Fixed([], tail)) for w in scripted]
        assert got.tolist() == want


def brute_force_pf(scores, c):
    """Permute-and-flip's law by enumerating every visiting order (finite scores)."""
    s = np.asarray(scores, dtype=float)
    p = np.where(np.isfinite(s), np.exp(-c * (s.max() - s)), 0.0)
    k = len(s)
    out = np.zeros(k)
    perms = list(itertools.permutations(range(k)))
    for perm in perms:
        stay = 1.0
        for j in perm:
            out[j] += stay * p[j] / len(perms)
            stay *= 1.0 - p[j]
    return out


def softmax(scores, c):
    s = np.asarray(scores, dtype=float)
    w = np.where(np.isfinite(s), np.exp(c * (s - s.max())), 0.0)
    return w / w.sum()


ROWS = [
    [0.0, -0.5, -1.25, -3.0],
    [2.0, 2.0, 1.0, -np.inf],
    [-1.0, 0.5, 0.5 - 2.0**-20, 0.25],
    [10.0, 9.0, -1e300, 9.5],
]


def _chi2(counts, probs):
    keep = probs > 0
    assert counts[~keep].sum() == 0, "an index of probability 0 was drawn"
    return float(stats.chisquare(counts[keep], probs[keep] / probs[keep].sum() * counts.sum()).pvalue)


@pytest.mark.parametrize("sampler, law", [(permute_and_flip_rows, brute_force_pf),
                                          (exponential_mechanism_rows, softmax)])
def test_row_samplers_have_their_mechanisms_laws(sampler, law):
    """All four rows in one (G, 4) draw: each row's frequencies against its own law."""
    n = 40_000
    c = 0.85
    scores = np.repeat(np.array(ROWS), n, axis=0)
    chosen = sampler(scores, c, np.random.default_rng(17)).reshape(len(ROWS), n)
    for r, row in enumerate(ROWS):
        counts = np.bincount(chosen[r], minlength=4)
        assert _chi2(counts, law(row, c)) > P_ACCEPT, (r, counts)
        if r == 0:
            assert _chi2(counts, law(row, 1.2 * c)) < P_ACCEPT  # the test can fail


def test_permute_and_flip_and_the_exponential_mechanism_differ_on_rows():
    row = ROWS[0]
    n = 40_000
    chosen = permute_and_flip_rows(np.tile(row, (n, 1)), 0.85, np.random.default_rng(2))
    assert _chi2(np.bincount(chosen, minlength=4), softmax(row, 0.85)) < P_ACCEPT


def test_every_row_gets_an_index_with_a_finite_score():
    rng = np.random.default_rng(4)
    scores = rng.normal(0, 30, size=(2000, 7))
    scores[rng.random(scores.shape) < 0.5] = -np.inf
    scores[np.arange(2000), rng.integers(0, 7, 2000)] = 0.0  # one finite score per row at least
    for sampler in (permute_and_flip_rows, exponential_mechanism_rows):
        chosen = sampler(scores, 0.3, rng)
        assert (chosen >= 0).all() and np.isfinite(scores[np.arange(2000), chosen]).all()


def test_rows_are_seeded_and_independent_of_other_rows_law():
    """The same seed gives the same indices; a row's law does not depend on the rows beside it."""
    a = np.tile(ROWS[0], (30_000, 1))
    b = np.vstack([a, np.tile(ROWS[3], (30_000, 1))])
    x = permute_and_flip_rows(b, 0.85, np.random.default_rng(8))
    assert np.array_equal(x, permute_and_flip_rows(b, 0.85, np.random.default_rng(8)))
    assert _chi2(np.bincount(x[:30_000], minlength=4), brute_force_pf(ROWS[0], 0.85)) > P_ACCEPT


def _doubles(rng, n):
    """Doubles across the whole range the samplers meet: grid values, integers, subnormals, huge."""
    mags = np.ldexp(rng.random(n) + 0.5, rng.integers(-1074, 61, n))
    grid = np.round(rng.random(n) * 2**30) / 2**20
    ints = np.floor(rng.random(n) * 2**40)
    return np.concatenate([mags, grid, ints])


def test_the_float_bounds_hold_the_exact_values():
    """For random c and gaps (top − s in doubles, as the sampler forms them): M = 2^e >= x,
    y_f's interval holds x/M, and every q = y/k's interval [lo, hi] holds it, exactly (Fractions)."""
    rng = np.random.default_rng(11)
    tiny = np.ldexp(rng.random(300) + 0.5, rng.integers(-1074, -1000, 300))  # subnormal gaps and products
    tops = np.concatenate([_doubles(rng, 600), tiny])
    lows = np.concatenate([-_doubles(rng, 600)[rng.permutation(1800)], -tiny[rng.permutation(300)]])
    for c in (0.5, 1.0 / 3.0, 0.35, 2.0**-20, 7.9):
        with np.errstate(over="ignore"):
            x = c * (tops - lows)
        keep = (x > 0) & (x < selection._LARGE)
        e, y = selection._split(x[keep])
        for i, (top, low) in enumerate(zip(tops[keep], lows[keep])):
            exact = Fraction(c) * (Fraction(float(top)) - Fraction(float(low)))
            m = 1 << int(e[i])
            assert exact <= m
            for k in (1, 2, 3, 7):
                lo, hi = selection._bounds(np.array([y[i] / k]))
                assert Fraction(float(lo[0])) <= exact / m / k <= Fraction(float(hi[0]))


def test_rows_without_a_finite_score_or_with_nan_are_refused():
    from dp_spark.errors import ParameterError

    rng = np.random.default_rng(0)
    for sampler in (permute_and_flip_rows, exponential_mechanism_rows):
        for bad in ([[0.0, 1.0], [-np.inf, -np.inf]], [[0.0, np.nan]], [[0.0, np.inf]], [[]], [0.0, 1.0]):
            with pytest.raises(ParameterError, match="selection scores must"):  # fixed text, no score
                sampler(np.array(bad, dtype=float), 0.5, rng)


def test_float_flags_set_to_raise_do_not_make_a_draw_fail():
    """A caller's np.seterr(all="raise") must not turn subnormal or huge gaps into an error."""
    scores = np.array([[0.0, -5e-324, -1.0, -1e308]])
    with np.errstate(all="raise"):
        for sampler in (permute_and_flip_rows, exponential_mechanism_rows):
            for seed in range(20):
                assert sampler(scores, 0.7, np.random.default_rng(seed))[0] in (0, 1, 2)
