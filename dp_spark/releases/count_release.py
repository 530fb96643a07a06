"""The count-release: as many item counts as possible, each near a target
relative error, under person-level δ-approximate ρ-zCDP.

Rogers, "Private Count Release: A Simple and Scalable Approach for Private
Data Analytics" (arXiv 2403.05073); ALGORITHMS.md 5.2-5.3.

``method="pcr"`` (default) — Private Count Release, Algorithm 2: the Spark
stage collects the k̄+1 largest per-item counts of distinct persons (each
person adds at most 1 to any count, but may touch all of them; no
contribution bound to tune); the driver loop
(:func:`dp_spark.mechanisms.count_release.private_count_release`) finds the top
remaining item with Unknown Domain Gumbel at a growing ε under a zCDP
privacy filter and releases its count with discrete Gaussian noise of
σ = max(σ_r(ε), 2/ε), until ρ or δ would be overspent (or k̄ counts are out).

``method="bounded"`` — the contribution-bounding ("Plume") baseline: each
person keeps at most m = ``max_items`` distinct items (salted hash, in
Spark), Gaussian-threshold partition selection on the bounded data (share α
of ρ, all of δ), then discrete Gaussian counts of the selected items (the
rest of ρ, L2 sensitivity sqrt(m)), optionally dropping noisy counts below
T = (2 + r)σ/r (:mod:`dp_spark.mechanisms.count_release.bounded`). Both noises are drawn inside
Spark by the mechanism layer's pure functions, keyed per item
(:mod:`dp_spark.mechanisms.count_release.keyed`); the selected items stay a DataFrame and only the
released rows reach the driver.

Both: δ-approximate ρ-zCDP (add or remove one person), stated with the
(ε, δ + δ') equivalent, ε = ρ + 2·sqrt(ρ·ln(1/δ')), δ' = ``conversion_delta``
(default δ). Every released count carries its σ; a pcr count also carries
the threshold T of the selection that found it and ``p_within_r``, a lower
bound on the probability that it is within relative error r of the truth
when the true count is at least T (:func:`dp_spark.mechanisms.count_release.loop.within_relative_error_probability`).
"""

from __future__ import annotations

import logging
from functools import partial

import numpy as np
from scipy.special import ndtr

from dp_spark.accounting import PrivacyFilter, ZCDP
from dp_spark.mechanisms.count_release import (
    ACCURACY_FACTOR,
    DELTA_MIN,
    EPSILON_MIN,
    bounded_plan,
    check_pcr_parameters,
    gaussian_threshold_select,
    keyed_noisy_counts,
    noise_key,
    private_count_release,
    within_relative_error_probability,
)
from dp_spark.errors import ParameterError
from dp_spark.noise import make_rng
from dp_spark import checks
from dp_spark.report import Release
from dp_spark.stages import item_counts as stage

log = logging.getLogger(__name__)

RELEASE = "count-release"
METHODS = ("pcr", "bounded")

#: Public upper limits of the sizing parameters, checked before Spark starts:
#: pcr collects the k̄ + 1 largest counts to the driver and runs up to k̄
#: rounds there; bounded keeps up to m items per person (sensitivity sqrt(m)).
KBAR_LIMIT = 1_000_000
MAX_ITEMS_LIMIT = 100_000

_STOPPED = {
    "rho": "the next round would have exceeded rho",
    "delta": "the next round would have exceeded delta",
    "kbar": "kbar counts were released (all collected counts)",
}


def validate(rho, delta, relative_error=0.1, kbar=10000, method="pcr", seed=None, *,
             max_items=None, alpha=0.5, epsilon_min=EPSILON_MIN, delta_min=DELTA_MIN,
             accuracy_factor=ACCURACY_FACTOR, conversion_delta=None):
    """Checks that need no data (the CLI runs them before Spark starts).
    Returns a dict of the checked parameters (with ``plan`` for bounded)."""
    if method not in METHODS:
        raise ParameterError(f"method must be one of {', '.join(METHODS)}; got {method!r}.")
    rho = checks.positive(rho, "rho")
    delta = checks.open_unit(delta, "delta")
    relative_error = checks.positive(relative_error, "relative_error")
    kbar = checks.whole(kbar, "kbar")
    if kbar > KBAR_LIMIT:
        raise ParameterError(f"kbar must be at most {KBAR_LIMIT:,} (that many counts are collected to the "
                             f"driver); got {kbar:,}. Lower --kbar.")
    if max_items is not None and checks.whole(max_items, "max_items") > MAX_ITEMS_LIMIT:
        raise ParameterError(f"max_items must be at most {MAX_ITEMS_LIMIT:,}; got {max_items:,}. "
                             "Lower --max-items (the noise grows with sqrt(max_items)).")
    seed = checks.seed(seed)
    conversion_delta = delta if conversion_delta is None else checks.open_unit(conversion_delta, "conversion_delta")
    if delta + conversion_delta >= 1:
        raise ParameterError("delta + conversion_delta must stay below 1; lower conversion_delta.")
    out = {"rho": rho, "delta": delta, "relative_error": relative_error, "kbar": kbar,
           "method": method, "seed": seed, "conversion_delta": conversion_delta}
    if method == "pcr":
        (_, _, _, _, epsilon_min, delta_min, accuracy_factor) = check_pcr_parameters(
            rho, delta, relative_error, kbar, epsilon_min, delta_min, accuracy_factor)
        out.update(epsilon_min=epsilon_min, delta_min=delta_min, accuracy_factor=accuracy_factor)
    else:
        if max_items is None:
            raise ParameterError(
                "method 'bounded' needs max_items (m, the most distinct items kept per person; "
                "--max-items). Choose it from public knowledge: a percentile of the data is "
                "not private."
            )
        out["plan"] = bounded_plan(rho, delta, max_items, alpha, relative_error)
    return out


def count_release(
    df,
    rho: float,
    delta: float,
    relative_error: float = 0.1,
    kbar: int = 10000,
    method: str = "pcr",
    person_col: str = "person_id",
    item_col: str = "item",
    seed: int | None = None,
    *,
    max_items: int | None = None,
    alpha: float = 0.5,
    count_threshold: bool = False,
    epsilon_min: float = EPSILON_MIN,
    delta_min: float = DELTA_MIN,
    accuracy_factor: float = ACCURACY_FACTOR,
    conversion_delta: float | None = None,
    budget: PrivacyFilter | None = None,
    ledger=None,
) -> Release:
    """Release noisy counts of distinct persons per item, with their σ.

    Guarantee: person-level δ-approximate ρ-zCDP (add or remove one person
    with all rows), hence (ρ + 2·sqrt(ρ·ln(1/δ')), δ + δ')-DP with
    δ' = ``conversion_delta`` (default δ). ``method``: ``pcr`` (Private
    Count Release, Rogers 2024 Algorithm 2; parameters ``relative_error`` r,
    ``kbar`` k̄, ``epsilon_min`` ε*, ``delta_min`` δ*, ``accuracy_factor``)
    or ``bounded`` (the contribution-bounding baseline; ``max_items`` m is
    required, ``alpha`` is the selection's share of ρ, ``count_threshold``
    drops noisy counts below (2 + r)σ/r). ``budget``: an optional shared
    zCDP PrivacyFilter, spent before any data is read. ``seed``: tests and
    demos only. Rows with a null person or item are dropped.

    Returns a Release whose ``items`` value lists {"item", "count", "sigma"}
    (``pcr`` adds "threshold" and "p_within_r", see the module docstring;
    largest noisy counts first for ``bounded``, discovery order for
    ``pcr``), with ``rho_spent`` / ``delta_spent``; the ``items_df``
    artifact is the (rank, item, count, sigma) table as a Spark DataFrame.
    """
    from dp_spark.io import spark_frame

    df = spark_frame(df, "df")  # a pandas DataFrame is converted; other types refused
    from dp_spark.ledger import budget_or_ledger

    budget = budget_or_ledger(budget, ledger)  # ledger=: a persisted budget (dp_spark.ledger)
    p = validate(rho, delta, relative_error, kbar, method, seed, max_items=max_items, alpha=alpha,
                 epsilon_min=epsilon_min, delta_min=delta_min, accuracy_factor=accuracy_factor,
                 conversion_delta=conversion_delta)
    edge_df = stage.edge_table(df, person_col, item_col)  # schema only, no data read
    integral = stage.integral_items(edge_df)
    guarantee = ZCDP(p["rho"], p["delta"])
    if budget is not None:
        budget.spend(guarantee, label=RELEASE)  # refuses before any data is read
    rng = make_rng(p["seed"])
    if method == "pcr":
        rows, values, errors, split = _pcr(edge_df, p, rng)
    else:
        rows, values, errors, split = _bounded(edge_df, p, rng, bool(count_threshold))

    equivalent = guarantee.to_approx(p["conversion_delta"])
    statement = (
        f"Person-level {guarantee.describe()}, which implies "
        f"(ε = {equivalent.epsilon:.4g}, δ = {equivalent.delta:.3g})-differential privacy: the "
        f"output would be almost as likely if any one person (every row with the same "
        f"{person_col}) were removed or added. Released: {len(rows)} {item_col} values with "
        "their number of distinct persons plus Gaussian noise of the stated sigma."
    )
    parameters = {
        "rho": p["rho"],
        "delta": p["delta"],
        "relative_error": p["relative_error"],
        "method": method,
        "person_col": person_col,
        "item_col": item_col,
        "conversion_delta": p["conversion_delta"],
        "noise": "discrete gaussian",
    }
    if method == "pcr":
        parameters.update(kbar=p["kbar"], epsilon_min=p["epsilon_min"], delta_min=p["delta_min"],
                          accuracy_factor=p["accuracy_factor"])
    else:
        plan = p["plan"]
        parameters.update(max_items=plan.max_items, alpha=plan.alpha, count_threshold=bool(count_threshold))
    return Release(
        name=RELEASE,
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {person_col} value)",
        guarantee=guarantee,
        parameters=parameters,
        values=values,
        errors=errors,
        statement=statement,
        seeded=p["seed"] is not None,
        budget_split=split,
        equivalent=equivalent,
        artifacts={"items_df": _items_df(edge_df.sparkSession, rows, integral)},
    )


def _pcr(edge_df, p, rng):
    log.info("count-release: collecting the %d largest item counts", p["kbar"] + 1)
    top = stage.top_item_counts(edge_df, p["kbar"])
    log.info("count-release: Private Count Release loop")
    result = private_count_release(
        top.counts, top.next_count, p["rho"], p["delta"], p["relative_error"], p["kbar"], rng,
        epsilon_min=p["epsilon_min"], delta_min=p["delta_min"], accuracy_factor=p["accuracy_factor"],
    )
    r = p["relative_error"]
    rows = [{"item": top.items[x.index], "count": int(x.count), "sigma": float(x.sigma),
             "threshold": float(x.threshold),
             "p_within_r": within_relative_error_probability(x.sigma, r, x.threshold)}
            for x in result.released]
    del top  # non-private; only released items leave this function
    values = {
        "items": rows,
        "released": len(rows),
        "method": "pcr",
        "rho_spent": result.spent.rho,
        "delta_spent": result.spent.delta,
        "selection_calls": result.selection_calls,
        "bottoms": result.bottoms,
        "final_epsilon": result.final_epsilon,
        "stopped": result.stopped,
    }
    errors = {
        "items": _pcr_accuracy(rows, r, p["accuracy_factor"]),
        "stopped": f"why the loop ended: {', '.join(f'{k}: {v}' for k, v in _STOPPED.items())}",
    }
    unused = result.ledger.remaining  # exact, rounded down
    split = [
        {"step": (f"selection: {result.selection_calls} Unknown Domain Gumbel top-1 calls "
                  f"({result.bottoms} returned ⊥), ε from {p['epsilon_min']:g} to "
                  f"{result.final_epsilon:.4g}, δ* = {p['delta_min']:g} each"),
         **result.selection_spent.to_dict()},
        {"step": f"counts: {len(rows)} discrete Gaussian counts (sensitivity 1 each)",
         **result.count_spent.to_dict()},
        {"step": ("held by the privacy filter, unused (still counted: the filter's guarantee "
                  "is its whole budget)"),
         **unused.to_dict()},
    ]
    return rows, values, errors, split


def _pcr_accuracy(rows, r, a):
    """The error statement of the pcr counts (from public values only)."""
    text = (
        "each count is the item's number of distinct persons plus discrete Gaussian noise whose "
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


def _bounded(edge_df, p, rng, use_threshold):
    plan = p["plan"]
    salt_select, salt_count = (int(x) for x in rng.integers(0, 2**62, size=2))
    select_key, count_key = noise_key(rng), noise_key(rng)
    log.info("count-release: bounding to %d items per person, Gaussian-threshold selection", plan.max_items)
    select = partial(gaussian_threshold_select, sigma=plan.selection_sigma,
                     threshold=plan.selection_threshold, key=select_key)
    selected = stage.select_items(stage.bounded_item_counts(edge_df, plan.max_items, salt_select), select)
    # `selected` is used twice below (restriction and the items to count); its
    # noise is keyed per item, so both evaluations select the same items.
    restricted = stage.bounded_item_counts(edge_df, plan.max_items, salt_count, restrict_to=selected)
    add_noise = partial(keyed_noisy_counts, sigma=plan.count_sigma, key=count_key)
    noisy = stage.noisy_counts_of_items(restricted, selected, add_noise)  # private from here on
    log.info("count-release: counting the selected items")
    n_selected, released = stage.collect_item_counts(
        noisy, minimum=plan.count_threshold if use_threshold else None)
    rows = [{"item": item, "count": count, "sigma": plan.count_sigma} for item, count in released]
    values = {
        "items": rows,
        "released": len(rows),
        "method": "bounded",
        "selected": n_selected,
        "rho_spent": plan.rho,
        "delta_spent": plan.delta,
        "max_items": plan.max_items,
        "selection_threshold": plan.selection_threshold,
        "count_threshold": plan.count_threshold if use_threshold else None,
    }
    errors = {
        "items": (
            f"each count is the number of distinct persons when every person keeps at most "
            f"{plan.max_items} of its items (never more than the true count), plus discrete "
            f"Gaussian noise with standard deviation at most {plan.count_sigma:.4g}"
        ),
        "selected": "items that cleared the noisy partition-selection threshold",
    }
    if use_threshold:
        errors["count_threshold"] = (
            f"counts below (2 + r)σ/r = {plan.count_threshold:.4g} were dropped, so that "
            f"(count + σ)/(count − σ) <= 1 + {plan.relative_error:g} for the rest"
        )
    split = [
        {"step": (f"selection: Gaussian thresholding on counts bounded to {plan.max_items} items "
                  f"per person (σ = {plan.selection_sigma:.4g}, threshold {plan.selection_threshold:.4g})"),
         **plan.selection_cost.to_dict()},
        {"step": f"counts: discrete Gaussian, L2 sensitivity sqrt({plan.max_items}), σ = {plan.count_sigma:.4g}",
         **plan.count_cost.to_dict()},
    ]
    return rows, values, errors, split


def _items_df(spark, rows, integral):
    import pandas as pd
    from pyspark.sql import types as T

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
