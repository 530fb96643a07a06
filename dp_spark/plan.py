"""A release's plan: everything decided from its parameters alone.

Every release builds a frozen :class:`Plan` before it touches data: the validated parameters
(:mod:`dp_spark.checks`, run by constructing the release's ``Params`` of :func:`param` fields), the
guarantee spent, its split between steps and what will be released. The Python API, the CLI
(``--dry-run`` prints the plan without starting Spark) and the jobs all build it with
``dp_spark.plans.<release>.plan``. Nothing here imports pyspark.

Calibration: budgets count a privacy parameter as the decimal it was written as
(:func:`dp_spark.accounting.exact.written`), so no mechanism may run above that decimal. :func:`builds`
ensures it: guarantee, parameters and texts come from the parameters as given (``plan.given``: what is
charged and reported); the budget split and ``plan.params`` (what the mechanisms get) from the
:data:`PRIVACY_FIELDS` calibrated (:func:`dp_spark.accounting.exact.calibrate`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import json
from dataclasses import MISSING, dataclass, field
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Mapping

from dp_spark import checks
from dp_spark.accounting import ApproxDP, PrivacyFilter, PureDP, ZCDP, compose
from dp_spark.accounting.exact import calibrate, exact, remainder, written
from dp_spark.errors import BudgetExceededError, ParameterError
from dp_spark.keys import MAX_GROUP_KEYS, GroupKeys
from dp_spark.settings.groups import MAX_GROUPS_LIMIT

#: Version of the plan and report documents (``to_dict()["version"]``).
FORMAT_VERSION = "2.0"


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


def param(default: Any = MISSING, help: str = "", *, limit: Any = None, choices: tuple | None = None,
          cli: bool = True, api: bool = True, cli_type: Callable | None = None, cli_default: Any = MISSING,
          flag: bool = False) -> Any:
    """A field of a release's ``Params``, read by the API, the CLI and the YAML configs: ``default``
    (none: required), ``help`` (CLI help), ``limit`` (public limit), ``choices``; ``cli=False``: Python
    only; ``api=False``: the plan takes it, the release function does not; ``cli_type`` (default: the
    default's type); ``cli_default`` where the CLI's differs (e.g. a demo ε); ``flag``: a switch."""
    metadata = {"help": help, "limit": limit, "choices": choices, "cli": cli, "api": api,
                "cli_type": cli_type, "cli_default": default if cli_default is MISSING else cli_default,
                "flag": flag}
    if default is MISSING:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)


def params_fields(params_cls, *, api: bool | None = None, cli: bool | None = None) -> tuple:
    """The fields of a ``Params`` class in order, optionally only the API's or the CLI's."""
    out = []
    for f in dataclasses.fields(params_cls):
        if api is not None and f.metadata.get("api", True) != api:
            continue
        if cli is not None and f.metadata.get("cli", True) != cli:
            continue
        out.append(f)
    return tuple(out)


def field_default(f) -> Any:
    """A field's Python default (``inspect.Parameter.empty`` if required)."""
    return inspect.Parameter.empty if f.default is MISSING else f.default


def keyword_signature(params_cls, *, api: bool | None = None) -> inspect.Signature:
    """The keyword-only signature of ``params_cls``'s fields, required ones first."""
    fields = params_fields(params_cls, api=api)
    ordered = [f for f in fields if f.default is MISSING] + [f for f in fields if f.default is not MISSING]
    return inspect.Signature([
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=field_default(f)) for f in ordered
    ])


def release_api(plan_builder):
    """Decorate ``run_plan(df, plan, budget, ledger)`` into the public
    ``dp_spark.<name>(df, *, ..., budget=None, ledger=None)`` whose keywords are the API fields of
    ``plan_builder.Params``. A call binds them (TypeError for an unknown or missing one), builds the
    plan (every check, before any data is read) and passes it on. Name and docstring are
    ``run_plan``'s."""
    kinds = inspect.Parameter
    own = plan_builder.Params.__dict__.get("__annotations__", {})  # the release's own fields before the shared ones
    keywords = sorted(keyword_signature(plan_builder.Params, api=True).parameters.values(),
                      key=lambda k: (k.default is not kinds.empty, k.name not in own))
    signature = inspect.Signature(
        [kinds("df", kinds.POSITIONAL_OR_KEYWORD), *keywords,
         kinds("budget", kinds.KEYWORD_ONLY, default=None), kinds("ledger", kinds.KEYWORD_ONLY, default=None)],
        return_annotation="Release")

    def wrap(run_plan):
        @functools.wraps(run_plan)
        def release(*args, **keywords):
            given = signature.bind(*args, **keywords).arguments
            df, budget, ledger = given.pop("df"), given.pop("budget", None), given.pop("ledger", None)
            return run_plan(df, plan_builder(**given), budget, ledger)

        release.__signature__ = signature
        return release

    return wrap


def set_checked(params, **values) -> None:
    """In a frozen ``Params.__post_init__``: store checked (normalized) values."""
    for name, value in values.items():
        object.__setattr__(params, name, value)


#: The ``Params`` names of the privacy parameters a plan charges; :func:`builds` calibrates them.
PRIVACY_FIELDS = ("epsilon", "rho", "delta")


def calibrated(params):
    """``params`` with each of :data:`PRIVACY_FIELDS` replaced by ``exact.calibrate`` of it (0.1 -> the
    float below it, 0.5 -> 0.5); ``params`` itself when nothing changes. The checks are not rerun."""
    changes = {}
    for name in PRIVACY_FIELDS:
        value = getattr(params, name, None)
        if isinstance(value, float) and calibrate(value) != value:
            changes[name] = calibrate(value)
    if not changes:
        return params
    out = copy.copy(params)
    set_checked(out, **changes)
    return out


def _check_calibration(charged, runs_at) -> None:
    """Assert that every component the mechanisms run at (exact binary value) is at most the decimal
    charged: what makes counting decimals sound."""
    given, used = charged.to_dict(), runs_at.to_dict()
    if given["kind"] != used["kind"] or any(
            exact(used[k]) > written(v) for k, v in given.items() if k != "kind"):
        raise AssertionError(f"a plan's calibrated guarantee {runs_at!r} exceeds the charged {charged!r}")


def builds(params_cls):
    """Decorate ``derive(params) -> Plan`` into the release's ``plan(params)`` or ``plan(**keywords)``
    (checked by ``params_cls`` first), with the keyword signature of ``params_cls``. The one
    calibration hook (module docstring)."""

    def wrap(derive):
        def derived(params) -> tuple["Plan", Any]:
            """(plan, the Params its release runs with); private keys: :func:`with_private_keys`."""
            if getattr(params, "keys_chosen_privately", lambda: False)():
                return with_private_keys(derive, params)
            return derive(params), params

        @functools.wraps(derive)
        def plan(params=None, /, **keywords) -> "Plan":
            if params is None:
                params = params_cls(**keywords)
            elif keywords or not isinstance(params, params_cls):
                raise TypeError(f"plan() takes a {params_cls.__qualname__} or keyword arguments, not both")
            built, runs_with = derived(params)
            tuned = calibrated(params)
            runs_at = built.guarantee
            if tuned is not params or runs_with is not params:
                inner, runs_with = derived(tuned)
                object.__setattr__(built, "split", inner.split)
                object.__setattr__(built, "steps", inner.steps)
                runs_at = inner.guarantee
            _check_calibration(built.guarantee, runs_at)
            object.__setattr__(built, "params", runs_with)
            object.__setattr__(built, "given", params)
            object.__setattr__(built, "runs_at", runs_at)
            return built

        plan.__signature__ = keyword_signature(params_cls).replace(return_annotation="Plan")
        plan.Params = params_cls
        return plan

    return wrap


@dataclass(frozen=True)
class Step:
    """One step of a budget split: ``name`` (what the release code asks for), ``label`` (the report's
    words) and ``cost``."""

    name: str | None
    label: str
    cost: Any


@dataclass(frozen=True)
class Split:
    """A plan's budget split in the order spent, addressed by step name (``split.epsilon("count")``)."""

    steps: tuple[Step, ...] = ()

    def __contains__(self, name: str) -> bool:
        return any(s.name == name for s in self.steps)

    def __iter__(self):
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def cost(self, name: str) -> Any:
        """The cost of step ``name`` (KeyError if the plan has no such step)."""
        for s in self.steps:
            if s.name == name:
                return s.cost
        raise KeyError(f"no budget step named {name!r} (steps: {[s.name for s in self.steps]})")

    def epsilon(self, name: str) -> float:
        """The ε of step ``name``; 0.0 when the plan has no such step."""
        return self.cost(name).epsilon if name in self else 0.0


@dataclass(frozen=True)
class Plan:
    """What a release will do, before any data is read.

    ``guarantee``: the total spent (a PureDP, ApproxDP or ZCDP cost), checked against the budget before
    reading. ``steps``: its split, ``(label, cost)`` in the order spent (given as :class:`Step` to name
    them; ``split`` is the named form); the parts never add up to more than the total. Set by
    :func:`builds`: ``params`` (calibrated), ``given`` and ``runs_at`` (the guarantee at the calibrated
    values). ``parameters``: every validated parameter as given, by the names API, CLI and YAML share.
    ``releases``: what is released, in words. ``equivalent``: a zCDP guarantee's (ε, δ), where reported.
    """

    release: str
    guarantee: Any
    steps: tuple[tuple[str, Any], ...]
    parameters: Mapping[str, Any]
    privacy_unit: str
    neighbouring: str
    releases: str
    equivalent: Any = None
    notes: tuple[str, ...] = field(default=())
    params: Any = field(default=None, compare=False)
    split: Split = field(default=Split(), compare=False, repr=False)
    given: Any = field(default=None, compare=False, repr=False)
    runs_at: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "parameters", _frozen(self.parameters))
        named = tuple(s if isinstance(s, Step) else Step(None, str(s[0]), s[1]) for s in self.steps)
        object.__setattr__(self, "split", Split(tuple(Step(s.name, str(s.label), s.cost) for s in named)))
        object.__setattr__(self, "steps", tuple((s.label, s.cost) for s in self.split))
        object.__setattr__(self, "notes", tuple(self.notes))

    def __getitem__(self, name: str) -> Any:
        """A parameter: ``plan["epsilon"]``."""
        return self.parameters[name]

    def check(self, budget) -> None:
        """BudgetExceededError if ``budget`` cannot pay for this release; reads no data, spends nothing."""
        if budget is None or budget.can_spend(self.guarantee):
            return
        name = getattr(budget, "name", None)
        which = f"the ledger budget {name!r}" if name else "the budget"
        raise BudgetExceededError(
            f"{self.release} would spend {self.guarantee.describe()} but {which} has only "
            f"{budget.remaining.describe()} left; lower the release's privacy parameter or raise "
            "the budget. No data was read and nothing was charged."
        )

    def spend(self, budget=None) -> PrivacyFilter:
        """Charge the guarantee to ``budget`` (a PrivacyFilter or ledger budget; refused before any data
        is read if it would overspend), then return the run's own filter over ``runs_at`` (binary values)
        with every step charged in order: the release draws noise only within it."""
        if budget is not None:
            budget.spend(self.guarantee, label=self.release)
        local = PrivacyFilter(self.guarantee if self.runs_at is None else self.runs_at, as_written=False)
        for label, cost in self.steps:
            local.spend(cost, label=label)
        return local

    def budget_split(self) -> list[dict[str, Any]]:
        return [{"step": label, **cost.to_dict()} for label, cost in self.steps]

    def privacy(self) -> dict[str, Any]:
        return privacy_document(self.guarantee, self.equivalent, self.privacy_unit, self.neighbouring)

    def to_dict(self) -> dict[str, Any]:
        """The plan as a JSON document (what ``--dry-run --quiet`` prints)."""
        return {
            "release": self.release,
            "version": FORMAT_VERSION,
            "plan": True,
            "privacy": self.privacy(),
            "parameters": _jsonable(self.parameters),
            "budget_split": self.budget_split(),
            "releases": self.releases,
            "notes": list(self.notes),
        }

    def describe(self) -> str:
        """The plan for a person (what ``--dry-run`` prints)."""
        lines = [f"{self.release} (dry run: no data read, nothing spent)",
                 f"  spends   {self.guarantee.describe()}, unit: one {self.privacy_unit}",
                 f"  releases {self.releases}", "  budget split:"]
        lines += [f"    {cost.describe():<24} {label}" for label, cost in self.steps]
        lines.append("  parameters:")
        width = max((len(k) for k in self.parameters), default=0)
        lines += [f"    {k:<{width}}  {v}" for k, v in self.parameters.items() if v is not None]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)


def privacy_document(guarantee, equivalent, privacy_unit: str, neighbouring: str) -> dict[str, Any]:
    """The ``privacy`` section of a plan or report: guarantee, (ε, δ) equivalent if any, privacy unit."""
    doc: dict[str, Any] = {**guarantee.to_dict(), "description": guarantee.describe()}
    doc.setdefault("delta", 0.0)
    if equivalent is not None:
        doc["approx_dp_equivalent"] = equivalent.to_dict()
    doc["privacy_unit"] = privacy_unit
    doc["neighbouring"] = neighbouring
    return doc


def _jsonable(mapping: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in mapping.items():
        if isinstance(value, tuple):
            value = list(value)
        out[key] = value
    return out


def budget_filter(epsilon=None, delta=None, rho=None) -> PrivacyFilter | None:
    """A run's budget from its ``--budget-*`` values (None if none): ρ (with δ) a zCDP filter, ε with
    δ > 0 an (ε, δ) filter, ε alone a pure ε filter."""
    if epsilon is None and rho is None:
        if delta is not None:
            raise ParameterError("budget_delta needs budget_epsilon or budget_rho.")
        return None
    if epsilon is not None and rho is not None:
        raise ParameterError("give budget_epsilon or budget_rho, not both (a budget holds one kind of guarantee).")
    d = 0.0 if delta is None else checks.delta(delta, "budget_delta", allow_zero=True)
    if rho is not None:
        return PrivacyFilter(ZCDP(checks.positive(rho, "budget_rho"), d))
    e = checks.positive(epsilon, "budget_epsilon")
    return PrivacyFilter(ApproxDP(e, d) if d > 0 else PureDP(e))


#: δ' of the (ε, δ') equivalent a ρ-zCDP grouped release states when the user gave no δ
#: (ε = ρ + 2√(ρ ln(1/δ')), Bun & Steinke 2016, Proposition 1.3).
ZCDP_EQUIVALENT_DELTA = 1e-6
#: Most group keys (public, or kept of the privately chosen) a release takes by default
#: (``GroupParams.MAX_KEYS``), counted on the keys, never the data: continual-distinct's, whose driver
#: runs one counter per group and releases a value per group and step. The others declare their own:
#: set-union and count-release :data:`dp_spark.keys.MAX_GROUP_KEYS` (per-group work in Spark and Arrow
#: arrays), distinct-count and top-k 100,000 (per-group arrays on the driver or the executors).
MAX_PUBLIC_GROUPS = 1024
#: Groups the JSON report carries (the first in :class:`dp_spark.keys.GroupKeys` order);
#: every group is in ``release.groups`` and ``--groups-output``.
REPORT_GROUPS = 100

#: groups=None: the keys' set-union spends ε·KEYS_EPSILON_SHARE and δ_k = :func:`keys_delta`.
KEYS_EPSILON_SHARE = 0.1
KEYS_DELTA = 1e-6
KEYS_DELTA_SHARE = 0.1
#: Δ0 of the keys' set-union without max_groups (set-union's default); with max_groups=m it is m.
KEYS_MAX_PER_PERSON = 100
#: The keys' set-union policy: its weights are integer units, so the step adds exact discrete Gaussian
#: noise against an integer threshold (:mod:`dp_spark.mechanisms.set_union.discrete`); the policy
#: histograms' float weights have no grid with a data-independent sensitivity.
KEYS_POLICY = "weighted-gaussian"


def key_mechanism(cost, per_person: int):
    """The keys' set-union constants for the step's ``cost``, Δ0 = ``per_person``: an ApproxDP(ε_k, δ_k)
    :func:`dp_spark.mechanisms.set_union.plan_discrete_set_union`, a ZCDP(ρ_k, δ_k) (δ_k-approximate
    ρ_k-zCDP) :func:`~dp_spark.mechanisms.set_union.plan_discrete_set_union_zcdp`; built by the plan
    too, so a bad step is refused before reading."""
    # every plan imports this module (~30 ms); only a plan with private group keys needs scipy
    from dp_spark.mechanisms.set_union import plan_discrete_set_union, plan_discrete_set_union_zcdp  # lazy: scipy

    if isinstance(cost, ZCDP):
        return plan_discrete_set_union_zcdp(cost.rho, cost.delta, per_person)
    return plan_discrete_set_union(cost.epsilon, cost.delta, per_person)


KEYS_STEP = ("group keys (DP set-union on the group column: weighted Gaussian histogram, exact discrete Gaussian "
             "noise, integer threshold; each person contributes at most {per_person} keys; the released keys "
             "then act as public)")
KEYS_REFUSED = ("group_by without groups= chooses the keys privately with a set-union, an (ε, δ) step; this "
                "release's guarantee is ρ-zCDP, into which an (ε, δ) step does not convert soundly, so give "
                "the public keys groups= (--groups FILE).")
#: groups=None in a release given (ρ, δ) (``KEYS_BUDGET = "rho"``): the keys' set-union spends
#: ρ·KEYS_RHO_SHARE and δ_k = :func:`keys_delta` as a δ_k-approximate ρ_k-zCDP step.
KEYS_RHO_SHARE = 0.1


def keys_delta(delta: float | None) -> float:
    """δ_k of the private key step for a release whose own δ is ``delta`` (public values only).

    δ > 0: min(KEYS_DELTA, KEYS_DELTA_SHARE·δ), taken out of δ, so the whole stays the (ε, δ) given.
    δ enters the keys' threshold (Gopi et al. Theorem 4.1) and the δ-releases' thresholds only through
    ln(1/δ), so the release keeps 90% of δ at a cost of ln(1/0.9) ≈ 0.1 there; the cap keeps the key
    step no weaker than a pure release's. None or 0.0 (pure ε): KEYS_DELTA, added on top."""
    if delta is None or delta == 0.0:
        return KEYS_DELTA
    return min(KEYS_DELTA, delta * KEYS_DELTA_SHARE)


def _rest_of(params, keys_text: str, **values):
    """``params`` with ``values`` (the release's share of the budget once the keys took theirs), every
    ``Params`` rule re-checked as given (``dataclasses.replace`` runs ``__post_init__``): a rest the release
    cannot run with (e.g. pcr's one round, a floor on ε) is refused here, before reading, never after
    the key step spent."""
    try:
        return dataclasses.replace(params, **values)
    except ParameterError as err:
        raise ParameterError(f"with the keys chosen privately ({keys_text} spent on them first), the "
                             f"release's own parameters fail: {err}") from None


def with_private_keys(derive, params) -> tuple["Plan", Any]:
    """(plan, Params the release runs with) of a grouped release whose keys are chosen privately
    (``groups=None``), for any release; public values only.

    The step "group_keys" spends a share of the budget on a set-union of the group column
    (:mod:`dp_spark.releases.group_keys`), then ``derive`` runs on the rest (exactly:
    :func:`~dp_spark.accounting.exact.remainder`; the rest re-checked as given, :func:`_rest_of`):

    - a release given ε (``KEYS_BUDGET = "epsilon"``): the keys spend (KEYS_EPSILON_SHARE·ε,
      δ_k = :func:`keys_delta`), the release ε − ε_k and, with δ > 0, δ − δ_k. By basic composition the
      whole is (ε, δ)-DP as given, or (ε, KEYS_DELTA)-DP for a pure-ε release. A ρ-zCDP release given ε
      is refused (ParameterError): an (ε, δ) step has no sound ρ-zCDP conversion.
    - a release given (ρ, δ), δ-approximate ρ-zCDP (``KEYS_BUDGET = "rho"``, count-release): the keys
      spend ZCDP(KEYS_RHO_SHARE·ρ, δ_k) — their exact set-union is δ_k-approximate ρ_k-zCDP
      (:mod:`dp_spark.mechanisms.set_union.discrete`, (4)) — the release ρ − ρ_k and δ − δ_k; approximate
      zCDP composes by adding ρ and δ (Bun & Steinke 2016, Lemma 8.3), so the whole is the (ρ, δ) given."""
    given_delta = getattr(params, "delta", None)
    has_delta = isinstance(given_delta, float) and given_delta > 0.0
    if getattr(type(params), "KEYS_BUDGET", "epsilon") == "rho":
        rho = getattr(params, "rho", None)
        if not isinstance(rho, float) or not has_delta:
            raise ParameterError(KEYS_REFUSED)
        keys_rho, delta_k = rho * KEYS_RHO_SHARE, keys_delta(given_delta)
        keys_cost = ZCDP(keys_rho, delta_k)
        rest = _rest_of(params, f"ρ·{KEYS_RHO_SHARE:g} and δ = {delta_k:g}",
                        rho=remainder(rho, keys_rho), delta=remainder(given_delta, delta_k))
        guarantee = ZCDP(rho, given_delta)
        parameters = {"rho": rho, "delta": given_delta, "group_keys_rho": keys_rho, "group_keys_delta": delta_k,
                      "release_rho": rest.rho, "release_delta": rest.delta}
        spent = f"ρ = {keys_rho:g} with δ = {delta_k:g} (δ-approximate ρ-zCDP)"
        whole = (f"the release the rest of ρ and δ on the released keys; in all {guarantee.describe()} as given, "
                 "by composition")
        conversion = getattr(params, "conversion_delta", None) or ZCDP_EQUIVALENT_DELTA
        extra = {"equivalent": guarantee.to_approx(conversion)}
    else:
        epsilon = getattr(params, "epsilon", None)
        if not isinstance(epsilon, float):
            raise ParameterError(KEYS_REFUSED)
        keys_epsilon = epsilon * KEYS_EPSILON_SHARE
        delta_k = keys_delta(given_delta if has_delta else None)
        keys_cost = ApproxDP(keys_epsilon, delta_k)
        try:
            rest = _rest_of(params, f"ε·{KEYS_EPSILON_SHARE:g} and δ = {delta_k:g}",  # keys + rest <= ε, δ exactly
                            epsilon=remainder(epsilon, keys_epsilon),
                            **({"delta": remainder(given_delta, delta_k)} if has_delta else {}))
        except ParameterError:
            if isinstance(derive(params).guarantee, ZCDP):  # never private keys, whatever ε: say so first
                raise ParameterError(KEYS_REFUSED) from None
            raise
        parameters = {"epsilon": epsilon, "group_keys_epsilon": keys_epsilon, "group_keys_delta": delta_k,
                      **({"delta": given_delta, "release_delta": rest.delta} if has_delta else {})}
        spent = f"(ε = {keys_epsilon:g}, δ = {delta_k:g})"
        extra = {}
    built = derive(rest)
    if isinstance(built.guarantee, ZCDP) != isinstance(keys_cost, ZCDP):
        raise ParameterError(KEYS_REFUSED)
    if not isinstance(keys_cost, ZCDP):
        # the whole: the δ given when the release has one (the parts sum to at most it exactly), else the keys'
        delta = given_delta if has_delta else compose([keys_cost, built.guarantee]).delta
        guarantee = ApproxDP(epsilon, delta)
        if has_delta:
            whole = (f"the release the rest of ε and δ − {delta_k:g} on the released keys; in all ({epsilon:g}, "
                     f"{delta:g})-DP as given, by basic composition")
        else:
            whole = (f"the release the rest of ε on the released keys; in all ({epsilon:g}, {delta:g})-DP by basic "
                     f"composition (the release has no δ of its own to take the keys' δ from)")
    per_person = params.max_groups if params.max_groups is not None else KEYS_MAX_PER_PERSON  # set-union's Δ0
    key_mechanism(keys_cost, per_person)  # the key step's constants: refused here, not after spending
    plan = dataclasses.replace(
        built, guarantee=guarantee, parameters={**built.parameters, **parameters}, **extra,
        steps=(Step("group_keys", KEYS_STEP.format(per_person=per_person), keys_cost), *built.split),
        notes=(*built.notes, f"the group keys are chosen privately: a set-union on {params.group_by} spends "
                             f"{spent}, {whole}"),
        releases=f"{built.releases}; the keys of {params.group_by} chosen privately (a set-union)",
    )
    return plan, rest


GROUP_BY_HELP = ("release one value per key of this column (public keys: --groups); every person's rows "
                 "count in at most --max-groups of their groups")
GROUPS_HELP = ("file of the public group keys (one column; CSV/Parquet/JSON; at most 1,000,000 keys for "
               f"set-union and count-release, 100,000 for distinct-count and top-k, {MAX_PUBLIC_GROUPS:,} for "
               "continual-distinct), all released, also those without rows; in Python also a list or a one-column Spark "
               "DataFrame; omitted: the keys are chosen privately (a set-union on the group column, "
               f"ε·{KEYS_EPSILON_SHARE:g} and δ = min({KEYS_DELTA:g}, δ·{KEYS_DELTA_SHARE:g}) out of the "
               f"release's (ε, δ); a pure-ε release becomes (ε, {KEYS_DELTA:g})-DP; count-release pays "
               f"ρ·{KEYS_RHO_SHARE:g} and the same δ out of its (ρ, δ))")
MAX_GROUPS_HELP = ("most groups one person contributes to (m): each person keeps the rows of at most m of "
                   "their groups (a public hash order), and each group's release spends ε/m (m = 1: every "
                   "group gets the full ε by parallel composition); default: chosen privately (a share of ε)")


def _is_spark_frame(value) -> bool:
    """A Spark DataFrame (classic or Connect), without importing pyspark."""
    return type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pyspark")


def keys_limit_reason(limit: int) -> str:
    """Why a release takes at most ``limit`` keys (public words for refusals and docs)."""
    if limit >= MAX_GROUP_KEYS:
        return ("its per-group work runs in Spark and on Arrow arrays; the keys are held as one array on the "
                "driver")
    if limit > MAX_PUBLIC_GROUPS:
        return ("its per-group summaries and mechanisms are arrays that grow with the keys (distinct-count's on "
                "the driver, top-k's on the executors); set-union and count-release take up to 1,000,000 keys")
    return ("it runs one counter per group on the driver and releases a value per group and step; "
            "distinct-count and top-k take up to 100,000 keys, set-union and count-release 1,000,000")


def public_keys(value, limit: int = MAX_PUBLIC_GROUPS) -> "tuple | GroupKeys | None":
    """A list-like of public keys as a tuple of distinct keys in order (all ints or all strings); None
    for a path or a DataFrame (the release reads those before spending); keys already read
    (:class:`~dp_spark.keys.GroupKeys`, one Arrow array) unchanged, never copied into Python objects.
    ParameterError for anything else and for more than ``limit`` keys."""
    if value is None or isinstance(value, str) or _is_spark_frame(value):
        return None
    if isinstance(value, GroupKeys):  # keys already read and checked (an Arrow array): kept as they are
        if len(value) > limit:
            raise ParameterError(f"groups: {len(value):,} public keys; at most {limit:,} for this release "
                                 f"({keys_limit_reason(limit)}).")
        return value
    if isinstance(value, (bytes, dict)) or not hasattr(value, "__iter__"):
        raise ParameterError("groups must be a list of public keys, a one-column Spark DataFrame or a file path; "
                             f"got {type(value).__name__}.")
    keys = []
    for key in value:
        if hasattr(key, "item") and not isinstance(key, (str, bytes)):
            key = key.item()  # numpy scalars
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise ParameterError(f"groups: every key must be a whole number or a string; got {type(key).__name__}.")
        keys.append(key)
    if len({type(k) for k in keys}) > 1:
        raise ParameterError("groups: the keys must all be whole numbers or all strings, not a mix.")
    keys = tuple(dict.fromkeys(keys))
    if not keys:
        raise ParameterError("groups: give at least one public key.")
    if len(keys) > limit:
        raise ParameterError(f"groups: {len(keys):,} public keys; at most {limit:,} for this release "
                             f"({keys_limit_reason(limit)}).")
    return keys


def counted_keys(groups) -> int | None:
    """How many public keys ``groups`` holds when that is known without reading anything: a list's
    (a tuple) or keys already read (a :class:`~dp_spark.keys.GroupKeys`); None for a file, a DataFrame
    or privately chosen keys (None)."""
    return len(groups) if isinstance(groups, (tuple, GroupKeys)) else None


def check_group_column(group_by: str, reserved, **columns) -> None:
    """ParameterError unless the group column differs from ``columns`` and from ``reserved`` (the
    columns of ``release.groups``)."""
    checks.distinct_columns(**columns, group_by=group_by)
    if group_by in reserved:
        raise ParameterError(f"group_by {group_by!r} is a column name of release.groups ({', '.join(reserved)}); "
                             "rename the group column first.")


@dataclass(frozen=True, kw_only=True)
class GroupParams:
    """The group parameters, declared once: a grouped release's ``Params`` subclasses this and calls
    :meth:`check_groups` in its ``__post_init__``. ``group_by``: the column splitting the release;
    ``groups``: the public keys (list, one-column Spark DataFrame or file path; all released, also those
    without rows; None: chosen privately, :func:`with_private_keys`, refused for a ρ-zCDP release);
    ``max_groups``: m, the most groups a person contributes to (None: chosen privately, a charged step)."""

    #: Most keys the release takes, public or kept of the privately chosen (module constants).
    MAX_KEYS: ClassVar[int] = MAX_PUBLIC_GROUPS
    #: What a private key step (groups=None) is paid from: "epsilon" (an (ε, δ) share of the release's ε,
    #: :func:`with_private_keys`), "rho" (a δ-approximate ρ-zCDP share of its (ρ, δ)), or None (refused).
    KEYS_BUDGET: ClassVar[str | None] = "epsilon"
    #: The refusal of groups=None when the release cannot pay for the key step.
    KEYS_REFUSAL: ClassVar[str] = KEYS_REFUSED

    group_by: str | None = param(None, GROUP_BY_HELP, cli_type=str)
    groups: Any = param(None, GROUPS_HELP, cli_type=str)
    max_groups: int | None = param(None, MAX_GROUPS_HELP, cli_type=int)

    def check_groups(self) -> None:
        """The group parameters' checks (public values only; nothing read)."""
        if self.group_by is None:
            if self.groups is not None or self.max_groups is not None:
                raise ParameterError("groups= and max_groups= split a release by group_by=; give group_by= "
                                     "(--group-by) too, or neither.")
            return
        if not isinstance(self.group_by, str) or not self.group_by.strip():
            raise ParameterError("group_by must be a column name.")
        if self.groups is None:  # keys chosen privately: a charged step (with_private_keys)
            budget = type(self).KEYS_BUDGET
            if budget is None or not isinstance(getattr(self, budget, None), float):
                raise ParameterError(type(self).KEYS_REFUSAL)
        keys = public_keys(self.groups, type(self).MAX_KEYS)
        if keys is not None:
            set_checked(self, groups=keys)
        elif isinstance(self.groups, str) and not self.groups.strip():
            raise ParameterError("groups: the file path is empty.")
        if self.max_groups is not None:  # None: m chosen privately by the release (charged in its split)
            set_checked(self, max_groups=checks.integer(self.max_groups, "max_groups", 1, MAX_GROUPS_LIMIT))

    def keys_chosen_privately(self) -> bool:
        """``group_by`` without ``groups`` (:func:`with_private_keys`)."""
        return self.group_by is not None and self.groups is None

    def group_parameters(self) -> dict[str, Any]:
        """The group parameters as the plan and report state them ({} when not grouped)."""
        if self.group_by is None:
            return {}
        if self.groups is None:
            source = "chosen privately (set-union on the group column: the plan's group keys step)"
        elif isinstance(self.groups, tuple):
            source = f"public: a list of {len(self.groups):,} keys"
        elif isinstance(self.groups, str):
            source = f"public: the file {self.groups}"
        else:
            source = "public: a Spark DataFrame"
        return {"group_by": self.group_by, "groups": source,
                "max_groups": self.max_groups if self.max_groups is not None else "chosen privately"}
