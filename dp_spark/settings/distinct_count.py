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

#: GEM's candidates are the powers of BOUND_GRID_RATIO below max_bound and
#: max_bound itself (a public function of max_bound only:
#: :func:`bound_candidates`). The default max_bound, 4^8 = 65,536, caps no
#: realistic table (issue 36: the previous 100 undercounted a table with ~93
#: items per person by 31 % and one with 1,000 per person by 91 %), and the
#: greedy's rounds stop when the persons' items run out, so a high top costs
#: nothing the data does not need. Method "matching" defaults to
#: MATCHING_MAX_BOUND = 4^5 = 1,024: its private size check counts each
#: person's first max_bound pairs (sensitivity max_bound), so a larger
#: default would push most inputs to the greedy.
#:
#: SELECTION_BETA is GEM's utility parameter at SELECTION_REFERENCE_CANDIDATES
#: candidates: t = (2/ε)·ln(k/β) (its privacy holds for any public value;
#: the lower bound's confidence is the release's own beta). With k
#: candidates the release uses β_k = SELECTION_BETA·k/4
#: (:func:`selection_beta`), so t stays (2/ε)·ln 20 whatever the top of the
#: grid: measured across the accuracy tier's shapes, a t that grew with
#: ln k moved Amazon Fashion's choice from 16 to 4 at ε = 0.5 (median lower
#: bound 85 % → 66 %) and gained nothing elsewhere
#: (benchmarks/distinct_count_grid_2026-11-29.md).
BOUND_GRID_RATIO = 4
DEFAULT_MAX_BOUND = 4 ** 8  # 65,536
MATCHING_MAX_BOUND = 4 ** 5  # 1,024
SELECTION_BETA = 0.2
SELECTION_REFERENCE_CANDIDATES = 4
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
    """The bounds GEM chooses from: 1, 2, 4, … below ``max_bound``, and
    ``max_bound`` itself (public: a function of ``max_bound`` only). The
    top is always a candidate, so no bound the user allows is unreachable."""
    top = int(max_bound)
    out, bound = [], 1
    while bound < top:
        out.append(bound)
        bound *= BOUND_GRID_RATIO
    return out + [top]


def selection_beta(n_candidates: int) -> float:
    """GEM's β for ``n_candidates`` bound candidates: SELECTION_BETA scaled
    so that ln(k/β), and with it GEM's threshold t, is the same for every k
    (a public function of k only; any value in (0, 1) keeps the choice DP).
    At most 0.9: a k that large (over 18 candidates) is beyond
    MAX_BOUND_LIMIT's grid, which has 11."""
    return min(SELECTION_BETA * int(n_candidates) / SELECTION_REFERENCE_CANDIDATES, 0.9)


def default_max_bound(method: str) -> int:
    """The max_bound a release uses when none is given: MATCHING_MAX_BOUND
    for exact matching, DEFAULT_MAX_BOUND otherwise (module comment)."""
    return MATCHING_MAX_BOUND if method == "matching" else DEFAULT_MAX_BOUND


def cap_note(bound: int, max_bound: int) -> str:
    """What the report and the CLI say when the chosen bound is the largest
    candidate (a function of released and public values only)."""
    how = (f"raise max_bound (--max-bound) up to {MAX_BOUND_LIMIT:,}" if max_bound < MAX_BOUND_LIMIT
           else "it is at its public limit")
    return (f"persons with more than {bound:,} distinct items count only {bound:,} of them, so the estimate may "
            f"be capped; {how}")


def limited(value, name: str) -> int:
    """A whole number from 1 to the public limit of ``name`` (LIMITS)."""
    limit, why = LIMITS[name]
    return checks.integer(value, name, 1, limit, f" ({why})")
