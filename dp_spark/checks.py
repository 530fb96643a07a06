"""Every parameter check of dp_spark, in one module (pure Python and numpy).

Release plans, mechanisms and samplers all validate through these functions, so a parameter gets the same
rule and message everywhere. A failure raises :class:`~dp_spark.errors.ParameterError` naming the parameter
and what is expected. A message may quote a *parameter* the caller chose (ε, ρ, β, a horizon); checks of
data-derived values (:func:`finite_vector`, :func:`finite_number`) never quote a value.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from dp_spark.errors import ParameterError

Size = int | tuple[int, ...] | None


def _real(value: object, name: str, expected: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.number)):
        raise ParameterError(f"{name} must be {expected}; got {value!r}.")
    return float(value)


def number(value: object, name: str) -> float:
    """A finite real number (bools refused)."""
    x = _real(value, name, "a finite number")
    if not math.isfinite(x):
        raise ParameterError(f"{name} must be a finite number; got {value!r}.")
    return x


def positive(value: object, name: str, hint: str = "") -> float:
    """A finite number > 0 (ε, ρ, a noise scale, …)."""
    x = _real(value, name, "a positive finite number")
    if not math.isfinite(x) or x <= 0.0:
        raise ParameterError(f"{name} must be a positive finite number (> 0){hint}; got {value!r}.")
    return x


#: The ε a release accepts, checked by every plan before anything is charged or read. Below 1e-6 a
#: sensitivity-1 count gets noise of scale >= 10⁶, so no answer means anything, and noise tails and
#: thresholds approach the limits of a float. Above 50, e^ε > 5·10²¹ bounds nothing: the noise is far below
#: one count. Deployed releases stay well inside (the US Census 2020 redistricting data spent ε ≈ 20 in all).
EPSILON_RANGE = (1e-6, 50.0)
#: The ρ (zCDP) a release accepts. 1e-12 is ρ = ε²/2 at ε ≈ 1.4e-6, the noise level of the lowest ε
#: (Gaussian σ ≈ 7·10⁵ per unit of sensitivity); 50 bounds the mean privacy loss by 50 (ρ-zCDP bounds the
#: KL divergence by ρ) and converts to ε ≈ 103 at δ = 1e-6: nothing is protected.
RHO_RANGE = (1e-12, 50.0)


def _in_range(value: object, name: str, bounds: tuple[float, float], why: str) -> float:
    x = positive(value, name)
    low, high = bounds
    if not low <= x <= high:
        raise ParameterError(
            f"{name} must lie in [{low:g}, {high:g}]; got {value!r}. {why}"
        )
    return x


def epsilon(value: object, name: str = "epsilon") -> float:
    """A release's ε, within :data:`EPSILON_RANGE` (refused before any charge)."""
    return _in_range(
        value, name, EPSILON_RANGE,
        "Below that the noise swamps every answer; above it the release protects nothing "
        "(e^epsilon bounds no privacy loss). See the README, 'Privacy parameters'.",
    )


def rho(value: object, name: str = "rho") -> float:
    """A release's ρ (zCDP), within :data:`RHO_RANGE` (refused before any charge)."""
    return _in_range(
        value, name, RHO_RANGE,
        "Below that the noise swamps every answer; above it the release protects nothing. "
        "See the README, 'Privacy parameters'.",
    )


def nonnegative(value: object, name: str) -> float:
    """A finite number >= 0 (a privacy amount, a sensitivity, a noise scale)."""
    x = _real(value, name, "a finite number >= 0")
    if not math.isfinite(x) or x < 0.0:
        raise ParameterError(f"{name} must be a finite number >= 0; got {value!r}.")
    return x


def open_unit(value: object, name: str) -> float:
    """A probability strictly between 0 and 1 (β, δ)."""
    x = _real(value, name, "a number strictly between 0 and 1")
    if not 0.0 < x < 1.0:
        raise ParameterError(f"{name} must be strictly between 0 and 1; got {value!r}.")
    return x


def probability(value: object, name: str, upper: float = 1.0, include_upper: bool = False) -> float:
    """A number in (0, upper), or (0, upper] with ``include_upper``."""
    bound = f"(0, {upper:g}]" if include_upper else f"(0, {upper:g})"
    x = _real(value, name, f"a number in {bound}")
    inside = 0.0 < x <= upper if include_upper else 0.0 < x < upper
    if not inside:
        raise ParameterError(f"{name} must lie in {bound}; got {value!r}.")
    return x


def delta(value: object, name: str = "delta", allow_zero: bool = False) -> float:
    """δ in (0, 1), or [0, 1) when a pure-DP choice (δ = 0) is allowed."""
    interval = "[0, 1)" if allow_zero else "(0, 1)"
    x = _real(value, name, f"a number in {interval}")
    if not ((0.0 <= x < 1.0) if allow_zero else (0.0 < x < 1.0)):
        raise ParameterError(f"{name} must lie in {interval}; got {value!r}.")
    return x


def integer(value: object, name: str, low: int = 1, high: int | None = None, what: str = "") -> int:
    """A whole number with low <= value (<= high); ``what`` adds why."""
    bound = f"from {low} to {high:,}" if high is not None else f">= {low}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise ParameterError(f"{name} must be a whole number {bound}{what}; got {value!r}.")
    v = int(value)
    if v < low or (high is not None and v > high):
        raise ParameterError(f"{name} must be a whole number {bound}{what}; got {v}.")
    return v


def at_most(value: object, name: str, limit: int, why: str, none_ok: bool = False) -> int | None:
    """A whole number from 1 to a public ``limit`` (None passes with ``none_ok``); the refusal says ``why``."""
    if value is None and none_ok:
        return None
    v = integer(value, name, 1)
    if v > limit:
        raise ParameterError(f"{name} must be at most {limit:,}: {why}; got {v!r}.")
    return v


def whole(value: object, name: str, minimum: int = 1) -> int:
    """A whole number >= ``minimum``."""
    return integer(value, name, minimum)


def boolean(value: object, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{name} must be True or False; got {value!r}.")
    return bool(value)


def choice(value: object, name: str, allowed) -> str:
    """One of a fixed set of names (a method, a policy, …)."""
    if value not in tuple(allowed):
        raise ParameterError(f"{name} must be one of {', '.join(map(str, allowed))}; got {value!r}.")
    return value


def seed(value: object) -> int | None:
    """A seed is only for tests and demos; a whole number >= 0 if given."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)) or value < 0:
        raise ParameterError(f"seed must be a whole number >= 0 or None; got {value!r}.")
    return int(value)


def rng(value: object) -> np.random.Generator:
    """A ``numpy.random.Generator`` (from :func:`dp_spark.noise.make_rng`)."""
    if not isinstance(value, np.random.Generator):
        raise ParameterError(
            "rng must be a numpy.random.Generator (from dp_spark.noise.make_rng, seeded by the OS); "
            "seeds, None and legacy RandomState objects are not accepted"
        )
    return value


def horizon(value: object, name: str = "horizon") -> int:
    """The horizon T: a power of two >= 1."""
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
    """A 1-d float64 array of finite numbers (the message never quotes an entry)."""
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
    """A finite number (the message quotes no value: it may be data-derived)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.number)):
        raise ParameterError(f"{name} must be a finite number, got {type(value).__name__}")
    as_float = float(value)
    if not math.isfinite(as_float):
        raise ParameterError(f"{name} must be a finite number")
    return as_float


def size(value: object) -> Size:
    """A numpy-style ``size``: None, a non-negative int or a tuple of them."""
    if value is None:
        return None
    dims = value if isinstance(value, tuple) else (value,)
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim < 0:
            raise ParameterError(f"size must be None, a non-negative int or a tuple of them, got {value!r}")
    return tuple(int(d) for d in dims) if isinstance(value, tuple) else int(value)


def distinct_columns(**columns: object) -> None:
    """Check that the named column options (``person_col=…, item_col=…``) name different columns."""
    seen: dict[object, str] = {}
    for option, column in columns.items():
        if column in seen:
            raise ParameterError(
                f"{seen[column]} and {option} both name the column {column!r}; they must be "
                "different columns (--" + seen[column].replace("_", "-") + " / --"
                + option.replace("_", "-") + ")."
            )
        seen[column] = option
