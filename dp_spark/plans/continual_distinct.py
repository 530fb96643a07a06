"""The continual-distinct plan: parameters, ρ and its split (Jain et al. 2023).

Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, "Counting Distinct Elements in the Turnstile Model
with Differential Privacy under Continual Observation" (NeurIPS 2023). The release spends item-level
ρ-zCDP for the whole series of ``horizon`` steps, reported with its (ε, δ) equivalent
ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun–Steinke 2016, Prop. 1.3; ``delta`` costs nothing extra). The split of
ρ depends on public parameters only (``dp_spark.mechanisms.continual_distinct.budget_split`` over the
tree horizon, the next power of two of ``horizon``):

- ``method="select"`` (the default of a batch run): 5 % of ρ to a noisy choice of one counter (a
  flippancy bound or a recompute block) from the finished stream, 5 % to a noisy count stating its
  truncation or staleness, the rest to that counter
  (:mod:`dp_spark.mechanisms.continual_distinct.select`);
- ``"auto"`` (the default with ``stream=True``): ρ_svt to the sparse vector (Algorithm 2), the rest to
  counters (Algorithm 1; per level the factorized counter — online the streaming BLT counter — or the
  binary tree) started lazily, then the recompute baseline (or all of ρ to the baseline when no counter
  can beat it);
- ``"adaptive"`` (Algorithm 3): ρ/2 to the sparse vector, ρ/(2(J + 1)) to each of the J + 1 counters
  (per level the factorized counter or the binary tree, whichever has the smaller noise bound; online
  the factorized counter is the streaming BLT counter);
- ``"bounded"`` (Algorithm 1, needs ``max_flippancy``): all of ρ to one counter, the binary tree
  (``counter="tree"``, default) or a factorized counter (``counter="factorized"``: the square root
  in batch runs, its buffered-linear-Toeplitz approximation when streamed);
- ``"baseline"``: all of ρ to the periodic-recompute counts.

The size limits (``MAX_HORIZON``, ``MAX_SHARDS``) and time-mapping checks are re-exported from
:mod:`dp_spark.settings.continual_distinct`, which the Spark stage shares. Nothing here imports pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from dp_spark import checks
from dp_spark.accounting import ZCDP
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.continual_distinct.mechanisms import (COUNTERS, DEFAULT_COUNTER, DEFAULT_METHOD, DEFAULT_STREAM_METHOD, MECHANISMS,
                                                               budget_split, check_counter, group_factor, group_rho,
                                                               grouped_budget_split, round_up_flippancy)
from dp_spark.plan import GroupParams, Plan, builds, counted_keys, param, set_checked
from dp_spark.plans import RHO_HELP_TAIL, SEED_HELP
from dp_spark.settings.continual_distinct import (
    MAX_HORIZON,
    MAX_SHARDS,
    next_power_of_two,
    validate_horizon,
    validate_mapping_parameters,
    validate_grouped_size,
    validate_shards,
)

RELEASE = "continual-distinct"
METHODS = MECHANISMS

NEIGHBOURING = (
    "item-level (Jain et al. 2023, Definition 1.2): remove any subset of the events of one item "
    "(rows with the same item value); a person is protected only as far as their events concern a single item"
)

#: The streaming release's extra assumption (``dp_spark.streaming.query``).
GRID_CONDITION = (
    "the step grid (which source files form which step) does not depend on the data: removing one "
    "item's events leaves every other event in the same step"
)

RULES = (
    "A delete of an absent item is ignored: counts never go below zero.",
    "Events are sorted by time (input order is irrelevant); several events may share a step. "
    "Within a step they apply in raw-time order, equal times inserts first (the net change, "
    "clamped at zero). An item's presence is read at the end of each step.",
    "Bad values are dropped per event, never an error after spending, and counted nowhere: an event "
    "is dropped if its item is null, its op is not +1/-1 (null included), its time is null or not "
    "finite, or its time maps to a step outside 1..horizon (events after the horizon are dropped). "
    "The filter looks at one row at a time, so each item keeps a subset of its own events and the "
    "item-level guarantee is unchanged.",
    "The horizon is a required public parameter, never derived from the data. Item columns whose "
    "Spark equality is not byte equality (floating point; strings with a non-binary collation) are "
    "refused before anything is read or spent.",
)

def error_assumption(method: str, w: int | None) -> str:
    """The assumption behind a method's stated error bounds (report wording)."""
    if method == "bounded":
        return f", provided no item flips more than {w} times (otherwise add the number of items that do)"
    if method in ("baseline", "auto"):
        return ", provided the count changes by at most 1 per step (staleness between recomputes)"
    return ""  # "select" states its truncation or staleness from a noisy count; "adaptive" from its sparse vector


def grouped_note(method: str, m: int, group_by: str, item_col: str, n_groups: int | None = None,
                 **counter) -> str:
    """The plan's note on a grouped run's budget (proof:
    :mod:`dp_spark.mechanisms.continual_distinct.mechanisms`, "Groups"); ``counter``: the counter's
    keywords of ``group_factor``."""
    head = (f"Grouped by {group_by}: each {item_col}'s events count in at most {m} of its groups (the first by a "
            "public hash order of (item, group)); ")
    factor = group_factor(method, m, n_groups, **counter)
    full = group_factor(method, m, None, **counter)
    if counter.get("counter") == "factorized":
        tail = (f"every group's counter spends ρ/{factor}: one item's neighbour changes k groups by a subset of its "
                f"events (each at most one group's calibrated sensitivity B) and at most 2({m} - k) by all of them "
                f"(each at most the item-removal bound U <= B), so the changed factorized counters cost at most "
                f"max(m, ⌈2m·U/B⌉) = {full} groups' worth")
        return head + tail + (f", and only {n_groups} groups exist." if factor < full else ".")
    if factor < full:  # fewer public keys than the counters one item could change
        bound = f"min({m}, {n_groups})" if method == "bounded" else f"min({2 * m}, {n_groups})"
        return head + (f"every group's counter spends ρ/{factor} = ρ/{bound}: one item's neighbour changes at most "
                       f"{'m' if method == 'bounded' else '2m'} groups' counters, and only {n_groups} groups exist.")
    if method == "bounded":
        tail = (f"every group's counter spends ρ/{m} (trees only: the counters one item changes add up to at most "
                f"{m} trees' sensitivity" + ("; m = 1: parallel composition, the full ρ per group)." if m == 1
                                             else ")."))
    else:
        tail = (f"every group's counter spends ρ/{2 * m}: removing some of one item's events can move its kept "
                f"groups, so up to {2 * m} counters change (method 'bounded' needs only ρ/{m}).")
    return head + tail


def counter_factor_options(counter: str, tree_horizon: int, w: int | None) -> dict:
    """The counter's keywords of ``group_factor``/``group_rho``: the factorized counter's factor
    depends on the public (tree horizon, w); the tree's on nothing more."""
    if counter == DEFAULT_COUNTER:
        return {}
    return {"counter": counter, "horizon": tree_horizon, "flippancy_bound": w}


def effective_flippancy(max_flippancy: int | None, tree_horizon: int) -> int | None:
    """The bound w the tree uses: max_flippancy rounded up to a power of two,
    at most the tree horizon (no item flips more often than there are steps)."""
    if max_flippancy is None:
        return None
    return min(round_up_flippancy(max_flippancy), tree_horizon)


def _method_flippancy(method, max_flippancy) -> tuple[str, int | None]:
    method = checks.choice(method, "method", METHODS)
    if method == "bounded":
        if max_flippancy is None:
            raise ParameterError(
                "method 'bounded' needs max_flippancy (how often an item may flip between present "
                "and absent); or use method 'auto' or 'adaptive', which need none."
            )
        return method, checks.whole(max_flippancy, "max_flippancy")
    if max_flippancy is not None:
        raise ParameterError(f"max_flippancy applies only to method 'bounded'; leave it unset for {method!r}.")
    return method, None


def origin_value(text):
    """--origin as a number when it reads as one, else the text (an ISO
    date/time; a YAML date becomes its text too)."""
    if text is None or (isinstance(text, (int, float)) and not isinstance(text, bool)):
        return text
    text = str(text)
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


origin_value.__name__ = "a number or an ISO date/time"


#: The columns of a grouped run's ``release.groups`` besides the group column.
GROUPS_OUTPUT_COLUMNS = ("step", "count", "std", "error_bound", "error")

#: A grouped run's m is required (:mod:`dp_spark.mechanisms.continual_distinct.mechanisms`, "Groups").
MAX_GROUPS_REQUIRED = (
    "group_by needs max_groups= (--max-groups), the most groups one item's events count in: "
    "continual-distinct does not choose it privately (a private choice would have to be charged "
    "under the item-level subset relation, where one item's neighbour moves between counts of groups; "
    "not offered). Give a public bound, e.g. max_groups=1 when every item belongs to one group."
)


@dataclass(frozen=True, kw_only=True)
class Params(GroupParams):
    """Every continual-distinct parameter (default, CLI help, public limit), checked on construction.
    ``stream`` (plan and CLI only) runs the Structured Streaming form (``dp_spark.streaming``), whose
    guarantee also assumes ``GRID_CONDITION``; ``origin``, ``step_size`` and ``shards`` do not apply to it."""

    #: No private key step: its set-union protects persons, and this release's privacy unit is the item.
    KEYS_BUDGET: ClassVar[str | None] = None
    KEYS_REFUSAL: ClassVar[str] = ("continual-distinct needs public keys (groups=, --groups FILE): its privacy unit "
                                   "is the item, and a private choice of the keys (a set-union over persons) does "
                                   "not protect items.")

    # The group flags' help says the item-level rules (GroupParams' text is the person-level releases').
    group_by: str | None = param(None, "release one series per key of this column (needs --groups and "
                                 "--max-groups); every item's events count in at most --max-groups of its groups",
                                 cli_type=str)
    groups: Any = param(None, "file of the public group keys (one column; CSV/Parquet/JSON), all released, also "
                        "those without events; in Python also a list or a one-column Spark DataFrame; required "
                        "with --group-by (privately chosen keys are not offered for continual counts)",
                        cli_type=str)
    max_groups: int | None = param(None, "most groups one item's events count in (m), required with --group-by: "
                                   "each item keeps the events of at most m of its groups (a public hash order "
                                   "of (item, group)), and each group's counters spend a share of ρ that falls "
                                   "with m (m = 1: the full ρ per group)", cli_type=int)
    time_col: str = param("time", "column with the event time: integer steps, numbers, timestamps or dates "
                          "(CSV/JSON text is parsed per row: whole steps, or ISO dates/times when --origin is "
                          "one, or numbers when --origin is a decimal; --schema declares another type)")
    item_col: str = param("item", "column identifying the item (the privacy unit)")
    op_col: str = param("op", "column with +1 (insert) or -1 (delete)")
    rho: float = param(help=f"privacy parameter ρ (zCDP) spent by the whole series; {RHO_HELP_TAIL}",
                       cli_default=0.5)
    horizon: int = param(help="number of steps T to release: REQUIRED with --input (a public parameter, never "
                         "taken from the data; events after step T are dropped); the built-in data defaults to "
                         "1024 steps (32 with --stream)", limit=MAX_HORIZON,
                         cli_default=None, cli_type=int)  # the CLI fills the demo's (commands.plan_options)
    method: str | None = param(None, f"one of {', '.join(METHODS)}: {DEFAULT_METHOD} (the default of a batch run: "
                               "one counter chosen privately from the finished stream, error bound without "
                               f"assumptions), {DEFAULT_STREAM_METHOD} (the default with --stream: counters then "
                               "recompute, switched by a sparse vector), adaptive (Algorithm 3), bounded (Algorithm 1, "
                               "needs --max-flippancy), baseline (periodic recompute)", choices=METHODS, cli_type=str)
    max_flippancy: int | None = param(None, "bounded: how often an item may flip between present and absent",
                                      cli_type=int)
    counter: str = param(DEFAULT_COUNTER, "bounded: the counter on the w-truncated stream: tree (default, the "
                         "binary tree of Algorithm 1) or factorized (the square-root factorized counter, its BLT "
                         "approximation with --stream: lower noise variance at the same ρ)", choices=COUNTERS)
    beta: float = param(0.05, "the error bounds hold with probability 1 - beta")
    delta: float = param(1e-6, "δ of the reported (ε, δ) equivalent (nothing extra is spent)")
    origin: object = param(None, "time of the start of step 1 (a number, or an ISO date/time for timestamp/date "
                           "columns); required for timestamp, date and non-integer time columns (never derived "
                           "from the data); integer columns default to 1", cli_type=origin_value)
    step_size: float | None = param(None, "length of a step, in the time column's units (seconds for "
                                    "timestamps; default 1, or one day)", cli_type=float)
    shards: int | None = param(None, "item-hash shards of the Spark stage (default two per task slot of the cluster; "
                               f"at most {MAX_SHARDS:,})", limit=MAX_SHARDS, cli_type=int)
    stream: bool = param(False, "run as a Structured Streaming query (one step per micro-batch)", flag=True,
                         api=False)
    seed: int | None = param(None, SEED_HELP, cli_type=int)

    def __post_init__(self):
        checks.distinct_columns(time_col=self.time_col, item_col=self.item_col, op_col=self.op_col)
        set_checked(self, rho=checks.rho(self.rho))  # within checks.RHO_RANGE, before any charge
        set_checked(self, beta=checks.open_unit(self.beta, "beta"))
        set_checked(self, delta=checks.open_unit(self.delta, "delta"))
        checks.seed(self.seed)
        set_checked(self, horizon=validate_horizon(self.horizon))
        stream = checks.boolean(self.stream, "stream")
        default = DEFAULT_STREAM_METHOD if stream else DEFAULT_METHOD
        method, max_flippancy = _method_flippancy(default if self.method is None else self.method, self.max_flippancy)
        set_checked(self, method=method, max_flippancy=max_flippancy)
        set_checked(self, counter=check_counter(method, checks.choice(self.counter, "counter", COUNTERS)))
        validate_mapping_parameters(self.origin, self.step_size)
        set_checked(self, shards=validate_shards(self.shards))
        set_checked(self, stream=checks.boolean(self.stream, "stream"))
        if self.stream and self.method == "select":
            raise ParameterError("method 'select' reads the finished stream: batch only; drop --stream or use "
                                 "method 'auto'.")
        self.check_groups()
        if self.group_by is not None:
            checks.distinct_columns(time_col=self.time_col, item_col=self.item_col, op_col=self.op_col,
                                    group_by=self.group_by)
            if self.max_groups is None:
                raise ParameterError(MAX_GROUPS_REQUIRED)
            if self.group_by in GROUPS_OUTPUT_COLUMNS:
                raise ParameterError(f"group_by {self.group_by!r} is a column name of release.groups ("
                                     f"{', '.join(GROUPS_OUTPUT_COLUMNS)}); rename the group column first.")
            if self.stream:
                raise ParameterError("group_by is a batch release; drop --stream (or group_by).")
            if counted_keys(self.groups) is not None:
                validate_grouped_size(counted_keys(self.groups), self.horizon)


@builds(Params)
def plan(params: Params) -> Plan:
    """The continual-distinct release's plan (item-level ρ-zCDP for the whole series)."""
    p = params
    rho, horizon, method, max_flippancy, beta, delta, stream = (
        p.rho, p.horizon, p.method, p.max_flippancy, p.beta, p.delta, p.stream)
    time_col, item_col, op_col, origin, step_size, shards = (
        p.time_col, p.item_col, p.op_col, p.origin, p.step_size, p.shards)
    tree_horizon = next_power_of_two(horizon)
    w = effective_flippancy(max_flippancy, tree_horizon)
    grouped = p.group_by is not None
    counter_options = counter_factor_options(p.counter, tree_horizon, w)
    if grouped:  # each group's counter at ρ/factor; one item's neighbour changes <= factor counters
        # G is known for a list; a file's or DataFrame's keys are read before spending and the plan rebuilt
        n_groups = counted_keys(p.groups)
        factor = group_factor(method, p.max_groups, n_groups, **counter_options)
        rho_group = group_rho(rho, method, p.max_groups, n_groups, **counter_options)
        split = grouped_budget_split(budget_split(method, rho_group, tree_horizon, beta, w, counter=p.counter), factor,
                                     rho)
    else:  # the online counter's factorized levels ("auto", "adaptive") are BLT counters
        split = budget_split(method, rho, tree_horizon, beta, w, counter=p.counter, online=stream)
    steps = [(label, ZCDP(part)) for label, part in split]
    parameters = {
        "rho": rho, "delta": delta, "beta": beta, "method": method, "horizon": horizon,
        "horizon_given": True,  # always: the horizon is a required parameter
        "tree_horizon": tree_horizon, "max_flippancy": max_flippancy, "flippancy_bound": w,
        "time_col": time_col, "item_col": item_col, "op_col": op_col,
    }
    if method == "bounded":
        parameters["counter"] = p.counter
    if stream:
        parameters["mode"] = "stream"
    else:
        parameters.update(origin=origin, step_size=step_size, shards=shards)
    parameters["noise"] = "discrete gaussian"
    if grouped:
        parameters.update(p.group_parameters())
        parameters.update(rho_per_group=rho_group, group_budget_factor=factor)
    guarantee = ZCDP(rho)
    notes = ["Bad values are dropped per event (never an error after spending); the report lists the rules."]
    if tree_horizon != horizon:
        notes.append(f"The trees run over {tree_horizon} steps (the next power of two); steps 1..{horizon} are released.")
    if max_flippancy is not None and w != max_flippancy:
        notes.append(f"max_flippancy {max_flippancy} is used as w = {w} (a power of two, at most the tree horizon).")
    if stream:
        notes.append(f"Streaming: privacy holds provided {GRID_CONDITION}.")
    if grouped:
        notes.append(grouped_note(method, p.max_groups, p.group_by, item_col, n_groups, **counter_options))
    return Plan(
        release=RELEASE,
        guarantee=guarantee,
        steps=steps,
        parameters=parameters,
        privacy_unit="item",
        neighbouring=f"{NEIGHBOURING}; assumes {GRID_CONDITION}" if stream else NEIGHBOURING,
        releases=(f"a private estimate of the number of present {item_col} values at every step 1..{horizon}, "
                  f"each with its {1 - beta:.0%} simultaneous error bound"
                  + ("" if not grouped else f", per public key of {p.group_by} (each series at {1 - beta:.0%})")),
        equivalent=guarantee.to_approx(delta),
        notes=notes,
    )
