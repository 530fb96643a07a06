"""``dp-spark set-union``: which items may be published at all (DP Set Union)."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, RUN_OPTIONS, Option, groups_writer, items_writer
from dp_spark.commands.params import release_options
from dp_spark.plans.set_union import Params

NAME = "set-union"
HELP = "differentially private set union: release as many items as possible (partition selection)"

OPTIONS = INPUT_OPTIONS + release_options(Params, declared=INPUT_OPTIONS + RUN_OPTIONS) + (
    Option("items_output", str, None, "write the released items here as Parquet (atomically)"),
    Option("budget_epsilon", float, None, "total ε budget; with --budget-delta an (ε, δ) budget: the "
           "run is refused before reading data if the release would exceed it"),
    Option("budget_delta", float, None, "total δ budget (with --budget-epsilon)"),
    Option("groups_output", str, None, "with --group-by: write every released (group, item) row "
           "(the group column, item, error) "
           "here: Parquet, CSV (a path ending in .csv) or table:db.name (atomically)"),
) + RUN_OPTIONS

ARTIFACT_WRITERS = {"groups": groups_writer("per-group rows"), "items": items_writer("items", "items")}


def plan_options(opts):
    """``--groups-output`` needs ``--group-by`` (an ungrouped run has no
    per-group rows), and a grouped run writes its rows to ``--groups-output``
    only (``--items-output`` is the ungrouped table): both refused before
    Spark starts."""
    from dp_spark.errors import ParameterError

    if opts.get("groups_output") and not opts.get("group_by"):
        raise ParameterError("--groups-output writes the per-group rows of a grouped run; give --group-by "
                             "(with --groups), or drop --groups-output.")
    if opts.get("items_output") and opts.get("group_by"):
        raise ParameterError("a grouped run (--group-by) writes its released (group, item) rows to "
                             "--groups-output; drop --items-output.")
    return opts
