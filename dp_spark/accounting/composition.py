"""Basic composition across kinds of privacy cost.

Composition adds ε (and δ) for (approximate) DP and ρ (and δ) for δ-approximate zCDP (Bun–Steinke
2016). Mixed kinds convert to the weakest present: pure DP -> (ε, 0)-DP, pure ε-DP -> (ε²/2)-zCDP
(Bun–Steinke 2016, Proposition 1.4). (ε, δ)-DP does not imply zCDP, so mixing those two is refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from dp_spark.accounting.conversions import pure_to_zcdp
from dp_spark.accounting.costs import ApproxDP, PrivacyCost, PureDP, ZCDP
from dp_spark.errors import ParameterError

__all__ = ["compose", "convert_cost", "zero_cost"]

_KINDS = {PureDP.kind: PureDP, ApproxDP.kind: ApproxDP, ZCDP.kind: ZCDP}


def check_cost(cost: object, name: str = "cost") -> PrivacyCost:
    """Raise ParameterError unless ``cost`` is a PureDP, ApproxDP or ZCDP."""
    if not isinstance(cost, (PureDP, ApproxDP, ZCDP)):
        raise ParameterError(
            f"{name} must be a PureDP, ApproxDP or ZCDP, got {type(cost).__name__}"
        )
    return cost


def zero_cost(kind: str) -> PrivacyCost:
    """Return the zero cost of a kind ("pure-dp", "approx-dp" or "zcdp")."""
    if kind not in _KINDS:
        raise ParameterError(f"unknown privacy kind {kind!r}; use one of {sorted(_KINDS)}")
    return PureDP(0.0) if kind == PureDP.kind else _KINDS[kind](0.0, 0.0)


def convert_cost(cost: PrivacyCost, kind: str) -> PrivacyCost:
    """Restate ``cost`` as a cost of ``kind``: same kind unchanged, PureDP(ε) -> ApproxDP(ε, 0) or
    ZCDP(ε²/2); anything else raises ParameterError."""
    check_cost(cost)
    if kind not in _KINDS:
        raise ParameterError(f"unknown privacy kind {kind!r}; use one of {sorted(_KINDS)}")
    if cost.kind == kind:
        return cost
    if isinstance(cost, PureDP) and kind == ApproxDP.kind:
        return ApproxDP(cost.epsilon, 0.0)
    if isinstance(cost, PureDP) and kind == ZCDP.kind:
        return ZCDP(pure_to_zcdp(cost.epsilon), 0.0)
    hint = (
        "convert the zCDP total with ZCDP.to_approx(delta_prime) first"
        if isinstance(cost, ZCDP) and kind == ApproxDP.kind
        else "account this release under a budget of the same kind"
    )
    raise ParameterError(f"a {cost.kind} cost cannot be counted as {kind}; {hint}")


def _target_kind(costs: list[PrivacyCost]) -> str:
    kinds = {cost.kind for cost in costs}
    if ZCDP.kind in kinds:
        if ApproxDP.kind in kinds:
            raise ParameterError(
                "cannot compose (ε, δ)-DP costs with zCDP costs: (ε, δ)-DP does not imply "
                "zCDP; state every release in zCDP, or convert the zCDP total to (ε, δ) "
                "with ZCDP.to_approx and compose in (ε, δ)-DP"
            )
        return ZCDP.kind
    if ApproxDP.kind in kinds:
        return ApproxDP.kind
    return PureDP.kind


def compose(costs: Iterable[PrivacyCost]) -> PrivacyCost:
    """The basic composition of ``costs`` in the weakest kind present (module docstring); ApproxDP with
    ZCDP raises ParameterError; the empty composition is PureDP(0)."""
    items = [check_cost(cost, "each composed cost") for cost in costs]
    if not items:
        return PureDP(0.0)
    kind = _target_kind(items)
    total = zero_cost(kind)
    for cost in items:
        total = total + convert_cost(cost, kind)
    return total
