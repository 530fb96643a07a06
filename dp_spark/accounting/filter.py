"""A privacy filter: a budget that refuses any release that would overspend it.

The filter lets a job choose each release's privacy cost adaptively (after
seeing earlier outputs) while the total guarantee stays the budget:

- zCDP budget ρ (with δ): each spend adds its ρ and its δ separately; as long
  as Σρᵢ <= ρ and Σδᵢ <= δ the whole interaction is δ-approximate ρ-zCDP
  (the fully adaptive zCDP filter of Whitehouse, Ramdas, Rogers and Wu,
  "Fully-Adaptive Composition in Differential Privacy", ICML 2023);
- (ε, δ) budget: ε and δ add (basic composition, which remains valid as a
  filter: Rogers, Roth, Ullman and Vadhan, "Privacy Odometers and Filters",
  NeurIPS 2016);
- pure ε budget: ε adds (same source).

Costs are checked before any data is read. A refusal changes nothing and its
message quotes only parameters (the requested cost and the remaining budget).

Exact comparison, no slack (the rule): every amount is the exact binary
value of the float it was given as (0.1 is 0.1000000000000000055…, 0.3 is
0.2999999999999999888…). Spent amounts are summed as exact fractions and a
spend is accepted only if the exact sum stays at most the exact budget, so
the filter never lets a job spend more than its budget, not even by one
ulp. Consequence: three spends of 0.1 do not fit a budget of 0.3 (their
exact sum is 0.3000000000000000166…); they do fit a budget written as
``0.1 + 0.1 + 0.1`` (the float 0.30000000000000004), and :attr:`remaining`
(exact, rounded down) always fits, so the last part of a split should be
``remaining`` or :func:`dp_spark.accounting.remainder` (total minus the
other parts, rounded down). Reported totals (:attr:`spent`) are rounded up.
"""

from __future__ import annotations

from fractions import Fraction

from dp_spark.accounting.composition import check_cost, convert_cost
from dp_spark.accounting.costs import ApproxDP, PrivacyCost, PureDP, ZCDP
from dp_spark.accounting.exact import exact, float_down, float_up
from dp_spark.errors import BudgetExceededError, ParameterError

__all__ = ["PrivacyFilter"]


def _components(cost: PrivacyCost) -> dict[str, float]:
    """The numeric fields of a cost: epsilon / delta / rho."""
    return {key: value for key, value in cost.to_dict().items() if key != "kind"}


def _exact_components(cost: PrivacyCost, kind: str) -> dict[str, Fraction]:
    """The exact amounts ``cost`` spends from a budget of ``kind`` (pure ε
    counts as ρ = ε²/2 exactly in a zCDP budget, as (ε, 0) in an (ε, δ) one)."""
    if isinstance(cost, PureDP) and kind == ZCDP.kind:
        return {"rho": exact(cost.epsilon) ** 2 / 2, "delta": Fraction(0)}
    if isinstance(cost, PureDP) and kind == ApproxDP.kind:
        return {"epsilon": exact(cost.epsilon), "delta": Fraction(0)}
    return {key: exact(value) for key, value in _components(cost).items()}


def _from_components(kind: str, values: dict[str, float]) -> PrivacyCost:
    if kind == PureDP.kind:
        return PureDP(values["epsilon"])
    if kind == ApproxDP.kind:
        return ApproxDP(values["epsilon"], values["delta"])
    return ZCDP(values["rho"], values["delta"])


class PrivacyFilter:
    """Track spending against a fixed budget (a PureDP, ApproxDP or ZCDP).

    ``spend`` converts a cost to the budget's kind when valid (PureDP ε counts
    as ApproxDP(ε, 0) or as ZCDP(ε²/2)); other mixes raise ParameterError.
    Amounts are compared exactly (module docstring: no slack, no overspend).
    """

    def __init__(self, budget: PrivacyCost) -> None:
        self._budget = check_cost(budget, "budget")
        self._limit = _exact_components(self._budget, self._budget.kind)
        self._spent = {key: Fraction(0) for key in self._limit}
        self._ledger: list[tuple[str, PrivacyCost]] = []

    # ---------------------------------------------------------------- state

    @property
    def budget(self) -> PrivacyCost:
        """The total guarantee this filter enforces."""
        return self._budget

    @property
    def spent(self) -> PrivacyCost:
        """The composed total spent so far, in the budget's kind (exact sum,
        rounded up: never understated)."""
        return _from_components(self._budget.kind, {k: float_up(v) for k, v in self._spent.items()})

    @property
    def remaining(self) -> PrivacyCost:
        """Budget minus spent, per component, exact and rounded down (so
        spending ``remaining`` always fits), floored at zero."""
        left = {k: float_down(max(Fraction(0), self._limit[k] - self._spent[k])) for k in self._limit}
        return _from_components(self._budget.kind, left)

    @property
    def ledger(self) -> list[tuple[str, PrivacyCost]]:
        """A copy of the accepted spends, as (label, cost as given), in order."""
        return list(self._ledger)

    # ---------------------------------------------------------------- spending

    def _converted(self, cost: PrivacyCost) -> PrivacyCost:
        check_cost(cost)
        try:
            return convert_cost(cost, self._budget.kind)
        except ParameterError as exc:
            raise ParameterError(
                f"cannot spend a {cost.kind} cost from a {self._budget.kind} budget: {exc}"
            ) from None

    def _fits(self, amounts: dict[str, Fraction]) -> bool:
        """Whether spent + amounts stays within the budget, component by component, exactly."""
        return all(self._spent[key] + amounts[key] <= self._limit[key] for key in self._limit)

    def can_spend(self, cost: PrivacyCost) -> bool:
        """Return whether ``spend(cost)`` would be accepted (changes nothing).

        Raises ParameterError for a cost that cannot be counted in the
        budget's kind, as ``spend`` would.
        """
        self._converted(cost)
        return self._fits(_exact_components(cost, self._budget.kind))

    def spend(self, cost: PrivacyCost, label: str = "") -> PrivacyCost:
        """Record ``cost`` under ``label`` if it fits, and return it in the budget's kind.

        Raises BudgetExceededError, leaving the filter unchanged, if the running
        total (ρ and δ separately for zCDP; ε and δ for approximate DP; ε for
        pure DP) would exceed the budget at all (exact comparison of the
        given floats, see the module docstring).
        """
        if not isinstance(label, str):
            raise ParameterError(f"label must be a str, got {type(label).__name__}")
        converted = self._converted(cost)
        amounts = _exact_components(cost, self._budget.kind)
        if not self._fits(amounts):
            counted = "" if converted is cost else f" (counted as {converted.describe()})"
            name = f" {label!r}" if label else ""
            raise BudgetExceededError(
                f"release{name} requests {cost.describe()}{counted}, but the remaining "
                f"budget is {self.remaining.describe()} (amounts are compared exactly, as the "
                "binary values of the floats given: spend the filter's remaining budget for a "
                "last part); lower this release's privacy parameters or raise the job's budget"
            )
        self._spent = {key: self._spent[key] + amounts[key] for key in self._spent}
        self._ledger.append((label, cost))
        return converted

    def __repr__(self) -> str:
        return (
            f"PrivacyFilter(budget={self._budget!r}, spent={self.spent!r}, "
            f"releases={len(self._ledger)})"
        )
