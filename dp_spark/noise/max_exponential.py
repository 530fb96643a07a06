"""The largest of m independent Exp(1) variables, bounded at a uniform read bit by bit.

Permute-and-flip (McKenna & Sheldon, NeurIPS 2020) is report-noisy-max with Exp(1) noise on the
scaled scores (Ding, Kifer, Saghaian, Steinke, Wang, Xiao & Zhang, "The Permute-and-Flip
Mechanism is Identical to Report-Noisy-Max with Exponential Noise", arXiv:2105.07260, 2021).
Where the candidates come in groups of m with one score (top-k's joint permute-and-flip: m up to
d!/(d−k)! sequences an entry), a group competes with the largest of its m noises,
``Y = −ln(1 − U^(1/m))`` for a uniform U (the inverse of the CDF ``(1 − e^−y)^m``), increasing in
U. A sampler that reads U's binary digits lazily (the first 53 as an integer ``word``, then
64-bit words) knows U only within ``[word, word + 1]·2^-bits``, so Y within
``[Y(word·2^-bits), Y((word + 1)·2^-bits)]``; the bounds below hold those two ends.

- :func:`float_bounds`: doubles, vectorised, for the first 53 bits: ``lo <= Y(U_lo)`` and
  ``hi >= Y(U_hi)``, given ``ln m`` within ``log_m_error``. They hold when every double
  operation and library function (numpy's ``log``, ``exp``, ``expm1``, ``log1p``) is within
  ``FLOAT_ERROR = 2^-36`` relative of its exact value: over 10⁵ units in the last place, where
  IEEE 754 arithmetic is within half a unit and numpy's float64 functions document at most 4
  units. Error analysis (ρ = FLOAT_ERROR): E = −ln U within ρ relative, so ln E within
  ρ(1 + |ln E|), and |ln E| <= 37 for U in [2^-53, 1 − 2^-53] (E between 1.1e-16 and 36.8);
  t = ln E − ln m within that plus ``log_m_error`` and ρ(|ln E| + |ln m|); a = e^t within ρ
  relative more; Y's derivative in ln a is −a/(e^a − 1), of size at most 1, so those errors
  reach Y at most as they are; Y's own evaluation (−ln(−expm1(−a)) for a <= ln 2,
  −log1p(−e^−a) above, −t + a/2 where t < −40, whose omitted terms are below e^−80) adds at
  most 3ρ(1 + Y) + 10^-30. The margin used, ``log_m_error + ρ(8 + 4(Y + 37 + |ln m|)) +
  10^-30``, is above the sum. U = 0 gives the lower bound 0 (Y > 0), U = 1 the upper bound +inf.
- :func:`exact_bounds`: Python ``decimal`` at any number of digits, for any number of bits and
  any integer m (no double involved): ``ln`` and ``exp`` of :mod:`decimal` are correctly rounded
  (half a unit in the last place); every one is widened by ten units in the last place, every
  other operation rounded outward (``ROUND_FLOOR`` for a lower end, ``ROUND_CEILING`` for an
  upper end). For x = ln(U)/m above −1/2, 1 − e^x is bounded by two consecutive partial sums
  of its alternating series −Σ x^n/n!, so no digits cancel and a huge m (x near 0) needs none
  extra.

Both are bounds, not estimates: a sampler that decides an argmax only when the bounds separate,
reading more bits and digits otherwise, releases exactly the argmax of the true values.
Releases nothing by itself; the guarantee is stated where it is used
(:func:`dp_spark.mechanisms.top_k.joint.pnf_joint_top_k`).
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np

from dp_spark.noise.weighted import decimal_context, directed_contexts, exact_decimal

__all__ = ["FIRST_BITS", "FLOAT_ERROR", "exact_bounds", "float_bounds", "max_exponential"]

#: Bits of U read first (one integer word below 2^53: U's ends are doubles exactly).
FIRST_BITS = 53
#: The relative error allowed for each double operation and library function (module docstring).
FLOAT_ERROR = 2.0**-36
_LN_E_BOUND = 37.0
_SERIES_BELOW = decimal.Decimal("-0.5")
_INF = decimal.Decimal("Infinity")


def max_exponential(log_m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Max of m i.i.d. Exp(1) variables, m = exp(log_m), given E = −ln U (as doubles).

    Inverse CDF: y = −ln(1 − exp(−a)), a = E/m = exp(ln E − ln m), evaluated from t = ln E −
    ln m without forming m: −ln(−expm1(−a)) for a <= ln 2, −log1p(−exp(−a)) above (Mächler's
    log1mexp), −t + a/2 when t < −40 (the omitted terms are O(a²)). Accurate to a few ulps for
    every finite ln m, where the paper's Eq. (6) overflows past ln m ≈ 745. E = 0 gives a large
    finite value (E is raised to the smallest normal double), E = inf gives 0.
    """
    e = np.maximum(e, np.finfo(np.float64).tiny)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        t = np.log(e) - log_m
        y = np.empty_like(t)
        tiny = t < -40.0
        a = np.exp(np.where(tiny, -40.0, t))
        small = ~tiny & (a <= math.log(2.0))
        large = ~tiny & ~small
        y[tiny] = -t[tiny] + 0.5 * np.exp(t[tiny])
        y[small] = -np.log(-np.expm1(-a[small]))
        y[large] = -np.log1p(-np.exp(-a[large]))
    return y


def float_bounds(log_m: np.ndarray, words: np.ndarray, log_m_error: float, upper: bool) -> np.ndarray:
    """Doubles bounding Y = −ln(1 − U^(1/m)) for U in ``[words, words + 1]·2^-53``: below
    Y(words·2^-53) (``upper`` False) or above Y((words + 1)·2^-53) (``upper`` True), for every
    m with |ln m − ``log_m``| <= ``log_m_error`` (module docstring: the doubles' error budget).
    ``words``: integers in [0, 2^53)."""
    u = np.ldexp((np.asarray(words, dtype=np.int64) + (1 if upper else 0)).astype(np.float64), -FIRST_BITS)  # exact
    with np.errstate(divide="ignore"):
        e = -np.log(u)  # 0 at U = 1, +inf at U = 0
    y = max_exponential(log_m, e)
    # |ln E| <= 37 for 2^-53 <= U <= 1 − 2^-53 (E between 1.1e-16 and 36.8); U = 0 and U = 1 are set apart below
    margin = log_m_error + FLOAT_ERROR * (8.0 + 4.0 * (np.abs(y) + _LN_E_BOUND + np.abs(log_m))) + 1e-30
    if upper:
        return np.where(e > 0.0, y + margin, np.inf)
    return np.where(np.isfinite(e), np.maximum(y - margin, 0.0), 0.0)


def _one_minus_exp(x: decimal.Decimal, digits: int) -> tuple[decimal.Decimal, decimal.Decimal]:
    """(lo, hi) around 1 − e^x for a Decimal x < 0, within ~10^(2 − digits) relative: below
    x = −1/2 by the alternating series −Σ x^n/n! (the true value lies between two consecutive
    partial sums; terms until one is 10^-(digits + 3) of the first, at digits + 10 digits), else
    1 − e^x with e^x correctly rounded (no cancellation: 1 − e^x >= 0.39); then widened by ten
    units in the last place."""
    slack = decimal.Decimal(f"1E{2 - digits}")
    down, up = directed_contexts(digits)
    if x > _SERIES_BELOW:
        ctx = decimal_context(digits + 10)
        term = ctx.minus(x)
        stop = ctx.multiply(term, decimal.Decimal(f"1E{-digits - 3}"))
        before, total, n = decimal.Decimal(0), term, 1
        while abs(term) > stop:
            n += 1
            term = ctx.divide(ctx.multiply(term, x), n)  # −x^n/n!: signs alternate, sizes fall (|x| < 1)
            before, total = total, ctx.add(total, term)
        lo, hi = min(before, total), max(before, total)
    else:
        e = decimal_context(digits).exp(x)
        lo = down.subtract(1, up.multiply(e, up.add(1, slack)))
        hi = up.subtract(1, down.multiply(e, down.subtract(1, slack)))
    return down.multiply(lo, down.subtract(1, slack)), up.multiply(hi, up.add(1, slack))


def _y_bound(m: int, u: Fraction, digits: int, upper: bool) -> decimal.Decimal:
    """A bound of −ln(1 − u^(1/m)) for a dyadic 0 < u < 1 and an integer m >= 1: above it
    (``upper``) or below it, with outward rounding at ``digits`` digits (module docstring)."""
    near = decimal_context(digits)
    down, up = directed_contexts(digits)
    slack = decimal.Decimal(f"1E{2 - digits}")  # ten units in the last place, relative
    ln_u = near.ln(exact_decimal(u))  # < 0, within half a unit of ln u
    if upper:  # x = ln(u)/m from above (nearer 0): 1 − e^x from below, Y from above
        x = up.divide(up.multiply(ln_u, down.subtract(1, slack)), m)
        w = _one_minus_exp(x, digits)[0]
        if w <= 0:
            return _INF
        return up.minus(down.multiply(near.ln(w), up.add(1, slack)))  # −ln w from above (ln w <= 0)
    x = down.divide(down.multiply(ln_u, up.add(1, slack)), m)
    w = _one_minus_exp(x, digits)[1]
    if w >= 1:
        return decimal.Decimal(0)
    return max(down.minus(up.multiply(near.ln(w), down.subtract(1, slack))), decimal.Decimal(0))


def exact_bounds(m: int, word: int, bits: int, digits: int) -> tuple[decimal.Decimal, decimal.Decimal]:
    """(lo, hi) with lo <= Y <= hi for Y = −ln(1 − U^(1/m)) and every U in ``[word, word +
    1]·2^-bits``: ``decimal`` at ``digits`` digits (module docstring), exact for any integer m >=
    1 and any number of bits; ``hi`` is +inf when U may be 1. More digits and bits give narrower
    bounds."""
    if m < 1 or not 0 <= word < 1 << bits:  # pragma: no cover - callers pass valid entries only
        raise ValueError("max_exponential: m >= 1 and 0 <= word < 2^bits")
    lo = _y_bound(m, Fraction(word, 1 << bits), digits, upper=False) if word else decimal.Decimal(0)
    hi = _y_bound(m, Fraction(word + 1, 1 << bits), digits, upper=True) if word + 1 < 1 << bits else _INF
    return lo, hi
