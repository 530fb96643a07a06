"""Shape of the set-union release on D and on D + one person (Spark, end to end).

Whether the release raises, which report keys and values it has, its
guarantee, budget and budget_split, and the released DataFrame's columns
and types must not depend on whether one person is present — whatever that
person's rows hold (a normal set, far more than Δ0 items, null or huge
values). The number of released items is itself the mechanism's DP output,
so it is not compared; the columns are.
"""

from __future__ import annotations

import pytest

import dp_spark

SCHEMA = "person_id long, item string"
SEED = 11

NEIGHBOURS = {
    "ordinary": [(90_001, "w1"), (90_001, "w2"), (90_001, "only-mine")],
    "many items": [(90_002, f"x{i}") for i in range(5_000)],
    "null and huge values": [(90_003, None), (90_003, "z" * 200_000), (90_003, ""), (None, "w3")],
}
#: The neighbours each policy is run with (the additive policies share every
#: code path but the histogram's; the sequential default runs them all).
CASES = {"policy-gaussian": list(NEIGHBOURS), "count": ["many items"]}


@pytest.fixture(scope="module")
def base_rows():
    return [(p, f"w{(p * 7 + k) % 30}") for p in range(300) for k in range(p % 4 + 1)]


def shape(spark, rows, policy):
    df = spark.createDataFrame(rows, SCHEMA)
    try:
        release = dp_spark.set_union(df, epsilon=1.0, delta=1e-4, max_items=5, method=policy, seed=SEED)
    except Exception as exc:  # noqa: BLE001 - the type is part of the shape
        return {"raised": type(exc).__name__}
    report = release.to_dict()
    return {
        "raised": None,
        "report_keys": sorted(report),
        "values": sorted(release.values),
        "result": {k: v for k, v in report["result"].items() if k != "released_count"},
        "parameters": report["parameters"],
        "privacy": report["privacy"],
        "budget_split": report["budget_split"],
        "errors": report["errors"],
        "statement": report["statement"],
        "publishable": report["publishable"],
        "artifacts": sorted(release.artifacts),
        "items": release.items.dtypes,
        "count_is_int": isinstance(report["result"]["released_count"], int),
    }


@pytest.mark.parametrize("policy", list(CASES))
def test_shape_is_the_same_with_one_more_person(spark, base_rows, policy):
    expected = shape(spark, base_rows, policy)
    assert expected["raised"] is None and expected["items"] == [("item", "string")]
    for name in CASES[policy]:
        assert shape(spark, base_rows + NEIGHBOURS[name], policy) == expected, name
