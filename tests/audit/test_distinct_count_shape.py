"""Shape of the distinct-count release on neighbouring tables (Spark).

D and D + one person, for every method: the same report keys, parameter
and result keys, privacy section (the budget spent) and budget_split, and
neither raises. The added person is
either one with many items or one that pushes exact matching across its
edge limit (where the old code refused on the true size)."""

from __future__ import annotations

import pytest

import dp_spark
from dp_spark import checks

SCHEMA = "person_id long, item string"
BASE = [(p, f"x{p % 17}") for p in range(30)]  # 30 persons, one item each: 30 pairs
MANY_ITEMS = [(999, f"y{i}") for i in range(500)]
OVER_LIMIT = [(998, f"z{i}") for i in range(3)]

CASES = {
    "greedy, automatic shards": {"method": "greedy"},
    "greedy, 2 shards": {"method": "greedy", "shards": 2},
    "sampling": {"method": "sampling"},
    # ε large enough that D (30 pairs <= edge_limit) runs exact matching and
    # D + OVER_LIMIT (33 pairs) falls back to greedy: the path differs, the shape must not.
    "matching at its edge limit": {"method": "matching", "edge_limit": 30, "epsilon": 1e4},
}


@pytest.fixture(autouse=True)
def _epsilon_range_for_the_matching_case(monkeypatch):
    """The matching case needs ε = 1e4 (far above checks.EPSILON_RANGE, which
    every release refuses: no privacy) so that its noisy pair count decides
    the path; this shape test lifts the cap for itself only."""
    monkeypatch.setattr(checks, "EPSILON_RANGE", (checks.EPSILON_RANGE[0], 1e4))


def _shape(spark, rows, kwargs):
    df = spark.createDataFrame(rows, SCHEMA)
    args = {"epsilon": 1.0, "max_bound": 3, "seed": 7, **kwargs}
    try:
        report = dp_spark.distinct_count(df, **args).to_dict()
    except Exception as error:  # noqa: BLE001 - whether it raised is part of the shape
        return ("raised", type(error).__name__)
    return (
        sorted(report),
        sorted(report["parameters"]),
        sorted(report["result"]),
        report["privacy"],
        report["budget_split"],
        sorted(report["errors"]),
    )


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("extra", ["many items", "over the edge limit"])
def test_same_shape_on_neighbouring_tables(spark, case, extra):
    person = MANY_ITEMS if extra == "many items" else OVER_LIMIT
    without = _shape(spark, BASE, CASES[case])
    with_person = _shape(spark, BASE + person, CASES[case])
    assert without[0] != "raised"
    assert without == with_person
