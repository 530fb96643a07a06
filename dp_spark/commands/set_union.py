"""``dp-spark set-union``: which items may be published at all (DP Set Union)."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, Option, RUN_OPTIONS, items_writer

NAME = "set-union"
HELP = "differentially private set union: release as many items as possible (partition selection)"

POLICY_CHOICES = ("count", "weighted-laplace", "weighted-gaussian", "policy-laplace", "policy-gaussian")

OPTIONS = INPUT_OPTIONS + (
    Option("epsilon", float, 1.0, "privacy parameter ε spent by the release"),
    Option("delta", float, 1e-6, "privacy parameter δ spent by the release (0 < δ < 1)"),
    Option("max_items", int, 100, "Δ0: most distinct items one person contributes (at most 100,000)"),
    Option("policy", str, "policy-gaussian", "histogram update policy", POLICY_CHOICES),
    Option("alpha", float, 2.0, "policy cutoff Γ = ρ + alpha·(noise scale) (0 to 1000)"),
    Option("shards", int, None, "policy-*: number of person shards (default 8, "
           "independent of the cluster; 1 = the paper's single pass; at most 4,096)"),
    Option("shard_cutoff", str, "scaled", "policy-*: cutoff in each shard, Γ/√shards "
           "('scaled') or Γ ('full'); privacy is the same", ("scaled", "full")),
    Option("items_output", str, None, "write the released items here as Parquet (atomically)"),
    Option("budget_epsilon", float, None, "total ε budget; with --budget-delta the run is "
           "refused before reading data if the release would exceed it"),
    Option("budget_delta", float, None, "total δ budget (with --budget-epsilon)"),
) + RUN_OPTIONS


def validate(opts) -> None:
    """Check parameters before Spark starts, with the release's own checks
    (including the public limits on max_items, shards and alpha)."""
    from dp_spark.errors import ParameterError
    from dp_spark import checks
    from dp_spark.mechanisms.set_union import plan_set_union
    from dp_spark.stages.set_union import check_shards

    plan_set_union(opts["epsilon"], opts["delta"], opts["max_items"], opts["policy"], opts["alpha"])
    checks.seed(opts["seed"])
    check_shards(opts["shards"])
    given = [opts["budget_epsilon"] is not None, opts["budget_delta"] is not None]
    if any(given) and not all(given):
        raise ParameterError("give both --budget-epsilon and --budget-delta (an (ε, δ) budget), or neither.")
    if all(given):
        checks.positive(opts["budget_epsilon"], "budget_epsilon")
        checks.open_unit(opts["budget_delta"], "budget_delta")


def cost(opts):
    """What the release will spend (checked against the budget before reading)."""
    from dp_spark.accounting import ApproxDP

    return ApproxDP(opts["epsilon"], opts["delta"])


def budget(opts):
    """The run's privacy filter, if a budget was given."""
    from dp_spark.accounting import ApproxDP, PrivacyFilter

    if opts["budget_epsilon"] is None:
        return None
    return PrivacyFilter(ApproxDP(opts["budget_epsilon"], opts["budget_delta"]))


def run(spark, df, opts, budget_filter):
    from dp_spark.releases.set_union import set_union

    return set_union(
        df,
        epsilon=opts["epsilon"],
        delta=opts["delta"],
        max_items=opts["max_items"],
        policy=opts["policy"],
        alpha=opts["alpha"],
        shards=opts["shards"],
        shard_cutoff=opts["shard_cutoff"],
        person_col=opts["person_col"],
        item_col=opts["item_col"],
        seed=opts["seed"],
        budget=budget_filter,
    )


ARTIFACT_WRITERS = {"items": items_writer("items", "items")}
