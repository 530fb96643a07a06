"""``dp-spark top-k``: the k items with the most distinct persons, in order."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, Option, RUN_OPTIONS, items_writer

NAME = "top-k"
HELP = "differentially private top-k items by number of distinct persons"

_MECHANISMS = ("auto", "joint", "pnf-joint", "pnf-peel", "cdp-peel", "unknown-domain")

OPTIONS = INPUT_OPTIONS + (
    Option("k", int, 10, "number of items to release, in rank order"),
    Option("epsilon", float, 1.0, "privacy parameter ε spent by the release"),
    Option("delta", float, 0.0, "δ for unknown-domain (required there, e.g. 1e-6) and for "
           "cdp-peel's (ε, δ) accounting; the other mechanisms are pure ε-DP"),
    Option("method", str, None, "selection mechanism: auto (default) = unknown-domain without "
           "--domain; with one, joint when delta = 0, else the one (joint or cdp-peel) with the "
           "smallest predicted error, 5%% of epsilon spent on that choice", _MECHANISMS),
    Option("mechanism", str, "auto", "old name of --method (kept as an alias)", _MECHANISMS),
    Option("domain", str, None, "public list of possible items: a text file with one item per "
           "line, or a CSV/Parquet file with the item column (needed by joint, pnf-joint, "
           "pnf-peel, cdp-peel)"),
    Option("kbar", int, None, "unknown-domain: how many of the largest counts are collected "
           "(default max(1000, 2k))"),
    Option("persons", int, None, "public number (or upper bound) of persons, only used to warn "
           "when the error bound is large next to it"),
    Option("items_output", str, None, "also write the released items here as Parquet (atomically)"),
    Option("budget_epsilon", float, None, "total ε budget; the run is refused before reading "
           "data if the release would exceed it"),
    Option("budget_delta", float, None, "total δ budget (with --budget-epsilon; default 0)"),
) + RUN_OPTIONS


def validate(opts) -> None:
    """Check parameters before Spark starts, with the release's own checks."""
    from dp_spark import checks
    from dp_spark.releases.top_k import validate as validate_release

    from dp_spark.releases.top_k import method_of

    validate_release(opts["k"], opts["epsilon"], opts["delta"],
                     method_of(opts["method"], opts["mechanism"]),
                     opts["domain"] is not None, opts["kbar"], opts["seed"])
    if opts["persons"] is not None:
        checks.whole(opts["persons"], "persons")
    if opts["budget_epsilon"] is not None:
        checks.positive(opts["budget_epsilon"], "budget_epsilon")
    if opts["budget_delta"] is not None:
        if opts["budget_epsilon"] is None:
            from dp_spark.errors import ParameterError

            raise ParameterError("--budget-delta needs --budget-epsilon.")
        checks.open_unit(opts["budget_delta"], "budget_delta")


def cost(opts):
    """What the release will spend (checked against the budget before reading)."""
    from dp_spark.releases.top_k import guarantee_of, method_of, resolve_mechanism

    mechanism = resolve_mechanism(method_of(opts["method"], opts["mechanism"]), opts["domain"] is not None)
    return guarantee_of(mechanism, opts["epsilon"], opts["delta"])


def budget(opts):
    """The run's privacy filter, if a budget was given."""
    from dp_spark.accounting import ApproxDP, PrivacyFilter, PureDP

    if opts["budget_epsilon"] is None:
        return None
    if opts["budget_delta"]:
        return PrivacyFilter(ApproxDP(opts["budget_epsilon"], opts["budget_delta"]))
    return PrivacyFilter(PureDP(opts["budget_epsilon"]))


def run(spark, df, opts, budget_filter):
    from dp_spark.releases.top_k import top_k
    from dp_spark.stages.item_counts import read_domain

    domain = read_domain(spark, opts["domain"], opts["item_col"]) if opts["domain"] else None
    return top_k(
        df,
        k=opts["k"],
        epsilon=opts["epsilon"],
        delta=opts["delta"],
        mechanism=opts["mechanism"],
        method=opts["method"],
        domain=domain,
        person_col=opts["person_col"],
        item_col=opts["item_col"],
        seed=opts["seed"],
        kbar=opts["kbar"],
        persons=opts["persons"],
        budget=budget_filter,
    )


ARTIFACT_WRITERS = {"items": items_writer("items_df", "items", single_file=True)}
