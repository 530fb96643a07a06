"""A persisted privacy-budget ledger: named budgets and every charge against them.

A budget is a total guarantee (``PureDP``, ``ApproxDP`` or ``ZCDP``). A charge
is recorded, under a lock on its budget, before the release reads any data,
and only if the composed total still fits; it is never refunded (a crashed
run keeps its charge). Composition is the project's basic composition, stated
in the budget's kind (``dp_spark.accounting.convert_cost``): ε adds for a
pure budget; ε and δ add for an (ε, δ) budget (pure ε counted as (ε, 0));
ρ and δ add for a zCDP budget (pure ε counted as ρ = ε²/2, Bun–Steinke 2016,
Proposition 1.4). Summing per component is valid for adaptively chosen
charges (a privacy filter: Rogers–Roth–Ullman–Vadhan 2016 for (ε, δ);
Whitehouse–Ramdas–Rogers–Wu 2023 for zCDP). (ε, δ) charges cannot enter a
zCDP budget and zCDP charges cannot enter an (ε, δ) budget without a chosen
δ', so those are refused.

Run keys: a charge made with a run key (e.g. an Airflow run id) is the
charge of that run; a retry with the same key reuses it instead of spending
again. A "once" key (a continual stream's checkpoint + sink) may be charged
only once: a second charge means the stream is being re-created and would
publish its steps again with new noise, so it is refused.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dp_spark.accounting import ApproxDP, PureDP, ZCDP, compose, convert_cost
from dp_spark.accounting.composition import check_cost
from dp_spark.accounting.exact import exact
from dp_spark.errors import BudgetExceededError, InputError, ParameterError
from dp_spark.ledger.store import open_store

if TYPE_CHECKING:  # the budget module imports this one
    from dp_spark.ledger.budget import LedgerBudget

RULES = {
    PureDP.kind: "basic composition: ε adds (pure ε-DP filter)",
    ApproxDP.kind: "basic composition: ε and δ add; a pure ε charge counts as (ε, 0)",
    ZCDP.kind: "zCDP composition: ρ and δ add; a pure ε charge counts as ρ = ε²/2 "
               "(Bun–Steinke 2016, Prop. 1.4)",
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,99}$")


def cost_from_dict(data: dict) -> "PureDP | ApproxDP | ZCDP":
    kind = data["kind"]
    if kind == PureDP.kind:
        return PureDP(data["epsilon"])
    if kind == ApproxDP.kind:
        return ApproxDP(data["epsilon"], data["delta"])
    return ZCDP(data["rho"], data.get("delta", 0.0))


def _fields(cost) -> dict[str, float]:
    return {k: v for k, v in cost.to_dict().items() if k != "kind"}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ParameterError(
            f"budget name {name!r} must be 1-100 letters, digits or _.:@/- (starting with a letter or digit)."
        )
    return name


@dataclass(frozen=True)
class BudgetState:
    """A budget's total, composed spent, what is left, and the rule used."""

    name: str
    total: object
    spent: object
    charges: int
    #: The exact sum (fractions of the stored floats) of every counted charge:
    #: budgets are compared exactly, with no slack, as the privacy filter does.
    exact_spent: dict | None = None

    @property
    def left(self):
        total, spent = _fields(self.total), _fields(self.spent)
        return cost_from_dict({"kind": self.total.kind, **{k: max(0.0, total[k] - spent[k]) for k in total}})

    @property
    def rule(self) -> str:
        return RULES[self.total.kind]

    def fits(self, counted) -> bool:
        total, extra = _fields(self.total), _fields(counted)
        spent = self.exact_spent if self.exact_spent is not None else {
            k: exact(v) for k, v in _fields(self.spent).items()}
        return all(spent.get(k, 0) + exact(extra[k]) <= exact(total[k]) for k in total)


def counted_as(cost, kind: str, budget: str):
    """``cost`` restated in the budget's kind, or a ParameterError saying why not."""
    check_cost(cost)
    try:
        return convert_cost(cost, kind)
    except ParameterError:
        raise ParameterError(
            f"a {cost.describe()} charge cannot be counted in the {kind} budget {budget!r} "
            f"({RULES[kind]}); use a budget of a kind that holds it (a zCDP budget holds ε-DP and "
            "zCDP releases, an (ε, δ) budget holds ε-DP and (ε, δ) releases)."
        ) from None


class Ledger:
    """Named privacy budgets and their charges, in an SQLite file or PostgreSQL."""

    def __init__(self, location, create: bool = False) -> None:
        self.location = str(location)
        self._store = open_store(location, create)
        self.description = self._store.description

    def close(self) -> None:
        self._store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ budgets

    def create_budget(self, name: str, total) -> None:
        """Create budget ``name`` with the total guarantee ``total``; refused if it exists."""
        check_name(name)
        check_cost(total, "budget")
        if all(v == 0 for k, v in _fields(total).items() if k != "delta"):
            raise ParameterError("a budget needs ε > 0 or ρ > 0.")
        with self._store.transaction() as cur:
            if cur.execute("SELECT name FROM dp_budgets WHERE name = ?", (name,)):
                raise ParameterError(f"budget {name!r} already exists in the ledger {self.description!r}.")
            f = total.to_dict()
            cur.execute(
                "INSERT INTO dp_budgets (name, kind, epsilon, delta, rho, created) VALUES (?, ?, ?, ?, ?, ?)",
                (name, total.kind, f.get("epsilon"), f.get("delta"), f.get("rho"), _now()),
            )

    def names(self) -> list[str]:
        with self._store.transaction() as cur:
            return [r[0] for r in cur.execute("SELECT name FROM dp_budgets ORDER BY name")]

    def state(self, name: str) -> BudgetState:
        with self._store.transaction() as cur:
            return self._state(cur, name)

    def _state(self, cur, name: str) -> BudgetState:
        rows = cur.execute("SELECT kind, epsilon, delta, rho FROM dp_budgets WHERE name = ?", (name,))
        if not rows:
            known = ", ".join(r[0] for r in cur.execute("SELECT name FROM dp_budgets ORDER BY name")) or "none"
            raise ParameterError(
                f"no budget {name!r} in the ledger {self.description!r} (budgets: {known}); "
                "create it with 'dp-spark ledger create'."
            )
        kind, eps, delta, rho = rows[0]
        total = cost_from_dict({"kind": kind, "epsilon": eps, "delta": delta, "rho": rho})
        counted = [cost_from_dict(json.loads(r[0])) for r in
                   cur.execute("SELECT counted FROM dp_charges WHERE budget = ?", (name,))]
        spent = convert_cost(compose(counted), kind) if counted else convert_cost(PureDP(0.0), kind)
        exact_spent = {k: sum((exact(_fields(c)[k]) for c in counted), exact(0.0)) for k in _fields(total)}
        return BudgetState(name, total, spent, len(counted), exact_spent)

    def history(self, name: str | None = None) -> list[dict]:
        """Every charge (optionally of one budget), oldest first."""
        query = ("SELECT budget, seq, release, cost, counted, rule, run_key, parameters, created "
                 "FROM dp_charges")
        params: tuple = ()
        if name is not None:
            query, params = query + " WHERE budget = ?", (name,)
        with self._store.transaction() as cur:
            rows = cur.execute(query + " ORDER BY created, budget, seq", params)
        keys = ("budget", "seq", "release", "cost", "counted", "rule", "run_key", "parameters", "time")
        out = []
        for row in rows:
            entry = dict(zip(keys, row))
            for key in ("cost", "counted", "parameters"):
                entry[key] = json.loads(entry[key])
            out.append(entry)
        return out

    # ------------------------------------------------------------ charging

    def charge(self, name: str, cost, release: str, *, run_key: str | None = None, key_seq: int = 0,
               once: bool = False, parameters: dict | None = None) -> tuple[object, bool]:
        """Record ``cost`` against budget ``name`` if it fits; return (counted cost, reused).

        One transaction with the budget locked: a charge of the same run key
        and sequence number is reused (or, for a ``once`` key, refused);
        otherwise the composed total plus the charge must fit the budget, or
        BudgetExceededError is raised and nothing is recorded."""
        with self._store.transaction(lock_budget=name) as cur:
            state = self._state(cur, name)
            counted = counted_as(cost, state.total.kind, name)
            if run_key is not None:
                earlier = cur.execute(
                    "SELECT cost, release FROM dp_charges WHERE budget = ? AND run_key = ? AND key_seq = ?",
                    (name, run_key, key_seq),
                )
                if earlier:
                    _check_reuse(earlier[0], cost, release, run_key, once)
                    return counted, True
            if not state.fits(counted):
                raise BudgetExceededError(
                    f"{release} would spend {cost.describe()} from the ledger budget {name!r}, which has "
                    f"only {state.left.describe()} left ({state.rule}); lower the release's privacy "
                    "parameters or use another budget. Nothing was charged and no data was read."
                )
            seq = cur.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM dp_charges WHERE budget = ?", (name,))[0][0]
            rule = state.rule if counted == cost else f"{state.rule}; counted as {counted.describe()}"
            cur.execute(
                "INSERT INTO dp_charges (budget, seq, release, cost, counted, rule, run_key, key_seq, "
                "parameters, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, int(seq), release, json.dumps(cost.to_dict()), json.dumps(counted.to_dict()), rule,
                 run_key, key_seq if run_key is not None else None,
                 json.dumps(parameters or {}, default=str, sort_keys=True), _now()),
            )
        return counted, False

    def budget(self, name: str, run_key: str | None = None, *, once: bool = False,
               parameters: dict | None = None) -> "LedgerBudget":
        """A budget object for the ``budget=`` argument of every release function."""
        from dp_spark.ledger.budget import LedgerBudget

        self.state(check_name(name))  # refuses an unknown budget now
        return LedgerBudget(self, name, run_key=run_key, once=once, parameters=parameters)


def _check_reuse(row, cost, release: str, run_key: str, once: bool) -> None:
    earlier_cost, earlier_release = cost_from_dict(json.loads(row[0])), row[1]
    if once:
        raise BudgetExceededError(
            f"the ledger already holds the charge of {run_key!r} ({earlier_release}, "
            f"{earlier_cost.describe()}): that stream was started before and its released steps would "
            "be published again with new noise. Restore its checkpoint to resume, or use a new "
            "checkpoint and sink for a new stream."
        )
    if earlier_cost != cost:
        raise ParameterError(
            f"run key {run_key!r} was already charged {earlier_cost.describe()} for {earlier_release}; "
            "a retry must use the same privacy parameters, and a new run needs a new run key."
        )


def open_ledger(location, create: bool = False) -> Ledger:
    """Open the ledger at ``location`` (a file path, ``sqlite:///path`` or a
    ``postgresql://`` URL). A missing file is created only with ``create``."""
    if location is None or str(location).strip() == "":
        raise InputError("give the ledger's path or postgresql:// URL.")
    return Ledger(location, create)
