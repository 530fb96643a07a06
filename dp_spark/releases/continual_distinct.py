"""The continual-distinct release: the number of present items at every step.

Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, "Counting Distinct Elements in
the Turnstile Model with Differential Privacy under Continual Observation"
(NeurIPS 2023). An event table ``(time, item, op)`` (op +1 inserts the item,
−1 deletes it) becomes a time series: for every step t = 1..T a private
estimate of D(t), the number of items whose count is positive at the end of
step t.

Privacy unit: an ITEM, not a person. Neighbouring event tables differ by any
subset of the events of one item (the paper's Definition 1.2: those events
replaced by no-ops). The guarantee is item-level ρ-zCDP for the whole series
(sensitivity ℓ2² ≤ 4·w·L per tree, ``mechanisms.continual_distinct.relations``),
reported with its (ε, δ) equivalent ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun–Steinke
2016, Prop. 1.3).

Pipeline: plan (``dp_spark.plans.continual_distinct``: checks and ρ's split,
before any data is read) → event table
(``dp_spark.stages.continual.grouped_events``) → Spark stage
(``grouped_cells``, no noise; O(G·T log T) numbers reach the driver) →
``dp_spark.mechanisms.continual_distinct.mechanisms.counts_by_group`` (numpy, one
counter per group, noise from an OS-seeded generator) → ``Release`` with the
``series`` artifact. Mechanisms (``method=``):

- ``"select"`` (default of a batch run): one counter chosen privately from
  the finished stream — Algorithm 1 at a flippancy bound, or the recompute
  baseline at a block — with 90 % of ρ, and its truncation or staleness
  stated from a noisy count, so the error bound needs no assumption about
  the data (``dp_spark.mechanisms.continual_distinct.select``).
- ``"auto"`` (default with ``--stream``): Algorithm 3 with lazily started
  counters (planned by the trees' crossover rule; per level the factorized
  counter — online its BLT approximation — or the tree, whichever has the
  smaller noise bound) and the recompute baseline past the
  crossover (Section 3.3's "best of both worlds";
  ``dp_spark.mechanisms.continual_distinct.auto``).
- ``"adaptive"``: Algorithm 3, counters for w = 2^j, j = 0..J (per level the
  factorized counter — online its BLT approximation — or the binary tree,
  whichever has the smaller noise bound), switched by the sparse vector
  technique (Algorithm 2) on the number of items whose flippancy exceeds the
  current w. Budget: ρ/2 to the sparse vector, ρ/(2(J + 1)) to each counter.
- ``"bounded"``: Algorithm 1 with a known ``max_flippancy`` (rounded up to a
  power of two): Gaussian binary tree, σ² = w·L/(2ρ), over the w-truncated
  stream; error grows with √w, not with T. ``counter="factorized"`` runs
  the square-root factorized counter on the same stream instead of the
  tree (``mechanisms.continual_distinct.factorized``; streamed, its
  buffered-linear-Toeplitz approximation ``mechanisms.continual_distinct.blt``):
  exact integer noise, per-step variance stated exactly.
- ``"baseline"``: the paper's Theorem 3.10 comparison as periodic recompute
  (the count every B steps, Gaussian noise, held between).

The project's own constants (the paper's are not legible in its seed text)
and the sensitivity bounds behind every privacy claim (property-tested on
random neighbouring streams): ``dp_spark.mechanisms.continual_distinct.mechanisms``.

Grouped (``group_by=``, public ``groups=``, ``max_groups=`` m): the same
body (ungrouped: one group, m = 1). Before anything is spent the template
restricts the events to the keys and caps every ITEM to m of its groups (a
per-item transformation). Each group's counter spends ρ/min(2m, G),
ρ/min(m, G) for "bounded" and ρ/min(max(m, ⌈2m·U/B⌉), G) for its
factorized counter (proof:
:mod:`dp_spark.mechanisms.continual_distinct.mechanisms`, "Groups"):
item-level ρ-zCDP for all series together; each group's bounds hold with
probability >= 1 − β, all G groups' with >= 1 − G·β.
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import types as T

from dp_spark.accounting import PrivacyFilter
from dp_spark.mechanisms.continual_distinct.mechanisms import counts_by_group, group_factor, merged_records
from dp_spark.noise.records import KINDS
from dp_spark.plan import Plan, release_api
from dp_spark.plans.continual_distinct import GRID_CONDITION, RULES, counter_factor_options, error_assumption
from dp_spark.plans.continual_distinct import plan as make_plan
from dp_spark.releases.groups import report_groups
from dp_spark.releases.template import run_release
from dp_spark.report import Release
from dp_spark.settings.continual_distinct import validate_grouped_size
from dp_spark.stages.continual import event_columns, grouped_cells, grouped_events, time_mapping
from dp_spark.stages.edges import GROUP

log = logging.getLogger(__name__)

#: The series artifact's columns (a Spark DataFrame, one row per released step).
SERIES_SCHEMA = "step long, estimate double, std double, error_bound double, flippancy_bound long"


def _finite_or_none(value: float):
    value = float(value)
    return value if math.isfinite(value) else None


def series_frame(steps, estimates, std, error_bound, flippancy_bound) -> pd.DataFrame:
    """The released series on the driver, as a pandas DataFrame (step,
    estimate, std, error_bound, flippancy_bound); released values only."""
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


def series_dataframe(session, series: pd.DataFrame):
    """The released series as a Spark DataFrame (``SERIES_SCHEMA``) via Arrow; released values only."""
    schema = pa.schema([("step", pa.int64()), ("estimate", pa.float64()), ("std", pa.float64()),
                        ("error_bound", pa.float64()), ("flippancy_bound", pa.int64())])
    return session.createDataFrame(pa.Table.from_pandas(series, schema=schema, preserve_index=False))


def series_pandas(series) -> pd.DataFrame:
    """A series artifact (Spark or pandas) as pandas with the exact column
    types of ``series_frame`` (``flippancy_bound`` a nullable integer)."""
    frame = series.toPandas() if hasattr(series, "toPandas") else series
    return series_frame(frame["step"], frame["estimate"], frame["std"], frame["error_bound"],
                        [None if pd.isna(b) else int(b) for b in frame["flippancy_bound"]])


def _noise_words(noise) -> str:
    """What the estimates' noise is, from the mechanism's records (the trees
    and the baseline add noise; the sparse vector only chooses)."""
    added = [r for r in noise if r.kind in ("binary-tree", "factorized-counter", "discrete-gaussian")
             and r.parameters.get("role") is None]  # "select"'s choice and statement draws add nothing
    if not added:
        return "discrete Gaussian noise"
    kinds = []
    for r in added:
        if KINDS[r.kind] not in kinds:
            kinds.append(KINDS[r.kind])
    sigmas = ", ".join(f"{r.scale:.4g}" for r in added)
    return f"{' or '.join(kinds)} (sigma {sigmas})"


def _errors(confidence: float, assumption: str, noise=()) -> dict:
    return {
        "final_estimate": (
            f"the estimate at the last released step: the number of present items plus {_noise_words(noise)}, "
            "whose standard deviation at that step is at most final_std"
        ),
        "final_error_bound": (
            f"with probability >= {confidence:.0%} every step's |estimate - true count| is at most its "
            f"error_bound (series column; this is the last step's){assumption}"
        ),
        "flippancy_bound": (
            "the flippancy bound w whose counter produced the last estimate (for 'adaptive', chosen by "
            "the sparse vector: a released, private quantity)"
        ),
        "series": (
            "one row per step: estimate, std (its Gaussian noise), error_bound (simultaneous over "
            f"all steps, probability >= {confidence:.0%}), flippancy_bound"
        ),
    }


def build_release(
    plan: Plan,
    *,
    series: pd.DataFrame,
    session,
    local: PrivacyFilter,
    method: str,
    seeded: bool,
    parameters: dict,
    notes: list[str],
    noise=(),
) -> Release:
    """The Release of a (batch or streamed) series of released estimates.

    ``series``: released values only (shorter than the horizon for a running
    stream), the ``series`` artifact of ``session``. ``method``: the mechanism
    that ran. ``parameters``: released choices added to the plan's. ``noise``:
    the mechanism's noise records, named by the error statements.
    """
    beta, delta, item_col = plan.params.beta, plan.params.delta, plan.params.item_col
    confidence = 1.0 - beta
    last = series.iloc[-1] if len(series) else None
    values = {
        "method": method,
        "horizon": int(plan.params.horizon),
        "released_count": int(len(series)),
        "final_estimate": None if last is None else float(last["estimate"]),
        "final_std": None if last is None else float(last["std"]),
        "final_error_bound": None if last is None else _finite_or_none(last["error_bound"]),
        "flippancy_bound": None if last is None or pd.isna(last["flippancy_bound"]) else int(last["flippancy_bound"]),
        "confidence": confidence,
        "notes": list(notes),
    }
    assumption = error_assumption(method, plan["flippancy_bound"])
    errors = _errors(confidence, assumption, noise)
    if plan.parameters.get("counter") == "factorized" and last is not None:
        values["max_std"] = float(series["std"].max())
        errors["max_std"] = ("the largest per-step noise standard deviation bound over the released steps: the "
                             "factorized counter's noise variance at step t is sigma^2*S(t), stated exactly and "
                             "non-decreasing in t, so this is the last released step's")
    provided = f", provided {GRID_CONDITION}" if plan.parameters.get("mode") == "stream" else ""
    statement = (
        f"Item-level {plan.guarantee.describe()}, which implies ({plan.equivalent.epsilon:.3g}, {delta:g})-"
        f"differential privacy: the whole series would be almost as likely if any subset of the "
        f"events of any one item (rows with the same {item_col}) were removed{provided}. The privacy unit is an "
        f"item, not a person. With probability at least {confidence:.0%} every released estimate is "
        f"within its error_bound of the true number of present items{assumption}."
    )
    return Release.from_plan(
        plan, values=values, errors=errors, statement=statement, seeded=seeded,
        budget_split=[{"step": label, **c.to_dict()} for label, c in local.ledger],
        parameters={**parameters, "rules": list(RULES)},
        artifacts={"series": series_dataframe(session, series)}, noise=noise,
    )


# ------------------------------------------------------------------ the release

@release_api(make_plan)  # the signature: Params' API fields, budget=, ledger= (one declaration)
def continual_distinct(df, plan: Plan, budget, ledger) -> Release:
    """Release the number of present items at every step under item-level ρ-zCDP.

    Jain et al. (NeurIPS 2023), the mechanisms of the module docstring.
    Item-level ρ-zCDP for the whole series (neighbouring tables differ by any
    subset of one item's events), reported with its (ε, δ) equivalent.

    Args:
        df: a Spark (or pandas) DataFrame of events: ``time_col`` (integer
            steps, numbers, timestamps or dates), ``item_col``, ``op_col``
            (+1 insert, −1 delete).
        rho: the zCDP budget of the whole series (> 0; required).
        horizon: number of steps T to release: REQUIRED, public, at most
            ``MAX_HORIZON``. Events after step T are dropped.
        method: "select" (default), "auto" (the default with --stream),
            "adaptive", "bounded" or "baseline".
        max_flippancy: the flippancy bound w for "bounded" only.
        counter: "bounded" only: "tree" (default) or "factorized" (the
            square-root factorized counter; streamed, its BLT approximation).
        beta: failure probability of the stated error bounds.
        delta: δ of the reported (ε, δ) equivalent (nothing extra is spent).
        origin, step_size: step = ⌊(time − origin) / step_size⌋ + 1
            (``dp_spark.stages.continual``). Integer columns: defaults 1 and 1.
            Floating, timestamp and date columns REQUIRE ``origin`` (never
            derived from the data). Timestamps: step_size in seconds, default
            one day; origin an ISO date/time (UTC unless it says otherwise).
        shards: item-hash shards of the Spark stage (default two per task slot).
        seed: tests and demos only; a seeded release is not for publication.
        budget: an optional shared :class:`PrivacyFilter` (or ``ledger=``); ρ
            is spent before any data is read; refused if it would overspend.
        group_by: a series per public key (``groups=``: a list, a one-column
            DataFrame or a file). ``max_groups`` m, REQUIRED with it: each
            item's events count in at most m of its groups (the first by a
            public hash order). ``release.groups``: the group column, step,
            count, std, error_bound, error; groups × the tree horizon is at most
            ``MAX_GROUPED_STEPS``.

    Returns a :class:`Release`: ``release.series`` (step, estimate, std,
    error_bound, flippancy_bound per step); ``release.result`` holds
    ``method``, ``horizon``, ``released_count``, ``final_estimate``,
    ``final_std``, ``final_error_bound``, ``flippancy_bound``, ``confidence``
    and ``notes``.

    Parameter and schema problems are refused before anything is spent; bad
    values drop the event (``RULES``), so whether the release raises never
    depends on the rows.
    """
    return run(plan, df, budget=budget, ledger=ledger)


def run(plan: Plan, df, *, budget=None, ledger=None, before_spend=None) -> Release:
    """The release on its plan through :func:`~dp_spark.releases.template.run_release`, on the event table."""
    mappings = []  # the time mapping the event table found (from the schema and the parameters: public)

    def events(plan: Plan, df):
        table, mapping = event_table(plan, df)
        mappings.append(mapping)
        return table

    def body(plan: Plan, events, rng, local) -> Release:
        return _body(plan, events, rng, local, mappings[-1])

    return run_release(plan, df, body, budget=budget, ledger=ledger, before_spend=before_spend,
                       edge_table=events, prepare=_grouped_size)


def event_table(plan: Plan, df):
    """(the event table, its time mapping) after the schema and time-mapping
    checks (a timestamp column without ``origin`` is refused here), before any
    spending and without reading data (:func:`dp_spark.stages.continual.grouped_events`)."""
    p = plan.params
    columns = event_columns(df, p.time_col, p.item_col, p.op_col)
    mapping = time_mapping(columns.kind, p.origin, p.step_size)
    return grouped_events(df, columns, mapping, p.horizon, p.group_by, p.time_col, p.item_col, p.op_col), mapping


def _grouped_size(plan: Plan, events) -> Plan:
    """A grouped run's size limit from the public keys alone, before spending;
    the plan rebuilt with the number of keys read from a file or a DataFrame.
    An ungrouped plan is returned unchanged."""
    p = plan.params
    if p.group_by is None:
        return plan
    validate_grouped_size(len(p.groups), p.horizon)
    counter = counter_factor_options(p.counter, plan["tree_horizon"], plan["flippancy_bound"])
    if plan["group_budget_factor"] != group_factor(p.method, p.max_groups, len(p.groups), **counter):
        rebuilt = make_plan(dataclasses.replace(plan.given, groups=p.groups))  # the public keys, read
        # the source of the keys and their count stay stated as the template put them
        parameters = {**rebuilt.parameters, "groups": plan.parameters["groups"],
                      "group_keys": plan.parameters["group_keys"]}
        plan = dataclasses.replace(rebuilt, steps=tuple(rebuilt.split), parameters=parameters)
    return plan


def _body(plan: Plan, events, rng, local, mapping) -> Release:
    """Stage (one pass), a counter per group, then the report: the series
    (ungrouped) or the groups table."""
    p = plan.params
    keys = p.groups or (None,)  # an ungrouped run: the one constant group
    log.info("continual-distinct: computing per-step summaries")  # no key count: the rule of tests/audit/test_transcript.py
    cells = grouped_cells(events, len(keys), plan["tree_horizon"], shards=p.shards)  # NON-PRIVATE
    log.info("continual-distinct: running the %s mechanism", p.method)
    results = counts_by_group((cells.summaries(g) for g in range(len(keys))),
                              plan.parameters.get("rho_per_group", p.rho), p.method, plan["flippancy_bound"],
                              rng=rng, beta=p.beta, counter=p.counter)
    del cells  # non-private; nothing below may use it
    if p.group_by is None:  # the report's shape only: one series, or the groups table
        return _report(plan, results[0], mapping, local, events.sparkSession, p.seed is not None)
    noise = merged_records([r.noise for r in results], plan["group_budget_factor"])
    return _groups_report(plan, keys, results, local, events.schema[GROUP].dataType, events.sparkSession, noise)


def _report(plan: Plan, result, mapping, local: PrivacyFilter, session, seeded: bool) -> Release:
    """The Release from the mechanism's released values and public parameters only."""
    T, tree_horizon, w = plan.params.horizon, plan["tree_horizon"], plan["flippancy_bound"]
    max_flippancy = plan.params.max_flippancy
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
    described = mapping.describe()
    if "step_seconds" in described:
        described["step_size"] = described["step_seconds"]  # step_size of a timestamp column is in seconds
    parameters = {**described, "mechanism_parameters": result.parameters}
    return build_release(plan, series=series, session=session, local=local, method=result.method,
                         seeded=seeded, parameters=parameters, notes=notes, noise=result.noise)


def _rows(plan: Plan, keys, results) -> pd.DataFrame:
    """Every group's released series, one row per (group, step): released values only."""
    T = plan.params.horizon
    confidence = 1.0 - plan.params.beta
    assumption = error_assumption(plan.params.method, plan["flippancy_bound"])
    frames = []
    for key, r in zip(keys, results):
        bound = np.asarray(r.error_bound[:T], dtype=np.float64)
        frames.append(pd.DataFrame({
            "group": [key] * T,
            "step": np.arange(1, T + 1, dtype=np.int64),
            "count": np.rint(np.asarray(r.estimates[:T], dtype=np.float64)).astype(np.int64),
            "std": np.asarray(r.std[:T], dtype=np.float64),
            "error_bound": np.where(np.isfinite(bound), bound, np.nan),
        }))
    out = pd.concat(frames, ignore_index=True)
    tail = (f" of the true number of present items of this group, at every step of the group at once with "
            f"probability >= {confidence:.0%}{assumption}")
    out["error"] = [f"within ±{b:,.4g}{tail}" if np.isfinite(b) else "no error bound at this step"
                    for b in out["error_bound"].to_numpy()]
    return out


def _groups_frame(spark, name: str, group_type, rows: pd.DataFrame):
    """``release.groups`` as a Spark DataFrame via Arrow (released values,
    at most MAX_GROUPED_STEPS rows)."""
    key = pa.int64() if isinstance(group_type, T.LongType) else pa.string()
    schema = pa.schema([(name, key), ("step", pa.int64()), ("count", pa.int64()), ("std", pa.float64()),
                        ("error_bound", pa.float64()), ("error", pa.string())])
    table = pa.Table.from_pandas(rows.rename(columns={"group": name}), schema=schema, preserve_index=False)
    return spark.createDataFrame(table)


def _groups_report(plan: Plan, keys, results, local, group_type, spark, noise) -> Release:
    """A grouped run's Release: every group's series as ``release.groups``,
    each group's last step in the report; released values only."""
    p = plan.params
    m, factor = p.max_groups, plan["group_budget_factor"]
    confidence = 1.0 - p.beta
    simultaneous = max(0.0, 1.0 - len(keys) * p.beta)
    last = []
    for key, r in zip(keys, results):
        bound = float(r.error_bound[p.horizon - 1])
        last.append({"group": key, "final_estimate": int(np.rint(r.estimates[p.horizon - 1])),
                     "final_std": float(r.std[p.horizon - 1]),
                     "final_error_bound": bound if np.isfinite(bound) else None})
    shown, more = report_groups(last)
    values = {
        "method": p.method,
        "horizon": int(p.horizon),
        "confidence": confidence,
        "simultaneous_confidence": simultaneous,
        "groups_released": len(keys),
        "groups": shown,
        "groups_in_report": len(shown),
        "notes": sorted({n for r in results for n in r.notes}),
    }
    errors = {
        "groups": ("each group's count at every step: the number of present items of that group (after each item's "
                   f"events are kept in at most {m} of its groups) plus that group's discrete Gaussian noise; "
                   "release.groups / --groups-output has one row per (group, step) with its std, error_bound and "
                   "error statement; the report holds each group's last step"),
        "final_error_bound": (f"with probability >= {confidence:.0%} every step's |count − true count| of a group "
                              f"is at most its error_bound; all {len(keys):,} groups' at once with probability >= "
                              f"{simultaneous:.0%} (union bound)"),
    }
    if more:
        errors["groups_in_report"] = (f"the report holds the first {len(shown):,} of {len(keys):,} groups (the keys' "
                                      "sorted order); every group is in release.groups and --groups-output")
    most = m if p.method == "bounded" else 2 * m
    share = (f"ρ/{factor}" + (" (the full ρ: parallel composition)" if factor == 1 else "")
             + f" (the factor min({'m' if p.method == 'bounded' else '2m'}, G) = min({most}, {len(keys)}): one "
             f"item's neighbour changes at most that many of the {len(keys):,} groups' counters)")
    if p.counter != "tree":
        counter = counter_factor_options(p.counter, plan["tree_horizon"], plan["flippancy_bound"])
        full = group_factor(p.method, m, None, **counter)
        share = (f"ρ/{factor}" + (" (the full ρ: parallel composition)" if factor == 1 else "")
                 + f" (the factor min(max(m, ⌈2m·U/B⌉), G) = min({full}, {len(keys)}): the factorized counters one "
                 f"item's neighbour changes cost at most that many groups' budgets, U and B the counter's "
                 "item-removal and subset sensitivity bounds)")
    statement = (
        f"Item-level {plan.guarantee.describe()} over all groups' series, which implies "
        f"({plan.equivalent.epsilon:.3g}, {p.delta:g})-differential privacy: the output would be almost as likely "
        f"if any subset of the events of any one item (rows with the same {p.item_col}) were removed. The privacy "
        f"unit is an item, not a person. Each item's events count in at most {m} of its {p.group_by} groups; each "
        f"group's series spends {share}. With probability at least {confidence:.0%} every estimate of a group is "
        f"within its error_bound; all {len(keys):,} groups' together with probability at least {simultaneous:.0%}."
    )
    frame = _groups_frame(spark, p.group_by, group_type, _rows(plan, keys, results))

    return Release.from_plan(
        plan, values=values, errors=errors, statement=statement, seeded=p.seed is not None,
        budget_split=[{"step": label, **c.to_dict()} for label, c in local.ledger],
        parameters={"rho_per_group": plan["rho_per_group"], "rules": list(RULES)},
        noise=noise, artifacts={"groups": frame},
    )
