"""``dp-spark ledger create|show|history``: manage a persisted budget ledger."""

from __future__ import annotations

import json

from dp_spark.accounting import ApproxDP, PureDP, ZCDP
from dp_spark.errors import ParameterError
from dp_spark.ledger import open_ledger

HELP = "create and inspect a persisted privacy-budget ledger (budgets shared across runs)"


def add_parser(sub) -> None:
    p = sub.add_parser("ledger", help=HELP, description=HELP)
    actions = p.add_subparsers(dest="ledger_action", metavar="ACTION", parser_class=type(p))
    actions.required = True
    create = actions.add_parser("create", help="create a named budget",
                                description="Create a named budget: --epsilon (pure ε-DP), --epsilon and "
                                "--delta ((ε, δ)-DP), or --rho [--delta] (ρ-zCDP).")
    create.add_argument("ledger", metavar="LEDGER", help="ledger file (created if missing) or postgresql:// URL")
    create.add_argument("budget", metavar="BUDGET", help="name of the new budget")
    create.add_argument("--epsilon", type=float, help="total ε")
    create.add_argument("--delta", type=float, help="total δ (with --epsilon or --rho)")
    create.add_argument("--rho", type=float, help="total ρ (zCDP)")
    for action in ("show", "history"):
        q = actions.add_parser(action, help=f"{action} the budgets" if action == "show"
                               else "every charge, with its release, parameters and time")
        q.add_argument("ledger", metavar="LEDGER")
        q.add_argument("--budget", help="only this budget")
        q.add_argument("--json", action="store_true", help="print JSON")


def total_of(epsilon, delta, rho):
    """The budget's guarantee from the flags."""
    if (epsilon is None) == (rho is None):
        raise ParameterError("give either --epsilon (with optional --delta) or --rho (with optional --delta).")
    for value, name in ((epsilon, "epsilon"), (rho, "rho")):
        if value is not None and not (value > 0 and value != float("inf")):
            raise ParameterError(f"--{name} must be a finite number > 0; got {value!r}.")
    if delta is not None and not 0 <= delta < 1:
        raise ParameterError(f"--delta must be in [0, 1); got {delta!r}.")
    if rho is not None:
        return ZCDP(rho, delta or 0.0)
    return ApproxDP(epsilon, delta) if delta else PureDP(epsilon)


def run(args) -> int:
    if args.ledger_action == "create":
        total = total_of(args.epsilon, args.delta, args.rho)
        with open_ledger(args.ledger, create=True) as ledger:
            ledger.create_budget(args.budget, total)
            print(f"budget {args.budget!r} created in {ledger.description}: {total.describe()}")
        return 0
    with open_ledger(args.ledger, read_only=True) as ledger:  # show and history never write
        names = [args.budget] if args.budget else ledger.names()
        if args.ledger_action == "show":
            states = [ledger.state(n) for n in names]
            rows = [{"budget": s.name, "total": s.total.to_dict(), "spent": s.spent.to_dict(),
                     "left": s.left.to_dict(), "charges": s.charges, "rule": s.rule} for s in states]
            if args.json:
                print(json.dumps(rows, indent=2))
            for s in [] if args.json else states:
                print(f"{s.name}: total {s.total.describe()}; spent {_short(s.spent)}; left {_short(s.left)}; "
                      f"{s.charges} charge(s); {s.rule}")
            return 0
        if args.budget:
            ledger.state(args.budget)  # refuses an unknown budget
        entries = ledger.history(args.budget)
        if args.json:
            print(json.dumps(entries, indent=2, ensure_ascii=False))
            return 0
        for e in entries:
            key = f" run key {e['run_key']}" if e["run_key"] else ""
            if e.get("state"):
                key += f" ({_STATES.get(e['state'], e['state'])})"
            params = ", ".join(f"{k}={v}" for k, v in e["parameters"].items())
            print(f"{e['time']} {e['budget']} #{e['seq']} {e['release']}{key}: {_short_dict(e['cost'])} "
                  f"[{e['rule']}] ({params})")
        return 0


#: How ``ledger history`` shows a keyed run's state (the JSON keeps the state's name).
_STATES = {"drawn": "drawn, not released: a retry needs a new run key"}


def _short(cost) -> str:
    return _short_dict(cost.to_dict())


def _short_dict(data: dict) -> str:
    names = {"epsilon": "ε", "delta": "δ", "rho": "ρ"}
    return ", ".join(f"{names[k]} = {v:g}" for k, v in data.items() if k != "kind")
