"""Parameter checks shared by the Private Count Release loop and the
contribution-bounding baseline (each raises ParameterError naming what to
change; messages quote parameters only)."""

from __future__ import annotations

import math
import numbers

from dp_spark.errors import ParameterError


def number(value, name: str) -> float:
    """A finite real number (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a number; got {value!r}.")
    x = float(value)
    if not math.isfinite(x):
        raise ParameterError(f"{name} must be finite; got {value!r}.")
    return x


def positive(value, name: str, hint: str = "") -> float:
    x = number(value, name)
    if x <= 0:
        raise ParameterError(f"{name} must be > 0{hint}; got {value!r}.")
    return x


def open_unit(value, name: str) -> float:
    x = number(value, name)
    if not 0 < x < 1:
        raise ParameterError(f"{name} must be strictly between 0 and 1; got {value!r}.")
    return x
