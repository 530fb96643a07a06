"""``dp-spark count-release``: item counts of distinct persons, each with its σ."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, RUN_OPTIONS, Command, Option, check_group_outputs, groups_writer, items_writer
from dp_spark.commands.params import release_options
from dp_spark.plans.count_release import Params
from dp_spark.releases import RELEASES

NAME = "count-release"

OPTIONS = INPUT_OPTIONS + release_options(Params, declared=INPUT_OPTIONS + RUN_OPTIONS) + (
    Option("items_output", str, None, "also write the released items here as Parquet (atomically)"),
    Option("budget_rho", float, None, "total ρ budget; the run is refused before reading data if "
           "the release would exceed it"),
    Option("budget_delta", float, None, "total δ budget (with --budget-rho; default 0)"),
    Option("groups_output", str, None, "with --group-by: write every released (group, item) row "
           "(the group column, item, count, sigma, error) "
           "here: Parquet, CSV (a path ending in .csv) or table:db.name (atomically)"),
) + RUN_OPTIONS

WRITERS = {"groups": groups_writer("per-group rows"),
                    "items": items_writer("items", "counts", single_file=True)}


def plan_options(opts):
    """The grouped-run output options, refused before Spark starts
    (:func:`~dp_spark.commands.base.check_group_outputs`)."""
    return check_group_outputs(opts, "per-group rows", "items_output")


COMMAND = Command(NAME, RELEASES[NAME].help, OPTIONS, WRITERS, plan_options=plan_options)
