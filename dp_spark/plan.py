"""A release's plan: everything decided from its parameters alone.

Every release builds a frozen :class:`Plan` before it touches data: the
parameters validated (by :mod:`dp_spark.checks`), the guarantee the release
spends, how that is split between its steps, and what will be released.
The Python API, the command line and the jobs all build the same plan from
the same function (``dp_spark.plans.<release>.plan``), so no check, cost or
budget split is written twice; ``dp-spark <release> --dry-run`` prints it
without starting Spark. Nothing here imports pyspark.

Each release declares its parameters once, in a frozen ``Params``
dataclass (:func:`param` fields: default, help, public limit, CLI type and
default where they differ); constructing it runs the checks, and
:func:`builds` turns ``derive(params) -> Plan`` into the release's ``plan``
with the keyword signature of its fields. A plan's budget split is typed
(:class:`Split` of named :class:`Step`: ``plan.split.epsilon("count")``),
never decoded by position.

Calibration (issue 22): budgets count a privacy parameter as the decimal it
was written as (:func:`dp_spark.accounting.exact.written`), so no mechanism
may run above that decimal. :func:`builds` is the one place that ensures
it: the plan's guarantee, parameters and texts come from the parameters as
given (what is charged and reported), while its budget split and
``plan.params`` (what the release hands its mechanisms) come from the
parameters calibrated (:data:`PRIVACY_FIELDS`, each the largest float at or
below its decimal: :func:`dp_spark.accounting.exact.calibrate`).
``plan.given`` keeps the ``Params`` as given.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import json
from dataclasses import MISSING, dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

from dp_spark import checks
from dp_spark.accounting import ApproxDP, PrivacyFilter, PureDP, ZCDP, compose
from dp_spark.accounting.exact import calibrate, exact, remainder, written
from dp_spark.errors import BudgetExceededError, ParameterError
from dp_spark.settings.groups import MAX_GROUPS_LIMIT

#: Version of the plan and report documents (``to_dict()["version"]``).
FORMAT_VERSION = "2.0"


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


# -- typed parameters ---------------------------------------------------------------


def param(default: Any = MISSING, help: str = "", *, limit: Any = None, choices: tuple | None = None,
          cli: bool = True, api: bool = True, cli_type: Callable | None = None, cli_default: Any = MISSING,
          flag: bool = False) -> Any:
    """A field of a release's ``Params`` with what the API, the CLI and the
    YAML configs derive from it: ``default`` (none: required), ``help``
    (the CLI's help text), ``limit`` (the public limit, where there is one),
    ``choices``; ``cli=False``: a Python-only parameter (no flag, no YAML
    key); ``api=False``: the release function does not take it (the plan
    does: e.g. a size the release computes); ``cli_type`` (default: the
    default's type) and ``cli_default`` (where the command line's differs,
    e.g. a demo ε where the API requires one); ``flag``: a switch."""
    metadata = {"help": help, "limit": limit, "choices": choices, "cli": cli, "api": api,
                "cli_type": cli_type, "cli_default": default if cli_default is MISSING else cli_default,
                "flag": flag}
    if default is MISSING:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)


def params_fields(params_cls, *, api: bool | None = None, cli: bool | None = None) -> tuple:
    """The fields of a ``Params`` class, in order, optionally only those the
    release function (``api=True``) or the command line (``cli=True``) takes."""
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
    """The keyword-only signature the fields of ``params_cls`` make (the
    required ones first, then the others in field order)."""
    fields = params_fields(params_cls, api=api)
    ordered = [f for f in fields if f.default is MISSING] + [f for f in fields if f.default is not MISSING]
    return inspect.Signature([
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=field_default(f)) for f in ordered
    ])


def release_api(plan_builder):
    """Decorate a release's ``run_plan(df, plan, budget, ledger)`` into its
    public ``dp_spark.<name>(df, *, ..., budget=None, ledger=None)``,
    declared once: the keyword parameters are the release's ``Params`` API
    fields (``plan_builder.Params``, with their defaults), so the signature
    the user, ``help()`` and the docs see is read from the one declaration.
    A call binds the keywords to that signature (a TypeError for an unknown
    or missing one, as a written signature gives), builds the plan
    (``plan_builder(**keywords)``: every check, before any data is read) and
    hands it to the decorated function (which runs the one release flow).
    The decorated function's name and docstring are the release's."""
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


#: The privacy parameters a plan charges (its guarantee's ε, ρ, δ), by the
#: names every release's ``Params`` uses; :func:`builds` calibrates them.
PRIVACY_FIELDS = ("epsilon", "rho", "delta")


def calibrated(params):
    """``params`` with each privacy parameter (:data:`PRIVACY_FIELDS`)
    replaced by the float a mechanism is calibrated to: the largest float at
    or below the decimal written (``exact.calibrate``: 0.1 -> the float
    below it, 0.5 -> 0.5). ``params`` itself when nothing changes; the
    checks are not run again (the given values passed them)."""
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
    """Every component the mechanisms run at (exact binary value) is at most
    the decimal charged: the soundness of counting decimals (a plan whose
    guarantee is not stated from its privacy parameters would fail here)."""
    given, used = charged.to_dict(), runs_at.to_dict()
    if given["kind"] != used["kind"] or any(
            exact(used[k]) > written(v) for k, v in given.items() if k != "kind"):
        raise AssertionError(f"a plan's calibrated guarantee {runs_at!r} exceeds the charged {charged!r}")


def builds(params_cls):
    """Decorate ``derive(params) -> Plan`` into the release's ``plan``:
    ``plan(params)`` or ``plan(**keywords)`` (then ``params_cls(**keywords)``
    checks them first), with the keyword signature of ``params_cls`` (what
    the CLI and the docs read). The one calibration hook (module
    docstring): the guarantee, parameters and texts are derived from the
    parameters as given (``plan.given``), the budget split from the
    calibrated ones, which the Plan carries as ``params``."""

    def wrap(derive):
        def derived(params) -> tuple["Plan", Any]:
            """(plan, the Params its release runs with): with keys chosen
            privately (``groups=None``), the plan with its "group keys"
            step first and the release's own steps on the rest of ε."""
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


# -- the typed budget split ---------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One step of a plan's budget split: ``name`` (what the release code
    asks for: ``plan.split.epsilon("count")``), ``label`` (the words in the
    report's budget split) and ``cost``."""

    name: str | None
    label: str
    cost: Any


@dataclass(frozen=True)
class Split:
    """A plan's budget split, in the order spent, by step name. The
    release asks for a share by name (``split.epsilon("count")``; 0.0 for a
    step the plan does not have), never by position."""

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

    ``guarantee``: the total it spends (a :class:`~dp_spark.PureDP`,
    :class:`~dp_spark.ApproxDP` or :class:`~dp_spark.ZCDP` cost), checked
    against the budget before reading. ``steps``: the split of that total,
    ``(label, cost)`` in the order spent (given as :class:`Step` objects to
    name them; ``split`` is the typed, named form); the parts never add up
    to more than the total. ``params``: the release's typed, checked
    ``Params`` with the privacy parameters calibrated (set by the plan
    builder, :func:`builds`: what the release hands its mechanisms);
    ``given``: the ``Params`` as given; ``runs_at``: the guarantee at the
    calibrated values (each component at most the decimal charged).
    ``parameters``: every validated parameter as given, by the names
    the API, the CLI and the YAML config share. ``releases``: what will be
    released, in words. ``equivalent``: the (ε, δ) equivalent of a zCDP
    guarantee, where one is reported.
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

    # -- the budget -----------------------------------------------------------

    def check(self, budget) -> None:
        """Refuse (BudgetExceededError) if ``budget`` cannot pay for this
        release. Reads no data and spends nothing."""
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
        """Charge the guarantee to ``budget`` (a PrivacyFilter or a ledger
        budget; refused before any data is read if it would overspend), then
        return this run's own filter with every step charged, in order: the
        release draws its noise only within what this filter holds: the
        guarantee at the calibrated values (``runs_at``), counted as the
        binary values the mechanisms use (each at most the decimal charged)."""
        if budget is not None:
            budget.spend(self.guarantee, label=self.release)
        local = PrivacyFilter(self.guarantee if self.runs_at is None else self.runs_at, as_written=False)
        for label, cost in self.steps:
            local.spend(cost, label=label)
        return local

    def budget_split(self) -> list[dict[str, Any]]:
        return [{"step": label, **cost.to_dict()} for label, cost in self.steps]

    # -- documents --------------------------------------------------------------

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
    """The ``privacy`` section of a plan or report: the guarantee spent, its
    (ε, δ) equivalent where one applies, and the privacy unit."""
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
    """A run's budget from its ``--budget-*`` values (None if none given):
    ρ (with δ) gives a zCDP filter, ε with δ > 0 an (ε, δ) filter, ε alone a
    pure ε filter."""
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


# -- the group parameters (issue 24), declared once ---------------------------------

#: Most public group keys one release takes (``groups=``). Three things grow
#: with it: the driver receives the per-group summary, O(groups × summary)
#: numbers (distinct-count: one count per bound candidate, at most 11); the
#: mechanism runs once per group on the driver; and the grouped greedy
#: holds at most 2^10 groups (``stages.distinct.GROUP_INDEX_BITS``). Counted
#: on the public keys only, never the data.
MAX_PUBLIC_GROUPS = 1024
#: Groups whose released values the JSON report carries (the first in the
#: canonical, sorted order of the keys: dp_spark.releases.groups.canonical_keys);
#: every group is in ``release.groups`` and ``--groups-output``.
REPORT_GROUPS = 100

#: groups=None: the share of ε the private choice of the keys spends (a
#: set-union on the group column), and its δ: a release with a δ of its own
#: pays the keys' δ out of it (:func:`keys_delta`: min(KEYS_DELTA,
#: KEYS_DELTA_SHARE·δ)), so the whole stays the (ε, δ) given; a pure-ε
#: release (no δ, or δ = 0) becomes (ε, KEYS_DELTA)-DP. Stated in the plan,
#: the report's privacy section and its budget split.
KEYS_EPSILON_SHARE = 0.1
KEYS_DELTA = 1e-6
KEYS_DELTA_SHARE = 0.1
#: The per-person bound Δ0 of the keys' set-union when max_groups is not
#: given (set-union's own default); with max_groups=m it is m.
KEYS_MAX_PER_PERSON = 100
#: The set-union policy the keys are chosen with: the weighted-Gaussian
#: histogram, whose weights are exact integer units, so the step adds exact
#: discrete Gaussian noise and compares with an integer threshold
#: (:mod:`dp_spark.mechanisms.set_union.discrete`; the policy histograms'
#: float weights have no grid with a data-independent sensitivity).
KEYS_POLICY = "weighted-gaussian"


def key_mechanism(epsilon: float, delta: float, per_person: int):
    """The constants of the keys' set-union (grid, discrete Gaussian σ,
    integer threshold): :func:`dp_spark.mechanisms.set_union.plan_discrete_set_union`
    at (ε_k, δ_k) and Δ0 = ``per_person`` (what the step and the audit tier
    run). Built by :func:`with_private_keys` when the plan is made (so a bad
    (ε_k, δ_k) is refused before anything is read) and again by
    :mod:`dp_spark.releases.group_keys` to run the step."""
    # mechanisms.set_union imports scipy.special and scipy.optimize: 450-550 ms measured, against ~30 ms for this
    # module, which the ledger, the report and every plan import; only a plan with private group keys needs it
    from dp_spark.mechanisms.set_union import plan_discrete_set_union  # lazy: scipy, 450-550 ms (see above)

    return plan_discrete_set_union(epsilon, delta, per_person)


KEYS_STEP = ("group keys (DP set-union on the group column: weighted Gaussian histogram, exact discrete Gaussian "
             "noise, integer threshold; each person contributes at most {per_person} keys; the released keys "
             "then act as public)")
KEYS_REFUSED = ("group_by without groups= chooses the keys privately with a set-union, an (ε, δ) step; this "
                "release's guarantee is ρ-zCDP, into which an (ε, δ) step does not convert soundly, so give "
                "the public keys groups= (--groups FILE).")


def keys_delta(delta: float | None) -> float:
    """The δ of the private key step for a release whose own δ is ``delta``
    (None or 0.0: a pure-ε release). With δ > 0 the keys take
    min(KEYS_DELTA, KEYS_DELTA_SHARE·δ) out of it and the release runs on
    the rest, so the whole is the (ε, δ) given. Why a tenth, capped at
    KEYS_DELTA: δ enters the keys' set-union (its threshold, Gopi et al.
    Theorem 4.1) and the δ-releases' thresholds (set-union's ρ, Unknown
    Domain Gumbel's) only through ln(1/δ), so the release keeps 90% of δ at
    a cost of ln(1/0.9) ≈ 0.1 in that logarithm, and the keys' threshold
    grows by ln 10 over one at δ; the cap keeps the key step never weaker
    than the pure release's (ε_k, KEYS_DELTA). Pure-ε release: KEYS_DELTA,
    added on top (there is no δ to take it from). Public values only."""
    if delta is None or delta == 0.0:
        return KEYS_DELTA
    return min(KEYS_DELTA, delta * KEYS_DELTA_SHARE)


def with_private_keys(derive, params) -> tuple["Plan", Any]:
    """The plan of a grouped release whose keys are chosen privately
    (``groups=None``), generic over releases, and the Params its release
    runs with. Budget (basic composition): the step "group_keys" spends
    (KEYS_EPSILON_SHARE·ε, δ_k) on a set-union of the group column
    (:mod:`dp_spark.releases.group_keys`); the release's own plan is
    ``derive`` on the rest: its Params' ``epsilon`` replaced by ε − ε_k
    and, for a release with a δ > 0, its ``delta`` by δ − δ_k (exactly:
    :func:`~dp_spark.accounting.exact.remainder`), so its body cannot
    spend more; its steps after the keys'. δ_k = :func:`keys_delta`.

    The guarantee: a release with δ > 0 is (ε, δ)-DP in all, as given
    (ε_k + ε_rest <= ε and δ_k + δ_rest <= δ exactly; basic composition);
    a pure-ε release (no δ, or δ = 0) is (ε, KEYS_DELTA)-DP. A ρ-zCDP
    release is refused (ParameterError): an (ε, δ) step has no sound ρ-zCDP
    conversion. Public values only."""
    epsilon = getattr(params, "epsilon", None)
    if not isinstance(epsilon, float):
        raise ParameterError(KEYS_REFUSED)
    given_delta = getattr(params, "delta", None)
    has_delta = isinstance(given_delta, float) and given_delta > 0.0
    keys_epsilon = epsilon * KEYS_EPSILON_SHARE
    delta_k = keys_delta(given_delta if has_delta else None)
    rest = copy.copy(params)
    set_checked(rest, epsilon=remainder(epsilon, keys_epsilon))  # keys + rest <= epsilon exactly
    if has_delta:
        set_checked(rest, delta=remainder(given_delta, delta_k))  # keys + rest <= delta exactly
    built = derive(rest)
    if isinstance(built.guarantee, ZCDP):
        raise ParameterError(KEYS_REFUSED)
    keys_cost = ApproxDP(keys_epsilon, delta_k)
    per_person = params.max_groups if params.max_groups is not None else KEYS_MAX_PER_PERSON  # set-union's Δ0
    key_mechanism(keys_epsilon, delta_k, per_person)  # the key step's constants: refused here, not after spending
    # the whole: the δ given when the release has one (the parts sum to at most it exactly), else the keys'
    delta = given_delta if has_delta else compose([keys_cost, built.guarantee]).delta
    parameters = {**built.parameters, "epsilon": epsilon, "group_keys_epsilon": keys_epsilon,
                  "group_keys_delta": delta_k,
                  **({"delta": given_delta, "release_delta": rest.delta} if has_delta else {})}
    if has_delta:
        whole = (f"the release the rest of ε and δ − {delta_k:g} on the released keys; in all ({epsilon:g}, "
                 f"{delta:g})-DP as given, by basic composition")
    else:
        whole = (f"the release the rest of ε on the released keys; in all ({epsilon:g}, {delta:g})-DP by basic "
                 f"composition (the release has no δ of its own to take the keys' δ from)")
    note = (f"the group keys are chosen privately: a set-union on {params.group_by} spends "
            f"(ε = {keys_epsilon:g}, δ = {delta_k:g}), {whole}")
    plan = dataclasses.replace(
        built, guarantee=ApproxDP(epsilon, delta), parameters=parameters,
        steps=(Step("group_keys", KEYS_STEP.format(per_person=per_person), keys_cost), *built.split),
        notes=(*built.notes, note),
        releases=f"{built.releases}; the keys of {params.group_by} chosen privately (a set-union)",
    )
    return plan, rest


GROUP_BY_HELP = ("release one value per key of this column (public keys: --groups); every person's rows "
                 "count in at most --max-groups of their groups")
GROUPS_HELP = (f"file of the public group keys (one column; CSV/Parquet/JSON, at most {MAX_PUBLIC_GROUPS:,} "
               "keys), all released, also those without rows; in Python also a list or a one-column Spark "
               "DataFrame; omitted: the keys are chosen privately (a set-union on the group column, "
               f"ε·{KEYS_EPSILON_SHARE:g} and δ = min({KEYS_DELTA:g}, δ·{KEYS_DELTA_SHARE:g}) out of the "
               f"release's (ε, δ); a pure-ε release becomes (ε, {KEYS_DELTA:g})-DP)")
MAX_GROUPS_HELP = ("most groups one person contributes to (m): each person keeps the rows of at most m of "
                   "their groups (a public hash order), and each group's release spends ε/m (m = 1: every "
                   "group gets the full ε by parallel composition); default: chosen privately (a share of ε)")


def _is_spark_frame(value) -> bool:
    """A Spark DataFrame (classic or Connect), without importing pyspark."""
    return type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pyspark")


def public_keys(value) -> tuple | None:
    """A list-like of public group keys as a tuple of distinct keys in the
    given order (ints or strings, one kind, no None); None for a path or a
    DataFrame (read before spending, by the release template). ParameterError
    for anything else, and for more than :data:`MAX_PUBLIC_GROUPS` keys (a
    public count)."""
    if value is None or isinstance(value, str) or _is_spark_frame(value):
        return None
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
    if len(keys) > MAX_PUBLIC_GROUPS:
        raise ParameterError(f"groups: {len(keys):,} public keys; at most {MAX_PUBLIC_GROUPS:,} (the driver "
                             "receives every group's summary and runs each group's mechanism).")
    return keys


def check_group_column(group_by: str, reserved, **columns) -> None:
    """The group column differs from the person and item columns and from
    the per-value columns of ``release.groups`` (public names only)."""
    checks.distinct_columns(**columns, group_by=group_by)
    if group_by in reserved:
        raise ParameterError(f"group_by {group_by!r} is a column name of release.groups ({', '.join(reserved)}); "
                             "rename the group column first.")


@dataclass(frozen=True, kw_only=True)
class GroupParams:
    """The group parameters every grouped release takes (issue 24), declared
    once: a release's ``Params`` that groups subclasses this and calls
    :meth:`check_groups` in its ``__post_init__``; a release without them
    simply does not take them. ``group_by``: the column whose values split
    the release; ``groups``: the public keys (a list, a one-column Spark
    DataFrame or a file path; every key is released, also one without rows);
    ``max_groups``: m, the most groups a person contributes to;
    ``max_groups=None`` lets the release choose m privately (a charged step
    of its split). ``groups=None`` with ``group_by``: the keys are chosen
    privately by a set-union on the group column, a step of every such
    release's plan (:func:`with_private_keys`: generic, no per-release
    code); the released keys then act as public. Refused (ParameterError,
    before anything is read) for a release whose guarantee is ρ-zCDP."""

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
            if not isinstance(getattr(self, "epsilon", None), float):
                raise ParameterError(KEYS_REFUSED)
        keys = public_keys(self.groups)
        if keys is not None:
            set_checked(self, groups=keys)
        elif isinstance(self.groups, str) and not self.groups.strip():
            raise ParameterError("groups: the file path is empty.")
        if self.max_groups is not None:  # None: m chosen privately by the release (charged in its split)
            set_checked(self, max_groups=checks.integer(self.max_groups, "max_groups", 1, MAX_GROUPS_LIMIT))

    def keys_chosen_privately(self) -> bool:
        """``group_by`` without ``groups``: the keys are released by the
        plan's "group keys" step (:func:`with_private_keys`)."""
        return self.group_by is not None and self.groups is None

    def group_parameters(self) -> dict[str, Any]:
        """The group parameters as the plan and the report state them ({}
        when not grouped, so an ungrouped report is unchanged)."""
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
