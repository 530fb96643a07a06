"""Privacy costs and guarantees: pure DP, approximate DP and (δ-approximate) zCDP.

A cost is what one release spends; a guarantee is the same object stated for a whole job. Construction
validates: zero is allowed, negative, NaN and infinite values are refused, δ lies in [0, 1). ``a + b``
composes two costs of one kind (ε and δ add; ρ and δ add for zCDP, Bun–Steinke 2016) exactly on the
decimals written, stated as the smallest float whose decimal is not below the sum
(``exact.written_up``: 0.1 + 0.2 is 0.3). ``compose`` mixes kinds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from dp_spark.accounting.conversions import check_delta, check_nonnegative, zcdp_to_approx_epsilon
from dp_spark.accounting.exact import calibrate, written, written_up
from dp_spark.errors import ParameterError

__all__ = ["PureDP", "ApproxDP", "ZCDP", "PrivacyCost", "cost_from_dict"]


def _fmt(value: float) -> str:
    """Shortest faithful text of a parameter (1 -> "1", 1e-06 -> "1e-06"). An amount calibrated one
    float below a short decimal (0.09999999999999999 for 0.1) reads as that decimal, the amount charged;
    ``to_dict()`` keeps the exact value."""
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    if math.isfinite(value) and value > 0:
        above = math.nextafter(value, math.inf)
        if len(repr(above)) < len(repr(value)) and calibrate(above) == value:
            return _fmt(above)
    return repr(value)


def _set(obj: object, name: str, value: float) -> None:
    object.__setattr__(obj, name, value)


class _CostMixin:
    """Behaviour shared by the three cost types."""

    kind: ClassVar[str]

    def _same_kind(self, other: object, op: str):
        if type(other) is type(self):
            return other
        if isinstance(other, (PureDP, ApproxDP, ZCDP)):
            raise ParameterError(
                f"cannot {op} a {other.kind} cost to a {self.kind} cost with '+'; "
                "use dp_spark.accounting.compose, which converts where possible"
            )
        return None

    def __radd__(self, other: object):
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self  # lets sum(costs) start from 0
        return NotImplemented


@dataclass(frozen=True)
class PureDP(_CostMixin):
    """ε-differential privacy (Dwork–McSherry–Nissim–Smith 2006)."""

    epsilon: float
    kind: ClassVar[str] = "pure-dp"

    def __post_init__(self) -> None:
        _set(self, "epsilon", check_nonnegative(self.epsilon, "epsilon"))

    def __add__(self, other: object) -> PureDP:
        same = self._same_kind(other, "add")
        if same is None:
            return NotImplemented
        return PureDP(_add(self.epsilon, same.epsilon))

    def to_dict(self) -> dict[str, float | str]:
        """Return {"kind": "pure-dp", "epsilon": ε}."""
        return {"kind": self.kind, "epsilon": self.epsilon}

    def describe(self) -> str:
        """One line for humans, e.g. "ε = 1 (pure differential privacy)"."""
        return f"ε = {_fmt(self.epsilon)} (pure differential privacy)"


@dataclass(frozen=True)
class ApproxDP(_CostMixin):
    """(ε, δ)-differential privacy (Dwork–Kenthapadi–McSherry–Mironov–Naor 2006)."""

    epsilon: float
    delta: float
    kind: ClassVar[str] = "approx-dp"

    def __post_init__(self) -> None:
        _set(self, "epsilon", check_nonnegative(self.epsilon, "epsilon"))
        _set(self, "delta", check_delta(self.delta, "delta"))

    def __add__(self, other: object) -> ApproxDP:
        same = self._same_kind(other, "add")
        if same is None:
            return NotImplemented
        return ApproxDP(_add(self.epsilon, same.epsilon), _add_delta(self.delta, same.delta))

    def to_dict(self) -> dict[str, float | str]:
        """Return {"kind": "approx-dp", "epsilon": ε, "delta": δ}."""
        return {"kind": self.kind, "epsilon": self.epsilon, "delta": self.delta}

    def describe(self) -> str:
        """One line for humans, e.g. "ε = 1, δ = 1e-06 ((ε, δ)-differential privacy)"."""
        return f"ε = {_fmt(self.epsilon)}, δ = {_fmt(self.delta)} ((ε, δ)-differential privacy)"


@dataclass(frozen=True)
class ZCDP(_CostMixin):
    """δ-approximate ρ-zero-concentrated differential privacy (Bun–Steinke 2016); δ = 0: plain ρ-zCDP."""

    rho: float
    delta: float = 0.0
    kind: ClassVar[str] = "zcdp"

    def __post_init__(self) -> None:
        _set(self, "rho", check_nonnegative(self.rho, "rho"))
        _set(self, "delta", check_delta(self.delta, "delta"))

    def __add__(self, other: object) -> ZCDP:
        same = self._same_kind(other, "add")
        if same is None:
            return NotImplemented
        return ZCDP(_add(self.rho, same.rho), _add_delta(self.delta, same.delta))

    def to_approx(self, delta_prime: float) -> ApproxDP:
        """The implied (ε, δ + δ')-DP guarantee, ε = ρ + 2·sqrt(ρ·ln(1/δ')) (Bun–Steinke 2016,
        Proposition 1.3, outside the δ event); δ' in (0, 1), δ + δ' below 1."""
        epsilon = zcdp_to_approx_epsilon(self.rho, delta_prime)
        return ApproxDP(epsilon, _add_delta(self.delta, float(delta_prime)))

    def to_dict(self) -> dict[str, float | str]:
        """Return {"kind": "zcdp", "rho": ρ, "delta": δ}."""
        return {"kind": self.kind, "rho": self.rho, "delta": self.delta}

    def describe(self) -> str:
        """One line for humans, e.g. "ρ = 0.5 (zero-concentrated differential privacy)"."""
        if self.delta == 0.0:
            return f"ρ = {_fmt(self.rho)} (zero-concentrated differential privacy, ρ-zCDP)"
        return f"ρ = {_fmt(self.rho)}, δ = {_fmt(self.delta)} (δ-approximate ρ-zCDP)"


PrivacyCost = PureDP | ApproxDP | ZCDP


def _add(first: float, second: float) -> float:
    """first + second exactly, as the decimals written, rounded up (never understated)."""
    return written_up(written(first) + written(second))


def _add_delta(first: float, second: float) -> float:
    total = _add(first, second)
    if total >= 1.0 or math.isnan(total):
        raise ParameterError(
            f"composed delta {total!r} is not below 1; use smaller delta values"
        )
    return total


def cost_from_dict(data: dict) -> "PureDP | ApproxDP | ZCDP":
    """The cost whose ``to_dict()`` is ``data`` (a ledger row, a report's ``privacy``; extra keys ignored)."""
    kind = data["kind"]
    if kind == PureDP.kind:
        return PureDP(data["epsilon"])
    if kind == ApproxDP.kind:
        return ApproxDP(data["epsilon"], data["delta"])
    return ZCDP(data["rho"], data.get("delta", 0.0))
