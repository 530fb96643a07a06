"""Argument checks and helpers shared by the top-k mechanisms (numpy only)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from dp_spark import checks
from dp_spark.accounting.exact import ratio_down
from dp_spark.errors import ParameterError


# Counts above this are not exact in float64 (the joint mechanisms need exact differences).
_MAX_EXACT_COUNT = 2**53

# Argument checks (dp_spark.checks; messages say what to change, never quote a count).
check_rng = checks.rng
check_positive = checks.positive
check_int = checks.integer
check_delta = checks.delta


def as_counts(
    counts: ArrayLike, name: str = "counts", *, integral: bool, allow_empty: bool = False
) -> np.ndarray:
    """Validate a 1-D vector of non-negative counts; never quotes a value."""
    try:
        arr = np.asarray(counts)
    except Exception:  # pragma: no cover - exotic inputs
        raise ParameterError(f"{name} must be a 1-D array of non-negative numbers") from None
    if arr.dtype == np.bool_ or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise ParameterError(f"{name} must be a 1-D array of non-negative numbers (int or float dtype)")
    if arr.ndim != 1:
        raise ParameterError(f"{name} must be one-dimensional (one count per item)")
    if arr.size == 0 and not allow_empty:
        raise ParameterError(f"{name} is empty; pass at least one item")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)):
            raise ParameterError(f"{name} must be finite (no NaN or infinity)")
    if np.any(arr < 0):
        raise ParameterError(f"{name} must be non-negative (they are numbers of distinct persons)")
    if integral:
        if np.issubdtype(arr.dtype, np.floating):
            if np.any(arr != np.floor(arr)):
                raise ParameterError(
                    f"{name} must be whole numbers (distinct-person counts); the joint "
                    "mechanisms need integer counts"
                )
        if np.any(arr > _MAX_EXACT_COUNT):
            raise ParameterError(f"{name} must not exceed 2**53 (exact in float64)")
        return arr.astype(np.int64)
    return arr.astype(np.float64)


def group_share(epsilon: float, delta: float, max_groups: int) -> tuple[float, float]:
    """(ε/m, δ/m), rounded down: one group's budget when a person is in at
    most m groups (basic composition over them, parallel across the others);
    m = 1: exactly (ε, δ)."""
    m = check_int(max_groups, "max_groups", 1)
    return ratio_down(epsilon, m), (ratio_down(delta, m) if delta > 0 else 0.0)
