"""The distinct-count release's public settings (Knop & Steinke 2023), shared
by the Spark stage, the mechanism and the plan (which re-exports them).
Nothing here imports pyspark."""

from __future__ import annotations

import math

from dp_spark import checks

METHODS = ("greedy", "matching", "sampling")
DEFAULT_EDGE_LIMIT = 20_000_000

#: GEM's candidates: powers of BOUND_GRID_RATIO below max_bound, and max_bound. The default
#: 4^8 caps no realistic table and costs nothing the data does not need (the greedy stops when
#: the items run out); "matching" defaults to 4^5, as its size check has sensitivity max_bound.
#: SELECTION_BETA: GEM's utility parameter, t = (2/ε)·ln(k/β), any public value keeping privacy;
#: each candidate gets its own threshold (:func:`candidate_betas`). Chosen by measurement: see
#: benchmarks/results/2026-11-29-distinct-count-grid.md.
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
    ``max_bound`` itself (public), so no bound the user allows is unreachable."""
    top = int(max_bound)
    out, bound = [], 1
    while bound < top:
        out.append(bound)
        bound *= BOUND_GRID_RATIO
    return out + [top]


def candidate_betas(n_candidates: int) -> list[float]:
    """GEM's failure share of each bound candidate: SELECTION_BETA/4 for each
    of the first SELECTION_REFERENCE_CANDIDATES (1, 4, 16, 64), then FAR_DECAY
    times less for each further one. Public, so the choice stays DP; they sum
    to less than 0.217, so the chance of a candidate far above the data's
    scale stays bounded however many candidates there are."""
    near = SELECTION_REFERENCE_CANDIDATES
    base = SELECTION_BETA / near
    return [base * FAR_DECAY ** -max(0, j - (near - 1)) for j in range(int(n_candidates))]


def gem_shifts(n_candidates: int, epsilon: float) -> list[float]:
    """Per unit of sensitivity, e_j = t_j − t: lowering candidate j's utility
    by ⌈e_j·Δ_j⌉ makes GEM with one β = SELECTION_BETA apply j's own threshold
    t_j = (2/ε)·ln(1/β_j) (:func:`candidate_betas`), integers kept exact."""
    k = int(n_candidates)
    common = math.log(k / SELECTION_BETA)
    return [(2.0 / float(epsilon)) * (math.log(1.0 / b) - common) for b in candidate_betas(k)]


def default_max_bound(method: str) -> int:
    """MATCHING_MAX_BOUND for exact matching, else DEFAULT_MAX_BOUND."""
    return MATCHING_MAX_BOUND if method == "matching" else DEFAULT_MAX_BOUND


def cap_note(bound: int, max_bound: int) -> str:
    """What the report and the CLI say when the chosen bound is the largest
    candidate (released and public values only)."""
    how = (f"raise max_bound (--max-bound) up to {MAX_BOUND_LIMIT:,}" if max_bound < MAX_BOUND_LIMIT
           else "it is at its public limit")
    return (f"persons with more than {bound:,} distinct items count only {bound:,} of them, so the estimate may "
            f"be capped; {how}")


def limited(value, name: str) -> int:
    """A whole number from 1 to the public limit of ``name`` (LIMITS)."""
    limit, why = LIMITS[name]
    return checks.integer(value, name, 1, limit, f" ({why})")
