"""Conversions between privacy notions (plain floats in, floats out; every
resulting cost is rounded up, never down: see ``exact``). A conversion that
states a budget's cost (pure -> zCDP, zCDP -> (ε, δ)) holds for the decimal
the input was written as and for its binary value alike, and its result is
never understated under either reading (``exact.cost_up``); the two a
mechanism's own accounting uses (bounded range, Gaussian) work on the
binary values it computed with.

Sources: Bun–Steinke, "Concentrated Differential Privacy: Simplifications,
Extensions, and Lower Bounds" (TCC 2016) for zCDP, its composition and the
zCDP -> (ε, δ) conversion; Cesar–Rogers, "Bounding, Concentrating, and
Truncating: Unifying Privacy Loss Composition for Data Analytics" (ALT 2021)
for the ε²/8 bound of bounded-range mechanisms (exponential mechanism,
Gumbel report-noisy-max).
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
    """Return ε such that ρ-zCDP implies (ε, δ)-DP: ε = ρ + 2·sqrt(ρ·ln(1/δ)).

    Bun–Steinke 2016, Proposition 1.3. ``delta`` must lie in (0, 1). For a
    δ₀-approximate ρ-zCDP guarantee the resulting δ is δ₀ + δ (see
    ``ZCDP.to_approx``).
    """
    rho = check_nonnegative(rho, "rho")
    delta = check_delta(delta, "delta", allow_zero=False)
    # ε grows with ρ and falls with δ: the larger reading of ρ, the smaller of δ
    rho, delta = float_up(upper(rho)), float_down(lower(delta))
    value = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    # log, sqrt and three float operations err by a few ulps: state ε with a
    # relative margin of 2⁻⁴⁰ (far above that error), rounded up
    return cost_up(exact(value) * (1 + Fraction(1, 2**40)))


def pure_to_zcdp(epsilon: float) -> float:
    """Return ρ = ε²/2 (rounded up): an ε-DP mechanism is (ε²/2)-zCDP
    (Bun–Steinke 2016, Prop. 1.4). ε is read both as the decimal written
    and as its binary value, and the larger is squared (``exact.upper``):
    the result is not below ε²/2 under either reading of ε, and is itself
    not below that under either reading of the result (``exact.cost_up``).
    pure_to_zcdp(0.1) is 0.005000000000000001 (the binary 0.1's ε²/2 is
    above 0.005). A budget counts ε²/2 of the decimal exactly
    (``filter.amounts``), sound because a mechanism charged ε runs at most
    at that decimal (``exact.calibrate``)."""
    epsilon = check_nonnegative(epsilon, "epsilon")
    return cost_up(upper(epsilon) ** 2 / 2)


def bounded_range_to_zcdp(epsilon: float) -> float:
    """Return ρ = ε²/8 for an ε-bounded-range mechanism (Cesar–Rogers 2021).

    Applies to the exponential mechanism with privacy parameter ε (and so to
    Gumbel report-noisy-max), not to ε-DP mechanisms in general. Rounded up.
    """
    epsilon = check_nonnegative(epsilon, "epsilon")
    return float_up(exact(epsilon) ** 2 / 8)


def gaussian_zcdp(l2_sensitivity: float, sigma: float) -> float:
    """Return ρ = Δ₂²/(2σ²) for Gaussian noise N(0, σ²) (or discrete Gaussian) on
    a statistic of L2 sensitivity Δ₂ (Bun–Steinke 2016, Proposition 1.6),
    computed exactly from the given floats and rounded up."""
    l2_sensitivity = check_nonnegative(l2_sensitivity, "l2_sensitivity")
    sigma = check_nonnegative(sigma, "sigma")
    if sigma == 0.0:
        raise ParameterError("sigma must be > 0 for the Gaussian mechanism")
    return float_up(exact(l2_sensitivity) ** 2 / (2 * exact(sigma) ** 2))
