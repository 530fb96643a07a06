"""Bernoulli(p) decided on uniform 64-bit words: the one rule of the exact samplers.

A uniform U on [0, 1) is read as 64-bit words, U = 0.W₁W₂… in base 2^64 (each word from ``rng``,
uniform on {0, …, 2^64 − 1}). For a rational 0 <= p = num/den <= 1 let P = ⌊p·2^64⌋:

- W₁ < P gives U < (W₁ + 1)/2^64 <= P/2^64 <= p: success;
- W₁ > P gives U >= W₁/2^64 >= (P + 1)/2^64 > p: failure;
- W₁ = P (probability at most 2^-64) leaves U's remaining words against the remaining fraction
  frac(p·2^64) = ((num·2^64) mod den)/den: the same question again (:func:`below`).

So the outcome is the rule U < p on U's exact value, and P[success] = p exactly, on Python
integers alone.

Doubles first (:func:`bernoulli_bounded`). A caller that knows doubles ``lo``, ``hi`` around p,
each within one rounding of a bound (lo <= p + 2^-53, hi >= p − 2^-53 as p <= 1: scaled by 2^64
exactly with ``ldexp``, within 2^11 of p·2^64 on the wrong side at most), compares W through
W_f = fl(W), within one ulp (2^11) of W, against fl(lo·2^64 − 2^13) and fl(hi·2^64 + 2^13), each
within 2^11 of its exact value: W_f below the first gives W < p·2^64 − 2^11 < P, above the second
W > p·2^64 + 2^11 > P. Only the words between are compared exactly (``exact(i)`` is asked for
them alone; looser bounds only send more words there). The outcome, and the words drawn, are
those of the integer rule for every word.

Releases nothing by itself; used by :mod:`dp_spark.noise.selection` (permute-and-flip and the
exponential mechanism) and :mod:`dp_spark.noise.discrete_batch` (the wide discrete Gaussian).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["WORD", "WORD_MARGIN", "below", "bernoulli_bounded", "draw_words"]

WORD = 2**64
#: A word is decided in doubles only this far from the scaled bound (three roundings of 2^11).
WORD_MARGIN = 2.0**13


def draw_words(m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` uniform 64-bit words (uint64)."""
    return rng.integers(0, WORD - 1, size=m, dtype=np.uint64, endpoint=True)


def below(word: int, num: int, den: int, rng: np.random.Generator) -> bool:
    """Whether U < num/den (0 <= num <= den, whole numbers), U = 0.W₁W₂… with W₁ = ``word`` and
    fresh words after it as needed (module docstring)."""
    while True:
        top, num = divmod(num * WORD, den)
        if word != top:
            return word < top
        word = int(rng.integers(0, WORD - 1, dtype=np.uint64, endpoint=True))


def bernoulli_bounded(lo: np.ndarray, hi: np.ndarray, exact: Callable[[int], tuple[int, int]],
                      rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(p_i) element-wise, exactly, for rationals p_i = num/den in [0, 1] with doubles
    ``lo[i]``, ``hi[i]`` around p_i (module docstring: each within one rounding of a bound);
    ``exact(i)`` gives (num, den), asked for only where the doubles do not decide. One word per
    element, drawn together, then :func:`below` for the undecided in increasing i."""
    m = lo.shape[0]
    if m == 0:
        return np.zeros(0, dtype=bool)
    words = draw_words(m, rng)
    as_float = words.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        out = as_float < np.ldexp(lo, 64) - WORD_MARGIN
        sure = out | (as_float > np.ldexp(hi, 64) + WORD_MARGIN)
    for i in np.flatnonzero(~sure).tolist():
        num, den = exact(i)
        out[i] = below(int(words[i]), num, den, rng)
    return out
