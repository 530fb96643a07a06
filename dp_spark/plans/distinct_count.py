"""The distinct-count plan: parameters, ε and its split (Knop & Steinke 2023).

Budget split (basic composition, total ε-DP), from the parameters alone:

- ``method="greedy"`` with ``shards=None``: ε/100 for a discrete Laplace
  count of persons that picks the number of greedy shards;
- ``method="matching"``: ε/100 for the private size check of the truncated
  (person, item) pairs (see :mod:`dp_spark.releases.distinct_count`);
- the rest ε' in two halves: the Generalized Exponential Mechanism picks the
  per-person bound among the public candidates l = 1, 4, 16, 64, … (powers of
  ``BOUND_GRID_RATIO`` up to ``max_bound``: :func:`bound_candidates`) with its
  own utility parameter β = ``SELECTION_BETA``, the discrete Laplace mechanism
  releases the count.
"""

from __future__ import annotations

from dp_spark import checks
from dp_spark.accounting import PureDP, remainder
from dp_spark.plan import Plan

RELEASE = "distinct-count"
METHODS = ("greedy", "matching", "sampling")
DEFAULT_EDGE_LIMIT = 20_000_000
SHARD_EPSILON_SHARE = 0.01
MATCHING_EPSILON_SHARE = 0.01
#: The automatic shard count reads the persons of a fixed 1-in-PERSON_SAMPLE
#: hash sample of the ids (public), then scales the noisy count up.
PERSON_SAMPLE = 16
SHARD_STEP = f"shard count (discrete Laplace on the number of persons in a fixed 1-in-{PERSON_SAMPLE} hash sample)"
MATCHING_STEP = "matching size check (discrete Laplace on the number of truncated (person, item) pairs)"
#: GEM's candidates are the powers of BOUND_GRID_RATIO up to max_bound (a
#: public function of max_bound only); SELECTION_BETA is GEM's utility
#: parameter t = (2/ε)·ln(k/β) (its privacy holds for any public value; the
#: lower bound's confidence is the release's own beta). Measured in
#: benchmarks/README.md (issue 25).
BOUND_GRID_RATIO = 4
SELECTION_BETA = 0.2
SELECT_STEP = ("bound selection (Generalized Exponential Mechanism over l = 1, 4, 16, 64, ... "
               f"(powers of {BOUND_GRID_RATIO} up to max_bound), GEM beta {SELECTION_BETA:g})")
COUNT_STEP = "count (discrete Laplace mechanism)"

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


def plan(*, epsilon, beta=0.05, max_bound=100, method="greedy", shards=None,
         edge_limit=DEFAULT_EDGE_LIMIT, person_col="person_id", item_col="item", seed=None) -> Plan:
    """The distinct-count release's plan (ε-DP, person level); every
    parameter checked before any data is read."""
    epsilon = checks.epsilon(epsilon)  # within checks.EPSILON_RANGE, before any charge
    beta = checks.open_unit(beta, "beta")
    checks.distinct_columns(person_col=person_col, item_col=item_col)
    method = checks.choice(method, "method", METHODS)
    max_bound = limited(max_bound, "max_bound")
    shards = None if shards is None else limited(shards, "shards")
    edge_limit = limited(edge_limit, "edge_limit")
    checks.seed(seed)
    if method == "greedy" and shards is None:
        pre = [(SHARD_STEP, epsilon * SHARD_EPSILON_SHARE)]
    elif method == "matching":
        pre = [(MATCHING_STEP, epsilon * MATCHING_EPSILON_SHARE)]
    else:
        pre = []
    rest = remainder(epsilon, *(e for _, e in pre))  # the parts sum to <= epsilon exactly
    steps = [(label, PureDP(e)) for label, e in pre]
    steps += [(SELECT_STEP, PureDP(rest / 2.0)), (COUNT_STEP, PureDP(rest / 2.0))]
    parameters = {
        "epsilon": epsilon, "beta": beta, "max_bound": max_bound, "method": method,
        "person_col": person_col, "item_col": item_col, "noise": "discrete laplace",
    }
    if method != "sampling":
        parameters["shards"] = shards
    if method == "matching":
        parameters["edge_limit"] = edge_limit
        parameters["items_per_person"] = max_bound
    return Plan(
        release=RELEASE,
        guarantee=PureDP(epsilon),
        steps=steps,
        parameters=parameters,
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {person_col} value)",
        releases=f"the number of distinct {item_col} values (noisy) and a {1 - beta:.0%} lower bound",
    )
