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

from dataclasses import dataclass

from dp_spark import checks
from dp_spark.accounting import PureDP, remainder
from dp_spark.plan import Plan, Step, builds, param, set_checked
from dp_spark.plans import EPSILON_HELP, ITEM_COL_HELP, PERSON_COL_HELP, SEED_HELP

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


@dataclass(frozen=True, kw_only=True)
class Params:
    """Every distinct-count parameter: its default, help (the CLI's), public
    limit; constructing one checks them all (before any data is read). The
    release function's keywords, the CLI flags and the YAML keys are these
    fields (tests/unit/test_params.py)."""

    epsilon: float = param(help=EPSILON_HELP, cli_default=1.0)
    beta: float = param(0.05, "the lower bound holds with probability 1 - beta")
    max_bound: int = param(100, "largest per-person bound l considered (1..max-bound; at most 1,000,000)",
                           limit=MAX_BOUND_LIMIT)
    method: str = param("greedy", "how bounded counts are computed", choices=METHODS)
    shards: int | None = param(None, "greedy: number of person shards (default: one per 200,000 persons, "
                               f"from a noisy count of a 1-in-{PERSON_SAMPLE} hash sample of persons that "
                               f"spends ε/100; at most {MAX_SHARDS:,})", limit=MAX_SHARDS, cli_type=int)
    edge_limit: int = param(DEFAULT_EDGE_LIMIT, "matching: most (person, item) pairs collected to the "
                            f"driver (at most {MAX_EDGE_LIMIT:,}); a noisy pair count (ε/100) decides whether "
                            "matching fits, else the greedy is used", limit=MAX_EDGE_LIMIT)
    person_col: str = param("person_id", PERSON_COL_HELP)
    item_col: str = param("item", ITEM_COL_HELP)
    seed: int | None = param(None, SEED_HELP, cli_type=int)

    def __post_init__(self):
        set_checked(self, epsilon=checks.epsilon(self.epsilon))  # within checks.EPSILON_RANGE, before any charge
        set_checked(self, beta=checks.open_unit(self.beta, "beta"))
        checks.distinct_columns(person_col=self.person_col, item_col=self.item_col)
        set_checked(self, method=checks.choice(self.method, "method", METHODS))
        set_checked(self, max_bound=limited(self.max_bound, "max_bound"))
        set_checked(self, shards=None if self.shards is None else limited(self.shards, "shards"))
        set_checked(self, edge_limit=limited(self.edge_limit, "edge_limit"))
        checks.seed(self.seed)


@builds(Params)
def plan(params: Params) -> Plan:
    """The distinct-count release's plan (ε-DP, person level) from its
    checked parameters (``plan(epsilon=..., ...)`` checks them first)."""
    p = params
    epsilon, method, shards = p.epsilon, p.method, p.shards
    if method == "greedy" and shards is None:
        pre = [Step("shards", SHARD_STEP, epsilon * SHARD_EPSILON_SHARE)]
    elif method == "matching":
        pre = [Step("matching", MATCHING_STEP, epsilon * MATCHING_EPSILON_SHARE)]
    else:
        pre = []
    rest = remainder(epsilon, *(s.cost for s in pre))  # the parts sum to <= epsilon exactly
    steps = [Step(s.name, s.label, PureDP(s.cost)) for s in pre]
    steps += [Step("select", SELECT_STEP, PureDP(rest / 2.0)), Step("count", COUNT_STEP, PureDP(rest / 2.0))]
    parameters = {
        "epsilon": epsilon, "beta": p.beta, "max_bound": p.max_bound, "method": method,
        "person_col": p.person_col, "item_col": p.item_col, "noise": "discrete laplace",
    }
    if method != "sampling":
        parameters["shards"] = shards
    if method == "matching":
        parameters["edge_limit"] = p.edge_limit
        parameters["items_per_person"] = p.max_bound
    return Plan(
        release=RELEASE,
        guarantee=PureDP(epsilon),
        steps=steps,
        parameters=parameters,
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {p.person_col} value)",
        releases=f"the number of distinct {p.item_col} values (noisy) and a {1 - p.beta:.0%} lower bound",
    )
