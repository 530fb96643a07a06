"""The ledger's rules: how a charge is counted in a budget's kind, and the states of a keyed run. Shared by
:mod:`dp_spark.ledger.ledger` and :mod:`dp_spark.ledger.budget`, so that neither imports the other.
"""

from __future__ import annotations

from dp_spark.accounting import ApproxDP, PureDP, ZCDP, convert_cost
from dp_spark.accounting.composition import check_cost
from dp_spark.errors import ParameterError

RULES = {
    PureDP.kind: "basic composition: ε adds (pure ε-DP filter)",
    ApproxDP.kind: "basic composition: ε and δ add; a pure ε charge counts as (ε, 0)",
    ZCDP.kind: "zCDP composition: ρ and δ add; a pure ε charge counts as ρ = ε²/2 "
               "(Bun–Steinke 2016, Prop. 1.4)",
}

#: The states of a keyed run (:mod:`dp_spark.ledger.ledger`): 'charged' (nothing drawn under the charge yet),
#: 'drawn' (about to draw or drawn: a retry needs a new run key), 'released' (a retry replays its record).
CHARGED, DRAWN, RELEASED = "charged", "drawn", "released"


class RecordedMeanwhile(ParameterError):
    """Raised when a keyed run is about to draw (``Ledger.mark_drawn``) and another run under its key
    recorded its release meanwhile: this run must not draw, and returns that release (``run``)."""

    def __init__(self, run) -> None:
        super().__init__(f"{run.describe()}; another run under the key recorded its release while this one "
                         "ran: this run drew nothing and returns that release.")
        self.run = run


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
