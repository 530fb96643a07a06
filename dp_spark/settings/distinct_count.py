"""The distinct-count release's public settings (Knop & Steinke 2023).

Shared by the Spark stage (:mod:`dp_spark.stages.distinct`), the mechanism
(:mod:`dp_spark.mechanisms.distinct_count.bound`) and the plan
(:mod:`dp_spark.plans.distinct_count`, which re-exports them). Nothing here
imports pyspark.
"""

from __future__ import annotations

import math

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
#: SELECTION_BETA is GEM's utility parameter: t = (2/ε)·ln(k/β) (its
#: privacy holds for any public value; the lower bound's confidence is the
#: release's own beta). The release gives each candidate its own threshold
#: (:func:`candidate_betas`, :func:`gem_shifts`): the first four (1, 4, 16,
#: 64) keep issue 25's t = (2/ε)·ln 20, each further one has a failure
#: share FAR_DECAY times smaller. Measured across the accuracy tier's shapes
#: (benchmarks/distinct_count_grid_2026-11-29.md): one t growing with ln k
#: moved Amazon Fashion's choice from 16 to 4 at ε = 0.5 (median lower bound
#: 85 % → 66 %); one t fixed at (2/ε)·ln 20 for all k gave every candidate
#: far above the data's scale the same weight, a 3 % chance of ℓ̂ >= 1,024
#: on MovieLens (lower bound 0 at its 2nd percentile).
BOUND_GRID_RATIO = 4
DEFAULT_MAX_BOUND = 4 ** 8  # 65,536
MATCHING_MAX_BOUND = 4 ** 5  # 1,024
SELECTION_BETA = 0.2
SELECTION_REFERENCE_CANDIDATES = 4
FAR_DECAY = 4
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
    "max_bound": (MAX_BOUND_LIMIT, "the driver receives counts for bounds up to max_bound and the "
                  "greedy runs up to max_bound rounds; a person bound above a million items is never useful"),
    "shards": (MAX_SHARDS, "each shard is a Spark task and a partition of the shuffle; more "
               "than 10,000 only adds scheduling overhead and shrinks shards (less accurate)"),
    "edge_limit": (MAX_EDGE_LIMIT, "exact matching holds every collected (person, item) pair "
                   "and the flow graph in driver memory (roughly 100 bytes per pair); use "
                   "method='greedy' for larger inputs"),
}


def bound_candidates(max_bound: int) -> list[int]:
    """The bounds GEM chooses from: 1, 4, 16, … below ``max_bound``, and
    ``max_bound`` itself (public: a function of ``max_bound`` only). The
    top is always a candidate, so no bound the user allows is unreachable."""
    top = int(max_bound)
    out, bound = [], 1
    while bound < top:
        out.append(bound)
        bound *= BOUND_GRID_RATIO
    return out + [top]


def candidate_betas(n_candidates: int) -> list[float]:
    """GEM's failure share of each of ``n_candidates`` bound candidates, in
    order: SELECTION_BETA/4 = 0.05 for each of the first
    SELECTION_REFERENCE_CANDIDATES (1, 4, 16, 64: issue 25's threshold
    t = (2/ε)·ln 20 for them whatever the grid's top), then FAR_DECAY times
    less for each further one. Public: a function of the count only; any
    public value keeps the choice DP. They sum to less than 0.217, so GEM's
    chance of a candidate far above the data's scale stays bounded however
    many candidates there are (with one share for all, 0.05·k, issue 36's
    review measured a 3 % chance of ℓ̂ >= 1,024 on MovieLens)."""
    near = SELECTION_REFERENCE_CANDIDATES
    base = SELECTION_BETA / near
    return [base * FAR_DECAY ** -max(0, j - (near - 1)) for j in range(int(n_candidates))]


def gem_shifts(n_candidates: int, epsilon: float) -> list[float]:
    """Per unit of sensitivity, the public amount e_j that candidate j's
    utility is lowered by so that GEM run with one β = SELECTION_BETA over
    the ``n_candidates`` candidates (t = (2/ε)·ln(k/β)) applies candidate
    j's own threshold t_j = (2/ε)·ln(1/β_j) (:func:`candidate_betas`):
    e_j = t_j − t. The caller lowers utility j by ⌈e_j·Δ_j⌉, an integer, so
    integer utilities stay exact in float64."""
    k = int(n_candidates)
    common = math.log(k / SELECTION_BETA)
    return [(2.0 / float(epsilon)) * (math.log(1.0 / b) - common) for b in candidate_betas(k)]


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
