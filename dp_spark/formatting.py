"""Numbers as a person reads them, for every renderer (CLI summary, HTML report, charts), so they agree."""

from __future__ import annotations

import math

__all__ = ["fmt"]


def fmt(value) -> str:
    """A number as a person reads it: 12,345 or 0.1235 or 1.2e-06. Scientific notation only below 0.001 and
    from 10^15 on; values of 1,000 and more are shown to the unit."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value != 0 and (abs(value) >= 1e15 or abs(value) < 1e-3):
            return f"{value:.3g}"
        if abs(value) >= 1000 or (value == int(value) and abs(value) >= 1):
            return f"{value:,.0f}"
        return f"{value:,.4g}"
    return str(value)
