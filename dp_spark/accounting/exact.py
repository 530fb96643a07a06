"""Exact arithmetic on privacy parameters, with directed rounding back to floats.

Privacy parameters arrive as floats. Every float is an exact binary
rational (0.1 is 0.1000000000000000055511151231257827…), and sums or
products of floats rounded to nearest can land below the true value. The
accounting therefore works on :class:`fractions.Fraction` copies of the
floats it is given, and rounds results back to floats in the direction that
never understates privacy loss:

- a cost (ε, ρ, δ spent, a composed total) is rounded **up**
  (:func:`float_up`);
- a share of a budget that a mechanism may still spend (what remains, the
  last part of a split) is rounded **down** (:func:`float_down`,
  :func:`remainder`);
- a noise scale Δ/ε is rounded **up** (:func:`ratio_up`): more noise, never
  less.

Budgets count a privacy parameter as the decimal it was written as
(:func:`written`: ``Fraction(repr(x))``, the shortest decimal that
round-trips: 0.1 counts as 1/10, not 0.1000000000000000055…), so that 0.9
then 0.1 fit a budget of 1. That is sound because a mechanism is never
calibrated to more than that decimal: :func:`calibrate` (used once, where a
plan turns its parameters into its budget split, :func:`dp_spark.plan.builds`)
gives the largest float at or below it: the float itself when its binary
value is at or below its decimal, else the next float toward 0. Amounts a
budget states back (what was spent, what is left) are on the safe side:
what is spent as a decimal (:func:`written_up`); what is left under both
readings, binary and decimal (:func:`left_down`), so a mechanism run at it
never spends more than is left; computed costs (:func:`cost_up`, safe under
both readings).
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
    """The decimal a privacy parameter was written as: ``Fraction(repr(x))``
    of a float (the shortest decimal that reads back as the same float:
    0.1 -> 1/10, 1e-06 -> 1/1000000); an int or Fraction as it is. What
    budgets count (:class:`dp_spark.accounting.PrivacyFilter`, the ledger)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    x = float(value)
    if not math.isfinite(x):
        raise ParameterError(f"a privacy amount must be finite; got {x!r}")
    return Fraction(repr(x))


def calibrate(value: float) -> float:
    """The float a mechanism is calibrated to for a privacy parameter given
    as ``value``: the largest float at or below the decimal it was written
    as (:func:`written`). That is ``value`` itself when its binary value is
    at or below that decimal (0.3, 0.5, 1.0), else the next float toward 0
    (``math.nextafter(value, 0)``: 0.1, 0.9). So a release charged the
    written decimal never runs a mechanism above it."""
    return float_down(written(value))


def upper(value: float | int | Fraction) -> Fraction:
    """The larger of a float's two readings (exact binary value, written
    decimal): a cost that must hold under both."""
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
    """The smallest float whose written decimal is >= ``value``: a total
    spent, as a budget counting decimals states it (0.1 + 0.2 -> 0.3)."""
    q = exact(value)
    f = float_down(q)
    while math.isfinite(f) and written(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def written_down(value: Fraction | float | int) -> float:
    """The largest float whose written decimal is <= ``value`` (>= 0): what
    is left of a budget counting decimals, so that spending it always fits
    (1 - 0.9 -> 0.1)."""
    q = exact(value)
    f = float_down(q) if q > Fraction(1.7976931348623157e308) else float_up(q)
    while f > 0 and written(f) > q:
        f = math.nextafter(f, 0.0)
    return f


def left_down(value: Fraction | float | int) -> float:
    """The largest float whose exact binary value AND written decimal are
    both <= ``value`` (>= 0): what is left of a budget counting decimals.
    Spending it fits under either reading: a mechanism run at it spends no
    more than is left (1 - 0.9 -> 0.09999999999999999, whose decimal and
    binary value are both below 1/10; ``written_down`` alone would give
    0.1, whose binary value is above 1/10). Both readings grow with the
    float, so stepping down from ``written_down`` finds it."""
    f = written_down(value)
    q = exact(value)
    while f > 0 and Fraction(f) > q:
        f = math.nextafter(f, 0.0)
    return f


def cost_up(value: Fraction | float | int) -> float:
    """A float whose exact binary value and written decimal are both >=
    ``value``: a computed cost (a conversion, a composed total) that is
    never understated, whichever way it is read."""
    q = exact(value)
    f = float_up(q)
    while math.isfinite(f) and written(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def decimal_text(value: Fraction) -> str:
    """A lossless text of an exact amount: a terminating decimal
    (``"0.1"``; every sum of written decimals, and ε²/2 of one, is one),
    else ``"p/q"``; ``Fraction(text)`` reads either back exactly."""
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
    """Δ/ε rounded up: the noise scale (Laplace b, σ) for sensitivity Δ and
    parameter ε, never smaller than the exact quotient of the given floats."""
    den = exact(denominator)
    if den <= 0:
        raise ParameterError("the denominator of a noise scale must be > 0")
    return float_up(exact(numerator) / den)


def ratio_down(numerator: float | int, denominator: float | int) -> float:
    """ε/Δ rounded down: a privacy coefficient (the exponential mechanism's
    ε/(2Δ), an exponential noise rate), never larger than the exact
    quotient of the given floats (a coefficient is an inverse scale)."""
    den = exact(denominator)
    if den <= 0:
        raise ParameterError("the denominator of a privacy coefficient must be > 0")
    return float_down(exact(numerator) / den)


def remainder(total: float, *parts: float) -> float:
    """The largest float r with parts + r <= total exactly: the last share of
    a budget split, so that the shares never sum to more than the total.
    Raises ParameterError if the other parts already exceed the total."""
    left = exact(total) - sum((exact(p) for p in parts), Fraction(0))
    if left < 0:
        raise ParameterError("the parts of a budget split exceed its total")
    return float_down(left)


def share_down(total: float, parts: int) -> float:
    """The largest float s with ``parts``·s <= total exactly: one of ``parts``
    equal shares of a budget, so that the shares never sum to more than it."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise ParameterError("parts must be a whole number >= 1")
    return float_down(exact(total) / parts)


#: Decimal precision of :func:`ln_bounds` (digits); the bracket it returns is
#: wider than the rounding error of both logarithms by a large margin.
_LN_DIGITS = 60


def ln_bounds(value: Fraction | float | int) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= ln(value) <= hi`` (exactly), for ``value`` > 0, less
    than 1e-50·(1 + |ln value|) apart: the logarithm of the exact rational
    value, never of a rounded one. ln(p/q) = ln p − ln q, each an exact
    integer's logarithm correctly rounded by :mod:`decimal` at 60 digits
    (error at most half a unit in the 60th digit), then widened by a margin
    far larger than that error."""
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
    """The largest float s with s² <= ``value`` (exactly), for value >= 0: a
    per-round ε from a zCDP budget (c·ε₀²/2 <= ρ), never above the exact root."""
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
    """The smallest float s with s² >= ``value`` (exactly), for value >= 0: a
    noise scale σ = sqrt(Δ²/(2ρ)), never below the exact root."""
    q = exact(value)
    if q < 0:
        raise ParameterError("the square root needs a value >= 0")
    s = math.sqrt(float_up(q))
    while math.isfinite(s) and Fraction(s) ** 2 < q:
        s = math.nextafter(s, math.inf)
    while s > 0 and Fraction(prv := math.nextafter(s, 0.0)) ** 2 >= q:
        s = prv
    return s
