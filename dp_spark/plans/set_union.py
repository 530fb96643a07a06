"""The set-union plan: parameters, (ε, δ) and its split (Gopi et al., ICML 2020).

DP Set Union, Algorithm 1 of Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin, "Differentially
Private Set Union" (ICML 2020), with the update policy ``method``. Person-level (ε, δ)-DP in two steps,
from the parameters alone (:func:`dp_spark.mechanisms.set_union.plan_set_union`):

- the noisy histogram: exact discrete Laplace noise on the grid of 2^-20, the weights rounded to it
  at random (ε, 0) for ``count`` (ℓ1 sensitivity Δ0), ``weighted-laplace``, ``policy-laplace`` and
  ``policy-greedy`` (ℓ1 sensitivity 1) (:mod:`dp_spark.mechanisms.set_union.laplace_grid`), or, for the
  Gaussian policies, exact discrete Gaussian noise on a grid of 2^-g (g <= 40) added to the capped weight
  floored onto it, ρ_n-zCDP converted to (ε, δ/2) (:mod:`dp_spark.mechanisms.set_union.gaussian_grid`);
- the threshold ρ: an item only the added person holds is released with probability at most δ
  (Laplace) or δ/2 (Gaussian): (0, δ) resp. (0, δ/2). ``policy-greedy`` (Carvalho, Wang, Gondara,
  AAAI 2022) has its own ρ (:mod:`dp_spark.mechanisms.set_union.greedy`).

No pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dp_spark import checks
from dp_spark.accounting import ApproxDP
from dp_spark.errors import ParameterError
from dp_spark.keys import MAX_GROUP_KEYS
from dp_spark.mechanisms.set_union import SHARD_CUTOFFS, SetUnionPlan, plan_set_union
from dp_spark.plan import GroupParams, Plan, Step, builds, check_group_column, param, set_checked
from dp_spark.plans import EPSILON_HELP, ITEM_COL_HELP, PERSON_COL_HELP, SEED_HELP
from dp_spark.summaries.set_union import DEFAULT_SHARDS, POLICIES, SEQUENTIAL

RELEASE = "set-union"
METHODS = POLICIES
ALGORITHM = "Gopi et al. 2020, DP Set Union (Algorithm 1)"
#: The policies from a later paper, named in the plan's ``algorithm``.
ALGORITHM_OF = {"policy-greedy": "Carvalho, Wang, Gondara 2022, Policy Greedy, in " + ALGORITHM}

#: Public limits of the parameters that size memory or work, checked before Spark starts.
MAX_ITEMS_LIMIT = 100_000
SHARDS_LIMIT = 4_096
PARTITIONS_LIMIT = 100_000
ALPHA_LIMIT = 1_000.0
LIMITS = {
    "max_items": (MAX_ITEMS_LIMIT, "Δ0 sizes every person's kept item list (one Spark row), the policy "
                  "kernel's work per person and the threshold search over t = 1..Δ0; beyond a few "
                  "hundred it only lowers each item's weight (the paper's best results use Δ0 <= 300)"),
    "shards": (SHARDS_LIMIT, "each shard is one Spark task building its own histogram of up to the "
               "whole vocabulary, and the per-shard cutoff Γ/√shards shrinks toward 0"),
    "partitions": (PARTITIONS_LIMIT, "each partition of the noise step is one Spark task"),
}


def limited(value, name: str) -> int:
    """A whole number from 1 to the public limit of ``name`` (LIMITS)."""
    limit, why = LIMITS[name]
    return checks.integer(value, name, 1, limit, f" ({why})")


def _alpha(value) -> float:
    alpha = checks.number(value, "alpha")
    if alpha < 0:
        raise ParameterError(f"alpha must be a finite number >= 0; got {value!r}.")
    if alpha > ALPHA_LIMIT:
        raise ParameterError(
            f"alpha must be at most {ALPHA_LIMIT:g} (got {alpha:g}): the cutoff Γ = ρ + α·scale "
            "only moves utility, which falls once α passes a few units (the paper's Figure 5)."
        )
    return alpha


def budget_steps(numeric: SetUnionPlan) -> list[Step]:
    """The two steps of the release's (ε, δ) (module docstring), labelled with their public constants."""
    if numeric.noise == "laplace":
        noise_step = (
            f"noisy histogram: discrete Laplace mechanism on the grid of 2^-{numeric.grid_bits} (weights rounded "
            f"to it at random), scale {numeric.scale:.4g}, l1 sensitivity {numeric.sensitivity:g}"
        )
    else:
        noise_step = (
            f"noisy histogram: discrete Gaussian mechanism on the grid of 2^-{numeric.grid_bits} (weights capped "
            f"and floored onto it), sigma {numeric.scale:.4g}, l2 sensitivity {numeric.sensitivity:.6g}"
        )
    threshold_step = (
        f"threshold rho = {numeric.rho:.4g}: items held only by the added person stay "
        "hidden except with this probability"
    )
    return [
        Step("noise", noise_step, ApproxDP(numeric.epsilon, numeric.noise_delta)),
        Step("threshold", threshold_step, ApproxDP(0.0, numeric.threshold_delta)),
    ]


#: The columns of ``release.groups`` besides the group column (kept names).
GROUP_COLUMNS = ("item", "error")
#: What ``max_groups`` means here (one mechanism on (group, item): no per-group split).
MAX_GROUPS_MEANING = ("optional: each person keeps the rows of at most m of their groups before the "
                      "Δ0 restriction (a per-person transformation; ε and δ are not divided); none: "
                      "Δ0 already bounds a person's (group, item) pairs over all groups")


@dataclass(frozen=True, kw_only=True)
class Params(GroupParams):
    """Every set-union parameter (default, CLI help, public limit), checked on construction. Grouped, the
    one mechanism runs on the composite key (group, item) and ``max_groups`` is an optional cap
    (:data:`MAX_GROUPS_MEANING`). Up to :data:`~dp_spark.keys.MAX_GROUP_KEYS` keys: the per-group work
    is the one Spark stage on composite keys and per-group counts in arrays."""

    MAX_KEYS: ClassVar[int] = MAX_GROUP_KEYS

    epsilon: float = param(help=EPSILON_HELP, cli_default=1.0)
    delta: float = param(help="privacy parameter δ spent by the release (0 < δ < 1)", cli_default=1e-6)
    max_items: int = param(100, f"Δ0: most distinct items one person contributes (at most {MAX_ITEMS_LIMIT:,})",
                           limit=MAX_ITEMS_LIMIT)
    method: str = param("policy-gaussian", "histogram update policy", choices=METHODS)
    alpha: float = param(2.0, f"policy cutoff Γ = ρ + alpha·(noise scale) (0 to {ALPHA_LIMIT:g})", limit=ALPHA_LIMIT)
    shards: int | None = param(None, "policy-*: number of person shards (default 8, independent of the "
                               f"cluster; 1 = the paper's single pass; at most {SHARDS_LIMIT:,})",
                               limit=SHARDS_LIMIT, cli_type=int)
    shard_cutoff: str = param("scaled", "policy-*: cutoff in each shard, Γ/√shards ('scaled') or Γ ('full'); "
                              "privacy is the same", choices=SHARD_CUTOFFS)
    person_col: str = param("person_id", PERSON_COL_HELP)
    item_col: str = param("item", ITEM_COL_HELP)
    count: bool = param(True, "also release the number of released items", cli=False)
    partitions: int | None = param(None, "partitions of the noise step (default: two per task slot of the "
                                   "cluster; performance only: the released set does not depend on it, and "
                                   "more than 256, the noise buckets, leave some partitions empty)",
                                   limit=PARTITIONS_LIMIT,
                                   cli=False)
    seed: int | None = param(None, SEED_HELP, cli_type=int)

    def __post_init__(self):
        set_checked(self, epsilon=checks.epsilon(self.epsilon))  # within checks.EPSILON_RANGE, before any charge
        set_checked(self, delta=checks.open_unit(self.delta, "delta"))
        checks.distinct_columns(person_col=self.person_col, item_col=self.item_col)
        set_checked(self, method=checks.choice(self.method, "method", METHODS))
        set_checked(self, max_items=limited(self.max_items, "max_items"))
        set_checked(self, alpha=_alpha(self.alpha))
        set_checked(self, shards=None if self.shards is None else limited(self.shards, "shards"))
        set_checked(self, partitions=None if self.partitions is None else limited(self.partitions, "partitions"))
        set_checked(self, count=checks.boolean(self.count, "count"))
        set_checked(self, shard_cutoff=checks.choice(self.shard_cutoff, "shard_cutoff", SHARD_CUTOFFS))
        checks.seed(self.seed)
        self.check_groups()  # then the group column's name (group_by None: nothing to clash)
        check_group_column(self.group_by, GROUP_COLUMNS, person_col=self.person_col, item_col=self.item_col)


@builds(Params)
def plan(params: Params) -> Plan:
    """The set-union release's plan (module docstring); an ε whose calibration overflows is refused.
    ``shards`` of a sequential policy defaults to :data:`~dp_spark.summaries.set_union.DEFAULT_SHARDS`."""
    p = params
    numeric = plan_set_union(p.epsilon, p.delta, p.max_items, p.method, p.alpha)  # refuses an ε that overflows
    parameters = {
        "epsilon": p.epsilon, "delta": p.delta, "method": p.method, "max_items": p.max_items, "alpha": p.alpha,
        "person_col": p.person_col, "item_col": p.item_col, "noise": numeric.noise,
        "algorithm": ALGORITHM_OF.get(p.method, ALGORITHM),
        "count": p.count, "partitions": p.partitions,
    }
    if p.method in SEQUENTIAL:
        parameters["shards"] = DEFAULT_SHARDS if p.shards is None else p.shards
        parameters["shard_cutoff"] = p.shard_cutoff
    size = " and its size" if p.count else ""
    releases = (f"the {p.item_col} values whose weight plus noise clears the threshold "
                f"rho = {numeric.rho:.4g} (a Spark DataFrame, never their weights){size}")
    if p.group_by is not None:
        parameters.update(p.group_parameters())
        parameters["max_groups"] = p.max_groups if p.max_groups is not None else "none"
        parameters["max_groups_meaning"] = MAX_GROUPS_MEANING
        releases = (f"the ({p.group_by}, {p.item_col}) pairs of the public keys whose weight plus noise clears the "
                    f"threshold rho = {numeric.rho:.4g}: one set union on the composite key, Δ0 = {p.max_items} "
                    f"pairs per person over all groups (a Spark DataFrame, never their weights){size}")
    return Plan(
        release=RELEASE,
        guarantee=ApproxDP(p.epsilon, p.delta),
        steps=budget_steps(numeric),
        parameters=parameters,
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {p.person_col} value)",
        releases=releases,
    )


def mechanism_plan(release_plan: Plan) -> SetUnionPlan:
    """The mechanism's constants (noise scale, ρ, Γ) of a release plan: the deterministic
    :func:`dp_spark.mechanisms.set_union.plan_set_union` at the calibrated ε and δ (``plan.params``)."""
    p = release_plan.parameters
    return plan_set_union(release_plan.params.epsilon, release_plan.params.delta, p["max_items"], p["method"],
                          p["alpha"])
