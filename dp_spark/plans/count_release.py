"""The count-release plan: parameters, (ρ, δ) and its split (Rogers 2024).

Rogers, "Private Count Release: A Simple and Scalable Approach for Private Data Analytics" (arXiv
2403.05073); ALGORITHMS.md 5.2-5.3. Person-level δ-approximate ρ-zCDP, stated with its (ε, δ + δ')
equivalent ε = ρ + 2·sqrt(ρ·ln(1/δ')), δ' = ``conversion_delta`` (default δ). Budget split, from the
parameters alone:

- ``method="pcr"`` (Algorithm 2): one step, the whole (ρ, δ), spent adaptively by the Private Count
  Release loop under its privacy filter (Unknown Domain Gumbel selections at a growing ε, discrete
  Gaussian counts: :mod:`dp_spark.mechanisms.count_release.loop`); what each part took, and what the
  filter held unused, is data-dependent and reported in the release's budget split.
- ``method="bounded"`` (the contribution-bounding baseline): Gaussian-threshold partition selection
  (α·ρ, all of δ) and discrete Gaussian counts (the rest of ρ), calibrated by
  :func:`dp_spark.mechanisms.count_release.bounded_plan`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dp_spark import checks
from dp_spark.accounting import ZCDP
from dp_spark.errors import ParameterError
from dp_spark.keys import MAX_GROUP_KEYS
from dp_spark.mechanisms.count_release.bounded import BoundedPlan, bounded_plan
from dp_spark.mechanisms.count_release.loop import ACCURACY_FACTOR, DELTA_MIN, EPSILON_MIN, check_pcr_parameters
from dp_spark.plan import GroupParams, Plan, Step, builds, check_group_column, param, set_checked
from dp_spark.plans import ITEM_COL_HELP, PERSON_COL_HELP, RHO_HELP_TAIL, SEED_HELP

RELEASE = "count-release"
METHODS = ("pcr", "bounded")

#: Public limits, checked before Spark starts: pcr collects the k̄ + 1 largest counts to the driver and
#: runs up to k̄ rounds there; bounded keeps up to m items per person (sensitivity sqrt(m)).
KBAR_LIMIT = 1_000_000
MAX_ITEMS_LIMIT = 100_000
KBAR_WHY = " (that many counts are collected to the driver; lower kbar)"
MAX_ITEMS_WHY = " (the noise grows with sqrt(max_items); lower max_items)"

PCR_STEP = ("Private Count Release loop: Unknown Domain Gumbel selections and discrete Gaussian counts, "
            "spent adaptively under a privacy filter")


def calibration(plan: Plan) -> BoundedPlan:
    """The public calibration (σ_s, τ, σ_c, T) of a ``method="bounded"`` plan, from its parameters only,
    at the calibrated ρ and δ (``plan.params``)."""
    return bounded_plan(plan.params.rho, plan.params.delta, plan["max_items"], plan["alpha"], plan["relative_error"])


def _bounded_steps(calibrated: BoundedPlan) -> list[Step]:
    m = calibrated.max_items
    return [
        Step("selection", f"selection: Gaussian thresholding on counts bounded to {m} items per person "
         f"(σ = {calibrated.selection_sigma:.4g}, threshold {calibrated.selection_threshold:.4g})",
         calibrated.selection_cost),
        Step("counts", f"counts: discrete Gaussian, L2 sensitivity sqrt({m}), σ = {calibrated.count_sigma:.4g}",
         calibrated.count_cost),
    ]


#: The columns of ``release.groups`` besides the group column (``item``, ``count``: kept names).
GROUP_COLUMNS = ("item", "count", "sigma", "error")
#: What ``max_groups`` means here (one mechanism on (group, item): no per-group split).
MAX_GROUPS_MEANING = ("optional: each person keeps the rows of at most m of their groups first (a per-person "
                      "transformation; ρ and δ are not divided); none: each (group, item) count moves by at "
                      "most 1 per person already, as every item count does ungrouped")


@dataclass(frozen=True, kw_only=True)
class Params(GroupParams):
    """Every count-release parameter (default, CLI help, public limit), checked on construction,
    including the loop's rule that one round fits (``method="pcr"``). Grouped, the one mechanism runs on
    the composite key (group, item) and ``max_groups`` is an optional cap (:data:`MAX_GROUPS_MEANING`). Up to
    :data:`~dp_spark.keys.MAX_GROUP_KEYS` keys: the per-group work is the one Spark stage on composite keys,
    the bounded baseline's released pairs stay in Spark, and the per-key numbers are one array."""

    MAX_KEYS: ClassVar[int] = MAX_GROUP_KEYS
    #: groups=None: the keys' set-union is paid as a δ-approximate ρ-zCDP share of (ρ, δ)
    #: (:func:`dp_spark.plan.with_private_keys`).
    KEYS_BUDGET: ClassVar[str | None] = "rho"

    rho: float = param(help=f"ρ: the release is δ-approximate ρ-zCDP; {RHO_HELP_TAIL}", cli_default=0.5)
    delta: float = param(help="δ of the δ-approximate ρ-zCDP guarantee", cli_default=1e-6)
    relative_error: float = param(0.1, "target relative error r of a released count")
    kbar: int = param(10000, "pcr: how many of the largest counts are collected (and the most counts "
                      f"released; at most {KBAR_LIMIT:,})", limit=KBAR_LIMIT)
    method: str = param("pcr", "pcr (Private Count Release, no contribution bound) or bounded "
                        "(contribution-bounding baseline, needs --max-items)", choices=METHODS)
    max_items: int | None = param(None, f"bounded: m, the most distinct items kept per person (at most "
                                  f"{MAX_ITEMS_LIMIT:,})", limit=MAX_ITEMS_LIMIT, cli_type=int)
    alpha: float = param(0.5, "bounded: share of ρ spent on selecting items")
    count_threshold: bool = param(False, "bounded: drop noisy counts below (2+r)σ/r", flag=True)
    epsilon_min: float = param(EPSILON_MIN, "pcr: ε* of the first selection (grown by √2 after ⊥)")
    delta_min: float = param(DELTA_MIN, "pcr: δ* spent by each selection")
    accuracy_factor: float = param(ACCURACY_FACTOR, "pcr: a in σ = (r/a)·T")
    conversion_delta: float | None = param(None, "δ' of the stated (ε, δ + δ') equivalent (default δ)",
                                           cli_type=float)
    person_col: str = param("person_id", PERSON_COL_HELP)
    item_col: str = param("item", ITEM_COL_HELP)
    seed: int | None = param(None, SEED_HELP, cli_type=int)

    def __post_init__(self):
        checks.distinct_columns(person_col=self.person_col, item_col=self.item_col)
        set_checked(self, method=checks.choice(self.method, "method", METHODS))
        set_checked(self, rho=checks.rho(self.rho))  # within checks.RHO_RANGE, before any charge
        set_checked(self, delta=checks.open_unit(self.delta, "delta"))
        set_checked(self, relative_error=checks.positive(self.relative_error, "relative_error", " (e.g. 0.1 for 10%)"))
        set_checked(self, kbar=checks.integer(self.kbar, "kbar", 1, KBAR_LIMIT, KBAR_WHY))
        if self.max_items is not None:
            set_checked(self, max_items=checks.integer(self.max_items, "max_items", 1, MAX_ITEMS_LIMIT, MAX_ITEMS_WHY))
        set_checked(self, alpha=checks.open_unit(self.alpha, "alpha"))
        set_checked(self, count_threshold=checks.boolean(self.count_threshold, "count_threshold"))
        checks.seed(self.seed)
        set_checked(self, conversion_delta=self.delta if self.conversion_delta is None
                    else checks.open_unit(self.conversion_delta, "conversion_delta"))
        if self.delta + self.conversion_delta >= 1:
            raise ParameterError("delta + conversion_delta must stay below 1; lower conversion_delta.")
        self.check_groups()  # then the group column's name (group_by None: nothing to clash)
        check_group_column(self.group_by, GROUP_COLUMNS, person_col=self.person_col, item_col=self.item_col)
        if self.method == "pcr":
            # ε*, δ*, a and the rule that one round fits (the loop's own check)
            *_, epsilon_min, delta_min, accuracy_factor = check_pcr_parameters(
                self.rho, self.delta, self.relative_error, self.kbar, self.epsilon_min, self.delta_min,
                self.accuracy_factor)
            set_checked(self, epsilon_min=epsilon_min, delta_min=delta_min, accuracy_factor=accuracy_factor)
        elif self.max_items is None:
            raise ParameterError(
                "method 'bounded' needs max_items (m, the most distinct items kept per person; "
                "--max-items). Choose it from public knowledge: a percentile of the data is "
                "not private."
            )


@builds(Params)
def plan(params: Params) -> Plan:
    """The count-release's plan (person-level δ-approximate ρ-zCDP)."""
    p = params
    rho, delta, kbar, max_items = p.rho, p.delta, p.kbar, p.max_items
    parameters = {
        "rho": rho, "delta": delta, "relative_error": p.relative_error, "method": p.method,
        "person_col": p.person_col, "item_col": p.item_col, "conversion_delta": p.conversion_delta,
        "noise": "discrete gaussian",
    }
    if p.method == "pcr":
        parameters.update(kbar=kbar, epsilon_min=p.epsilon_min, delta_min=p.delta_min,
                          accuracy_factor=p.accuracy_factor)
        steps = [Step("pcr", PCR_STEP, ZCDP(rho, delta))]
        releases = (f"up to {kbar:,} noisy counts of distinct persons per {p.item_col} value, each with its σ "
                    "(as many as ρ and δ allow)")
        notes = ["the loop spends adaptively: the release's budget split shows what its selections and "
                 "counts took, and the part its privacy filter held unused (still counted)"]
    else:
        calibrated = bounded_plan(rho, delta, max_items, p.alpha, p.relative_error)
        parameters.update(max_items=max_items, alpha=p.alpha, count_threshold=p.count_threshold)
        steps = _bounded_steps(calibrated)
        releases = (f"noisy counts of distinct persons of the {p.item_col} values that clear a noisy threshold "
                    f"(each person keeping at most {max_items} items), each with its σ")
        notes = ([f"counts below (2 + r)σ/r = {calibrated.count_threshold:.4g} are dropped"]
                 if p.count_threshold else [])
    if p.group_by is not None:
        parameters.update(p.group_parameters())
        parameters["max_groups"] = p.max_groups if p.max_groups is not None else "none"
        parameters["max_groups_meaning"] = MAX_GROUPS_MEANING
        releases = (f"{releases}, for the ({p.group_by}, {p.item_col}) pairs of the public keys: one release on the "
                    "composite key, the budget not split between groups")
    guarantee = ZCDP(rho, delta)
    return Plan(
        release=RELEASE,
        guarantee=guarantee,
        steps=steps,
        parameters=parameters,
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {p.person_col} value)",
        releases=releases,
        equivalent=guarantee.to_approx(p.conversion_delta),
        notes=notes,
    )
