"""``dp-spark distinct-count``: person-level DP count of distinct items."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, RUN_OPTIONS, Command, Option, check_group_outputs, groups_writer
from dp_spark.commands.params import release_options
from dp_spark.plans.distinct_count import Params
from dp_spark.releases import RELEASES

NAME = "distinct-count"

OPTIONS = INPUT_OPTIONS + release_options(Params, declared=INPUT_OPTIONS + RUN_OPTIONS) + (
    Option("budget_epsilon", float, None, "total ε budget; the run is refused before reading "
           "data if the release would exceed it"),
    Option("budget_rho", float, None, "total ρ budget (for a grouped run with --noise gaussian: ρ-zCDP with "
           "ρ = ε²/2); refused before reading data if the release would exceed it"),
) + (
    Option("groups_output", str, None, "with --group-by: write every group's released values (the group column, "
           "estimate, lower_bound, bound, error) here: Parquet, CSV (a path ending in .csv) or table:db.name "
           "(atomically)"),
) + RUN_OPTIONS

WRITERS = {"groups": groups_writer()}


def plan_options(opts):
    """``--groups-output`` needs ``--group-by`` (an ungrouped run has no
    per-group values): refused before Spark starts."""
    return check_group_outputs(opts, "per-group values")


COMMAND = Command(NAME, RELEASES[NAME].help, OPTIONS, WRITERS, plan_options=plan_options)
