"""``dp-spark set-union``: which items may be published at all (DP Set Union)."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, RUN_OPTIONS, Command, Option, check_group_outputs, groups_writer, items_writer
from dp_spark.commands.params import release_options
from dp_spark.plans.set_union import Params
from dp_spark.releases import RELEASES

NAME = "set-union"

OPTIONS = INPUT_OPTIONS + release_options(Params, declared=INPUT_OPTIONS + RUN_OPTIONS) + (
    Option("items_output", str, None, "write the released items here as Parquet (atomically)"),
    Option("budget_epsilon", float, None, "total ε budget; with --budget-delta an (ε, δ) budget: the "
           "run is refused before reading data if the release would exceed it"),
    Option("budget_delta", float, None, "total δ budget (with --budget-epsilon)"),
    Option("groups_output", str, None, "with --group-by: write every released (group, item) row "
           "(the group column, item, error) "
           "here: Parquet, CSV (a path ending in .csv) or table:db.name (atomically)"),
) + RUN_OPTIONS

WRITERS = {"groups": groups_writer("per-group rows"), "items": items_writer("items", "items")}


def plan_options(opts):
    """The grouped-run output options, refused before Spark starts
    (:func:`~dp_spark.commands.base.check_group_outputs`)."""
    return check_group_outputs(opts, "per-group rows", "items_output")


COMMAND = Command(NAME, RELEASES[NAME].help, OPTIONS, WRITERS, plan_options=plan_options)
