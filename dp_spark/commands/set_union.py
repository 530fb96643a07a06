"""``dp-spark set-union``: which items may be published at all (DP Set Union)."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, Option, RUN_OPTIONS, items_writer
from dp_spark.plans.set_union import ALPHA_LIMIT, MAX_ITEMS_LIMIT, METHODS, SHARDS_LIMIT

NAME = "set-union"
HELP = "differentially private set union: release as many items as possible (partition selection)"

OPTIONS = INPUT_OPTIONS + (
    Option("epsilon", float, 1.0, "privacy parameter ε spent by the release; from 1e-6 to 50 (below, the noise swamps every count; above, e^ε bounds nothing)"),
    Option("delta", float, 1e-6, "privacy parameter δ spent by the release (0 < δ < 1)"),
    Option("max_items", int, 100, f"Δ0: most distinct items one person contributes (at most {MAX_ITEMS_LIMIT:,})"),
    Option("method", str, "policy-gaussian", "histogram update policy", METHODS),
    Option("alpha", float, 2.0, f"policy cutoff Γ = ρ + alpha·(noise scale) (0 to {ALPHA_LIMIT:g})"),
    Option("shards", int, None, "policy-*: number of person shards (default 8, "
           f"independent of the cluster; 1 = the paper's single pass; at most {SHARDS_LIMIT:,})"),
    Option("shard_cutoff", str, "scaled", "policy-*: cutoff in each shard, Γ/√shards "
           "('scaled') or Γ ('full'); privacy is the same", ("scaled", "full")),
    Option("items_output", str, None, "write the released items here as Parquet (atomically)"),
    Option("budget_epsilon", float, None, "total ε budget; with --budget-delta an (ε, δ) budget: the "
           "run is refused before reading data if the release would exceed it"),
    Option("budget_delta", float, None, "total δ budget (with --budget-epsilon)"),
) + RUN_OPTIONS

ARTIFACT_WRITERS = {"items": items_writer("items", "items")}
