"""Conversions between privacy notions on floats; every resulting cost is rounded up (see ``exact``).

Those stating a budget's cost (pure -> zCDP, zCDP -> (ε, δ)) hold for the decimal the input was written
as and for its binary value alike, never understated under either reading (``exact.cost_up``); those of
a mechanism's own accounting (bounded range, Gaussian) use the binary values it computed with.

Sources: Bun–Steinke, "Concentrated Differential Privacy: Simplifications, Extensions, and Lower
Bounds" (TCC 2016) for zCDP, its composition and the zCDP -> (ε, δ) conversion; Cesar–Rogers,
"Bounding, Concentrating, and Truncating: Unifying Privacy Loss Composition for Data Analytics" (ALT
2021) for the ε²/8 bound of bounded-range mechanisms (exponential mechanism, Gumbel report-noisy-max).
"""

from __future__ import annotations

import math
from fractions import Fraction

from dp_spark.accounting.exact import cost_up, exact, float_down, float_up, lower, upper
from dp_spark import checks
from dp_spark.errors import ParameterError

__all__ = [
    "zcdp_to_approx_epsilon",
    "pure_to_zcdp",
    "bounded_range_to_zcdp",
    "gaussian_zcdp",
]


check_nonnegative = checks.nonnegative


def check_delta(value: object, name: str = "delta", allow_zero: bool = True) -> float:
    """δ in [0, 1) (or (0, 1)); :func:`dp_spark.checks.delta` with δ = 0 allowed by default."""
    return checks.delta(value, name, allow_zero)


def zcdp_to_approx_epsilon(rho: float, delta: float) -> float:
    """ε = ρ + 2·sqrt(ρ·ln(1/δ)), δ in (0, 1): ρ-zCDP implies (ε, δ)-DP (Bun–Steinke 2016, Proposition
    1.3); a δ₀-approximate guarantee gives δ₀ + δ (``ZCDP.to_approx``)."""
    rho = check_nonnegative(rho, "rho")
    delta = check_delta(delta, "delta", allow_zero=False)
    # ε grows with ρ and falls with δ: the larger reading of ρ, the smaller of δ
    rho, delta = float_up(upper(rho)), float_down(lower(delta))
    value = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    # log, sqrt and three float operations err by a few ulps: a relative margin of 2⁻⁴⁰ covers them
    return cost_up(exact(value) * (1 + Fraction(1, 2**40)))


def pure_to_zcdp(epsilon: float) -> float:
    """ρ = ε²/2, rounded up: an ε-DP mechanism is (ε²/2)-zCDP (Bun–Steinke 2016, Prop. 1.4). The larger
    of ε's two readings (``exact.upper``) is squared and stated with ``exact.cost_up``, so ρ is not below
    ε²/2 under any reading (pure_to_zcdp(0.1) is 0.005000000000000001). Budgets count ε²/2 of the
    decimal exactly (``filter.amounts``): sound, as a mechanism runs at most at it (``exact.calibrate``)."""
    epsilon = check_nonnegative(epsilon, "epsilon")
    return cost_up(upper(epsilon) ** 2 / 2)


def bounded_range_to_zcdp(epsilon: float) -> float:
    """ρ = ε²/8, rounded up, for an ε-bounded-range mechanism (Cesar–Rogers 2021): the exponential
    mechanism at ε and Gumbel report-noisy-max, not ε-DP mechanisms in general."""
    epsilon = check_nonnegative(epsilon, "epsilon")
    return float_up(exact(epsilon) ** 2 / 8)


def gaussian_zcdp(l2_sensitivity: float, sigma: float) -> float:
    """ρ = Δ₂²/(2σ²), exact and rounded up, for (discrete) Gaussian noise of scale σ on a statistic of L2
    sensitivity Δ₂ (Bun–Steinke 2016, Proposition 1.6)."""
    l2_sensitivity = check_nonnegative(l2_sensitivity, "l2_sensitivity")
    sigma = check_nonnegative(sigma, "sigma")
    if sigma == 0.0:
        raise ParameterError("sigma must be > 0 for the Gaussian mechanism")
    return float_up(exact(l2_sensitivity) ** 2 / (2 * exact(sigma) ** 2))
