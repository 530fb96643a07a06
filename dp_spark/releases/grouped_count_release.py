"""Grouped count-release (issue 24): noisy counts of distinct persons of
(group, item) pairs of every public key of ``group_by``, person-level
δ-approximate ρ-zCDP in all, one mechanism.

Run by :func:`dp_spark.count_release` with ``group_by=`` and ``groups=``
(the public keys), after the release template restricted the edge table to
the public keys (and, with ``max_groups`` m given, kept each person's rows
in at most m of their groups): :mod:`dp_spark.releases.groups`, per-person
transformations.

Guarantee: the ungrouped release's, unchanged and undivided. The edge table's
item becomes the composite key (group, item)
(:func:`dp_spark.stages.group_items.composite_edges`, a per-person, row-by-row
injective map) and the ONE mechanism of :mod:`dp_spark.releases.count_release`
runs on it:

- ``pcr`` (Private Count Release, Rogers 2024): the count of distinct persons
  of each (group, item) pair moves by at most 1 when one person is added or
  removed, all in the same direction, and a person may touch any number of
  pairs — exactly the histogram the Unknown Domain Gumbel selections and the
  discrete Gaussian counts (sensitivity 1) assume
  (tests/spark/test_group_items.py checks it on random neighbours); the
  loop's privacy filter bounds the whole release by (ρ, δ).
- ``bounded``: each person keeps at most m = ``max_items`` distinct pairs
  over all groups (salted hash), so the pair counts have ℓ2 sensitivity √m
  as the item counts do ungrouped.

A person's budget flows across groups: no per-group split, so ``max_groups``
is not needed for privacy: None (default) caps nothing; a given m is a
per-person cap applied first.

Released: ``release.groups`` (a Spark DataFrame made on the driver from the
released rows, at most k̄ of them: the group column under its own name,
``item`` in its normalised type, ``count``, ``sigma`` and ``error``, that
count's own error statement), in discovery order (pcr) or by noisy count
(bounded). The report's ``result["groups"]`` holds the first
``REPORT_GROUPS`` keys with their number of released counts and
``result["items"]`` the rows of those keys (each with ``group``).
"""

from __future__ import annotations

from pyspark.sql import types as T

from dp_spark.plan import Plan
from dp_spark.releases.groups import report_groups
from dp_spark.report import Release
from dp_spark.stages.group_items import parse_composite


def _row_error(plan: Plan, row: dict, record, r: float) -> str:
    """One released count's error statement (public values, its noise record)."""
    p = plan.params
    pair = f"({p.group_by}, {p.item_col})"
    half = record.half_width(0.05)
    if p.method == "pcr":
        return (f"this {pair} pair's number of distinct persons plus {record.describe()}: the noise is within "
                f"±{half:,.0f} with probability >= 95%; if the true count is at least {row['threshold']:.4g} "
                f"(the threshold of the selection that found it) the count is within a relative error of {r:g} "
                f"with probability >= {row['p_within_r']:.0%}")
    return (f"this {pair} pair's number of distinct persons when each person keeps at most "
            f"{plan['max_items']} pairs over all groups (never more than the true count), plus "
            f"{record.describe()}: the noise is within ±{half:,.0f} with probability >= 95%")


def grouped_release(plan: Plan, rows, values, errors, split, noise, integral: bool, group_type, spark) -> Release:
    """The grouped Release from the one mechanism's released rows (their
    ``item`` the composite key), public keys and noise records only."""
    p = plan.params
    keys = p.groups
    counted = [x for x in noise if x.kind == "discrete-gaussian"]
    if len(counted) == 1:  # bounded: one record for every count
        counted = counted * len(rows)
    out, per_group = [], [0] * len(keys)
    for row, record in zip(rows, counted, strict=True):
        index, item = parse_composite(row["item"], integral)
        named = {"group": keys[index], **row, "item": item}
        named["error"] = _row_error(plan, named, record, p.relative_error)
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
        T.StructField(p.group_by, group_type, False),
        T.StructField("item", T.LongType() if integral else T.StringType(), False),
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
