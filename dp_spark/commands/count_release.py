"""``dp-spark count-release``: item counts of distinct persons, each with its σ."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, RUN_OPTIONS, Option, items_writer
from dp_spark.mechanisms.count_release.loop import ACCURACY_FACTOR, DELTA_MIN, EPSILON_MIN
from dp_spark.plans.count_release import KBAR_LIMIT, MAX_ITEMS_LIMIT, METHODS

NAME = "count-release"
HELP = "differentially private item counts near a target relative error (Private Count Release)"

OPTIONS = INPUT_OPTIONS + (
    Option("rho", float, 0.5, "ρ: the release is δ-approximate ρ-zCDP; from 1e-12 to 50 (below, the noise swamps every count; above, nothing is protected)"),
    Option("delta", float, 1e-6, "δ of the δ-approximate ρ-zCDP guarantee"),
    Option("relative_error", float, 0.1, "target relative error r of a released count"),
    Option("kbar", int, 10000, "pcr: how many of the largest counts are collected (and the most "
           f"counts released; at most {KBAR_LIMIT:,})"),
    Option("method", str, "pcr", "pcr (Private Count Release, no contribution bound) or bounded "
           "(contribution-bounding baseline, needs --max-items)", METHODS),
    Option("max_items", int, None, f"bounded: m, the most distinct items kept per person (at most "
           f"{MAX_ITEMS_LIMIT:,})"),
    Option("alpha", float, 0.5, "bounded: share of ρ spent on selecting items"),
    Option("count_threshold", bool, False, "bounded: drop noisy counts below (2+r)σ/r", flag=True),
    Option("epsilon_min", float, EPSILON_MIN, "pcr: ε* of the first selection (grown by √2 after ⊥)"),
    Option("delta_min", float, DELTA_MIN, "pcr: δ* spent by each selection"),
    Option("accuracy_factor", float, ACCURACY_FACTOR, "pcr: a in σ = (r/a)·T"),
    Option("conversion_delta", float, None, "δ' of the stated (ε, δ + δ') equivalent (default δ)"),
    Option("items_output", str, None, "also write the released items here as Parquet (atomically)"),
    Option("budget_rho", float, None, "total ρ budget; the run is refused before reading data if "
           "the release would exceed it"),
    Option("budget_delta", float, None, "total δ budget (with --budget-rho; default 0)"),
) + RUN_OPTIONS

ARTIFACT_WRITERS = {"items": items_writer("items", "counts", single_file=True)}
