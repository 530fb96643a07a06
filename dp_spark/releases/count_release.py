"""The count-release: as many item counts as possible, each near a target
relative error, under person-level δ-approximate ρ-zCDP.

``dp_spark.count_release(df, *, rho, delta, ...)``: plan
(:mod:`dp_spark.plans.count_release`: the guarantee and its split), Spark
stage (:mod:`dp_spark.stages.item_counts`), mechanism
(:mod:`dp_spark.mechanisms.count_release`). Rogers, "Private Count Release:
A Simple and Scalable Approach for Private Data Analytics" (arXiv
2403.05073); ALGORITHMS.md 5.2-5.3.

``method="pcr"`` (default, Algorithm 2): the Spark stage collects the k̄+1
largest per-item counts of distinct persons (each person adds at most 1 to
any count, but may touch all; no contribution bound); the driver loop
(:func:`dp_spark.mechanisms.count_release.private_count_release`) finds the
top remaining item with Unknown Domain Gumbel at a growing ε under a zCDP
privacy filter and releases its count with discrete Gaussian noise of
σ = max(σ_r(ε), 2/ε), until ρ or δ would be overspent or k̄ counts are out.

``method="bounded"``: the contribution-bounding ("Plume") baseline. Each
person keeps at most m = ``max_items`` distinct items (salted hash),
Gaussian-threshold partition selection, then discrete Gaussian counts of
the selected items (L2 sensitivity sqrt(m)), optionally dropping noisy
counts below T = (2 + r)σ/r (:mod:`dp_spark.mechanisms.count_release.bounded`).
Both noises are drawn inside Spark, keyed per item
(:mod:`dp_spark.mechanisms.count_release.keyed`); only released rows reach
the driver, and grouped not even those: the released (group, item) pairs are
stored by the executors once (:func:`dp_spark.stages.item_counts.store_item_counts`)
and ``release.groups`` reads them; the driver gets one number per key (numpy)
and the report's first rows.

Grouped, up to :data:`dp_spark.keys.MAX_GROUP_KEYS` public keys: they are one
Arrow array on the driver and a Spark join, and nothing per key is a Python
object (pcr's per-key numbers are a numpy count of its at most k̄ rows).

Every count carries its σ; a pcr count also carries its selection's
threshold T and ``p_within_r``, a lower bound on the probability of
relative error <= r when the true count is at least T
(:func:`dp_spark.mechanisms.count_release.loop.within_relative_error_probability`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T
from scipy.special import ndtr

from dp_spark.group_sizes import size_summary
from dp_spark.mechanisms.count_release import (
    gaussian_threshold_select,
    keyed_noisy_counts,
    noise_key,
    private_count_release,
    within_relative_error_probability,
)
from dp_spark.mechanisms.count_release.loop import COUNT_STEP, SELECTION_STEP
from dp_spark.noise.records import KINDS
from dp_spark.plan import REPORT_GROUPS, Plan, release_api
from dp_spark.plans.count_release import calibration, plan as make_plan
from dp_spark.releases.template import run_release
from dp_spark.report import Release
from dp_spark.sparkjobs import spark_job
from dp_spark.stages import item_counts as stage
from dp_spark.stages.group_items import GROUP_INDEX, Composite

log = logging.getLogger(__name__)

#: Most released rows of the report's first keys the JSON report holds (a grouped run: the largest
#: noisy counts first for ``bounded``, discovery order for ``pcr``); every row is in ``release.groups``.
#: A public bound on what a grouped run collects to the driver besides one number per key.
REPORT_ROWS = 10_000

_STOPPED = {
    "rho": "the next round would have exceeded rho",
    "delta": "the next round would have exceeded delta",
    "kbar": "kbar counts were released (all collected counts)",
}


@release_api(make_plan)  # the signature: Params' API fields, budget=, ledger= (one declaration)
def count_release(df, plan: Plan, budget, ledger) -> Release:
    """Release noisy counts of distinct persons per item, with their σ.

    Person-level δ-approximate ρ-zCDP (add or remove one person), hence
    (ρ + 2·sqrt(ρ·ln(1/δ')), δ + δ')-DP with δ' = ``conversion_delta`` (default
    δ). ``method``: ``pcr`` (Rogers 2024 Algorithm 2; ``relative_error`` r,
    ``kbar`` k̄, ``epsilon_min`` ε*, ``delta_min`` δ*, ``accuracy_factor``) or
    ``bounded`` (``max_items`` m required, ``alpha`` the selection's share of ρ,
    ``count_threshold`` drops counts below (2 + r)σ/r). ``budget``: an optional
    shared zCDP PrivacyFilter (or ``ledger=``), spent before any data is read.
    ``seed``: tests and demos only. Rows with a null person or item are dropped.

    Returns a :class:`~dp_spark.Release`: ``result`` holds ``items`` ({"item",
    "count", "sigma"}, pcr adding "threshold" and "p_within_r"; discovery order
    for pcr, largest noisy counts first for bounded), ``released_count``,
    ``method``, ``rho_spent`` and ``delta_spent``; ``release.items`` is the
    (rank, item, count, sigma) Spark DataFrame.

    Per group: ``group_by`` and ``groups`` (public keys, at most 1,000,000) run
    ONE mechanism on the composite key (group, item): the same guarantee, not
    divided. ``max_groups`` m (optional) caps each person to m groups first.
    ``release.groups``: the group column, ``item``, ``count``, ``sigma``,
    ``error``, every released pair (``bounded``: kept in Spark, evaluated once);
    ``result["groups"]`` the first 100 keys with their numbers of released
    pairs, ``result["items"]`` at most 10,000 of those keys' rows.
    """
    return run(plan, df, budget=budget, ledger=ledger)


def run(plan: Plan, df, *, budget=None, ledger=None, before_spend=None) -> Release:
    """The release on its plan through :func:`~dp_spark.releases.template.run_release`."""
    return run_release(plan, df, _body, budget=budget, ledger=ledger, before_spend=before_spend)


def _body(plan: Plan, edge_df, rng, local) -> Release:
    """Stage and mechanism on the composite key (group, item), then the report.
    Grouped, the guarantee is undivided: each (group, item) count moves by at
    most 1 per person, all one way, and ``bounded`` keeps at most ``max_items``
    pairs per person over all groups."""
    composite = Composite.of(edge_df, plan.params.groups, private="group_keys" in plan.split,
                             limit=type(plan.params).MAX_KEYS)
    edge_df = composite.edges(edge_df)
    grouped = plan.params.group_by is not None
    if plan.params.method == "pcr":
        rows, values, errors, split, noise = _pcr(edge_df, plan, rng)
        if grouped:
            return _grouped_release(plan, composite, _pcr_pairs(plan, composite, rows, noise, edge_df.sparkSession),
                                    values, errors, split, noise)
    else:
        split = [{"step": label, **cost.to_dict()} for label, cost in local.ledger]  # fixed by the plan
        calibrated, noisy = _bounded_counts(edge_df, plan, rng)
        minimum = calibrated.count_threshold if plan.params.count_threshold else None
        if grouped:  # the released pairs stay in Spark (as many as the data gives)
            log.info("count-release: counting the selected pairs, kept in Spark")
            released, n_selected = stage.store_item_counts(noisy, minimum=minimum)
            pairs = _bounded_pairs(plan, composite, released, calibrated)
            values = _bounded_values(plan, calibrated, [], n_selected)
            return _grouped_release(plan, composite, pairs, values, _bounded_errors(calibrated, minimum is not None,
                                                                                    calibrated.noise),
                                    split, calibrated.noise)
        log.info("count-release: counting the selected items")
        n_selected, pairs = stage.collect_item_counts(noisy, minimum=minimum)
        rows = [{"item": item, "count": count, "sigma": calibrated.count_sigma} for item, count in pairs]
        values = _bounded_values(plan, calibrated, rows, n_selected)
        errors, noise = _bounded_errors(calibrated, minimum is not None, calibrated.noise), calibrated.noise
    spark = edge_df.sparkSession
    return Release.from_plan(  # ungrouped: the released items
        plan, values=values, errors=errors, statement=_statement(plan, len(rows)),
        seeded=plan.params.seed is not None, budget_split=split,
        artifacts={"items": _items_df(spark, rows, composite.integral)}, noise=noise,
    )


def _statement(plan: Plan, released: int) -> str:
    """The guarantee and what was released, in words (public values only)."""
    guarantee, equivalent = plan.guarantee, plan.equivalent
    return (
        f"Person-level {guarantee.describe()}, which implies "
        f"(ε = {equivalent.epsilon:.4g}, δ = {equivalent.delta:.3g})-differential privacy: the "
        f"output would be almost as likely if any one person (every row with the same "
        f"{plan.params.person_col}) were removed or added. Released: {released} {plan.params.item_col} values with "
        "their number of distinct persons plus Gaussian noise of the stated sigma."
    )


# ------------------------------------------------------------------ pcr


def _pcr(edge_df, plan: Plan, rng):
    """Private Count Release (Rogers 2024, Algorithm 2) on the k̄+1 largest
    counts (NON-PRIVATE, never leave this function)."""
    kbar, r = plan.params.kbar, plan.params.relative_error
    log.info("count-release: collecting the %d largest item counts", kbar + 1)
    top = stage.top_item_counts(edge_df, kbar)
    log.info("count-release: Private Count Release loop")
    result = private_count_release(
        top.counts, top.next_count, plan.params.rho, plan.params.delta, r, kbar, rng,
        epsilon_min=plan.params.epsilon_min, delta_min=plan.params.delta_min,
        accuracy_factor=plan.params.accuracy_factor,
    )
    rows = [{"item": top.items[x.index], "count": int(x.count), "sigma": float(x.sigma),
             "threshold": float(x.threshold),
             "p_within_r": within_relative_error_probability(x.sigma, r, x.threshold)}
            for x in result.released]
    del top  # non-private; only released items leave this function
    values = {
        "items": rows,
        "released_count": len(rows),
        "method": "pcr",
        "rho_spent": result.spent.rho,
        "delta_spent": result.spent.delta,
        "selection_calls": result.selection_calls,
        "bottoms": result.bottoms,
        "final_epsilon": result.final_epsilon,
        "stopped": result.stopped,
    }
    errors = {
        "items": _pcr_accuracy(rows, r, plan.params.accuracy_factor, result.noise),
        "stopped": f"why the loop ended: {', '.join(f'{k}: {v}' for k, v in _STOPPED.items())}",
    }
    split = _pcr_split(result, plan.params.epsilon_min, plan.params.delta_min, len(rows))
    labels = {SELECTION_STEP: split[0]["step"], COUNT_STEP: split[1]["step"]}
    keys = [{"step": s.label, **s.cost.to_dict()} for s in plan.split if s.name == "group_keys"]  # spent first
    return rows, values, errors, keys + split, tuple(x.at(labels[x.step]) for x in result.noise)


def _pcr_split(result, epsilon_min: float, delta_min: float, released: int) -> list[dict]:
    """What the loop's privacy filter actually spent, and what it held unused."""
    unused = result.ledger.remaining  # exact, rounded down
    return [
        {"step": (f"selection: {result.selection_calls} Unknown Domain Gumbel top-1 calls "
                  f"({result.bottoms} returned ⊥), ε from {epsilon_min:g} to "
                  f"{result.final_epsilon:.4g}, δ* = {delta_min:g} each"),
         **result.selection_spent.to_dict()},
        {"step": f"counts: {released} discrete Gaussian counts (sensitivity 1 each)",
         **result.count_spent.to_dict()},
        {"step": ("held by the privacy filter, unused (still counted: the filter's guarantee "
                  "is its whole budget)"),
         **unused.to_dict()},
    ]


def _pcr_accuracy(rows, r, a, noise):
    """The pcr counts' error statement (public values and noise records only)."""
    counted = [x for x in noise if x.step == COUNT_STEP]
    kinds = sorted({KINDS[x.kind] for x in counted}) or [KINDS["discrete-gaussian"]]
    sensitivity = max((x.sensitivity for x in counted), default=1.0)
    text = (
        f"each count is the item's number of distinct persons (sensitivity {sensitivity:g}) plus "
        f"{' or '.join(kinds)} whose "
        "standard deviation is at most its sigma = max(sigma_r, 2/epsilon), with "
        f"sigma_r = (r/{a:g})·threshold. If the item's true count is at least its threshold "
        "(the T of the selection that found it), the count is within a relative error of "
        f"{r:g} with probability at least its p_within_r = 2Φ(floor({r:g}·T)/sigma) − 1; "
        "larger true counts do better. "
    )
    if rows:
        low = min(x["p_within_r"] for x in rows)
        high = max(x["p_within_r"] for x in rows)
        floored = sum(x["sigma"] > r / a * x["threshold"] * (1 + 1e-12) for x in rows)
        text += (f"Over the {len(rows)} released counts p_within_r ranges from {low:.0%} to {high:.0%} "
                 f"(worst case {low:.3g}); the paper's target 2Φ({a:g}) − 1 ≈ "
                 f"{2.0 * float(ndtr(a)) - 1.0:.0%} applies only where sigma = sigma_r, and the "
                 f"floor 2/epsilon set a larger sigma (a lower probability) for {floored} of them. ")
    text += ("An item selected with a true count below its threshold (possible, with smaller "
             "probability the lower its count) has no such guarantee.")
    return text


# -------------------------------------------------------------- bounded


def _bounded_counts(edge_df, plan: Plan, rng):
    """The contribution-bounding baseline's calibration and its noisy counts (item, count) of the
    selected items, a lazy DataFrame: both noises are drawn inside Spark, keyed per item
    (:mod:`dp_spark.mechanisms.count_release.keyed`), so every evaluation gives the same rows."""
    calibrated = calibration(plan)
    salt_select, salt_count = (int(x) for x in rng.integers(0, 2**62, size=2))
    select_key, count_key = noise_key(rng), noise_key(rng)
    log.info("count-release: bounding to %d items per person, Gaussian-threshold selection", calibrated.max_items)
    select = partial(gaussian_threshold_select, sigma=calibrated.selection_sigma,
                     threshold=calibrated.selection_threshold, key=select_key)
    selected = stage.select_items(stage.bounded_item_counts(edge_df, calibrated.max_items, salt_select), select)
    # `selected` is evaluated twice; its noise is keyed per item, so both select the same items
    restricted = stage.bounded_item_counts(edge_df, calibrated.max_items, salt_count, restrict_to=selected)
    add_noise = partial(keyed_noisy_counts, sigma=calibrated.count_sigma, key=count_key)
    return calibrated, stage.noisy_counts_of_items(restricted, selected, add_noise)  # private from here on


def _bounded_values(plan: Plan, calibrated, rows: list[dict], n_selected: int) -> dict:
    """The bounded baseline's ``result`` (released values and public calibration); grouped, the
    caller sets ``items`` and ``released_count``."""
    use_threshold = plan.params.count_threshold
    return {
        "items": rows,
        "released_count": len(rows),
        "method": "bounded",
        "selected": n_selected,
        "rho_spent": calibrated.rho,
        "delta_spent": calibrated.delta,
        "max_items": calibrated.max_items,
        "selection_threshold": calibrated.selection_threshold,
        "count_threshold": calibrated.count_threshold if use_threshold else None,
    }


def _bounded_errors(calibrated, use_threshold: bool, noise) -> dict[str, str]:
    """The bounded baseline's error statements (public calibration and records)."""
    selection, counted = noise
    errors = {
        "items": (
            f"each count is the number of distinct persons when every person keeps at most "
            f"{calibrated.max_items} of its items (never more than the true count), plus "
            f"{counted.describe()}; the noise drawn for each count is within ±{counted.half_width(0.05):,.0f} "
            "with probability >= 95%"
            + (" (before the count threshold, which keeps only counts that came out high)" if use_threshold else "")
        ),
        "selected": f"items that cleared the noisy partition-selection threshold ({selection.describe()})",
    }
    if use_threshold:
        errors["count_threshold"] = (
            f"counts below (2 + r)σ/r = {calibrated.count_threshold:.4g} were dropped, so that "
            f"(count + σ)/(count − σ) <= 1 + {calibrated.relative_error:g} for the rest"
        )
    return errors


def _row_error(plan: Plan, row: dict, record) -> str:
    """One released pair's error statement (public values, its noise record)."""
    p = plan.params
    pair = f"({p.group_by}, {p.item_col})"
    half = record.half_width(0.05)
    if p.method == "pcr":
        return (f"this {pair} pair's number of distinct persons plus {record.describe()}: the noise is within "
                f"±{half:,.0f} with probability >= 95%; if the true count is at least {row['threshold']:.4g} "
                f"(the threshold of the selection that found it) the count is within a relative error of "
                f"{p.relative_error:g} with probability >= {row['p_within_r']:.0%}")
    return (f"this {pair} pair's number of distinct persons when each person keeps at most "
            f"{plan['max_items']} pairs over all groups (never more than the true count), plus "
            f"{record.describe()}: the noise is within ±{half:,.0f} with probability >= 95%")


@dataclass(frozen=True)
class _Pairs:
    """A grouped run's released (group, item) pairs: ``frame`` (``release.groups``: every pair, a Spark
    DataFrame), ``per_group`` (int64, the pairs of each key, by group index) and ``shown`` (the report's
    rows: pairs of the first :data:`~dp_spark.plan.REPORT_GROUPS` keys, at most :data:`REPORT_ROWS`).
    Released values and public keys only."""

    frame: object
    per_group: np.ndarray
    shown: list[dict]


def _bounded_pairs(plan: Plan, composite: Composite, released, calibrated) -> _Pairs:
    """The released pairs of ``released`` (the stored noisy counts of the composite items, already
    cut by the count threshold) in Spark: split into (group, item) by the key table, the one σ and the
    one error text (every count has the same noise record) as literal columns. Only the number of
    pairs per key (Arrow, at most one per key) and at most :data:`REPORT_ROWS` rows of the report's
    first keys reach the driver. The report's rows are read by group index (the first keys are
    indices 0..99) from the stored pairs, with no join: a join's plan can skip a job when one side
    is empty (adaptive execution), which would show before the record whether anything was released."""
    p = plan.params
    (_, counted) = calibrated.noise
    error = _row_error(plan, {}, counted)
    frame = (composite.split(released.withColumn("sigma", F.lit(float(calibrated.count_sigma))), p.group_by)
             .withColumn("error", F.lit(error)))
    with spark_job("counting the released pairs of every group"):
        per_group = composite.per_group(released)  # <= G numbers, as Arrow
    head = composite.keys.head(REPORT_GROUPS)
    # largest noisy counts first, as ungrouped; ties by key (its index: canonical order) and item (a public rule)
    first = (composite.indexed(released).where(F.col(GROUP_INDEX) < F.lit(len(head)))
             .orderBy(F.col("count").desc(), F.col(GROUP_INDEX).asc(), F.col("item").asc())
             .limit(REPORT_ROWS)
             .select(GROUP_INDEX, "item", "count"))
    with spark_job("collecting the released counts of the report's first groups"):
        table = first.toArrow()  # at most REPORT_ROWS rows
    sigma = float(calibrated.count_sigma)
    shown = [{"group": head[i], "item": item, "count": count, "sigma": sigma}
             for i, item, count in zip(table.column(GROUP_INDEX).to_pylist(), table.column("item").to_pylist(),
                                       table.column("count").to_pylist())]
    return _Pairs(frame, per_group, shown)


def _pcr_pairs(plan: Plan, composite: Composite, rows: list[dict], noise, spark) -> _Pairs:
    """The pcr loop's released rows (at most k̄, a public bound; each with its own noise record and
    error text) as (group, item) pairs: the frame from Arrow arrays, the per-key numbers with numpy."""
    p = plan.params
    counted = [x for x in noise if x.kind == "discrete-gaussian"]
    parsed = [composite.parse(row["item"]) for row in rows]
    index = np.fromiter((i for i, _ in parsed), dtype=np.int64, count=len(parsed))
    groups = composite.keys.arrow.take(pa.array(index, type=pa.int64()))
    named = [{"group": g, **row, "item": item}
             for g, row, (_, item) in zip(groups.to_pylist(), rows, parsed, strict=True)]
    errors = [_row_error(plan, row, record) for row, record in zip(named, counted, strict=True)]
    item_type = pa.int64() if composite.integral else pa.string()
    table = pa.table({
        p.group_by: groups,
        "item": pa.array([row["item"] for row in named], type=item_type),
        "count": pa.array([int(row["count"]) for row in named], type=pa.int64()),
        "sigma": pa.array([float(row["sigma"]) for row in named], type=pa.float64()),
        "error": pa.array(errors, type=pa.string()),
    })
    frame = spark.createDataFrame(table, _groups_schema(plan, composite))
    shown = [row for row, i in zip(named, index) if i < REPORT_GROUPS][:REPORT_ROWS]
    return _Pairs(frame, np.bincount(index, minlength=len(composite.keys)).astype(np.int64), shown)


def _groups_schema(plan: Plan, composite: Composite):
    """``release.groups``' schema: the group column, item, count, sigma, error."""
    return T.StructType([
        T.StructField(plan.params.group_by, composite.group_type, False),
        T.StructField("item", T.LongType() if composite.integral else T.StringType(), False),
        T.StructField("count", T.LongType(), False),
        T.StructField("sigma", T.DoubleType(), False),
        T.StructField("error", T.StringType(), False),
    ])


def _grouped_release(plan: Plan, composite: Composite, pairs: _Pairs, values, errors, split, noise) -> Release:
    """The grouped Release: ``release.groups`` (every released pair with its error statement) and the
    report's first ``REPORT_GROUPS`` keys with their numbers of pairs and at most :data:`REPORT_ROWS`
    of their rows. Released values, public keys and noise records only; nothing per key in a Python
    list (the per-key numbers are one numpy array)."""
    p = plan.params
    keys, per_group = composite.keys, pairs.per_group
    head = keys.head(REPORT_GROUPS)
    shown = [{"group": k, "released_count": int(n)} for k, n in zip(head, per_group[:len(head)])]
    in_head = int(per_group[:len(head)].sum())
    released = int(per_group.sum())
    report_rows = [{k: v for k, v in r.items() if k != "error"} for r in pairs.shown]
    values = {**values, "items": report_rows, "released_count": released,
              "groups": shown, "groups_released": len(keys), "groups_in_report": len(shown)}
    which = "largest" if p.method == "bounded" else "first found (the loop's order)"
    cut = (f" The report holds the {len(report_rows):,} {which} of the {in_head:,} counts of its first keys."
           if in_head > len(report_rows) else "")
    errors = {**errors,
              "items": (f"each released count is one ({p.group_by}, {p.item_col}) pair's; " + errors["items"]
                        + " Each row of release.groups / --groups-output states its own error." + cut),
              "groups": (f"each public key of {p.group_by} with the number of its pairs whose count was released "
                         "(the released rows are in release.groups / --groups-output)")}
    values["group_sizes"] = size_summary(keys, per_group, f"released ({p.group_by}, {p.item_col}) counts")
    errors["group_sizes"] = (f"every {p.group_by} group's number of released counts: the largest groups and how "
                             "many groups fall in each range (post-processing of the released pairs)")
    if len(keys) > len(shown):
        errors["groups_in_report"] = (f"the report holds the first {len(shown):,} of {len(keys):,} keys (public key "
                                      "order) and their rows; every released count is in release.groups")
    guarantee, equivalent = plan.guarantee, plan.equivalent
    m = p.max_groups
    cap = f" Each person's rows count in at most {m} of their {p.group_by} groups." if m is not None else ""
    statement = (
        f"Person-level {guarantee.describe()} over all groups, which implies (ε = {equivalent.epsilon:.4g}, "
        f"δ = {equivalent.delta:.3g})-differential privacy: the output would be almost as likely if any one "
        f"person (every row with the same {p.person_col}) were removed or added. One release runs on the "
        f"({p.group_by}, {p.item_col}) pairs, so the budget is not split between groups.{cap} Released: "
        f"{released} pairs with their number of distinct persons plus Gaussian noise of the stated sigma."
    )
    return Release.from_plan(
        plan, values=values, errors=errors, statement=statement, seeded=p.seed is not None, budget_split=split,
        artifacts={"groups": pairs.frame}, noise=noise,
    )


def _items_df(spark, rows, integral):
    """The released rows as a (rank, item, count, sigma) Spark DataFrame."""
    schema = T.StructType([
        T.StructField("rank", T.IntegerType(), False),
        T.StructField("item", T.LongType() if integral else T.StringType(), False),
        T.StructField("count", T.LongType(), False),
        T.StructField("sigma", T.DoubleType(), False),
    ])
    pdf = pd.DataFrame({
        "rank": pd.Series(np.arange(1, len(rows) + 1), dtype="int32"),
        "item": pd.Series([r["item"] for r in rows], dtype=object),
        "count": pd.Series([r["count"] for r in rows], dtype="int64"),
        "sigma": pd.Series([r["sigma"] for r in rows], dtype="float64"),
    })
    return spark.createDataFrame(pdf, schema)
