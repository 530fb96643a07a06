"""The continual-distinct release: the number of present items at every step.

Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, "Counting Distinct Elements in
the Turnstile Model with Differential Privacy under Continual Observation"
(NeurIPS 2023). An event table ``(time, item, op)`` — op +1 inserts the item,
−1 deletes it (likes and unlikes, sessions opening and closing) — becomes a
time series: for every step t = 1..T a private estimate of D(t), the number
of items whose count is positive at the end of step t.

Privacy unit: an ITEM, not a person. Neighbouring event tables differ by all
events of one item (one table has them, the other none); the guarantee is
item-level ρ-zCDP for the whole series, reported with its (ε, δ) equivalent
ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun–Steinke 2016, Prop. 1.3).

Pipeline: Spark stage ``dp_spark.stages.continual.continual_summaries`` (no
noise; O(T log T) numbers reach the driver) → ``dp_spark.mechanisms.continual_distinct.continual_counts``
(numpy; all noise from an OS-seeded generator) → ``Release`` whose ``series``
(a pandas DataFrame: step, estimate, std, error_bound, flippancy_bound) is an
artifact and whose report is ``to_dict()``. Mechanisms (``mechanism=``):

- ``"adaptive"`` — Algorithm 3: binary-tree mechanisms for w = 2^j, j = 0..J,
  switched by the sparse vector technique (Algorithm 2) on the number of items
  whose flippancy exceeds the current w; needs no flippancy bound. Budget: ρ/2
  to the sparse vector, ρ/(2(J + 1)) to each tree.
- ``"bounded"`` — Algorithm 1 with a known bound ``max_flippancy`` (rounded
  up to a power of two): Gaussian binary tree, σ² = w·L/(2ρ), over the
  w-truncated stream; error grows with √w, not with T.
- ``"baseline"`` — the paper's Theorem 3.10 comparison, implemented as
  periodic recompute (the count every B steps, Gaussian noise, held between).

Constants that are this project's (the paper's are not legible in its seed
text) are stated in ``dp_spark.mechanisms.continual_distinct.mechanisms``; every privacy claim
rests on a sensitivity bound proved there and property-tested on random
neighbouring streams.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.mechanisms.continual_distinct import DEFAULT_METHOD, MECHANISMS, continual_counts, round_up_flippancy
from dp_spark.mechanisms.continual_distinct import budget_split as continual_budget_split
from dp_spark.errors import ParameterError
from dp_spark.noise import make_rng
from dp_spark import checks
from dp_spark.report import Release

log = logging.getLogger(__name__)

RELEASE = "continual-distinct"

NEIGHBOURING = (
    "item-level (Jain et al. 2023, Definition 1.2): remove any subset of the events of one item "
    "(rows with the same item value); a person is protected only as far as their events concern a single item"
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


# ------------------------------------------------------------------ validation

def validate(
    rho, horizon, mechanism, max_flippancy, seed, beta, delta
) -> tuple[float, int, str, int | None, int | None, float, float]:
    """Parameter checks shared by the batch and streaming releases (no data read)."""
    from dp_spark.stages.continual import validate_horizon  # the stage's cap (imported lazily, as below)

    rho = checks.positive(rho, "rho")
    beta = checks.open_unit(beta, "beta")
    delta = checks.open_unit(delta, "delta")
    seed = checks.seed(seed)
    horizon = validate_horizon(horizon)  # required and capped, before any data is read
    if mechanism not in MECHANISMS:
        raise ParameterError(f"mechanism must be one of {', '.join(MECHANISMS)}; got {mechanism!r}.")
    if mechanism == "bounded":
        if max_flippancy is None:
            raise ParameterError(
                "mechanism 'bounded' needs max_flippancy (how often an item may flip between present "
                "and absent); or use mechanism 'adaptive', which needs none."
            )
        max_flippancy = checks.whole(max_flippancy, "max_flippancy")
    elif max_flippancy is not None:
        raise ParameterError(
            f"max_flippancy applies only to mechanism 'bounded'; leave it unset for {mechanism!r}."
        )
    return rho, horizon, mechanism, max_flippancy, seed, beta, delta


def effective_flippancy(max_flippancy: int | None, tree_horizon: int) -> int | None:
    """The bound w the tree uses: max_flippancy rounded up to a power of two,
    at most the tree horizon (no item flips more often than there are steps)."""
    if max_flippancy is None:
        return None
    return min(round_up_flippancy(max_flippancy), tree_horizon)


def budget_split(mechanism: str, rho: float, tree_horizon: int, beta: float, w: int | None) -> PrivacyFilter:
    """The ledger of the release's ρ (public quantities only; from the mechanism layer)."""
    local = PrivacyFilter(ZCDP(rho))
    for label, part in continual_budget_split(mechanism, rho, tree_horizon, beta, w):
        local.spend(ZCDP(part), label=label)
    return local


def _finite_or_none(value: float):
    value = float(value)
    return value if math.isfinite(value) else None


def build_release(
    *,
    series: pd.DataFrame,
    rho: float,
    beta: float,
    delta: float,
    mechanism: str,
    horizon: int,
    tree_horizon: int,
    w: int | None,
    seeded: bool,
    parameters: dict,
    notes: list[str],
    item_col: str,
    condition: str | None = None,
) -> Release:
    """The Release of a (batch or streamed) series of released estimates.

    ``series`` holds only released values (estimates and their public error
    statements); it may be shorter than ``horizon`` for a stream still running.
    ``condition``: an assumption the guarantee rests on (the streaming step
    grid); it is stated in the neighbouring relation and the statement.
    """
    local = budget_split(mechanism, rho, tree_horizon, beta, w)
    guarantee = ZCDP(rho)  # the ledger's parts sum to rho (up to float rounding)
    equivalent = guarantee.to_approx(delta)
    confidence = 1.0 - beta
    steps = len(series)
    last = series.iloc[-1] if steps else None
    values = {
        "mechanism": mechanism,
        "horizon": int(horizon),
        "steps_released": int(steps),
        "final_estimate": None if last is None else float(last["estimate"]),
        "final_std": None if last is None else float(last["std"]),
        "final_error_bound": None if last is None else _finite_or_none(last["error_bound"]),
        "flippancy_bound": None if last is None or pd.isna(last["flippancy_bound"]) else int(last["flippancy_bound"]),
        "confidence": confidence,
        "notes": list(notes),
    }
    if mechanism == "bounded":
        assumption = f", provided no item flips more than {w} times (otherwise add the number of items that do)"
    elif mechanism in ("baseline", "auto"):
        assumption = ", provided the count changes by at most 1 per step (staleness between recomputes)"
    else:
        assumption = ""
    errors = {
        "final_estimate": (
            "the estimate at the last released step: the number of present items plus Gaussian noise "
            "with standard deviation final_std"
        ),
        "final_error_bound": (
            f"with probability >= {confidence:.0%} every step's |estimate - true count| is at most its "
            f"error_bound (series column; this is the last step's){assumption}"
        ),
        "flippancy_bound": (
            "the flippancy bound w whose tree produced the last estimate (for 'adaptive', chosen by "
            "the sparse vector: a released, private quantity)"
        ),
        "series": (
            "one row per step: estimate, std (its Gaussian noise), error_bound (simultaneous over "
            f"all steps, probability >= {confidence:.0%}), flippancy_bound"
        ),
    }
    provided = "" if condition is None else f", provided {condition}"
    statement = (
        f"Item-level {guarantee.describe()}, which implies ({equivalent.epsilon:.3g}, {delta:g})-"
        f"differential privacy: the whole series would be almost as likely if any subset of the "
        f"events of any one item (rows with the same {item_col}) were removed{provided}. The privacy unit is an "
        f"item, not a person. With probability at least {confidence:.0%} every released estimate is "
        f"within its error_bound of the true number of present items{assumption}."
    )
    return Release(
        name=RELEASE,
        privacy_unit="item",
        neighbouring=NEIGHBOURING if condition is None else f"{NEIGHBOURING}; assumes {condition}",
        guarantee=guarantee,
        parameters=parameters,
        values=values,
        errors=errors,
        statement=statement,
        seeded=seeded,
        budget_split=[{"step": label, **c.to_dict()} for label, c in local.ledger],
        equivalent=equivalent,
        artifacts={"series": series},
    )


def series_frame(steps, estimates, std, error_bound, flippancy_bound) -> pd.DataFrame:
    """The released series as a pandas DataFrame (step, estimate, std, error_bound, flippancy_bound)."""
    return pd.DataFrame(
        {
            "step": np.asarray(steps, dtype=np.int64),
            "estimate": np.asarray(estimates, dtype=np.float64),
            "std": np.asarray(std, dtype=np.float64),
            "error_bound": np.asarray(error_bound, dtype=np.float64),
            "flippancy_bound": pd.array(
                [None if b is None else int(b) for b in flippancy_bound], dtype="Int64"
            ),
        }
    )


# ------------------------------------------------------------------ the release

def continual_distinct(
    events_df,
    rho: float,
    horizon: int | None = None,
    mechanism: str = DEFAULT_METHOD,
    time_col: str = "time",
    item_col: str = "item",
    op_col: str = "op",
    max_flippancy: int | None = None,
    seed: int | None = None,
    *,
    beta: float = 0.05,
    delta: float = 1e-6,
    origin=None,
    step_size=None,
    shards: int | None = None,
    budget: PrivacyFilter | None = None,
    ledger=None,
) -> Release:
    """Release the number of present items at every step under item-level ρ-zCDP.

    Args:
        events_df: a Spark DataFrame of events: ``time_col`` (integer steps,
            numbers, timestamps or dates), ``item_col``, ``op_col`` (+1 insert,
            −1 delete).
        rho: the zCDP budget spent by the whole series (> 0).
        horizon: number of steps T to release: REQUIRED (ParameterError
            before any data is read otherwise), a public parameter at most
            ``MAX_HORIZON``; never derived from the data. Events after step T
            are dropped.
        mechanism: "adaptive" (Algorithm 3), "bounded" (Algorithm 1, needs
            ``max_flippancy``) or "baseline" (periodic recompute).
        max_flippancy: the flippancy bound w for "bounded".
        seed: tests and demos only; a seeded release is not for publication.
        beta: failure probability of the stated error bounds.
        delta: δ of the reported (ε, δ) equivalent (nothing extra is spent).
        origin, step_size: time → step mapping, step = ⌊(time − origin) /
            step_size⌋ + 1 (see ``dp_spark.stages.continual``). Integer
            columns: defaults 1 and 1 (the time is the step). Floating,
            timestamp and date columns REQUIRE ``origin`` (the start of step
            1; ParameterError before any data is read otherwise) — it is never
            derived from the data. Timestamps: step_size in seconds, default
            one day; origin an ISO date/time (UTC unless it says otherwise).
        shards: item-hash shards of the Spark stage (default
            ``spark.sql.shuffle.partitions``).
        budget: an optional shared :class:`PrivacyFilter`; ρ is spent from it
            before any data is read, and the release is refused if it would
            overspend.

    Returns a :class:`Release`: ``release.series`` is a pandas DataFrame with
    one row per step (step, estimate, std, error_bound, flippancy_bound);
    ``release.to_dict()`` is the JSON report (guarantee, budget split, error
    statements, the bad-input rules applied, parameters).

    Bad input: schema problems (missing column, unusable type, an item
    column with inexact equality) are refused before anything is spent;
    value problems inside rows drop the event (``RULES``), so whether the
    release raises never depends on the rows.
    """
    from dp_spark.io import spark_frame

    events_df = spark_frame(events_df, "events_df")  # a pandas DataFrame is converted; other types refused
    from dp_spark.ledger import budget_or_ledger

    budget = budget_or_ledger(budget, ledger)  # ledger=: a persisted budget (dp_spark.ledger)
    from dp_spark.stages.continual import (
        check_columns,
        continual_summaries,
        time_mapping,
        validate_mapping_parameters,
        validate_shards,
    )

    rho, horizon, mechanism, max_flippancy, seed, beta, delta = validate(
        rho, horizon, mechanism, max_flippancy, seed, beta, delta
    )
    validate_mapping_parameters(origin, step_size)
    shards = validate_shards(shards)
    kind = check_columns(events_df, time_col, item_col, op_col)  # schema only, before any spending
    time_mapping(kind, origin, step_size)  # e.g. a timestamp column without origin: refused here
    cost = ZCDP(rho)
    if budget is not None:
        budget.spend(cost, label=RELEASE)  # refuses before any data is read
    rng = make_rng(seed)

    log.info("continual-distinct: computing per-step summaries")
    stage = continual_summaries(
        events_df, time_col, item_col, op_col, horizon, origin=origin, step_size=step_size, shards=shards
    )
    released_horizon, mapping = stage.horizon, stage.mapping
    tree_horizon = stage.summaries.horizon
    w = effective_flippancy(max_flippancy, tree_horizon)
    log.info("continual-distinct: running the %s mechanism", mechanism)
    result = continual_counts(stage.summaries, rho, mechanism, w, rng=rng, beta=beta)
    del stage  # non-private arrays; nothing below may use them

    T = released_horizon
    series = series_frame(
        np.arange(1, T + 1),
        result.estimates[:T],
        result.std[:T],
        result.error_bound[:T],
        [None] * T if result.flippancy_bound is None else result.flippancy_bound[:T],
    )
    notes = list(result.notes)
    if tree_horizon != T:
        notes.append(f"The trees run over {tree_horizon} steps (the next power of two); steps 1..{T} are released.")
    if max_flippancy is not None and w != max_flippancy:
        notes.append(f"max_flippancy {max_flippancy} was used as w = {w} (a power of two, at most the tree horizon).")
    parameters = {
        "rho": rho,
        "delta": delta,
        "beta": beta,
        "mechanism": mechanism,
        "horizon": T,
        "horizon_given": True,  # always: the horizon is a required parameter
        "tree_horizon": tree_horizon,
        "max_flippancy": max_flippancy,
        "flippancy_bound": w,
        "time_col": time_col,
        "item_col": item_col,
        "op_col": op_col,
        **mapping.describe(),
        "mechanism_parameters": result.parameters,
        "noise": "discrete gaussian",
        "rules": list(RULES),
    }
    return build_release(
        series=series,
        rho=rho,
        beta=beta,
        delta=delta,
        mechanism=mechanism,
        horizon=T,
        tree_horizon=tree_horizon,
        w=w,
        seeded=seed is not None,
        parameters=parameters,
        notes=notes,
        item_col=item_col,
    )
