"""The distinct-count plan: parameters, ε and its split (Knop & Steinke 2023).

Budget split (basic composition, total ε-DP), from the parameters alone:

- ``method="greedy"`` with ``shards=None``: ε/100 for a discrete Laplace count of persons that picks
  the number of greedy shards; ``method="matching"``: ε/100 for the private size check of the
  truncated (person, item) pairs (:mod:`dp_spark.releases.distinct_count`);
- the rest ε' in halves: the Generalized Exponential Mechanism (scores normalised by max(l, l'),
  permute-and-flip: :func:`dp_spark.mechanisms.distinct_count.select_bound`) picks the per-person bound
  among the public :func:`bound_candidates` l = 1, 4, 16, 64, … below ``max_bound``, and ``max_bound``,
  each with its own GEM threshold (:func:`candidate_betas`: t = (2/ε)·ln 20 for 1, 4, 16, 64, larger
  for the far ones); the discrete Laplace mechanism releases the count.

Per group (``group_by``) with a given ``max_groups`` m: the same steps per group at ε/m, or, with
``noise="gaussian"`` (asked for by name), ρ-zCDP with ρ = ε²/2: the same shares of ρ, the bound choice
and the discrete Gaussian count per group (:mod:`dp_spark.mechanisms.distinct_count.bound`). With
``max_groups=None``: [shards ε/100], ε/4 for the joint choice of the cap m and ONE bound l for all
groups (GEM over Σ_g (c_{g,m,l} − margin(m, l)), sensitivity m·l:
:mod:`dp_spark.mechanisms.distinct_count.cap_bound`), the rest for the counts (each group at
ε_count/m); under zCDP the same shares of ρ (the choice by the exponential mechanism at √(8ρ_cap)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

from dp_spark import checks
from dp_spark.accounting import ZCDP, PureDP, pure_to_zcdp, remainder
from dp_spark.accounting.exact import written
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.distinct_count.cap_bound import check_exact_scores
from dp_spark.plan import (ZCDP_EQUIVALENT_DELTA, GroupParams, Plan, Step, builds, check_group_column, counted_keys,
                           param, set_checked)
from dp_spark.plans import EPSILON_HELP, ITEM_COL_HELP, PERSON_COL_HELP, SEED_HELP
from dp_spark.settings.distinct_count import (  # noqa: F401 - the settings the stage and mechanism share, re-exported
    BOUND_GRID_RATIO,
    DEFAULT_EDGE_LIMIT,
    DEFAULT_MAX_BOUND,
    FAR_DECAY,
    LIMITS,
    MAX_BOUND_LIMIT,
    MAX_EDGE_LIMIT,
    MATCHING_MAX_BOUND,
    MAX_SHARDS,
    METHODS,
    SELECTION_BETA,
    SELECTION_REFERENCE_CANDIDATES,
    bound_candidates,
    default_max_bound,
    limited,
    candidate_betas,
    gem_shifts,
)

RELEASE = "distinct-count"
#: The one key of an ungrouped run: the edge table's constant group (``stages.edges.UNGROUPED``).
UNGROUPED_KEY = 0
#: Most group keys (public, or kept of the privately chosen): every group's mechanism runs vectorised
#: over numpy arrays on the driver (:func:`dp_spark.mechanisms.distinct_count.cap_bound.release_groups_batch`,
#: about 0.5 s and tens of MB at 100,000 groups) and the grouped greedy's summary, groups × bound
#: candidates counts (× the cap candidates with ``max_groups=None``), comes to the driver as Arrow.
MAX_DISTINCT_GROUP_KEYS = 100_000
SHARD_EPSILON_SHARE = 0.01
MATCHING_EPSILON_SHARE = 0.01
#: The automatic shard count reads the persons of a fixed, public 1-in-r hash sample and scales the noisy
#: count up; r = :func:`person_sample` (64 from ε = 1, 16 at ε = 0.25, 1 below ε = 0.02). Sampling error
#: about sqrt(r·persons). PERSON_SAMPLE chosen by measurement: see benchmarks/distinct_count_speed.py.
PERSON_SAMPLE = 64
SAMPLE_NOISE_PERSONS = 6_400
SHARD_STEP = ("shard count (discrete Laplace on the number of persons in a fixed hash sample of 1 in up to "
              f"{PERSON_SAMPLE})")


def person_sample(epsilon_shards: float) -> int:
    """1 in how many persons the automatic shard count reads, from the step's ε only: the largest power
    of two r <= PERSON_SAMPLE whose noise scale r/ε_shards (in persons) is at most SAMPLE_NOISE_PERSONS
    (3% of a 200,000-person shard), or 1."""
    r = PERSON_SAMPLE
    while r > 1 and r > SAMPLE_NOISE_PERSONS * float(epsilon_shards) * (1 + 1e-9):
        r //= 2
    return r
MATCHING_STEP = "matching size check (discrete Laplace on the number of truncated (person, item) pairs)"
SELECT_STEP = ("bound selection (Generalized Exponential Mechanism scores with max(l, l') denominators, "
               "permute-and-flip, over l = 1, 4, 16, 64, ... "
               f"(powers of {BOUND_GRID_RATIO} below max_bound, and max_bound), GEM beta "
               f"{SELECTION_BETA / SELECTION_REFERENCE_CANDIDATES:g} per candidate for the first "
               f"{SELECTION_REFERENCE_CANDIDATES}, {FAR_DECAY} times less for each further one)")
COUNT_STEP = "count (discrete Laplace mechanism)"
#: Share of ε of the grouped top-k's choice of the cap m (GEM over the rows kept:
#: :mod:`dp_spark.releases.group_cap`); the grouped distinct-count uses JOINT_CAP_* instead.
MAX_GROUPS_EPSILON_SHARE = 0.05
#: The noise of a grouped release: "laplace" (pure ε-DP: discrete Laplace m·ℓ/ε' per group, selections
#: at ε'/m) or "gaussian" (ρ-zCDP with ρ = ε²/2, the zCDP level pure ε-DP implies: discrete Gaussian
#: √m·ℓ/√(2ρ') per group, selections at √(8ρ'/m); :mod:`dp_spark.mechanisms.distinct_count.bound`).
NOISES = ("laplace", "gaussian")
#: ``noise=None`` with ``group_by``: "laplace", the pure ε-DP the caller asked for. "gaussian" is far more
#: accurate (benchmarks/grouped.py) but a weaker guarantee (≈ (ε + 2√(ρ ln 1/δ), δ)-DP): asked for by name.
DEFAULT_GROUPED_NOISE = "laplace"
GAUSSIAN_SELECT_STEP = ("bound selection (Generalized Exponential Mechanism scores with max(l, l') denominators, "
                        "exponential mechanism (ε-bounded range, so ε²/8-zCDP), over l = 1, 4, 16, 64, ... "
                        f"(powers of {BOUND_GRID_RATIO} below max_bound, and max_bound), GEM beta "
                        f"{SELECTION_BETA / SELECTION_REFERENCE_CANDIDATES:g} per candidate for the first "
                        f"{SELECTION_REFERENCE_CANDIDATES}, {FAR_DECAY} times less for each further one)")
GAUSSIAN_COUNT_STEP = "count (discrete Gaussian mechanism)"
MAX_GROUPS_STEP = ("group cap m (Generalized Exponential Mechanism over the rows kept, sum over persons of "
                   "min(groups, m), sensitivity m, for m = 1..M, M the number of keys: public, or released by the key step)")
#: Share of ε of the joint choice of the cap m and one bound l (``max_groups=None``): the middle of the
#: band where the error is flat, chosen by measurement: see benchmarks/grouped.py.
JOINT_CAP_EPSILON_SHARE = 0.25
JOINT_CAP_STEP = ("group cap m and bound l, jointly (Generalized Exponential Mechanism scores with max(m·l, m'·l') "
                  "denominators over sum over groups of (count at cap m and bound l minus its noise margin), "
                  "sensitivity m·l, for m = 1, 2, 4, ... and M (M the number of keys: public, or released by the key step) and l = 1, 4, 16, 64, "
                  f"... below max_bound and max_bound; GEM beta {SELECTION_BETA / SELECTION_REFERENCE_CANDIDATES:g} per "
                  f"bound for the first {SELECTION_REFERENCE_CANDIDATES}, {FAR_DECAY} times less for each further "
                  "one; {sampler})")
JOINT_COUNT_STEP = "count at the chosen m and l (discrete {noise} mechanism), per group at {share}/m"


@dataclass(frozen=True, kw_only=True)
class Params(GroupParams):
    """Every distinct-count parameter (default, CLI help, public limit), checked on construction. Grouped,
    up to :data:`MAX_DISTINCT_GROUP_KEYS` keys."""

    MAX_KEYS: ClassVar[int] = MAX_DISTINCT_GROUP_KEYS

    epsilon: float = param(help=EPSILON_HELP, cli_default=1.0)
    beta: float = param(0.05, "the lower bound holds with probability 1 - beta")
    max_bound: int | None = param(None, f"largest per-person bound l considered: the candidates are 1, 4, 16, ... "
                                  f"below it and itself (default {DEFAULT_MAX_BOUND:,}; {MATCHING_MAX_BOUND:,} for "
                                  "method matching, whose size check counts each person's first max-bound items; at "
                                  f"most {MAX_BOUND_LIMIT:,})", limit=MAX_BOUND_LIMIT, cli_type=int)
    method: str = param("greedy", "how bounded counts are computed", choices=METHODS)
    shards: int | None = param(None, "greedy: number of person shards (default: one per 200,000 persons, "
                               f"from a noisy count of a hash sample of 1 in up to {PERSON_SAMPLE} persons that "
                               f"spends ε/100; at most {MAX_SHARDS:,})", limit=MAX_SHARDS, cli_type=int)
    edge_limit: int = param(DEFAULT_EDGE_LIMIT, "matching: most (person, item) pairs collected to the "
                            f"driver (at most {MAX_EDGE_LIMIT:,}); a noisy pair count (ε/100) decides whether "
                            "matching fits, else the greedy is used", limit=MAX_EDGE_LIMIT)
    person_col: str = param("person_id", PERSON_COL_HELP)
    item_col: str = param("item", ITEM_COL_HELP)
    seed: int | None = param(None, SEED_HELP, cli_type=int)
    noise: str | None = param(None, "per-group noise of a grouped release: laplace (pure ε-DP) or gaussian "
                              "(ρ-zCDP with ρ = ε²/2, √m scaling across a person's m groups: more accurate, but a "
                              "weaker guarantee than ε-DP); default laplace; an ungrouped release is pure ε-DP "
                              "(laplace)", choices=NOISES, cli_type=str)

    def __post_init__(self):
        set_checked(self, epsilon=checks.epsilon(self.epsilon))  # within checks.EPSILON_RANGE, before any charge
        set_checked(self, beta=checks.open_unit(self.beta, "beta"))
        checks.distinct_columns(person_col=self.person_col, item_col=self.item_col)
        set_checked(self, method=checks.choice(self.method, "method", METHODS))
        set_checked(self, max_bound=default_max_bound(self.method) if self.max_bound is None
                    else limited(self.max_bound, "max_bound"))
        set_checked(self, shards=None if self.shards is None else limited(self.shards, "shards"))
        set_checked(self, edge_limit=limited(self.edge_limit, "edge_limit"))
        checks.seed(self.seed)
        self.check_groups()
        if self.noise is not None:
            set_checked(self, noise=checks.choice(self.noise, "noise", NOISES))
        if self.group_by is None:
            if self.noise not in (None, "laplace"):
                raise ParameterError(f"noise={self.noise!r} is available per group only (with group_by=); an "
                                     "ungrouped distinct count is pure ε-DP (noise='laplace').")
        else:
            # release.groups' columns: a group column of the same name would fail after spending
            check_group_column(self.group_by, ("estimate", "lower_bound", "bound", "error"),
                               person_col=self.person_col, item_col=self.item_col)
            if self.method != "greedy":
                raise ParameterError(f"group_by runs the per-group greedy (method='greedy'); method={self.method!r} "
                                     "is not available per group.")

    def keys_and_cap(self) -> tuple[tuple | None, int | None]:
        """(keys released, cap m of groups per person; None: chosen privately with the bound). An
        ungrouped run is the one-key grouped run (:data:`UNGROUPED_KEY`, m = 1)."""
        return ((UNGROUPED_KEY,), 1) if self.group_by is None else (self.groups, self.max_groups)


@builds(Params)
def plan(params: Params) -> Plan:
    """The distinct-count release's plan (ε-DP, person level; zCDP with ``noise="gaussian"``)."""
    p = params
    epsilon, method, shards = p.epsilon, p.method, p.shards
    if method == "greedy" and shards is None:
        pre = [Step("shards", SHARD_STEP, epsilon * SHARD_EPSILON_SHARE)]
    elif method == "matching":
        pre = [Step("matching", MATCHING_STEP, epsilon * MATCHING_EPSILON_SHARE)]
    else:
        pre = []
    joint = p.keys_and_cap()[1] is None
    noise = p.noise or DEFAULT_GROUPED_NOISE  # "laplace", as every ungrouped run
    if joint:  # the cap m and one bound l for all groups, chosen together (module doc)
        sampler = ("exponential mechanism (ε-bounded range, so ε²/8-zCDP)" if noise == "gaussian"
                   else "permute-and-flip")
        pre.append(Step("max_groups", JOINT_CAP_STEP.format(sampler=sampler), epsilon * JOINT_CAP_EPSILON_SHARE))
    if noise == "gaussian":
        return _gaussian_plan(p, pre)
    rest = remainder(epsilon, *(s.cost for s in pre))  # the parts sum to <= epsilon exactly
    if joint:
        _check_joint(p, "laplace", rest)
    steps = [Step(s.name, s.label, PureDP(s.cost)) for s in pre]
    if joint:
        steps.append(Step("count", JOINT_COUNT_STEP.format(noise="Laplace", share="ε"), PureDP(rest)))
    else:
        steps += [Step("select", _label(p, SELECT_STEP), PureDP(rest / 2.0)),
                  Step("count", _label(p, COUNT_STEP), PureDP(rest / 2.0))]
    parameters = _parameters(p, "discrete laplace")
    return Plan(
        release=RELEASE,
        guarantee=PureDP(epsilon),
        steps=steps,
        parameters=parameters,
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {p.person_col} value)",
        releases=_releases(p),
    )


def _gaussian_plan(p: Params, pre: list) -> Plan:
    """The grouped ρ-zCDP plan, ρ = :func:`grouped_rho`: the pure steps' shares of ε become the same
    shares of ρ (a pure mechanism at √(2ρ_step) is ρ_step-zCDP, Bun–Steinke 2016 Prop. 1.4; the group-cap
    GEM at √(8ρ_step) is ε-bounded range, so ε²/8-zCDP); the rest ρ' in halves for selections and counts
    (max_groups=None: all for the counts) (:mod:`dp_spark.mechanisms.distinct_count.bound`)."""
    rho = grouped_rho(p.epsilon)
    shares = [s.cost / p.epsilon * rho for s in pre]
    rest = remainder(rho, *shares)
    steps = [Step(s.name, s.label, ZCDP(share)) for s, share in zip(pre, shares)]
    m = p.max_groups
    if m is None:  # the joint choice of m and l (plan), then every group's count at ρ_count/m
        _check_joint(p, "gaussian", rest)
        steps.append(Step("count", JOINT_COUNT_STEP.format(noise="Gaussian", share="ρ") +
                          " (sigma √m·l/√(2ρ): zCDP composition over a person's ≤ m groups)", ZCDP(rest)))
    else:
        steps += [Step("select", gaussian_label(GAUSSIAN_SELECT_STEP, m, "√(8ρ/m) per group"), ZCDP(rest / 2.0)),
                  Step("count", gaussian_label(GAUSSIAN_COUNT_STEP, m, "sigma √m·l/√(2ρ) per group"),
                       ZCDP(rest / 2.0))]
    return Plan(
        release=RELEASE,
        guarantee=ZCDP(rho),
        equivalent=ZCDP(rho).to_approx(ZCDP_EQUIVALENT_DELTA),
        steps=steps,
        parameters={**_parameters(p, "discrete gaussian"), "rho": rho},
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {p.person_col} value)",
        releases=_releases(p),
    )


def _check_joint(p: Params, noise: str, count: float) -> None:
    """Refuse, before reading, a joint choice whose scores could leave exact int64 (``check_exact_scores``);
    G is a list's length, else the limit ``Params.MAX_KEYS`` (a frame's, a file's or privately chosen keys
    are not counted before reading)."""
    n_keys = counted_keys(p.groups) or type(p).MAX_KEYS
    select = p.epsilon * JOINT_CAP_EPSILON_SHARE  # the choice's ε (under zCDP √(8ρ_cap): bounded below here)
    if noise == "gaussian":
        select = 0.99 * math.sqrt(8 * JOINT_CAP_EPSILON_SHARE * grouped_rho(p.epsilon))
    check_exact_scores(n_keys, bound_candidates(p.max_bound), p.beta, noise, count, select=select)


def grouped_rho(epsilon: float) -> float:
    """ρ = ε²/2 rounded up (``pure_to_zcdp``), then to a float whose binary value is at most its written
    decimal, so the charged decimal covers what the mechanisms run at (``plan._check_calibration``)."""
    rho = pure_to_zcdp(epsilon)
    while math.isfinite(rho) and Fraction(rho) > written(rho):
        rho = math.nextafter(rho, math.inf)
    return rho


def gaussian_label(label: str, max_groups: int | None, how: str) -> str:
    """A step's label in a grouped ρ-zCDP run: once per group at ρ/m (``how``); a person's ≤ m groups
    compose to ρ, the others do not change."""
    if max_groups == 1:
        return f"{label}, per group at this full ρ (one group per person: parallel composition)"
    m = "m for the privately chosen cap m" if max_groups is None else str(max_groups)
    return (f"{label}, per group at ρ/{m} ({how}; each person in at most that many groups: zCDP composition "
            "over them, the other groups unchanged)")


def _parameters(p: Params, noise: str) -> dict:
    parameters = {
        "epsilon": p.epsilon, "beta": p.beta, "max_bound": p.max_bound, "method": p.method,
        "person_col": p.person_col, "item_col": p.item_col, "noise": noise,
    }
    if p.method != "sampling":
        parameters["shards"] = p.shards
    parameters.update(p.group_parameters())  # {} when not grouped: an ungrouped plan is unchanged
    if p.method == "matching":
        parameters["edge_limit"] = p.edge_limit
        parameters["items_per_person"] = p.max_bound
    return parameters


def _label(p: Params, label: str) -> str:
    """A pure step's label: as it is ungrouped, :func:`grouped_label` per group (wording only)."""
    return label if p.group_by is None else grouped_label(label, p.max_groups)


def _releases(p: Params) -> str:
    return (f"the number of distinct {p.item_col} values (noisy) and a {1 - p.beta:.0%} lower bound"
            + ("" if p.group_by is None else f", per public key of {p.group_by} (each at {1 - p.beta:.0%})"))


def grouped_label(label: str, max_groups: int) -> str:
    """A step's label in a grouped run: once per group at ε/m; a person's rows are in at most m groups,
    so it costs them at most m·(ε/m) = ε (basic composition over those, parallel composition across the
    disjoint rest)."""
    if max_groups is None:
        return (f"{label}, per group at ε/m for the privately chosen cap m (each person in at most m groups: "
                "basic composition over them, parallel composition across the others)")
    if max_groups == 1:
        return f"{label}, per group at this full ε (one group per person: parallel composition)"
    return (f"{label}, per group at ε/{max_groups} (each person in at most {max_groups} groups: basic "
            "composition over them, parallel composition across the others)")
