"""The continual-distinct plan: parameters, ρ and its split (Jain et al. 2023).

Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, "Counting Distinct Elements
in the Turnstile Model with Differential Privacy under Continual
Observation" (NeurIPS 2023). The release spends item-level ρ-zCDP for the
whole series of ``horizon`` steps, reported with its (ε, δ) equivalent
ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun–Steinke 2016, Prop. 1.3; ``delta`` costs
nothing extra). The split of ρ between the mechanism's parts depends on the
public parameters only (``dp_spark.mechanisms.continual_distinct.budget_split``
over the tree horizon, the next power of two of ``horizon``):

- ``method="auto"`` (default): ρ_svt to the sparse vector (Algorithm 2),
  the rest to binary trees (Algorithm 1) started lazily, then the recompute
  baseline (or all of ρ to the baseline when no tree can beat it);
- ``"adaptive"`` (Algorithm 3): ρ/2 to the sparse vector, ρ/(2(J + 1)) to
  each of the J + 1 trees;
- ``"bounded"`` (Algorithm 1, needs ``max_flippancy``): all of ρ to one tree;
- ``"baseline"``: all of ρ to the periodic-recompute counts.

The parameter limits that size driver memory and Spark work
(``MAX_HORIZON``, ``MAX_SHARDS``) and the time-mapping parameter checks live
in :mod:`dp_spark.settings.continual_distinct` (re-exported here), where the
Spark stage (:mod:`dp_spark.stages.continual`) applies the same functions.
Nothing here imports pyspark.
"""

from __future__ import annotations

from dp_spark import checks
from dp_spark.accounting import ZCDP
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.continual_distinct.mechanisms import DEFAULT_METHOD, MECHANISMS, budget_split, round_up_flippancy
from dp_spark.plan import Plan
from dp_spark.settings.continual_distinct import (  # noqa: F401 - the limits and checks the stage shares, re-exported
    DRIVER_BYTES_PER_CELL,
    HORIZON_REQUIRED,
    MAX_HORIZON,
    MAX_HORIZON_LOG2,
    MAX_SHARDS,
    driver_bytes,
    next_power_of_two,
    validate_horizon,
    validate_mapping_parameters,
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


def plan(*, rho, horizon, method=DEFAULT_METHOD, time_col="time", item_col="item", op_col="op",
         max_flippancy=None, beta=0.05, delta=1e-6, origin=None, step_size=None, shards=None,
         seed=None, stream=False) -> Plan:
    """The continual-distinct release's plan (item-level ρ-zCDP for the whole
    series); every parameter checked before any data is read.

    ``stream``: the Structured Streaming form (``dp_spark.streaming``), whose
    guarantee also assumes a data-independent step grid (``GRID_CONDITION``);
    ``origin``, ``step_size`` and ``shards`` (batch time mapping and stage
    shards) are checked but do not apply to it.
    """
    checks.distinct_columns(time_col=time_col, item_col=item_col, op_col=op_col)
    rho = checks.rho(rho)  # within checks.RHO_RANGE, before any charge
    beta = checks.open_unit(beta, "beta")
    delta = checks.open_unit(delta, "delta")
    checks.seed(seed)
    horizon = validate_horizon(horizon)
    method, max_flippancy = _method_flippancy(method, max_flippancy)
    validate_mapping_parameters(origin, step_size)
    shards = validate_shards(shards)
    stream = checks.boolean(stream, "stream")
    tree_horizon = next_power_of_two(horizon)
    w = effective_flippancy(max_flippancy, tree_horizon)
    steps = [(label, ZCDP(part)) for label, part in budget_split(method, rho, tree_horizon, beta, w)]
    parameters = {
        "rho": rho, "delta": delta, "beta": beta, "method": method, "horizon": horizon,
        "horizon_given": True,  # always: the horizon is a required parameter
        "tree_horizon": tree_horizon, "max_flippancy": max_flippancy, "flippancy_bound": w,
        "time_col": time_col, "item_col": item_col, "op_col": op_col,
    }
    if stream:
        parameters["mode"] = "stream"
    else:
        parameters.update(origin=origin, step_size=step_size, shards=shards)
    parameters["noise"] = "discrete gaussian"
    guarantee = ZCDP(rho)
    notes = ["Bad values are dropped per event (never an error after spending); the report lists the rules."]
    if tree_horizon != horizon:
        notes.append(f"The trees run over {tree_horizon} steps (the next power of two); steps 1..{horizon} are released.")
    if max_flippancy is not None and w != max_flippancy:
        notes.append(f"max_flippancy {max_flippancy} is used as w = {w} (a power of two, at most the tree horizon).")
    if stream:
        notes.append(f"Streaming: privacy holds provided {GRID_CONDITION}.")
    return Plan(
        release=RELEASE,
        guarantee=guarantee,
        steps=steps,
        parameters=parameters,
        privacy_unit="item",
        neighbouring=f"{NEIGHBOURING}; assumes {GRID_CONDITION}" if stream else NEIGHBOURING,
        releases=(f"a private estimate of the number of present {item_col} values at every step 1..{horizon}, "
                  f"each with its {1 - beta:.0%} simultaneous error bound"),
        equivalent=guarantee.to_approx(delta),
        notes=notes,
    )
