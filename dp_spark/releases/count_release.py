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
the driver.

Every count carries its σ; a pcr count also carries its selection's
threshold T and ``p_within_r``, a lower bound on the probability of
relative error <= r when the true count is at least T
(:func:`dp_spark.mechanisms.count_release.loop.within_relative_error_probability`).
"""

from __future__ import annotations

import logging
from functools import partial

import numpy as np
import pandas as pd
from pyspark.sql import types as T
from scipy.special import ndtr

from dp_spark.mechanisms.count_release import (
    gaussian_threshold_select,
    keyed_noisy_counts,
    noise_key,
    private_count_release,
    within_relative_error_probability,
)
from dp_spark.mechanisms.count_release.loop import COUNT_STEP, SELECTION_STEP
from dp_spark.noise.records import KINDS
from dp_spark.plan import Plan, release_api
from dp_spark.plans.count_release import calibration, plan as make_plan
from dp_spark.releases.groups import report_groups
from dp_spark.releases.template import run_release
from dp_spark.report import Release
from dp_spark.stages import item_counts as stage
from dp_spark.stages.group_items import Composite

log = logging.getLogger(__name__)

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

    Per group: ``group_by`` and ``groups`` (public keys, at most 1,024) run ONE
    mechanism on the composite key (group, item): the same guarantee, not
    divided. ``max_groups`` m (optional) caps each person to m groups first.
    ``release.groups``: the group column, ``item``, ``count``, ``sigma``,
    ``error``; ``result["groups"]`` the first 100 keys with their released
    counts, ``result["items"]`` those keys' rows.
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
    if plan.params.method == "pcr":
        rows, values, errors, split, noise = _pcr(edge_df, plan, rng)
    else:
        rows, values, errors, noise = _bounded(edge_df, plan, rng)
        split = [{"step": label, **cost.to_dict()} for label, cost in local.ledger]  # fixed by the plan
    spark = edge_df.sparkSession
    if plan.params.group_by is None:  # the report's shape only: the released items
        return Release.from_plan(
            plan, values=values, errors=errors, statement=_statement(plan, len(rows)),
            seeded=plan.params.seed is not None, budget_split=split,
            artifacts={"items": _items_df(spark, rows, composite.integral)}, noise=noise,
        )
    return _grouped_release(plan, composite, rows, values, errors, split, noise, spark)


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
    return rows, values, errors, split, tuple(x.at(labels[x.step]) for x in result.noise)


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


def _bounded(edge_df, plan: Plan, rng):
    """The contribution-bounding baseline, keyed noise drawn inside Spark:
    the released rows, values, errors and the two draws' noise records."""
    calibrated = calibration(plan)
    use_threshold = plan.params.count_threshold
    salt_select, salt_count = (int(x) for x in rng.integers(0, 2**62, size=2))
    select_key, count_key = noise_key(rng), noise_key(rng)
    log.info("count-release: bounding to %d items per person, Gaussian-threshold selection", calibrated.max_items)
    select = partial(gaussian_threshold_select, sigma=calibrated.selection_sigma,
                     threshold=calibrated.selection_threshold, key=select_key)
    selected = stage.select_items(stage.bounded_item_counts(edge_df, calibrated.max_items, salt_select), select)
    # `selected` is evaluated twice; its noise is keyed per item, so both select the same items
    restricted = stage.bounded_item_counts(edge_df, calibrated.max_items, salt_count, restrict_to=selected)
    add_noise = partial(keyed_noisy_counts, sigma=calibrated.count_sigma, key=count_key)
    noisy = stage.noisy_counts_of_items(restricted, selected, add_noise)  # private from here on
    log.info("count-release: counting the selected items")
    n_selected, released = stage.collect_item_counts(
        noisy, minimum=calibrated.count_threshold if use_threshold else None)
    rows = [{"item": item, "count": count, "sigma": calibrated.count_sigma} for item, count in released]
    values = {
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
    noise = calibrated.noise
    return rows, values, _bounded_errors(calibrated, use_threshold, noise), noise


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


def _grouped_release(plan: Plan, composite: Composite, rows, values, errors, split, noise, spark) -> Release:
    """The grouped Release: ``release.groups`` (each released row with its
    error statement) and the report's first ``REPORT_GROUPS`` keys. Released
    rows, public keys and noise records only."""
    p = plan.params
    keys = composite.keys
    counted = [x for x in noise if x.kind == "discrete-gaussian"]
    if len(counted) == 1:  # bounded: one record for every count
        counted = counted * len(rows)
    out, per_group = [], [0] * len(keys)
    for row, record in zip(rows, counted, strict=True):
        index, item = composite.parse(row["item"])
        named = {"group": keys[index], **row, "item": item}
        named["error"] = _row_error(plan, named, record)
        out.append(named)
        per_group[index] += 1
    shown, more = report_groups([{"group": k, "released_count": n} for k, n in zip(keys, per_group)])
    in_report = {g["group"] for g in shown}
    values = {**values,
              "items": [{k: v for k, v in r.items() if k != "error"} for r in out if r["group"] in in_report],
              "groups": shown, "groups_released": len(keys), "groups_in_report": len(shown)}
    errors = {**errors,
              "items": (f"each released count is one ({p.group_by}, {p.item_col}) pair's; " + errors["items"]
                        + " Each row of release.groups / --groups-output states its own error."),
              "groups": (f"each public key of {p.group_by} with the number of its pairs whose count was released "
                         "(the released rows are in release.groups / --groups-output)")}
    if more:
        errors["groups_in_report"] = (f"the report holds the first {len(shown):,} of {len(keys):,} keys (public key "
                                      "order) and their rows; every released count is in release.groups")
    schema = T.StructType([
        T.StructField(p.group_by, composite.group_type, False),
        T.StructField("item", T.LongType() if composite.integral else T.StringType(), False),
        T.StructField("count", T.LongType(), False),
        T.StructField("sigma", T.DoubleType(), False),
        T.StructField("error", T.StringType(), False),
    ])
    frame = spark.createDataFrame([(r["group"], r["item"], int(r["count"]), float(r["sigma"]), r["error"])
                                   for r in out], schema)
    guarantee, equivalent = plan.guarantee, plan.equivalent
    m = p.max_groups
    cap = f" Each person's rows count in at most {m} of their {p.group_by} groups." if m is not None else ""
    statement = (
        f"Person-level {guarantee.describe()} over all groups, which implies (ε = {equivalent.epsilon:.4g}, "
        f"δ = {equivalent.delta:.3g})-differential privacy: the output would be almost as likely if any one "
        f"person (every row with the same {p.person_col}) were removed or added. One release runs on the "
        f"({p.group_by}, {p.item_col}) pairs, so the budget is not split between groups.{cap} Released: "
        f"{len(out)} pairs with their number of distinct persons plus Gaussian noise of the stated sigma."
    )
    return Release.from_plan(
        plan, values=values, errors=errors, statement=statement, seeded=p.seed is not None, budget_split=split,
        artifacts={"groups": frame}, noise=noise,
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
