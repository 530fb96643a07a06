"""count-release end to end on D and on D + one person (fixed test seed):
the shape of the output must not depend on the added person.

Identical across the neighbours: whether the run raised, the report's keys
(and the keys of its values, errors and guarantee), the items table's
columns and types, the guarantee and its (ε, δ) equivalent, and the
budget_split's steps and keys. The number of released counts (and pcr's
loop statistics) is itself a differentially private output (PCR's privacy
filter decides when to stop; bounded's partition selection which items
appear), so for it only the columns are compared. For ``bounded`` the
budget_split is a function of the parameters only and must be equal
entry for entry.

The added person is a worst case for each method: one that holds many items
(every count moves, including the top ones), and one whose rows include a
null item and repeated rows (handled per person: dropped, deduplicated).
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

import dp_spark

SEED = 4
PERSONS = 1500


@pytest.fixture(scope="module")
def base(spark):
    """D: 1,500 persons, item popularity falling with rank (i0 held by all)."""
    df = spark.range(PERSONS).select(F.col("id").alias("person_id"))
    items = F.explode(F.sequence(F.lit(0), (F.lit(40) / (1 + F.col("person_id") % 40)).cast("int")))
    exploded = df.select("person_id", items.alias("rank"))
    return exploded.select("person_id", F.concat(F.lit("i"), F.col("rank").cast("string")).alias("item")).cache()


def _added(spark, kind):
    if kind == "many-items":
        rows = [(PERSONS, f"i{j}") for j in range(300)]
    else:
        rows = [(PERSONS, "i0"), (PERSONS, "i0"), (PERSONS, None), (PERSONS, "i5"), (PERSONS, "fresh")]
    return spark.createDataFrame(rows, "person_id long, item string")


def _run(df, method):
    kwargs = {"method": method, "seed": SEED, "kbar": 60}
    if method == "bounded":
        kwargs["max_items"] = 8
    try:
        release = dp_spark.count_release(df, rho=1.0, delta=1e-6, **kwargs)
    except Exception as exc:  # noqa: BLE001 - whether it raised is part of the shape
        return {"raised": type(exc).__name__}
    report = release.to_dict()
    table = release.items  # the artifact: a Spark DataFrame
    rows = report["result"]["items"]
    return {
        "raised": None,
        "report_keys": sorted(report),
        "value_keys": sorted(report["result"]),
        "error_keys": sorted(release.errors),
        "privacy": report["privacy"],  # the guarantee (ρ, δ) and its (ε, δ) equivalent
        "columns": [(f.name, f.dataType.simpleString()) for f in table.schema.fields],
        "item_keys": sorted({k for row in rows for k in row}) if rows else None,
        "split": [sorted(step) for step in report["budget_split"]],
        "split_entries": report["budget_split"],
        "released": report["result"]["released_count"],
        "parameters": report["parameters"],
    }


_ON_D: dict[str, dict] = {}  # the run on D, shared by both neighbours (same seed, same data)


@pytest.mark.parametrize("method", ["pcr", "bounded"])
@pytest.mark.parametrize("kind", ["many-items", "malformed"])
def test_same_shape_on_neighbours(spark, base, method, kind):
    if method not in _ON_D:
        _ON_D[method] = _run(base, method)
    on_d = _ON_D[method]
    on_d1 = _run(base.unionByName(_added(spark, kind)), method)
    assert on_d["raised"] is None and on_d1["raised"] is None
    assert on_d["released"] > 0 and on_d1["released"] > 0  # the comparison covers released rows
    same = ["report_keys", "value_keys", "error_keys", "privacy", "columns", "split", "parameters"]
    for key in same:
        assert on_d[key] == on_d1[key], key
    # rows of released items: same keys whenever both released something
    assert on_d["item_keys"] == on_d1["item_keys"]
    if method == "bounded":
        assert on_d["split_entries"] == on_d1["split_entries"]
    else:
        assert len(on_d["split_entries"]) == len(on_d1["split_entries"]) == 3
