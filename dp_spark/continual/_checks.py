"""Argument checks for the continual-release mechanism layer (private).

Messages name the parameter and say what to change. A message may quote a
*parameter* the caller chose (ρ, β, a horizon), never a value computed from the
event data.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from dp_spark.errors import ParameterError


def positive_finite(value: object, name: str) -> float:
    """Return ``value`` as a float after checking it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a positive finite number, got {type(value).__name__}")
    as_float = float(value)
    if not math.isfinite(as_float) or as_float <= 0.0:
        raise ParameterError(f"{name} must be a positive finite number, got {as_float!r}")
    return as_float


def open_unit(value: object, name: str) -> float:
    """Return ``value`` as a float after checking 0 < value < 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a number in (0, 1), got {type(value).__name__}")
    as_float = float(value)
    if not 0.0 < as_float < 1.0:
        raise ParameterError(f"{name} must lie in (0, 1), got {as_float!r}")
    return as_float


def integer(value: object, name: str, low: int, high: int | None = None) -> int:
    """Return ``value`` as an int after checking low <= value (<= high)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(f"{name} must be an int, got {type(value).__name__}")
    as_int = int(value)
    if as_int < low or (high is not None and as_int > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise ParameterError(f"{name} must be an int in {bound}, got {as_int}")
    return as_int


def horizon(value: object, name: str = "horizon") -> int:
    """Return the horizon T after checking it is a power of two >= 1."""
    as_int = integer(value, name, 1)
    if as_int & (as_int - 1):
        raise ParameterError(
            f"{name} must be a power of two (1, 2, 4, ...), got {as_int}; "
            "round the number of steps up to the next power of two"
        )
    return as_int


def log2_exact(power_of_two: int) -> int:
    """log2 of a power of two, exactly."""
    return int(power_of_two).bit_length() - 1


def finite_vector(values: object, name: str, length: int | None = None) -> np.ndarray:
    """Return ``values`` as a 1-d float64 array after checking it is finite.

    The message never quotes an entry (entries may be data-derived)."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a 1-d array of numbers") from None
    if array.ndim != 1:
        raise ParameterError(f"{name} must be a 1-d array, got {array.ndim} dimensions")
    if length is not None and array.shape[0] != length:
        raise ParameterError(f"{name} must have length {length} (one entry per step), got {array.shape[0]}")
    if not np.all(np.isfinite(array)):
        raise ParameterError(f"{name} must contain only finite numbers")
    return array


def finite_number(value: object, name: str) -> float:
    """Return ``value`` as a float after checking it is finite (message quotes no value)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.number)):
        raise ParameterError(f"{name} must be a finite number, got {type(value).__name__}")
    as_float = float(value)
    if not math.isfinite(as_float):
        raise ParameterError(f"{name} must be a finite number")
    return as_float
