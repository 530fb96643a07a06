"""Validation of the privacy parameters every release takes.

Runs before any data is read; each failure is a ParameterError whose message
says what to change.
"""

from __future__ import annotations

import math

import numpy as np

from dp_spark.errors import ParameterError


def _number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ParameterError(f"{name} must be a number; got {value!r}.")
    return float(value)


def positive(value, name: str) -> float:
    """A finite number > 0 (ε, ρ, …)."""
    x = _number(value, name)
    if not math.isfinite(x) or x <= 0:
        raise ParameterError(f"{name} must be a finite number > 0; got {value!r}.")
    return x


def open_unit(value, name: str) -> float:
    """A probability strictly between 0 and 1 (β, δ)."""
    x = _number(value, name)
    if not (0.0 < x < 1.0):
        raise ParameterError(f"{name} must be strictly between 0 and 1; got {value!r}.")
    return x


def whole(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ParameterError(f"{name} must be a whole number >= {minimum}; got {value!r}.")
    return int(value)


def seed(value) -> int | None:
    """A seed is only for tests and demos; it must be a whole number if given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ParameterError(f"seed must be a whole number >= 0 or None; got {value!r}.")
    return int(value)
