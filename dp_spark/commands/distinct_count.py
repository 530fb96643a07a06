"""``dp-spark distinct-count``: person-level DP count of distinct items."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, RUN_OPTIONS, Option
from dp_spark.commands.params import release_options
from dp_spark.plans.distinct_count import Params

NAME = "distinct-count"
HELP = "differentially private count of distinct items, with a lower bound"

OPTIONS = INPUT_OPTIONS + release_options(Params, declared=INPUT_OPTIONS + RUN_OPTIONS) + (
    Option("budget_epsilon", float, None, "total ε budget; the run is refused before reading "
           "data if the release would exceed it"),
) + RUN_OPTIONS
