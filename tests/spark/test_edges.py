"""The one edge table (issue 23): ``stages.edges.edges`` carries a group
column, the constant ``UNGROUPED`` when the release is not grouped, and
Catalyst prunes that constant from every stage that does not read it, so an
ungrouped release runs the physical plan it ran with two columns."""

from __future__ import annotations

import re
from functools import partial

import pytest
from pyspark.sql import functions as F

from dp_spark.errors import SchemaError
from dp_spark.stages import item_counts
from dp_spark.stages.distinct import count_pairs, greedy_rounds, matching_pairs, sampling_rounds
from dp_spark.stages.edges import GROUP, ITEM, PERSON, UNGROUPED, edges
from dp_spark.stages.set_union import restricted_sets, weight_histogram


def _stages():
    """Every stage that reads an edge table, as edge_df -> DataFrame (the
    plan the release would run; greedy and the sequential set-union policy
    feed whole rows to mapInArrow kernels)."""
    from dp_spark.stages import set_union

    return {
        "greedy": partial(greedy_rounds, max_bound=4, shards=2),
        "sampling": partial(sampling_rounds, max_bound=4, salt=3),
        "matching pairs": partial(matching_pairs, item_cap=4),
        "matching pairs, uncapped": partial(matching_pairs, item_cap=None),
        "item counts": item_counts.item_counts,
        "top counts": lambda e: item_counts.item_counts(e).orderBy(F.col("count").desc()).limit(5),
        "bounded counts": partial(item_counts.bounded_item_counts, max_items=2, salt=5),
        "set-union weighted": lambda e: weight_histogram(restricted_sets(e, 3, 7), "weighted-laplace"),
        "set-union additive": lambda e: set_union.additive_histogram(e, "weighted-laplace", 3, 7, partitions=2),
        "set-union sequential": lambda e: set_union._shard_histograms(e, "policy-laplace", 3, 7, 2.0, 2),
        "persons": lambda e: e.agg(F.countDistinct(PERSON)),
    }


def _physical(df) -> str:
    """The physical plan with expression ids and plan ids removed."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return re.sub(r"#\d+L?|plan_id=\d+|\[id=#?\d+\]", "", plan)


@pytest.fixture(scope="module")
def table(spark):
    rows = [(p, f"i{(p * 5 + j) % 11}", p % 3) for p in range(40) for j in range(1 + p % 3)]
    return spark.createDataFrame(rows + [(None, "x", 1), (41, None, 1)], "who long, what string, g int")


def test_an_ungrouped_edge_table_has_the_constant_group(table):
    out = edges(table, "who", "what")
    assert out.columns == [PERSON, ITEM, GROUP]
    assert {r[GROUP] for r in out.select(GROUP).distinct().collect()} == {UNGROUPED}
    assert out.count() == table.where(F.col("who").isNotNull() & F.col("what").isNotNull()).count()


@pytest.mark.parametrize("stage", list(_stages()))
def test_catalyst_prunes_the_constant_group_from_every_stage(spark, table, stage):
    """The same physical plan as on the two-column edge table the stages
    were written for: the constant never reaches a shuffle, a sort or a
    kernel (so the ungrouped speed is what it was)."""
    run = _stages()[stage]
    with_group = run(edges(table, "who", "what"))
    two_columns = run(edges(table, "who", "what").select(PERSON, ITEM))
    assert GROUP not in _physical(with_group).replace("group by", "")  # no column named group anywhere
    assert _physical(with_group) == _physical(two_columns)
    assert sorted(map(tuple, with_group.collect())) == sorted(map(tuple, two_columns.collect()))


def test_count_pairs_is_unchanged_by_the_group_column(table):
    assert count_pairs(matching_pairs(edges(table, "who", "what"), 4)) == \
        count_pairs(matching_pairs(edges(table, "who", "what").select(PERSON, ITEM), 4))


def test_a_group_column_is_normalised_and_its_null_rows_dropped(spark, table):
    out = edges(table.union(spark.createDataFrame([(50, "y", None)], "who long, what string, g int")),
                "who", "what", group_col="g")
    assert out.columns == [PERSON, ITEM, GROUP]
    assert str(out.schema[GROUP].dataType) == "LongType()"
    assert sorted(r[GROUP] for r in out.select(GROUP).distinct().collect()) == [0, 1, 2]
    assert out.where(F.col(PERSON) == 50).count() == 0  # its group is null


def test_a_group_column_is_refused_like_an_id_column(spark, table):
    with pytest.raises(SchemaError, match="'nope' is not in the input"):
        edges(table, "who", "what", group_col="nope")
    with pytest.raises(SchemaError, match="group column must differ"):
        edges(table, "who", "what", group_col="what")
    nested = spark.createDataFrame([(1, "a", [1])], "who long, what string, g array<long>")
    with pytest.raises(SchemaError, match="cannot be used as an id"):
        edges(nested, "who", "what", group_col="g")
    void = spark.sql("SELECT 1L AS who, 'a' AS what, NULL AS g")
    with pytest.raises(SchemaError, match="'g' holds only nulls"):
        edges(void, "who", "what", group_col="g")
