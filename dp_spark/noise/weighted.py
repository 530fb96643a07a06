"""Exact choice among candidates of weight a·exp(−x): the exponential mechanism with multiplicities.

Candidate j has weight ``w_j = a_j·exp(−x_j)``: ``a_j >= 0`` an integer (how many outputs the
candidate stands for: 1 for an item, the number of length-k sequences of an entry group in the
joint mechanism) and ``x_j`` a rational (``c·(top − s_j)`` for double scores, ``c·f`` for an
integer utility gap f). A choice releases j with probability exactly ``w_j / Σ_i w_i``: the
exponential mechanism (McSherry & Talwar 2007) when ``x_j`` is its coefficient times the score gap.
Used where a selection is not a plain score vector (top-k's joint mechanism, whose candidates are
groups of sequences, and the peeling mechanisms that one-shot Gumbel noise stands for, Durfee &
Rogers 2019); :mod:`dp_spark.noise.selection` covers plain rows of scores, many groups at once.

Rejection from a dyadic envelope. The caller gives, beside the exact ``(a_j, x_j)``, a double
``ℓ_j`` with ``|ℓ_j − ln w_j| <= 2^-10`` (``LOG_WEIGHT_TOLERANCE``; −inf where ``w_j = 0``). With
``E_j = ⌊ℓ_j/ln 2 + 2^-8⌋ + 1`` (in doubles: the division's rounding error, below 2^-20 for
``|ℓ_j| < 2^30``, is far inside the 2^-8 − 2^-10/ln 2 of slack; every caller's heaviest weight
has ``0 <= ℓ < 2^20``, so a lighter one past 2^30 is lumped whatever its rounding)
``w_j <= 2^{E_j}``, and ``w_j >= 2^{E_j − 1}·2^{−2^-8}·e^{−2^-10} > 0.49·2^{E_j}``. Let ``B = max_j
E_j`` and ``env_j = 2^{max(E_j, B − 48)}``: a candidate is proposed with probability ``env_j /
Σ env`` (integer weights ``2^{max(E_j, B−48) − (B−48)}``, one uniform integer below their sum;
:func:`propose`) and accepted with probability ``p_j = w_j / env_j <= 1``
(:func:`bernoulli_scaled_exp`), else a new proposal. The accepted candidate has probability ∝
``env_j·p_j = w_j``: exactly the target law, whatever the doubles ``ℓ_j`` were, as long as every
``p_j <= 1`` (checked exactly at each acceptance; a violation is an internal error, never a biased
draw). Each proposal is accepted with probability above 0.49 unless it falls among the candidates
``2^48`` times lighter than the heaviest (lumped at ``2^{B−48}``), whose whole envelope is at most
``n·2^-47`` of the total.

The acceptance, Bernoulli(a·exp(−x)·2^−s), exactly. ``U = 0.W₁W₂…`` is uniform, read in 64-bit
words from ``rng`` as needed: U < p when ``(W + 1)/2^{64n} <= p_lo`` for the first n words W, U >=
p when ``W/2^{64n} >= p_hi``, with ``[p_lo, p_hi] ∋ p`` from ``exp(−x)`` computed by Python's
``decimal`` (its ``exp`` is correctly rounded; the interval allows ten units in the last place)
and products rounded down for ``p_lo``, up for ``p_hi``; otherwise one more word and 19 more
digits. A decision at n words is the rule ``U < p`` for U's exact value, so the law is exact; two words are needed with
probability about 2^-60. Where ``p <= 2^b`` with ``b <= −64`` (from bit lengths and
``e^{−x} <= 2^{−⌊1.4425·x_f⌋}``), U < p needs ``⌊−b/64⌋`` zero words first: a nonzero one
decides (no ``decimal`` work for the lumped tail).

Doubles first. For x < 512 and a < 2^1000 the first word is compared with a double p_f
within 2^-40 of p, in doubles: x = m + n/64 + r exactly (Sterbenz), e^-x = T₁[m]·T₂[n]·e^-r
with the tables' doubles nearest e^-m and e^-(n/64) (each within 2^-53 relative, from 40-digit
``decimal``), e^-r by its Taylor polynomial to r^6 in Horner form (remainder below 2^-54; the
seven roundings of the evaluation and the table products add at most 14·2^-53), x_f = fl(x)
(or the caller's double) within 2^-51·x <= 2^-42 of x (relative effect on e^-x), fl(a) within
2^-53; in all below 2^-40. p_f above 1 − 2^-38 goes to ``decimal`` (which checks p <= 1). A
word W (as a double, within 2^10 of W) more than 2^13 below p_f(1 − 2^-38)·2^64 has
W + 1 <= p·2^64 (U < p); more than 2^13 above p_f(1 + 2^-38)·2^64, W >= p·2^64 (U >= p);
anything else goes on to ``decimal`` with that word as U's first. Only additions,
multiplications and divisions of doubles (correctly rounded) are used, no library exp.

Timing (how many proposals and words) depends on the weights, as for every sampler here:
these assume an adversary who sees the release, not the driver's clock. Releases nothing by
itself; guarantees are stated where it is used (``dp_spark.mechanisms.top_k``).
"""

from __future__ import annotations

import bisect
import decimal
import math
from fractions import Fraction
from typing import Callable

import numpy as np

from dp_spark.noise.discrete import uniform_below
from dp_spark.noise.rng import check_rng

__all__ = ["LOG_WEIGHT_TOLERANCE", "LUMP_DEPTH", "ZERO_WEIGHT", "bernoulli_scaled_exp", "class_totals", "class_weights",
           "decimal_context", "directed_contexts", "dyadic_exponents", "exact_decimal", "exponential_peel", "locate",
           "propose", "weighted_choice"]

_WORD_BITS = 64
#: Lumping depth: candidates whose exponent is this far below the heaviest share one envelope.
LUMP_DEPTH = 48
#: dyadic_exponents' mark of a zero weight (never proposed).
ZERO_WEIGHT = np.iinfo(np.int64).min
#: How far (in nats) the caller's doubles ℓ_j may be from ln w_j.
LOG_WEIGHT_TOLERANCE = 2.0**-10
#: The exponent's slack in bits: above the tolerance (2^-10/ln 2 < 2^-9.4) and the division's rounding.
_SLACK_BITS = 2.0**-8
_LN2 = math.log(2.0)


def exact_decimal(value: Fraction) -> decimal.Decimal:
    """The Decimal equal to a rational whose denominator is a power of two (every double, and
    doubles times integers): n/2^t = n·5^t·10^−t, written out exactly (no context rounds it)."""
    den = value.denominator
    if den & (den - 1):  # pragma: no cover - callers pass dyadic rationals only
        raise ValueError("exponent must be a dyadic rational")
    t = den.bit_length() - 1
    return decimal.Decimal(f"{value.numerator * 5**t}E-{t}")


def directed_contexts(digits: int) -> tuple[decimal.Context, decimal.Context]:
    """Decimal contexts rounding down and up at ``digits`` digits, with no exponent limit in reach."""
    return tuple(decimal_context(digits, mode) for mode in (decimal.ROUND_FLOOR, decimal.ROUND_CEILING))


def decimal_context(digits: int, rounding: str = decimal.ROUND_HALF_EVEN) -> decimal.Context:
    """A fresh context (never the thread's: a caller's precision, rounding or traps must not
    reach these computations), with no exponent limit in reach."""
    return decimal.Context(prec=digits, rounding=rounding, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                           traps=[decimal.InvalidOperation], flags=[])


def bernoulli_scaled_exp(a: int, x: Fraction | Callable[[], Fraction], shift: int, rng: np.random.Generator,
                         x_float: float | None = None) -> bool:
    """Bernoulli(a·exp(−x)·2^−shift), exactly (module docstring), for an integer a >= 0, a dyadic
    rational x >= 0 and an integer ``shift`` with a·exp(−x)·2^−shift <= 1 (an internal error
    otherwise). ``x`` may be a function returning it, called only when the doubles do not decide;
    ``x_float``, if given, must be within 2^-51·x of x (else ``float(x)``, correctly rounded; 0 is
    trusted only if x is 0)."""
    if a == 0:
        return False
    if x_float is None or not x_float < _HUGE:  # (an infinite or huge hint: the rational decides)
        x = x() if callable(x) else x
        x_float = float(x) if x < _HUGE else math.inf
    words: list[int] = []

    def word() -> int:
        w = int(rng.integers(0, 2**_WORD_BITS - 1, dtype=np.uint64, endpoint=True))
        words.append(w)
        return w

    # p < 2^bound: fl(1.4425·x_f) <= 1.4426·x_f·(1 − 2^-51) <= x·log2(e) (exactly for huge x)
    whole = math.floor(x_float * 1.4425) if x_float < _HUGE else math.floor(x * Fraction(14425, 10000))
    bound = a.bit_length() - shift - whole
    for _ in range(max(0, -bound) // _WORD_BITS):  # p < 2^-64n: U < p needs n zero words
        if word() != 0:
            return False
    if x_float == 0.0 and (x() if callable(x) else x) == 0:  # p = a·2^-shift: the exact rule on integers
        if (a > 1 << shift) if shift >= 0 else True:  # the envelope's invariant (module docstring)
            raise RuntimeError("weighted choice: acceptance probability above 1 (internal error)")
        while True:
            word()
            u, n = 0, len(words)
            for w in words:
                u = (u << _WORD_BITS) | w
            num, den = (a << (_WORD_BITS * n), 1 << shift) if shift >= 0 else (a << (_WORD_BITS * n - shift), 1)
            if (u + 1) * den <= num:
                return True
            if u * den >= num:
                return False
    if not words and 0.0 < x_float < _FAST_X and a.bit_length() < _FAST_BITS:  # doubles first (module docstring)
        p = math.ldexp(float(a) * _exp_neg(x_float), -shift)
        if p > 1.0 + _FAST_SLACK:  # pragma: no cover - the envelope's invariant (module docstring)
            raise RuntimeError("weighted choice: acceptance probability above 1 (internal error)")
        if p > 1.0 - _FAST_SLACK:  # too near 1 for the doubles: the decimals decide (and check)
            return _bernoulli_decimal(a, x() if callable(x) else x, shift, words, word)
        w = float(word())
        if w < math.ldexp(p * (1.0 - _FAST_SLACK), 64) - _WORD_MARGIN:
            return True
        if w > math.ldexp(p * (1.0 + _FAST_SLACK), 64) + _WORD_MARGIN:
            return False
    return _bernoulli_decimal(a, x() if callable(x) else x, shift, words, word)


def _bernoulli_decimal(a: int, x: Fraction, shift: int, words: list[int], word: Callable[[], int]) -> bool:
    """The acceptance decided with ``decimal`` bounds of p, U's ``words`` so far first (module docstring)."""
    minus_x = exact_decimal(-x)  # exact, whatever the thread's context
    a_dec = decimal.Decimal(a)
    digits = 40
    while True:
        down, up = directed_contexts(digits)
        e = down.exp(minus_x)  # correctly rounded (half-even) whatever the context's rounding
        slack = decimal.Decimal(f"1E{2 - digits}")  # ten units in the last place
        p_lo = down.multiply(down.multiply(e, down.subtract(1, slack)), a_dec)
        p_hi = up.multiply(up.multiply(e, up.add(1, slack)), a_dec)
        if shift >= 0:
            p_lo, p_hi = down.divide(p_lo, 1 << shift), up.divide(p_hi, 1 << shift)
        else:
            p_lo, p_hi = down.multiply(p_lo, 1 << -shift), up.multiply(p_hi, 1 << -shift)
        if p_lo > 1:  # pragma: no cover - the envelope's invariant (module docstring)
            raise RuntimeError("weighted choice: acceptance probability above 1 (internal error)")
        while True:  # the words drawn so far first, then one more while the digits can decide
            if words:
                u = 0
                for w in words:
                    u = (u << _WORD_BITS) | w
                scale = 1 << (_WORD_BITS * len(words))
                if down.multiply(p_lo, scale) >= u + 1:  # U < (u + 1)/2^64n <= p_lo <= p
                    return True
                if up.multiply(p_hi, scale) <= u:  # U >= u/2^64n >= p_hi >= p
                    return False
            if len(words) * _WORD_BITS >= 64 + digits * 3:
                break
            word()
        digits += 19


#: The doubles' path: x below this (e^-x from the tables below, all normal doubles), a below 2^_FAST_BITS (a double).
_FAST_X = 512
_FAST_BITS = 1000
#: x at or above this: the exact bound on p's size is taken from the rational (a double would overflow).
_HUGE = 2**1000
#: Relative slack of the doubles' p: above its error bound 2^-40 (module docstring).
_FAST_SLACK = 2.0**-38
#: A word is decided in doubles only this far from the scaled bound (rounding of words near 2^64: 2^10).
_WORD_MARGIN = 2.0**13
_EXP_WHOLE: list[float] = []  # e^-m, m = 0 .. 511, each the double nearest (from 40-digit decimals)
_EXP_SIXTYFOURTHS: list[float] = []  # e^-(n/64), n = 0 .. 63, likewise


def _exp_tables() -> None:
    ctx = decimal_context(40)
    _EXP_WHOLE.extend(float(ctx.exp(decimal.Decimal(-m))) for m in range(_FAST_X))
    _EXP_SIXTYFOURTHS.extend(float(ctx.exp(ctx.divide(decimal.Decimal(-n), 64))) for n in range(64))


def _exp_neg(x: float) -> float:
    """e^-x for a double 0 <= x < 512, within 14 units of 2^-53 relative (module docstring):
    x = m + n/64 + r exactly (m, n whole, 0 <= r < 1/64), two table entries and e^-r by its
    Taylor polynomial to r^6 (remainder below r^7/7! < 2^-54)."""
    if not _EXP_WHOLE:
        _exp_tables()
    m = int(x)
    t = x - m  # exact (Sterbenz)
    n = int(t * 64.0)
    r = t - n / 64.0  # exact (Sterbenz; r = t when n = 0)
    poly = 1.0 - r * (1.0 - r * (0.5 - r * (1.0 / 6 - r * (1.0 / 24 - r * (1.0 / 120 - r * (1.0 / 720))))))
    return _EXP_WHOLE[m] * _EXP_SIXTYFOURTHS[n] * poly


def dyadic_exponents(log_weights: np.ndarray) -> np.ndarray:
    """``E_j = ⌊ℓ_j/ln 2 + 2^-8⌋ + 1`` (int64) for doubles ℓ_j within ``LOG_WEIGHT_TOLERANCE`` of
    ln w_j: ``w_j <= 2^{E_j}`` (module docstring). −inf (zero weight) maps to the int64 minimum
    (never proposed)."""
    lw = np.asarray(log_weights, dtype=np.float64)
    out = np.full(lw.shape, ZERO_WEIGHT, dtype=np.int64)
    finite = np.isfinite(lw)
    # raising a tiny weight's ℓ (to -2^61) only raises its envelope, which stays above it
    out[finite] = np.floor(np.maximum(lw[finite], -2.0**61) / _LN2 + _SLACK_BITS).astype(np.int64) + 1
    return out


def class_weights(exponents: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """Envelope classes of a set of exponents against the heaviest ``top``: (class exponents
    ``max(E, top − LUMP_DEPTH)``, ascending and distinct, and how many candidates each holds); zero-weight
    candidates are left out. O(n)."""
    e = exponents[exponents != ZERO_WEIGHT]
    counts = np.bincount(np.maximum(e - (top - LUMP_DEPTH), 0), minlength=LUMP_DEPTH + 1)
    held = np.flatnonzero(counts)
    return held.astype(np.int64) + (top - LUMP_DEPTH), counts[held]


def propose(totals: list[int], rng: np.random.Generator) -> tuple[int, int]:
    """One uniform integer below ``sum(totals)``: (the part it falls in, its offset there)."""
    r = uniform_below(sum(totals), rng)
    for part, total in enumerate(totals):
        if r < total:
            return part, r
        r -= total
    raise RuntimeError("weighted choice: proposal out of range (internal error)")  # pragma: no cover


def class_totals(classes: np.ndarray, counts: np.ndarray, top: int) -> list[int]:
    """Each class's integer proposal weight: its count times ``2^(class − top + LUMP_DEPTH)``."""
    return [int(n) << int(c - (top - LUMP_DEPTH)) for c, n in zip(classes.tolist(), counts.tolist())]


def locate(exponents: np.ndarray, top: int, cls: int, offset: int) -> tuple[int, int]:
    """The candidate a proposal names: the ``offset // 2^(cls − top + LUMP_DEPTH)``-th (in index
    order) of those in class ``cls``, and the envelope exponent to accept it against."""
    members = np.flatnonzero(np.maximum(exponents, top - LUMP_DEPTH) == cls)
    members = members[exponents[members] != ZERO_WEIGHT]
    rank = offset >> (cls - (top - LUMP_DEPTH))
    if rank >= members.shape[0]:  # pragma: no cover - a recomputed block must repeat its classes
        raise RuntimeError("weighted choice: proposal outside its class (internal error)")
    return int(members[rank]), cls


def weighted_choice(log_weights: np.ndarray, exact: Callable[[int], tuple[int, Fraction]],
                    rng: np.random.Generator) -> int:
    """Index j with probability exactly ``w_j / Σ w`` (module docstring), for weights ``w_j = a·exp(−x)``
    with ``exact(j) = (a, x)`` and doubles ``log_weights`` within ``LOG_WEIGHT_TOLERANCE`` of
    ``ln w_j`` (−inf: zero weight; at least one finite). Releases nothing by itself."""
    rng = check_rng(rng)
    e = dyadic_exponents(log_weights)
    top = int(e.max())
    classes, counts = class_weights(e, top)
    totals = class_totals(classes, counts, top)
    while True:
        part, offset = propose(totals, rng)
        j, shift = locate(e, top, int(classes[part]), offset)
        a, x = exact(j)
        if bernoulli_scaled_exp(a, x, shift, rng):
            return j


def exponential_peel(scores: np.ndarray, coefficient: float, k: int, rng: np.random.Generator,
                     stop: int | None = None) -> np.ndarray:
    """Up to ``k`` distinct indices of ``scores`` (finite doubles), each chosen by the exponential
    mechanism ``P[j] ∝ exp(c·s_j)`` among those not chosen yet (peeling), exactly; ``stop``: an
    index whose choice ends the peel (not included in the output), e.g. a threshold's ⊥.

    Distributed as the k largest of ``s_j + Gumbel(1/c)`` in decreasing order (Durfee & Rogers,
    NeurIPS 2019, Lemma 4.2; with ``stop``, those above the stop's noisy score). Guarantees are the
    callers' (each step is ε-DP and ε-bounded-range for c = ε/Δ, monotone scores of sensitivity
    Δ). O(k·d) work. Releases nothing by itself."""
    rng = check_rng(rng)
    s = np.asarray(scores, dtype=np.float64)
    if s.shape[0] <= _SMALL:
        return _peel_small(s, coefficient, k, rng, stop)
    c = Fraction(coefficient)
    left = np.ones(s.shape[0], dtype=bool)
    chosen: list[int] = []
    while len(chosen) < k and left.any():
        top = float(s[left].max())
        with np.errstate(all="ignore"):
            # an overflowing product is lumped (−2^61), never dropped: its weight is not zero
            lw = np.where(left, np.maximum(-coefficient * (top - s), -(2.0**61)), -np.inf)
        top_q = Fraction(top)
        j = weighted_choice(lw, lambda i: (1, c * (top_q - Fraction(float(s[i])))), rng)
        if stop is not None and j == stop:
            break
        chosen.append(j)
        left[j] = False
    return np.asarray(chosen, dtype=np.int64)


#: Up to this many candidates the peel runs on Python floats and ints (:func:`_peel_small`).
_SMALL = 128


def _peel_small(s: np.ndarray, coefficient: float, k: int, rng: np.random.Generator, stop: int | None) -> np.ndarray:
    """:func:`exponential_peel` for a few candidates, the same envelope and acceptance in Python
    scalars: candidates in decreasing score order, so the heaviest (ℓ = 0, E = 1) is the first
    left and the envelope's exponents do not increase; a proposal is one uniform integer below the
    envelope's integer total (below 2^63 for 128 candidates), found by bisection. x_f =
    fl(c·fl(top − s)) is within 2^-51·x of x (two roundings) unless it is subnormal, when the
    exact x is used."""
    order = np.argsort(-s, kind="stable").tolist()
    values = [float(v) for v in s[order]]
    left = list(range(len(order)))
    chosen: list[int] = []
    c = coefficient
    while len(chosen) < k and left:
        top = values[left[0]]
        exps = [math.floor(max(-c * (top - values[pos]), -2.0**61) / _LN2 + _SLACK_BITS) + 1 for pos in left]
        base = exps[0] - LUMP_DEPTH
        cumulative, total = [], 0
        for e in exps:
            total += 1 << (max(e, base) - base)
            cumulative.append(total)
        while True:
            i = bisect.bisect_right(cumulative, uniform_below(total, rng))
            value = values[left[i]]
            x_f = c * (top - value)
            if x_f < 2.0**-1000 and value != top:  # subnormal or underflowed: no relative bound
                x_f = None
            if bernoulli_scaled_exp(1, lambda v=value: Fraction(c) * (Fraction(top) - Fraction(v)),
                                    max(exps[i], base), rng, x_float=x_f):
                break
        j = order[left.pop(i)]
        if stop is not None and j == stop:
            break
        chosen.append(j)
    return np.asarray(chosen, dtype=np.int64)
