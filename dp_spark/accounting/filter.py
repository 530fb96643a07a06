"""A privacy filter: a budget that refuses any release that would overspend it.

The filter lets a job choose each release's cost adaptively (after seeing earlier outputs) while the
total guarantee stays the budget:

- zCDP budget ρ (with δ): ρ and δ add separately; while Σρᵢ <= ρ and Σδᵢ <= δ the whole interaction is
  δ-approximate ρ-zCDP (the fully adaptive zCDP filter of Whitehouse, Ramdas, Rogers and Wu,
  "Fully-Adaptive Composition in Differential Privacy", ICML 2023);
- (ε, δ) budget: ε and δ add (basic composition remains valid as a filter: Rogers, Roth, Ullman and
  Vadhan, "Privacy Odometers and Filters", NeurIPS 2016); pure ε budget: ε adds (same source).

Costs are checked before any data is read; a refusal changes nothing and quotes only parameters.

The rule: amounts count as the decimals written (:func:`dp_spark.accounting.exact.written`: 0.1 is
1/10), summed exactly; a spend is accepted only if the sum stays within the exact budget, no slack: 0.9
then 0.1 fit a budget of 1, and nothing more does. Sound because no mechanism runs above the decimal
it is charged (:mod:`dp_spark.accounting.exact`); :attr:`remaining` rounds down (spending it always
fits), :attr:`spent` up. The ledger (:mod:`dp_spark.ledger`) counts through the same :func:`amounts`
and :func:`fits`, so both accept and refuse alike.

``as_written=False``: a mechanism's own filter over the binary floats it computed (the Private Count
Release loop, the continual trees) counts every amount, budget included, as its exact binary value.
"""

from __future__ import annotations

from fractions import Fraction

from dp_spark.accounting.composition import check_cost, convert_cost
from dp_spark.accounting.costs import ApproxDP, PrivacyCost, PureDP, ZCDP, cost_from_dict
from dp_spark.accounting.exact import exact, float_down, float_up, left_down, written, written_up
from dp_spark.errors import BudgetExceededError, ParameterError

__all__ = ["PrivacyFilter", "amounts", "fits", "stated"]


def _components(cost: PrivacyCost) -> dict[str, float]:
    """The numeric fields of a cost: epsilon / delta / rho."""
    return {key: value for key, value in cost.to_dict().items() if key != "kind"}


def amounts(cost: PrivacyCost, kind: str, as_written: bool = True) -> dict[str, Fraction]:
    """The exact amounts ``cost`` spends from a budget of ``kind``, each float as its written decimal
    (``as_written``) or binary value; pure ε counts as ρ = ε²/2 in a zCDP budget (Bun–Steinke 2016,
    Prop. 1.4), as (ε, 0) in an (ε, δ) one. The caller checks the conversion (``convert_cost``)."""
    value = written if as_written else exact
    if isinstance(cost, PureDP) and kind == ZCDP.kind:
        return {"rho": value(cost.epsilon) ** 2 / 2, "delta": Fraction(0)}
    if isinstance(cost, PureDP) and kind == ApproxDP.kind:
        return {"epsilon": value(cost.epsilon), "delta": Fraction(0)}
    return {key: value(v) for key, v in _components(cost).items()}


def fits(limit: dict[str, Fraction], spent: dict[str, Fraction], extra: dict[str, Fraction]) -> bool:
    """Whether spent + extra stays within limit, component by component, exactly."""
    return all(spent.get(key, 0) + extra[key] <= limit[key] for key in limit)


def stated(kind: str, values: dict[str, Fraction], up: bool, as_written: bool = True) -> PrivacyCost:
    """A cost of ``kind`` stating exact ``values`` rounded to the safe side: ``up`` (a total spent) or
    down (what is left, floored at 0), as decimals (``as_written``: ``written_up`` / ``left_down``) or
    as binary values."""
    if up:
        rounding = written_up if as_written else float_up
        floats = {k: rounding(v) for k, v in values.items()}
    else:
        rounding = left_down if as_written else float_down
        floats = {k: rounding(max(Fraction(0), v)) for k, v in values.items()}
    return cost_from_dict({"kind": kind, **floats})


class PrivacyFilter:
    """Spending against a fixed budget (PureDP, ApproxDP or ZCDP), compared exactly (module docstring).

    ``spend`` converts a cost to the budget's kind when valid (``convert_cost``); other mixes raise
    ParameterError.
    """

    def __init__(self, budget: PrivacyCost, *, as_written: bool = True) -> None:
        self._budget = check_cost(budget, "budget")
        self._as_written = bool(as_written)
        self._limit = amounts(self._budget, self._budget.kind, self._as_written)
        self._spent = {key: Fraction(0) for key in self._limit}
        self._ledger: list[tuple[str, PrivacyCost]] = []

    @property
    def budget(self) -> PrivacyCost:
        """The total guarantee this filter enforces."""
        return self._budget

    @property
    def spent(self) -> PrivacyCost:
        """The total spent so far in the budget's kind (exact sum, rounded up)."""
        return stated(self._budget.kind, self._spent, up=True, as_written=self._as_written)

    @property
    def remaining(self) -> PrivacyCost:
        """Budget minus spent per component, exact, rounded down (:func:`stated`), floored at 0: spending
        it always fits, and so does its binary value (0.1 left states 0.09999999999999999)."""
        left = {k: self._limit[k] - self._spent[k] for k in self._limit}
        return stated(self._budget.kind, left, up=False, as_written=self._as_written)

    @property
    def ledger(self) -> list[tuple[str, PrivacyCost]]:
        """A copy of the accepted spends, as (label, cost as given), in order."""
        return list(self._ledger)

    def _converted(self, cost: PrivacyCost) -> PrivacyCost:
        check_cost(cost)
        try:
            return convert_cost(cost, self._budget.kind)
        except ParameterError as exc:
            raise ParameterError(
                f"cannot spend a {cost.kind} cost from a {self._budget.kind} budget: {exc}"
            ) from None

    def _amounts(self, cost: PrivacyCost) -> dict[str, Fraction]:
        return amounts(cost, self._budget.kind, self._as_written)

    def can_spend(self, cost: PrivacyCost) -> bool:
        """Whether ``spend(cost)`` would be accepted (changes nothing); ParameterError as ``spend``."""
        self._converted(cost)
        return fits(self._limit, self._spent, self._amounts(cost))

    def spend(self, cost: PrivacyCost, label: str = "") -> PrivacyCost:
        """Record ``cost`` under ``label`` and return it in the budget's kind; BudgetExceededError,
        leaving the filter unchanged, if any component of the running total would exceed the budget."""
        if not isinstance(label, str):
            raise ParameterError(f"label must be a str, got {type(label).__name__}")
        converted = self._converted(cost)
        extra = self._amounts(cost)
        if not fits(self._limit, self._spent, extra):
            counted = "" if converted is cost else f" (counted as {converted.describe()})"
            name = f" {label!r}" if label else ""
            raise BudgetExceededError(
                f"release{name} requests {cost.describe()}{counted}, but the remaining "
                f"budget is {self.remaining.describe()} (amounts are compared exactly, as the "
                f"{'decimals written' if self._as_written else 'binary values of the floats'}: the "
                "filter's remaining budget always fits); lower this release's privacy parameters or "
                "raise the job's budget"
            )
        self._spent = {key: self._spent[key] + extra[key] for key in self._spent}
        self._ledger.append((label, cost))
        return converted

    def __repr__(self) -> str:
        return (
            f"PrivacyFilter(budget={self._budget!r}, spent={self.spent!r}, "
            f"releases={len(self._ledger)})"
        )
