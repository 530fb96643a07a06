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
"""

from __future__ import annotations

from dp_spark.accounting.composition import check_cost, convert_cost, zero_cost
from dp_spark.accounting.costs import ApproxDP, PrivacyCost, PureDP, ZCDP
from dp_spark.errors import BudgetExceededError, ParameterError

__all__ = ["PrivacyFilter"]

#: Relative slack when comparing a running total with the budget, so that
#: spending exactly the budget in float pieces (0.1 + 0.1 + 0.1 of 0.3) passes.
REL_TOL = 1e-9


def _components(cost: PrivacyCost) -> dict[str, float]:
    """The numeric fields of a cost: epsilon / delta / rho."""
    return {key: value for key, value in cost.to_dict().items() if key != "kind"}


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
    """

    def __init__(self, budget: PrivacyCost) -> None:
        self._budget = check_cost(budget, "budget")
        self._spent = zero_cost(budget.kind)
        self._ledger: list[tuple[str, PrivacyCost]] = []

    # ---------------------------------------------------------------- state

    @property
    def budget(self) -> PrivacyCost:
        """The total guarantee this filter enforces."""
        return self._budget

    @property
    def spent(self) -> PrivacyCost:
        """The composed total spent so far, stated in the budget's kind."""
        return self._spent

    @property
    def remaining(self) -> PrivacyCost:
        """Budget minus spent, per component, floored at zero."""
        budget, spent = _components(self._budget), _components(self._spent)
        left = {key: max(0.0, budget[key] - spent[key]) for key in budget}
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

    def _fits(self, converted: PrivacyCost) -> bool:
        """Whether spent + converted stays within the budget, component by component."""
        budget, spent = _components(self._budget), _components(self._spent)
        extra = _components(converted)
        return all(spent[key] + extra[key] <= budget[key] * (1.0 + REL_TOL) for key in budget)

    def can_spend(self, cost: PrivacyCost) -> bool:
        """Return whether ``spend(cost)`` would be accepted (changes nothing).

        Raises ParameterError for a cost that cannot be counted in the
        budget's kind, as ``spend`` would.
        """
        return self._fits(self._converted(cost))

    def spend(self, cost: PrivacyCost, label: str = "") -> PrivacyCost:
        """Record ``cost`` under ``label`` if it fits, and return it in the budget's kind.

        Raises BudgetExceededError, leaving the filter unchanged, if the running
        total (ρ and δ separately for zCDP; ε and δ for approximate DP; ε for
        pure DP) would exceed the budget by more than a relative 1e-9.
        """
        if not isinstance(label, str):
            raise ParameterError(f"label must be a str, got {type(label).__name__}")
        converted = self._converted(cost)
        if not self._fits(converted):
            counted = "" if converted is cost else f" (counted as {converted.describe()})"
            name = f" {label!r}" if label else ""
            raise BudgetExceededError(
                f"release{name} requests {cost.describe()}{counted}, but the remaining "
                f"budget is {self.remaining.describe()}; lower this release's privacy "
                "parameters or raise the job's budget"
            )
        self._spent = self._spent + converted
        self._ledger.append((label, cost))
        return converted

    def __repr__(self) -> str:
        return (
            f"PrivacyFilter(budget={self._budget!r}, spent={self._spent!r}, "
            f"releases={len(self._ledger)})"
        )
