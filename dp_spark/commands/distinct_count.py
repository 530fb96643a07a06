"""``dp-spark distinct-count``: person-level DP count of distinct items."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, RUN_OPTIONS, Option
from dp_spark.plans.distinct_count import DEFAULT_EDGE_LIMIT, MAX_EDGE_LIMIT, MAX_SHARDS, PERSON_SAMPLE

NAME = "distinct-count"
HELP = "differentially private count of distinct items, with a lower bound"

OPTIONS = INPUT_OPTIONS + (
    Option("epsilon", float, 1.0, "privacy parameter ε spent by the release; from 1e-6 to 50 (below, the noise swamps every count; above, e^ε bounds nothing)"),
    Option("beta", float, 0.05, "the lower bound holds with probability 1 - beta"),
    Option("max_bound", int, 100, "largest per-person bound l considered (1..max-bound; at most 1,000,000)"),
    Option("method", str, "greedy", "how bounded counts are computed",
           ("greedy", "matching", "sampling")),
    Option("shards", int, None, "greedy: number of person shards (default: one per 200,000 "
           f"persons, from a noisy count of a 1-in-{PERSON_SAMPLE} hash sample of persons that spends ε/100; at most {MAX_SHARDS:,})"),
    Option("edge_limit", int, DEFAULT_EDGE_LIMIT, "matching: most (person, item) pairs collected to the "
           f"driver (at most {MAX_EDGE_LIMIT:,}); a noisy pair count (ε/100) decides whether matching "
           "fits, else the greedy is used"),
    Option("budget_epsilon", float, None, "total ε budget; the run is refused before reading "
           "data if the release would exceed it"),
) + RUN_OPTIONS
