"""Exact arithmetic on privacy parameters, with directed rounding back to floats.

Every float is an exact binary rational (0.1 is 0.1000000000000000055511151231257827…), and float
arithmetic rounded to nearest can land below the true value. The accounting computes on
:class:`fractions.Fraction` and rounds back the way that never understates privacy loss: costs (ε, ρ,
δ spent, composed totals) and noise scales up (:func:`float_up`, :func:`ratio_up`), what a mechanism
may still spend down (:func:`float_down`, :func:`remainder`).

Budgets count a parameter as the decimal it was written as (:func:`written`: 0.1 counts as 1/10), so
0.9 then 0.1 fit a budget of 1. Sound because no mechanism is calibrated above that decimal
(:func:`calibrate`, applied by :func:`dp_spark.plan.builds`). What a budget states back is on the safe
side: spent as a decimal (:func:`written_up`), left under both readings, binary and decimal
(:func:`left_down`), computed costs under both (:func:`cost_up`).
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

from dp_spark.errors import ParameterError

__all__ = ["exact", "written", "calibrate", "upper", "lower", "written_up", "written_down", "cost_up",
           "left_down", "decimal_text", "float_up", "float_down", "ratio_up", "ratio_down", "remainder", "share_down",
           "ln_bounds", "ln_up", "ln_down", "sqrt_down", "sqrt_up"]


def exact(value: float | int | Fraction) -> Fraction:
    """The exact rational value of a float (or int / Fraction)."""
    if isinstance(value, Fraction):
        return value
    return Fraction(value)


def written(value: float | int | Fraction) -> Fraction:
    """The decimal a float was written as, ``Fraction(repr(x))`` (0.1 -> 1/10); an int or Fraction as
    it is. What budgets count (:class:`dp_spark.accounting.PrivacyFilter`, the ledger)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    x = float(value)
    if not math.isfinite(x):
        raise ParameterError(f"a privacy amount must be finite; got {x!r}")
    return Fraction(repr(x))


def calibrate(value: float) -> float:
    """The float a mechanism is calibrated to for a parameter given as ``value``: the largest float at
    or below its :func:`written` decimal: ``value`` when its binary value is at or below it (0.3, 0.5),
    else the next float toward 0 (0.1, 0.9). A release charged the decimal never runs above it."""
    return float_down(written(value))


def upper(value: float | int | Fraction) -> Fraction:
    """The larger of a float's two readings (binary value, written decimal): for a cost holding under both."""
    return max(exact(value), written(value))


def lower(value: float | int | Fraction) -> Fraction:
    """The smaller of a float's two readings (exact binary value, written decimal)."""
    return min(exact(value), written(value))


def _nearest(q: Fraction) -> float:
    try:
        return float(q)  # correctly rounded to nearest
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def float_up(value: Fraction | float | int) -> float:
    """The smallest float >= ``value`` (exactly); inf beyond the largest float."""
    q = exact(value)
    f = _nearest(q)
    if math.isfinite(f) and Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def float_down(value: Fraction | float | int) -> float:
    """The largest float <= ``value`` (exactly)."""
    q = exact(value)
    f = _nearest(q)
    if not math.isfinite(f):
        return math.copysign(1.7976931348623157e308, f)
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def written_up(value: Fraction | float | int) -> float:
    """The smallest float whose written decimal is >= ``value``: a total spent (0.1 + 0.2 -> 0.3)."""
    q = exact(value)
    f = float_down(q)
    while math.isfinite(f) and written(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def written_down(value: Fraction | float | int) -> float:
    """The largest float whose written decimal is <= ``value`` (>= 0): spending it always fits a budget
    counting decimals (1 - 0.9 -> 0.1)."""
    q = exact(value)
    f = float_down(q) if q > Fraction(1.7976931348623157e308) else float_up(q)
    while f > 0 and written(f) > q:
        f = math.nextafter(f, 0.0)
    return f


def left_down(value: Fraction | float | int) -> float:
    """The largest float whose binary value AND written decimal are both <= ``value`` (>= 0): what is
    left of a budget counting decimals, so a mechanism run at it spends no more than is left (1 - 0.9 ->
    0.09999999999999999; ``written_down`` gives 0.1, whose binary value is above 1/10). Both readings
    grow with the float, so stepping down from ``written_down`` finds it."""
    f = written_down(value)
    q = exact(value)
    while f > 0 and Fraction(f) > q:
        f = math.nextafter(f, 0.0)
    return f


def cost_up(value: Fraction | float | int) -> float:
    """A float whose binary value and written decimal are both >= ``value``: a computed cost never
    understated under either reading."""
    q = exact(value)
    f = float_up(q)
    while math.isfinite(f) and written(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def decimal_text(value: Fraction) -> str:
    """Lossless text of an exact amount: a terminating decimal (``"0.1"``: any sum of written decimals,
    or ε²/2 of one), else ``"p/q"``; ``Fraction(text)`` reads either back exactly."""
    q = exact(value)
    d, twos, fives = q.denominator, 0, 0
    while d % 2 == 0:
        d, twos = d // 2, twos + 1
    while d % 5 == 0:
        d, fives = d // 5, fives + 1
    if d != 1:
        return f"{q.numerator}/{q.denominator}"
    places = max(twos, fives)
    digits = q.numerator * 10**places // q.denominator
    return format(Decimal(f"{digits}e-{places}"), "f")


def ratio_up(numerator: float | int, denominator: float | int) -> float:
    """Δ/ε rounded up: a noise scale (Laplace b, σ), never below the exact quotient of the floats."""
    den = exact(denominator)
    if den <= 0:
        raise ParameterError("the denominator of a noise scale must be > 0")
    return float_up(exact(numerator) / den)


def ratio_down(numerator: float | int, denominator: float | int) -> float:
    """ε/Δ rounded down: a privacy coefficient, an inverse scale (the exponential mechanism's ε/(2Δ), an
    exponential noise rate), never above the exact quotient of the floats."""
    den = exact(denominator)
    if den <= 0:
        raise ParameterError("the denominator of a privacy coefficient must be > 0")
    return float_down(exact(numerator) / den)


def remainder(total: float, *parts: float) -> float:
    """The largest float r with parts + r <= total exactly: the last share of a budget split.
    ParameterError if the parts already exceed the total."""
    left = exact(total) - sum((exact(p) for p in parts), Fraction(0))
    if left < 0:
        raise ParameterError("the parts of a budget split exceed its total")
    return float_down(left)


def share_down(total: float, parts: int) -> float:
    """The largest float s with ``parts``·s <= total exactly: one of ``parts`` equal shares of a budget."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise ParameterError("parts must be a whole number >= 1")
    return float_down(exact(total) / parts)


#: Decimal digits of :func:`ln_bounds`' logarithms.
_LN_DIGITS = 60


def ln_bounds(value: Fraction | float | int) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= ln(value) <= hi`` exactly, ``value`` > 0, about 2e-50·(1 + |ln value|) apart.
    Of the exact rational p/q: ln p − ln q, each correctly rounded by :mod:`decimal` at 60 digits (error at most half a
    unit in the 60th digit), then widened by a margin far larger than that error."""
    q = exact(value)
    if q <= 0:
        raise ParameterError("the logarithm needs a value > 0")
    ctx = Context(prec=_LN_DIGITS)
    approx = Fraction(Decimal(q.numerator).ln(ctx)) - Fraction(Decimal(q.denominator).ln(ctx))
    margin = (1 + abs(approx)) * Fraction(1, 10**50)
    return approx - margin, approx + margin


def ln_up(value: Fraction | float | int) -> float:
    """A float >= ln(value) (exactly), within a couple of ulps of it."""
    return float_up(ln_bounds(value)[1])


def ln_down(value: Fraction | float | int) -> float:
    """A float <= ln(value) (exactly), within a couple of ulps of it."""
    return float_down(ln_bounds(value)[0])


def sqrt_down(value: Fraction | float | int) -> float:
    """The largest float s with s² <= ``value`` exactly (value >= 0): e.g. a per-round ε from a ρ."""
    q = exact(value)
    if q < 0:
        raise ParameterError("the square root needs a value >= 0")
    s = math.sqrt(float_down(q))
    while Fraction(s) ** 2 > q:
        s = math.nextafter(s, 0.0)
    while math.isfinite(nxt := math.nextafter(s, math.inf)) and Fraction(nxt) ** 2 <= q:
        s = nxt
    return s


def sqrt_up(value: Fraction | float | int) -> float:
    """The smallest float s with s² >= ``value`` exactly (value >= 0): e.g. σ = sqrt(Δ²/(2ρ))."""
    q = exact(value)
    if q < 0:
        raise ParameterError("the square root needs a value >= 0")
    s = math.sqrt(float_up(q))
    while math.isfinite(s) and Fraction(s) ** 2 < q:
        s = math.nextafter(s, math.inf)
    while s > 0 and Fraction(prv := math.nextafter(s, 0.0)) ** 2 >= q:
        s = prv
    return s
