"""The distinct-count release's public settings (Knop & Steinke 2023).

Shared by the Spark stage (:mod:`dp_spark.stages.distinct`), the mechanism
(:mod:`dp_spark.mechanisms.distinct_count.bound`) and the plan
(:mod:`dp_spark.plans.distinct_count`, which re-exports them). Nothing here
imports pyspark.
"""

from __future__ import annotations

from dp_spark import checks

METHODS = ("greedy", "matching", "sampling")
DEFAULT_EDGE_LIMIT = 20_000_000

#: GEM's candidates are the powers of BOUND_GRID_RATIO up to max_bound (a
#: public function of max_bound only); SELECTION_BETA is GEM's utility
#: parameter t = (2/ε)·ln(k/β) (its privacy holds for any public value; the
#: lower bound's confidence is the release's own beta). Measured in
#: benchmarks/README.md (issue 25).
BOUND_GRID_RATIO = 4
SELECTION_BETA = 0.2
#: How GEM's normalised scores are sampled: "permute-and-flip" (the
#: release's, with the same-direction denominators max(l, l')) or
#: "exponential" (the paper's GEM, kept for the benchmark's comparison).
SELECTION_SAMPLERS = ("permute-and-flip", "exponential")

#: Public upper limits on the parameters that size memory or work. Each
#: names the resource it protects.
MAX_BOUND_LIMIT = 1_000_000
MAX_SHARDS = 10_000
MAX_EDGE_LIMIT = 200_000_000
LIMITS = {
    "max_bound": (MAX_BOUND_LIMIT, "the driver builds the GEM score and noise-margin tables and the "
                  "greedy runs up to max_bound rounds, all of size max_bound; a person bound above "
                  "a million items is never useful"),
    "shards": (MAX_SHARDS, "each shard is a Spark task and a partition of the shuffle; more "
               "than 10,000 only adds scheduling overhead and shrinks shards (less accurate)"),
    "edge_limit": (MAX_EDGE_LIMIT, "exact matching holds every collected (person, item) pair "
                   "and the flow graph in driver memory (roughly 100 bytes per pair); use "
                   "method='greedy' for larger inputs"),
}


def bound_candidates(max_bound: int) -> list[int]:
    """The bounds GEM chooses from: 1, 4, 16, … up to ``max_bound`` (public)."""
    out, bound = [], 1
    while bound <= max_bound:
        out.append(bound)
        bound *= BOUND_GRID_RATIO
    return out


def limited(value, name: str) -> int:
    """A whole number from 1 to the public limit of ``name`` (LIMITS)."""
    limit, why = LIMITS[name]
    return checks.integer(value, name, 1, limit, f" ({why})")
