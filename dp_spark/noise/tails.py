"""Tail quantiles and standard deviations of the noise distributions.

Pure math, no randomness: these turn a noise scale into the error statement
of a release (a one-sided bound that holds with probability 1 - β, or a
standard deviation). They depend only on public parameters.
"""

from __future__ import annotations

import math

from dp_spark.checks import positive as positive_finite, probability

__all__ = [
    "laplace_upper_quantile",
    "discrete_laplace_upper_quantile",
    "discrete_laplace_std",
    "discrete_gaussian_std_upper",
]


def laplace_upper_quantile(scale: float, beta: float) -> float:
    """Return x with P[Lap(scale) > x] = β, i.e. scale · ln(1/(2β)), for β in (0, 1/2].

    Since P[Lap(b) > x] = exp(-x/b)/2 for x >= 0, a value released with
    Laplace(b) noise exceeds the truth by more than this with probability β.
    """
    scale = positive_finite(scale, "scale")
    beta = probability(beta, "beta", upper=0.5, include_upper=True)
    return scale * math.log(1.0 / (2.0 * beta))


def _log_tail_above(m: int, scale: float) -> float:
    """ln P[X > m] for X ~ discrete Laplace(scale), m >= 0: ln(p^(m+1)/(1+p))."""
    return -(m + 1) / scale - math.log1p(math.exp(-1.0 / scale))


def discrete_laplace_upper_quantile(scale: float, beta: float) -> int:
    """Return the smallest integer m >= 0 with P[X > m] <= β, X ~ discrete Laplace(scale).

    With p = exp(-1/scale), P[X >= j] = p^j / (1 + p) for j >= 1, so
    m = max(0, ⌈scale · (ln(1/β) - ln(1 + p))⌉ - 1); the result is computed in
    logs and then checked against the exact condition, which makes it robust
    for tiny β and large scales. β must lie in (0, 1).
    """
    scale = positive_finite(scale, "scale")
    beta = probability(beta, "beta")
    log_beta = math.log(beta)
    guess = math.ceil(scale * (-log_beta - math.log1p(math.exp(-1.0 / scale)))) - 1
    m = max(0, guess)
    while _log_tail_above(m, scale) > log_beta:
        m += 1
    while m > 0 and _log_tail_above(m - 1, scale) <= log_beta:
        m -= 1
    return m


def discrete_laplace_std(scale: float) -> float:
    """Return the standard deviation of the discrete Laplace(scale) distribution.

    With p = exp(-1/scale) the variance is 2p / (1 - p)², so the standard
    deviation is sqrt(2p) / (1 - p) (computed with expm1 for small 1/scale).
    It is slightly below the continuous Laplace's sqrt(2)·scale.
    """
    scale = positive_finite(scale, "scale")
    p = math.exp(-1.0 / scale)
    return math.sqrt(2.0 * p) / -math.expm1(-1.0 / scale)


def discrete_gaussian_std_upper(sigma: float) -> float:
    """Return an upper bound on the standard deviation of the discrete Gaussian N_Z(0, σ²).

    Canonne–Kamath–Steinke 2020 show Var[N_Z(0, σ²)] <= σ², so σ itself is an
    honest (slightly conservative) standard deviation to report.
    """
    return positive_finite(sigma, "sigma")
