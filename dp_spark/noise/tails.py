"""Tail quantiles and standard deviations of the noise distributions.

Pure math, no randomness: these turn a noise scale into the error statement
of a release (a one-sided bound that holds with probability 1 - β, or a
standard deviation). They depend only on public parameters.
"""

from __future__ import annotations

import math

from dp_spark.checks import positive as positive_finite, probability
from dp_spark.errors import ParameterError

#: Quantiles are returned as Python ints that callers use as floats: refuse
#: one at or beyond 2¹⁰²³ (no float can hold the error statement).
_MAX_QUANTILE = 2.0**1023

__all__ = [
    "laplace_upper_quantile",
    "discrete_laplace_upper_quantile",
    "discrete_laplace_std",
    "discrete_gaussian_std_upper",
    "discrete_gaussian_upper_quantile",
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
    logs and then checked against the condition, which makes it robust for
    tiny β and large scales. β must lie in (0, 1).

    Terminates quickly for every finite scale: the closed form is corrected
    by a bracketing search that doubles its step and then bisects (at most
    about 2·1100 evaluations even when m is near the largest float; a few in
    practice), instead of stepping by one — beyond 2⁵³ a step of one no
    longer changes the float condition, and the old loop ran for minutes at
    scale ~1e23. A quantile too large for a float raises ParameterError.
    """
    scale = positive_finite(scale, "scale")
    beta = probability(beta, "beta")
    log_beta = math.log(beta)

    def holds(m: int) -> bool:
        return _log_tail_above(m, scale) <= log_beta

    estimate = scale * (-log_beta - math.log1p(math.exp(-1.0 / scale)))
    if not estimate < _MAX_QUANTILE:
        raise ParameterError(
            f"the noise scale {scale:g} is too large: its tail quantile does not fit a float; "
            "use a larger privacy parameter"
        )
    m = max(0, math.ceil(estimate) - 1)
    if holds(m):  # search down for the smallest m that holds
        if m == 0 or not holds(m - 1):
            return m
        hi, step = m - 1, 1
        lo = hi - step
        while lo > 0 and holds(lo):
            hi, step = lo, step * 2
            lo = hi - step
        if lo <= 0:
            if holds(0):
                return 0
            lo = 0
    else:  # search up
        lo, step = m, 1
        hi = lo + step
        while not holds(hi):
            lo, step = hi, step * 2
            hi = lo + step
            if hi > _MAX_QUANTILE:
                raise ParameterError(
                    f"the noise scale {scale:g} is too large: its tail quantile does not fit a float; "
                    "use a larger privacy parameter"
                )
    # invariant: not holds(lo), holds(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid
    return hi


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


#: Up to this σ the discrete Gaussian's tail is summed term by term; above,
#: bounded by integrals (both upper bounds on P[X > m], see below).
_DG_SUM_SIGMA = 1000.0
#: Relative slack on the float evaluation of the tail (far above its rounding error).
_DG_SLACK = 1.0 + 1e-9


def _discrete_gaussian_tail_upper(m: int, sigma: float) -> float:
    """An upper bound on P[X > m], X ~ N_Z(0, σ²) (P[k] ∝ f(k) = e^(−k²/(2σ²))), m >= 0.

    σ <= 1000: the exact ratio Σ_{k>m} f(k) / Σ_k f(k), summed over |k| up
    to 40σ + 40 (the rest is below e^(−800) of the sum, added as a bound).
    Larger σ: f decreases on [0, ∞), so Σ_{k>m} f(k) <= f(m+1) + ∫_{m+1}^∞ f
    and Σ_k f(k) >= ∫ f − f(0) = σ√(2π) − 1 (unimodal sums against
    integrals). Both times _DG_SLACK covers the floats' rounding."""
    two_s2 = 2.0 * sigma * sigma
    if sigma <= _DG_SUM_SIGMA:
        top = int(40 * sigma) + 40
        total = 1.0 + 2.0 * math.fsum(math.exp(-k * k / two_s2) for k in range(1, top + 1))
        above = math.fsum(math.exp(-k * k / two_s2) for k in range(m + 1, top + 1)) + math.exp(-800.0)
        return min(1.0, _DG_SLACK * above / total)
    a = m + 1
    above = math.exp(-a * a / two_s2) + sigma * math.sqrt(math.pi / 2.0) * math.erfc(a / (sigma * math.sqrt(2.0)))
    return min(1.0, _DG_SLACK * above / (sigma * math.sqrt(2.0 * math.pi) - 1.0))


def discrete_gaussian_upper_quantile(sigma: float, beta: float) -> int:
    """Return the smallest integer m >= 0 whose upper bound on P[X > m] is <= β,
    X ~ N_Z(0, σ²) the discrete Gaussian (Canonne–Kamath–Steinke 2020): a
    value released with this noise exceeds the truth by more than m with
    probability at most β. The bound is the exact tail for σ <= 1000 and an
    integral bound above (:func:`_discrete_gaussian_tail_upper`); near
    σ·z_(1−β), and never above the sub-Gaussian ⌈σ·√(2 ln(1/β))⌉ (CKS 2020:
    P[X >= t] <= e^(−t²/(2σ²))), which caps the search. β in (0, 1)."""
    sigma = positive_finite(sigma, "sigma")
    beta = probability(beta, "beta")
    cap = math.ceil(sigma * math.sqrt(-2.0 * math.log(beta)))  # not log(1/β): 1/β overflows for a subnormal β
    if not cap < _MAX_QUANTILE:
        raise ParameterError(f"the noise scale {sigma:g} is too large: its tail quantile does not fit a float; "
                             "use a larger privacy parameter")
    if _discrete_gaussian_tail_upper(0, sigma) <= beta:
        return 0
    lo, hi = 0, cap  # invariant: the bound fails at lo; at hi it holds or hi is the sub-Gaussian cap
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _discrete_gaussian_tail_upper(mid, sigma) <= beta:
            hi = mid
        else:
            lo = mid
    return hi
