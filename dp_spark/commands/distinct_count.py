"""``dp-spark distinct-count``: person-level DP count of distinct items."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, RUN_OPTIONS, Option

NAME = "distinct-count"
HELP = "differentially private count of distinct items, with a lower bound"

OPTIONS = INPUT_OPTIONS + (
    Option("epsilon", float, 1.0, "privacy parameter ε spent by the release"),
    Option("beta", float, 0.05, "the lower bound holds with probability 1 - beta"),
    Option("max_bound", int, 100, "largest per-person bound l considered (1..max-bound; at most 1,000,000)"),
    Option("method", str, "greedy", "how bounded counts are computed",
           ("greedy", "matching", "sampling")),
    Option("shards", int, None, "greedy: number of person shards (default: one per 50,000 "
           "persons, from a noisy person count that spends ε/100; at most 10,000)"),
    Option("edge_limit", int, 20_000_000, "matching: most (person, item) pairs collected to the driver "
           "(at most 200,000,000); a noisy pair count (ε/100) decides whether matching fits, "
           "else the greedy is used"),
    Option("budget_epsilon", float, None, "total ε budget; the run is refused before reading "
           "data if the release would exceed it"),
) + RUN_OPTIONS


def validate(opts) -> None:
    """Check parameters before Spark starts, with the release's own checks."""
    from dp_spark import checks
    from dp_spark.stages.distinct import validate_stage_parameters

    checks.positive(opts["epsilon"], "epsilon")
    checks.open_unit(opts["beta"], "beta")
    checks.whole(opts["max_bound"], "max_bound")
    checks.seed(opts["seed"])
    validate_stage_parameters(opts["max_bound"], opts["method"], opts["shards"], opts["edge_limit"])
    if opts["budget_epsilon"] is not None:
        checks.positive(opts["budget_epsilon"], "budget_epsilon")


def cost(opts):
    """What the release will spend (checked against the budget before reading)."""
    from dp_spark.accounting import PureDP

    return PureDP(opts["epsilon"])


def budget(opts):
    """The run's privacy filter, if a budget was given."""
    from dp_spark.accounting import PrivacyFilter, PureDP

    if opts["budget_epsilon"] is None:
        return None
    return PrivacyFilter(PureDP(opts["budget_epsilon"]))


def run(spark, df, opts, budget_filter):
    from dp_spark.releases.distinct_count import distinct_count

    return distinct_count(
        df,
        person_col=opts["person_col"],
        item_col=opts["item_col"],
        epsilon=opts["epsilon"],
        beta=opts["beta"],
        max_bound=opts["max_bound"],
        method=opts["method"],
        seed=opts["seed"],
        shards=opts["shards"],
        edge_limit=opts["edge_limit"],
        budget=budget_filter,
    )
