"""Bounds of the largest of m Exp(1) variables at a lazily read uniform (dp_spark.noise.max_exponential):
every bound holds against a 300-digit reference, on random and extreme inputs, and is tight
enough to decide (a bound that is merely valid, e.g. [0, inf], fails the width checks)."""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest

from dp_spark.noise.max_exponential import FIRST_BITS, exact_bounds, float_bounds
from dp_spark.noise.weighted import decimal_context, exact_decimal

_REF = decimal_context(300)


def reference(m: int, u: Fraction) -> decimal.Decimal:
    """−ln(1 − u^(1/m)) at 300 digits (1 − e^x by its series below 10^-40: m up to 10^250 keeps ~50 digits)."""
    x = _REF.divide(_REF.ln(exact_decimal(u)), m)
    if x > decimal.Decimal("-1E-60"):  # −x − x²/2 + O(x³): 120 digits at least
        w = _REF.subtract(_REF.minus(x), _REF.divide(_REF.multiply(x, x), 2))
    else:
        w = _REF.subtract(1, _REF.exp(x))
    return _REF.minus(_REF.ln(w))


def _cases():
    rng = np.random.default_rng(11)
    ms = [1, 2, 3, 7, 1000, 10**6, 10**12, 2**60, 10**40, 10**120, 10**250]
    words = [1, 2, 17, 2**20, 2**52, 2**53 - 2, 2**53 - 3, 2**52 + 12345]
    words += [int(w) for w in rng.integers(1, 2**53 - 1, size=12)]
    return [(m, w) for m in ms for w in words]


@pytest.mark.parametrize("digits", [25, 40, 80])
def test_exact_bounds_hold_and_are_tight(digits):
    for m, word in _cases():
        lo, hi = exact_bounds(m, word, FIRST_BITS, digits)
        at_lo = reference(m, Fraction(word, 2**FIRST_BITS))
        at_hi = reference(m, Fraction(word + 1, 2**FIRST_BITS))
        assert lo <= at_lo and at_hi <= hi, (m, word, digits)
        # width: a few units at `digits` digits (relative to 1 − U^(1/m) and to Y)
        slack = (abs(at_lo) + abs(at_hi) + 1) * decimal.Decimal(f"1E{4 - digits}")
        assert at_lo - lo <= slack and hi - at_hi <= slack, (m, word, digits)


def test_exact_bounds_with_more_bits_narrow_to_the_point():
    rng = np.random.default_rng(5)
    for m in (1, 5, 10**9, 10**100):
        word, bits = int(rng.integers(1, 2**53)), FIRST_BITS
        for _ in range(4):  # U read 64 more bits at a time: the bounds close in on Y(U)
            word, bits = (word << 64) | int(rng.integers(0, 2**63)), bits + 64
        lo, hi = exact_bounds(m, word, bits, 120)
        point = reference(m, Fraction(word, 2**bits))
        assert lo <= point <= hi
        assert hi - lo <= (abs(point) + 1) * decimal.Decimal("1E-60")


def test_exact_bounds_at_the_ends_of_u():
    lo, hi = exact_bounds(7, 0, FIRST_BITS, 40)  # U may be 0: Y may be 0
    assert lo == 0 and hi > 0 and hi.is_finite()
    lo, hi = exact_bounds(7, 2**FIRST_BITS - 1, FIRST_BITS, 40)  # U may be 1: Y unbounded
    assert hi.is_infinite() and lo > 0
    lo, hi = exact_bounds(1, 1, 2, 40)  # m = 1: Y = −ln(1 − U) on U in [1/4, 1/2]
    assert lo <= reference(1, Fraction(1, 4)) <= reference(1, Fraction(1, 2)) <= hi < decimal.Decimal(0.7)


def test_float_bounds_hold_and_are_tight():
    cases = _cases()
    m = [c[0] for c in cases]
    words = np.array([c[1] for c in cases], dtype=np.int64)
    log_m = np.array([math.log(v) for v in m])
    lo = float_bounds(log_m, words, 0.0, upper=False)
    hi = float_bounds(log_m, words, 0.0, upper=True)
    for i, (mi, word) in enumerate(cases):
        at_lo = float(reference(mi, Fraction(word, 2**FIRST_BITS)))
        at_hi = float(reference(mi, Fraction(word + 1, 2**FIRST_BITS)))
        assert lo[i] <= at_lo and at_hi <= hi[i], (mi, word)
        scale = 1.0 + abs(at_hi) + abs(math.log(mi))
        assert at_lo - lo[i] <= 1e-8 * scale and hi[i] - at_hi <= 1e-8 * scale, (mi, word)


def test_float_bounds_widen_by_the_log_count_error():
    log_m = np.array([math.log(1000.0)])
    words = np.array([2**52], dtype=np.int64)
    exact_lo = float_bounds(log_m, words, 0.0, upper=False)[0]
    exact_hi = float_bounds(log_m, words, 0.0, upper=True)[0]
    # ln m known only within 0.01: the bounds must cover m·e^±0.01
    lo = float_bounds(log_m, words, 0.01, upper=False)[0]
    hi = float_bounds(log_m, words, 0.01, upper=True)[0]
    below = float(reference(991, Fraction(2**52, 2**FIRST_BITS)))  # 991 and 1010: |ln m − ln 1000| < 0.01
    above = float(reference(1010, Fraction(2**52 + 1, 2**FIRST_BITS)))
    assert lo <= below < exact_lo and exact_hi < above <= hi


def test_float_bounds_at_the_ends_of_u():
    log_m = np.array([0.0, math.log(50.0)])
    assert np.all(float_bounds(log_m, np.array([0, 0]), 0.0, upper=False) == 0.0)
    assert np.all(np.isinf(float_bounds(log_m, np.array([2**53 - 1] * 2), 0.0, upper=True)))
