"""``dp-spark set-union``: which items may be published at all (DP Set Union)."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, Option, RUN_OPTIONS, items_writer
from dp_spark.commands.params import release_options
from dp_spark.plans.set_union import Params

NAME = "set-union"
HELP = "differentially private set union: release as many items as possible (partition selection)"

OPTIONS = INPUT_OPTIONS + release_options(Params, declared=INPUT_OPTIONS + RUN_OPTIONS) + (
    Option("items_output", str, None, "write the released items here as Parquet (atomically)"),
    Option("budget_epsilon", float, None, "total ε budget; with --budget-delta an (ε, δ) budget: the "
           "run is refused before reading data if the release would exceed it"),
    Option("budget_delta", float, None, "total δ budget (with --budget-epsilon)"),
) + RUN_OPTIONS

ARTIFACT_WRITERS = {"items": items_writer("items", "items")}
