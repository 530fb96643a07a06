"""A ledger budget usable wherever a release takes ``budget=`` (a PrivacyFilter).

It has the methods the releases call (``spend(cost, label)``, ``can_spend``)
and the filter's ``budget``, ``spent`` and ``remaining``, read from the
ledger, so the same budget is shared by every process using the ledger.
"""

from __future__ import annotations

from dp_spark.errors import ParameterError


class LedgerBudget:
    """Spend from a named budget of a persisted ledger.

    ``run_key``: charges of this object are the run's charges, numbered in
    order; a retry with the same key reuses them (same costs) instead of
    spending again. ``once``: the key may be charged only once (a continual
    stream, keyed by its checkpoint and sink)."""

    def __init__(self, ledger, name: str, run_key: str | None = None, *, once: bool = False,
                 parameters: dict | None = None) -> None:
        if run_key is not None and (not isinstance(run_key, str) or not run_key.strip()):
            raise ParameterError(f"run_key must be a non-empty string; got {run_key!r}.")
        self.ledger, self.name, self.run_key, self.once = ledger, name, run_key, once
        self.parameters = dict(parameters or {})
        self._next_seq = 0
        self.reused = False

    # ---------------------------------------------------------------- state

    @property
    def budget(self):
        """The budget's total guarantee."""
        return self.ledger.state(self.name).total

    @property
    def spent(self):
        """Everything charged to the budget so far (by every run), composed."""
        return self.ledger.state(self.name).spent

    @property
    def remaining(self):
        return self.ledger.state(self.name).left

    # ---------------------------------------------------------------- spending

    def can_spend(self, cost) -> bool:
        """Whether ``spend(cost)`` would be accepted now (changes nothing). A
        cost already charged under this run key counts as accepted."""
        from dp_spark.ledger.ledger import counted_as

        state = self.ledger.state(self.name)
        counted = counted_as(cost, state.total.kind, self.name)
        if self.run_key is not None and self._has_key_charge():
            return True  # a retry (or, for a stream, a resume that spends nothing)
        return state.fits(counted)

    def _has_key_charge(self) -> bool:
        return any(c["run_key"] == self.run_key for c in self.ledger.history(self.name))

    def spend(self, cost, label: str = ""):
        """Charge ``cost`` under ``label`` if the budget holds it; return it as counted.

        Raises BudgetExceededError (nothing recorded) when it would not fit."""
        if not isinstance(label, str):
            raise ParameterError(f"label must be a str, got {type(label).__name__}")
        counted, reused = self.ledger.charge(
            self.name, cost, label or "release", run_key=self.run_key, key_seq=self._next_seq,
            once=self.once, parameters=self.parameters,
        )
        self._next_seq += 1
        self.reused = self.reused or reused
        return counted

    def __repr__(self) -> str:
        return f"LedgerBudget({self.ledger.description!r}, {self.name!r}, run_key={self.run_key!r})"


def budget_or_ledger(budget, ledger):
    """The spending object of a release called with ``budget=`` (a
    PrivacyFilter or a LedgerBudget) or ``ledger=`` (a LedgerBudget, from
    ``open_ledger(path).budget(name, run_key=...)``); not both."""
    if ledger is None:
        return budget
    if budget is not None:
        raise ParameterError("give budget= or ledger=, not both (a ledger budget is itself the budget).")
    if not isinstance(ledger, LedgerBudget):
        raise ParameterError(
            "ledger= takes a ledger budget: dp_spark.ledger.open_ledger(PATH).budget(NAME, run_key=...); "
            f"got {type(ledger).__name__}."
        )
    return ledger
