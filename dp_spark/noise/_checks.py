"""Argument checks shared by the samplers (private)."""

from __future__ import annotations

import math
import numbers

from dp_spark.errors import ParameterError

Size = int | tuple[int, ...] | None


def positive_finite(value: object, name: str) -> float:
    """Return ``value`` as a float after checking it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a positive finite number, got {type(value).__name__}")
    as_float = float(value)
    if not math.isfinite(as_float) or as_float <= 0.0:
        raise ParameterError(f"{name} must be a positive finite number, got {as_float!r}")
    return as_float


def probability(value: object, name: str, upper: float = 1.0, include_upper: bool = False) -> float:
    """Return ``value`` as a float after checking 0 < value < upper (or <= upper)."""
    bound = f"(0, {upper:g}]" if include_upper else f"(0, {upper:g})"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a number in {bound}, got {type(value).__name__}")
    as_float = float(value)
    inside = 0.0 < as_float <= upper if include_upper else 0.0 < as_float < upper
    if not inside:
        raise ParameterError(f"{name} must lie in {bound}, got {as_float!r}")
    return as_float


def check_size(size: object) -> Size:
    """Check a numpy-style ``size`` (None, a non-negative int or a tuple of them)."""
    if size is None:
        return None
    dims = size if isinstance(size, tuple) else (size,)
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim < 0:
            raise ParameterError(
                f"size must be None, a non-negative int or a tuple of them, got {size!r}"
            )
    return tuple(int(d) for d in dims) if isinstance(size, tuple) else int(size)
