"""Exact samplers for integer noise: Bernoulli(exp(-γ)), discrete Laplace, discrete Gaussian.

The algorithms are those of Canonne, Kamath and Steinke, "The Discrete
Gaussian for Differential Privacy" (NeurIPS 2020; arXiv 2004.00010),
Algorithms 1–3, implemented here from their description.

Why exact integer samplers. Mironov ("On significance of the least
significant bits for differential privacy", CCS 2012) showed that textbook
Laplace noise computed in floating point, ``x + scale * log(u)``, is not
differentially private: the set of doubles the sum can take depends on ``x``,
so the low-order bits of a released value can reveal ``x`` exactly. Here an
integer statistic receives integer noise, and that noise is produced by
rejection samplers whose every decision compares a uniform *integer* drawn
from ``rng`` with an exact rational threshold (Python ints and
``fractions.Fraction``). No floating-point number is computed, rounded or
added on the way to the output, so the output distribution is exactly the
stated one (up to the quality of ``rng``'s uniform bits), and integer plus
integer noise is again an exact integer.

Floating-point parameters are converted exactly (``Fraction(0.1)`` is the
rational value of the double nearest 0.1), so the sampled distribution is the
one for the parameter actually stored in the float.

Guarantees. Adding ``discrete_laplace(Δ/ε)`` to an integer statistic of L1
sensitivity Δ gives ε-DP; adding ``discrete_gaussian(σ)`` to an integer
statistic of L2 sensitivity Δ₂ gives (Δ₂²/(2σ²))-zCDP (CKS 2020, with
zCDP as defined by Bun–Steinke 2016); the discrete Laplace guarantee is the
geometric mechanism's (Ghosh–Roughgarden–Sundararajan 2009).
"""

from __future__ import annotations

import decimal
import math
import numbers
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dp_spark.errors import ParameterError
from dp_spark.checks import Size, size as check_size
from dp_spark.noise.rng import check_rng

__all__ = ["bernoulli_exp", "discrete_laplace", "discrete_gaussian", "uniform_below"]

IntOrArray = int | np.ndarray

_INT64_SPAN = 2**63 - 1  # largest d handled by one rng.integers call
_WORD_BITS = 64


# --------------------------------------------------------------------------- helpers


def to_fraction(value: object, name: str) -> Fraction:
    """Convert an int, float, Decimal or Fraction to the exactly equal Fraction."""
    if isinstance(value, bool):
        raise ParameterError(f"{name} must be a number, not a bool")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ParameterError(f"{name} must be finite, got {value!r}")
        return Fraction(value)
    if isinstance(value, numbers.Real):
        as_float = float(value)
        if not math.isfinite(as_float):
            raise ParameterError(f"{name} must be finite, got {as_float!r}")
        return Fraction(as_float)
    raise ParameterError(f"{name} must be an int, float or Fraction, got {type(value).__name__}")


def uniform_below(d: int, rng: np.random.Generator) -> int:
    """Return a uniform integer in [0, d) for any Python int d >= 1.

    Uses one ``rng.integers`` call when d fits in int64; otherwise draws
    ceil(bits/64) uniform 64-bit words, keeps the low ``d.bit_length()`` bits
    and rejects values >= d (acceptance probability > 1/2 per attempt).
    """
    if d < 1:
        raise ParameterError(f"upper bound of a uniform integer must be >= 1, got {d}")
    if d <= _INT64_SPAN:
        return int(rng.integers(0, d, dtype=np.int64))
    bits = d.bit_length()
    n_words = -(-bits // _WORD_BITS)
    mask = (1 << bits) - 1
    while True:
        words = rng.integers(0, 2**64 - 1, size=n_words, dtype=np.uint64, endpoint=True)
        value = 0
        for word in words.tolist():
            value = (value << _WORD_BITS) | word
        value &= mask
        if value < d:
            return value


def _bernoulli(p: Fraction, rng: np.random.Generator) -> bool:
    """Return True with probability exactly p (a Fraction in [0, 1])."""
    return uniform_below(p.denominator, rng) < p.numerator


def _bernoulli_exp_at_most_one(gamma: Fraction, rng: np.random.Generator) -> bool:
    """Bernoulli(exp(-γ)) for 0 <= γ <= 1 (CKS 2020, Algorithm 1, first part).

    Draw A_k ~ Bernoulli(γ/k) for k = 1, 2, ... until the first failure at
    step K; P[K is odd] = Σ_j (-γ)^j / j! = exp(-γ).
    """
    k = 1
    while _bernoulli(gamma / k, rng):
        k += 1
    return k % 2 == 1


def bernoulli_exp_fraction(gamma: Fraction, rng: np.random.Generator) -> bool:
    """Bernoulli(exp(-γ)) for any rational γ >= 0 (CKS 2020, Algorithm 1).

    For γ > 1 use exp(-γ) = exp(-1)^⌊γ⌋ · exp(-(γ - ⌊γ⌋)): ⌊γ⌋ independent
    Bernoulli(exp(-1)) trials must all succeed, then one Bernoulli(exp(-frac)).
    Stops at the first failure, so the expected work is O(1) for any γ.
    """
    if gamma <= 1:
        return _bernoulli_exp_at_most_one(gamma, rng)
    whole = math.floor(gamma)
    one = Fraction(1)
    for _ in range(whole):
        if not _bernoulli_exp_at_most_one(one, rng):
            return False
    return _bernoulli_exp_at_most_one(gamma - whole, rng)


def _count_exp1_successes(rng: np.random.Generator) -> int:
    """Number of Bernoulli(exp(-1)) successes before the first failure.

    This is geometric: P[V = v] = (1 - e^-1) e^-v.
    """
    count = 0
    one = Fraction(1)
    while _bernoulli_exp_at_most_one(one, rng):
        count += 1
    return count


def _discrete_laplace_one(numerator: int, denominator: int, rng: np.random.Generator) -> int:
    """One draw of the discrete Laplace with scale t/s (CKS 2020, Algorithm 2).

    With t = ``numerator`` and s = ``denominator``: draw U uniform in [0, t)
    and accept it with probability exp(-U/t); draw V geometric as above;
    X = U + t·V is then geometric with P[X = x] ∝ exp(-x/t); Y = ⌊X/s⌋ has
    P[Y = y] ∝ exp(-y·s/t). A fair sign B is attached, rejecting
    (B = negative, Y = 0) so that zero is not counted twice.
    """
    t, s = numerator, denominator
    while True:
        u = uniform_below(t, rng)
        if not _bernoulli_exp_at_most_one(Fraction(u, t), rng):
            continue
        x = u + t * _count_exp1_successes(rng)
        y = x // s
        negative = uniform_below(2, rng) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def _discrete_gaussian_one(sigma2: Fraction, lap_scale: int, rng: np.random.Generator) -> int:
    """One draw of the discrete Gaussian N_Z(0, σ²) (CKS 2020, Algorithm 3).

    Propose Y from the discrete Laplace of integer scale t = ⌊σ⌋ + 1 and
    accept with probability exp(-(|Y| - σ²/t)² / (2σ²)); the accepted Y has
    P[Y = y] ∝ exp(-y²/(2σ²)) exactly.
    """
    shift = sigma2 / lap_scale
    two_sigma2 = 2 * sigma2
    while True:
        y = _discrete_laplace_one(lap_scale, 1, rng)
        if bernoulli_exp_fraction((abs(y) - shift) ** 2 / two_sigma2, rng):
            return y


def _draw_many(draw_one: Callable[[], int], size: Size) -> IntOrArray:
    """Return one int (size None) or an int64 array of shape ``size``."""
    if size is None:
        return draw_one()
    shape = size if isinstance(size, tuple) else (size,)
    count = math.prod(shape)
    try:
        flat = np.fromiter((draw_one() for _ in range(count)), dtype=np.int64, count=count)
    except OverflowError as exc:  # only for scales beyond ~1e17
        raise ParameterError("noise scale too large for an int64 array; draw with size=None") from exc
    return flat.reshape(shape)


def _isqrt_floor_fraction(value: Fraction) -> int:
    """⌊sqrt(value)⌋ for a Fraction value >= 0, exactly: ⌊sqrt(p·q)⌋ // q."""
    p, q = value.numerator, value.denominator
    return math.isqrt(p * q) // q


# --------------------------------------------------------------------------- public


def bernoulli_exp(gamma: int | float | Fraction, rng: np.random.Generator) -> bool:
    """Return True with probability exactly exp(-γ), for rational γ >= 0.

    ``gamma`` may be an int, a float (converted exactly with
    ``Fraction(gamma)``) or a Fraction. Exact sampler of Canonne–Kamath–
    Steinke 2020, Algorithm 1; it uses only integer comparisons of uniform
    integers from ``rng`` with rational thresholds. Releases nothing by
    itself; it is the building block of the discrete samplers.
    """
    check_rng(rng)
    gamma_q = to_fraction(gamma, "gamma")
    if gamma_q < 0:
        raise ParameterError(
            f"gamma must be >= 0 (Bernoulli(exp(-gamma))), got {float(gamma_q)!r}"
        )
    return bernoulli_exp_fraction(gamma_q, rng)


def discrete_laplace(
    scale: int | float | Fraction, rng: np.random.Generator, size: Size = None
) -> IntOrArray:
    """Draw discrete Laplace noise: P[k] ∝ exp(-|k|/scale) for every integer k.

    With ``scale = Δ/ε`` added to an integer statistic of L1 sensitivity Δ the
    release is ε-DP. Exact sampler (Canonne–Kamath–Steinke 2020, Algorithm 2)
    with ``scale`` taken as the exact Fraction of the given number. Returns a
    Python int when ``size`` is None, else an int64 array of shape ``size``.
    """
    check_rng(rng)
    scale_q = to_fraction(scale, "scale")
    if scale_q <= 0:
        raise ParameterError(
            f"scale must be > 0 (discrete Laplace scale = sensitivity/epsilon), "
            f"got {float(scale_q)!r}"
        )
    size = check_size(size)
    t, s = scale_q.numerator, scale_q.denominator
    return _draw_many(lambda: _discrete_laplace_one(t, s, rng), size)


def discrete_gaussian(
    sigma: int | float | Fraction, rng: np.random.Generator, size: Size = None
) -> IntOrArray:
    """Draw discrete Gaussian noise: P[k] ∝ exp(-k²/(2σ²)) for every integer k.

    Added to an integer statistic of L2 sensitivity Δ₂ the release is
    (Δ₂²/(2σ²))-zCDP (Canonne–Kamath–Steinke 2020; zCDP as in Bun–Steinke
    2016). Exact sampler (CKS 2020, Algorithm 3) with σ² the exact
    Fraction of ``sigma`` squared. Its variance is at most σ². Returns a Python
    int when ``size`` is None, else an int64 array of shape ``size``.
    """
    check_rng(rng)
    sigma_q = to_fraction(sigma, "sigma")
    if sigma_q <= 0:
        raise ParameterError(
            f"sigma must be > 0 (discrete Gaussian standard deviation parameter), "
            f"got {float(sigma_q)!r}"
        )
    size = check_size(size)
    sigma2 = sigma_q * sigma_q
    lap_scale = _isqrt_floor_fraction(sigma2) + 1
    return _draw_many(lambda: _discrete_gaussian_one(sigma2, lap_scale, rng), size)
