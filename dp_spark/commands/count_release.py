"""``dp-spark count-release``: item counts of distinct persons, each with its σ."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, RUN_OPTIONS, Option, items_writer
from dp_spark.commands.params import release_options
from dp_spark.plans.count_release import Params

NAME = "count-release"
HELP = "differentially private item counts near a target relative error (Private Count Release)"

OPTIONS = INPUT_OPTIONS + release_options(Params, declared=INPUT_OPTIONS + RUN_OPTIONS) + (
    Option("items_output", str, None, "also write the released items here as Parquet (atomically)"),
    Option("budget_rho", float, None, "total ρ budget; the run is refused before reading data if "
           "the release would exceed it"),
    Option("budget_delta", float, None, "total δ budget (with --budget-rho; default 0)"),
) + RUN_OPTIONS

ARTIFACT_WRITERS = {"items": items_writer("items", "counts", single_file=True)}
