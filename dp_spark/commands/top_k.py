"""``dp-spark top-k``: the k items with the most distinct persons, in order.

Every release parameter is checked by the plan (:mod:`dp_spark.plans.top_k`);
this module only names the options and reads ``--domain`` (a file) into the
list of items the Python API takes.
"""

from __future__ import annotations


from dp_spark.commands.base import (
    INPUT_OPTIONS, RUN_OPTIONS, Command, Option, check_group_outputs, groups_writer, items_writer, run_release,
)
from dp_spark.commands.params import budget_options, release_options
from dp_spark.plans.top_k import DEMO_DELTA, Params
from dp_spark.releases import RELEASES

NAME = "top-k"

OPTIONS = INPUT_OPTIONS + release_options(Params, declared=INPUT_OPTIONS + RUN_OPTIONS) + (
    Option("items_output", str, None, "also write the released items here as Parquet (atomically)"),
    *budget_options(Params),
    Option("groups_output", str, None, "with --group-by: write every group's released items (the group column, "
           "rank, item, error) here: Parquet, CSV (a path ending in .csv) or table:db.name (atomically)"),
) + RUN_OPTIONS


def complete(opts):
    """``--delta`` not given: DEMO_DELTA when the mechanism needs δ
    (unknown-domain, or auto without a domain, which runs unknown-domain),
    else 0 (a pure mechanism stays pure). Public options only."""
    if opts.get("delta") is not None:
        return opts
    needs = opts.get("method") == "unknown-domain" or (opts.get("method") == "auto" and not opts.get("domain"))
    return {**opts, "delta": DEMO_DELTA if needs else 0.0}


def run(spark, plan, df, opts, budget):
    """The release on the CLI's plan, with ``--domain PATH`` read into the
    public list of items (public data; read before the release spends anything)."""
    from dp_spark.stages.item_counts import read_domain

    domain = read_domain(spark, opts["domain"], opts["item_col"], private=df) if opts["domain"] else None
    return run_release(COMMAND, plan, df, opts, budget, domain=domain)


WRITERS = {"items": items_writer("items", "items", single_file=True), "groups": groups_writer()}


def plan_options(opts):
    """The grouped-run output options, refused before Spark starts
    (:func:`~dp_spark.commands.base.check_group_outputs`)."""
    return check_group_outputs(opts, "per-group items", "items_output")


COMMAND = Command(NAME, RELEASES[NAME].help, OPTIONS, WRITERS, complete=complete, plan_options=plan_options, run=run)
