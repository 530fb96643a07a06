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
from dp_spark.settings.distinct_count import (  # noqa: F401 - the settings the stage and mechanism share, re-exported
    BOUND_GRID_RATIO,
    DEFAULT_EDGE_LIMIT,
    LIMITS,
    MAX_BOUND_LIMIT,
    MAX_EDGE_LIMIT,
    MAX_SHARDS,
    METHODS,
    SELECTION_BETA,
    bound_candidates,
    limited,
)

RELEASE = "distinct-count"
SHARD_EPSILON_SHARE = 0.01
MATCHING_EPSILON_SHARE = 0.01
#: The automatic shard count reads the persons of a fixed 1-in-PERSON_SAMPLE
#: hash sample of the ids (public), then scales the noisy count up.
PERSON_SAMPLE = 16
SHARD_STEP = f"shard count (discrete Laplace on the number of persons in a fixed 1-in-{PERSON_SAMPLE} hash sample)"
MATCHING_STEP = "matching size check (discrete Laplace on the number of truncated (person, item) pairs)"
SELECT_STEP = ("bound selection (Generalized Exponential Mechanism over l = 1, 4, 16, 64, ... "
               f"(powers of {BOUND_GRID_RATIO} up to max_bound), GEM beta {SELECTION_BETA:g})")
COUNT_STEP = "count (discrete Laplace mechanism)"


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
