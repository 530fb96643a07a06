"""The wide discrete Gaussian sampler's certified comparisons (dp_spark.noise.discrete_batch).

``discrete_gaussian_batch_wide`` decides ⌊γ⌋ and each 64-bit word's Bernoulli comparison in doubles
where a proven error bound settles it, and in Python ints elsewhere. Its claim: the same decision
on every word as the all-integer path, so the same draws, bit for bit, from the same generator.
These tests hold it to that claim: against the integer path (``_certified=False``), against a digest
of the draws the module made before the change (the helpers both paths share included), with every
comparison forced onto the exact path, on scripted words at the decision boundary, and the error
bound of the float interval against exact rational arithmetic.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.mechanisms.set_union.gaussian_grid import plan_gaussian_grid
from dp_spark.noise import discrete_batch, words
from dp_spark.noise.discrete_batch import (
    _bernoulli_wide,
    _bernoulli_wide_certified,
    _gamma_estimates,
    _gamma_intervals,
    discrete_gaussian_batch_wide,
    rational_sigma2,
)
from dp_spark.noise.rng import make_rng

#: σ² of the callers: set union's grid noise (policy and weighted Gaussian at ε = 1 and 0.1), a
#: factorized counter's 2^40-scaled strategy, a rational grid value, the largest σ of the int64
#: proposal, and small σ² whose Bernoulli denominators stay in int64 (the certified path is off).
SIGMA2 = [
    plan_gaussian_grid("policy-gaussian", 1.0, 1e-6, 100).sigma ** 2,
    plan_gaussian_grid("weighted-gaussian", 0.1, 1e-9, 30).sigma ** 2,
    20 * 2**40 + 12345,
    rational_sigma2(Fraction(2**81 + 3, 7)),
    (2**47 - 1) ** 2,
    Fraction(3 * 2**80 + 1, 7),  # denominators that are not powers of two: inexact conversions
    Fraction(10**26, 3**17),
    Fraction(3, 2**61),  # 2·n·d·t² = 3·2^62: the certified path's threshold, just above
    Fraction(1, 2**61),  # exactly 2^62: certified
    Fraction(3, 2**59),  # 3·2^60, below: the integer path (its Bernoulli draws bounded integers, not words)
    Fraction(41, 8),
    30,
]


def _state(rng: np.random.Generator) -> str:
    """The generator's whole state (PCG64's with its buffered half word; ChaCha's arrays as lists)."""
    return json.dumps(rng.bit_generator.state, sort_keys=True, default=lambda v: np.asarray(v).tolist())


def _same_stream(a: np.random.Generator, b: np.random.Generator) -> bool:
    return _state(a) == _state(b)


@pytest.mark.parametrize("sigma2", SIGMA2, ids=lambda s: f"2^{math.log2(float(s)):.1f}")
@pytest.mark.parametrize("size", [1, 37, 4096])
def test_certified_path_draws_what_the_integer_path_draws(sigma2, size):
    """Three seeds: the same draws and the generator left in the same state."""
    for seed in (1, 2, 3):
        fast, exact = make_rng(seed), make_rng(seed)
        a = discrete_gaussian_batch_wide(sigma2, size, fast)
        b = discrete_gaussian_batch_wide(sigma2, size, exact, _certified=False)
        assert np.array_equal(a, b)
        assert _same_stream(fast, exact)


def test_the_same_on_the_releases_chacha_generator():
    """An unseeded (ChaCha20, OS-keyed) generator copied: both paths draw the same values."""
    rng = make_rng(None)
    twin = copy.deepcopy(rng)
    sigma2 = SIGMA2[0]
    assert np.array_equal(discrete_gaussian_batch_wide(sigma2, 5000, rng),
                          discrete_gaussian_batch_wide(sigma2, 5000, twin, _certified=False))
    assert _same_stream(rng, twin)


#: SHA-256 of the draws below and of the generators' states after them, made by the module before the
#: certified path (commit a4ad5b2): a change of any shared helper's words (the exp(−1) trials, the scalar
#: bounds, the proposal) changes it, where comparing the two paths of one module could not see it.
DRAWS_BEFORE_THE_CHANGE = "a33d079183b12751cf9a97c4587ca2cea5174f18ff8869c34064ff764a9a803a"


def test_the_module_draws_what_it_drew_before_the_certified_path():
    digest = hashlib.sha256()
    calls = [(discrete_batch.discrete_laplace_batch, 1), (discrete_batch.discrete_laplace_batch, Fraction(2**40 + 1, 1024)),
             (discrete_batch.discrete_gaussian_batch, Fraction(41, 8)), (discrete_batch.discrete_gaussian_batch, 1000),
             (discrete_gaussian_batch_wide, SIGMA2[0]), (discrete_gaussian_batch_wide, Fraction(3 * 2**80 + 1, 7)),
             (discrete_gaussian_batch_wide, Fraction(3, 2**59))]
    for seed in (5, 6):
        rng = np.random.default_rng(seed)
        for draw, arg in calls:
            digest.update(draw(arg, 300, rng).tobytes())
        a, b = rng.integers(0, 50, 200), rng.integers(1, 20, 200)
        digest.update(discrete_batch.bernoulli_exp_batch(a, b, rng).tobytes())
        digest.update(_state(rng).encode())
    assert digest.hexdigest() == DRAWS_BEFORE_THE_CHANGE


def test_float_exceptions_do_not_escape_the_certified_path():
    """Under np.errstate(all="raise") a σ² whose doubles underflow draws as the integer path does."""
    sigma2 = Fraction(2 * 3**400 + 1, 3**400)
    with np.errstate(all="raise"):
        a = discrete_gaussian_batch_wide(sigma2, 200, make_rng(1))
    assert np.array_equal(a, discrete_gaussian_batch_wide(sigma2, 200, make_rng(1), _certified=False))


def test_every_comparison_forced_onto_the_exact_path_changes_nothing(monkeypatch):
    """An interval as wide as [−1, 2] around every γ and a word margin above 2^64: no double decides
    anything, every ⌊γ⌋ and every word goes through Python ints; the draws stay the same."""
    sigma2 = SIGMA2[0]
    expected = discrete_gaussian_batch_wide(sigma2, 3000, make_rng(7), _certified=False)
    monkeypatch.setattr(discrete_batch, "_GAMMA_SLACK", 1.0)
    monkeypatch.setattr(words, "WORD_MARGIN", 2.0**66)
    assert np.array_equal(discrete_gaussian_batch_wide(sigma2, 3000, make_rng(7)), expected)


class _Words:
    """Stands in for the generator: the scripted 64-bit words, in order."""

    def __init__(self, words):
        self.words = list(words)

    def integers(self, low, high, size=None, dtype=None, endpoint=False):
        if size is None:  # one word (a tie reads on)
            return np.uint64(self.words.pop(0))
        return np.array([self.words.pop(0) for _ in range(size)], dtype=np.uint64)


@pytest.mark.parametrize("num,den", [
    (2**180 // 3, 2**180 + 12345),  # p ≈ 1/3
    (1, 2**70),  # p ≈ 2^-70: P = 0
    (2**190 - 12345, 2**190),  # p just below 1
    (7 * 2**120 + 5, 2**123 + 1),  # p ≈ 7/8
])
@pytest.mark.parametrize("bounds", ["tight", "one rounding inward"])
def test_words_at_the_boundary_are_decided_exactly(num, den, bounds):
    """Words around P = ⌊p·2^64⌋ (P − 2^14 .. P + 2^14, P itself: a tie, then a second word), with
    the tightest double bounds of p, or bounds one rounding off inward (the interval arithmetic's
    allowance: a lower bound up to an ulp above p): every outcome is the integer rule's."""
    top, _ = divmod(num * 2**64, den)
    p = Fraction(num, den)
    near = float(p)
    if bounds == "tight":
        lo, hi = math.nextafter(near, -math.inf), math.nextafter(near, math.inf)
        assert Fraction(lo) <= p <= Fraction(hi)
    else:
        lo, hi = math.nextafter(near, math.inf), math.nextafter(near, -math.inf)
    for offset in (-2**14, -2**13, -2**11, -2, -1, 0, 1, 2, 2**11, 2**13, 2**14):
        word = top + offset
        if not 0 <= word < 2**64:
            continue
        follow = [word, 2**63]  # the second word decides a tie
        got = _bernoulli_wide_certified(np.array([lo]), np.array([hi]), lambda i: num, den, _Words(follow))
        want = _bernoulli_wide([num], den, _Words(follow))
        assert got.tolist() == want.tolist(), offset


def test_without_the_word_margin_a_bound_one_rounding_off_decides_wrongly(monkeypatch):
    """The margin is needed: a lower bound one ulp above p (one rounding's allowance) and the word
    P + 1 (the integer rule: failure): with no margin the doubles call it a success."""
    num, den = 2**180 // 3, 2**180 + 12345
    top, _ = divmod(num * 2**64, den)
    lo = hi = np.array([math.nextafter(float(Fraction(num, den)), math.inf)])
    assert _bernoulli_wide([num], den, _Words([top + 1])).tolist() == [False]
    assert _bernoulli_wide_certified(lo, hi, lambda i: num, den, _Words([top + 1])).tolist() == [False]
    monkeypatch.setattr(words, "WORD_MARGIN", 0.0)
    assert _bernoulli_wide_certified(lo, hi, lambda i: num, den, _Words([top + 1])).tolist() == [True]


@settings(max_examples=300, deadline=None)
@given(
    sigma_bits=st.integers(min_value=-3, max_value=47),
    numerator_noise=st.integers(min_value=0, max_value=2**20),
    grid=st.sampled_from([1, 2**10, 2**21, 7]),
    offset=st.one_of(st.integers(min_value=-2**20, max_value=2**20),
                     st.integers(min_value=-(2**52) + 1, max_value=2**52 - 1)),
)
def test_the_gamma_interval_holds_gamma_with_its_stated_bound(sigma_bits, numerator_noise, grid, offset):
    """For σ² = n/d from 2^-6 to 2^94 and magnitudes |Y| around σ²/t and far from it: the float
    interval holds the exact γ = (|Y|·t·d − n)²/(2·n·d·t²), and γ_f is within the module's derived
    bound 2^-48·(1/(2σ²) + γ) of it (the interval's half-width is over 200 times that)."""
    sigma2 = Fraction(2 ** (2 * sigma_bits) * grid + numerator_noise, grid) if sigma_bits >= 0 else \
        Fraction(grid + numerator_noise % grid, grid * 2 ** (-2 * sigma_bits))
    num, den = sigma2.numerator, sigma2.denominator
    t = math.isqrt(num * den) // den + 1
    if t >= 2**48:
        return
    c = num // (t * den)
    mag = max(0, c + offset)
    lo, hi, ok = _gamma_intervals(np.array([mag], dtype=np.int64), num, den, t)
    if not ok[0]:
        return
    gamma = Fraction((mag * t * den - num) ** 2, 2 * num * den * t * t)
    assert Fraction(lo[0]) <= gamma <= Fraction(hi[0])
    estimate, _ = _gamma_estimates(np.array([mag], dtype=np.int64), num, den, t)
    assert abs(Fraction(estimate[0]) - gamma) <= Fraction(2) ** -48 * (1 / (2 * sigma2) + gamma)
