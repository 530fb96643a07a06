"""dp_spark.stages.arrow_frames.arrow_frame: a driver-side Arrow table of public or released values as a
DataFrame, a LocalRelation up to LOCAL_ROWS (by the caller's public bound) and Arrow IPC chunks decoded
by a Python pass above; the same rows in the same order either way, and the same seeded releases."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

import dp_spark
from dp_spark.stages import arrow_frames
from dp_spark.stages.arrow_frames import LOCAL_ROWS, arrow_frame
from tests.spark.test_session_shapes import MATRIX_SHAPES, settings

SCHEMAS = {
    "long": T.StructType([T.StructField("g", T.LongType(), False),
                          T.StructField("group_index", T.IntegerType(), False)]),
    "string": T.StructType([T.StructField("g", T.StringType(), False),
                            T.StructField("group_index", T.IntegerType(), False)]),
}


def _table(kind: str, n: int) -> pa.Table:
    rng = np.random.default_rng(n)
    values = rng.permutation(10 * n + 1)[:n].astype(np.int64)  # distinct, unordered
    keys = pa.array(values) if kind == "long" else pa.array([f"k{v}é" for v in values.tolist()])
    return pa.table({"g": keys, "group_index": pa.array(np.arange(n, dtype=np.int32))})


def _plan(frame) -> str:
    return frame._jdf.queryExecution().analyzed().toString()


@pytest.mark.parametrize("kind", ["long", "string"])
@pytest.mark.parametrize("bound", [LOCAL_ROWS, LOCAL_ROWS + 1], ids=["local", "chunks"])
def test_the_rows_in_order_on_either_path(spark, monkeypatch, kind, bound):
    monkeypatch.setattr(arrow_frames, "CHUNK_ROWS", 700)  # several chunks, a short last one
    table = _table(kind, 2_345)
    got = arrow_frame(spark, table, SCHEMAS[kind], bound=bound)
    assert ("MapInArrow" in _plan(got)) == (bound > LOCAL_ROWS)  # the path follows the bound alone
    assert_df_equality(got, spark.createDataFrame(table, SCHEMAS[kind]))  # rows, order and schema
    assert got.rdd.getNumPartitions() <= spark.sparkContext.defaultParallelism


def test_the_path_is_the_bounds_not_the_tables_length(spark):
    """A 3-row table under a large public bound takes the chunked path, and an empty one gives an empty
    frame: what runs in Spark shows the bound (public), never how many rows there were."""
    schema = SCHEMAS["long"]
    small = arrow_frame(spark, _table("long", 3), schema, bound=10**6)
    empty = arrow_frame(spark, _table("long", 0), schema, bound=10**6)
    assert "MapInArrow" in _plan(small) and "MapInArrow" in _plan(empty)
    assert sorted(r["group_index"] for r in small.collect()) == [0, 1, 2]
    assert empty.count() == 0 and empty.schema == schema


def test_a_large_table_reaches_the_plan_as_a_few_rows(spark):
    """The reason for the chunked path: 100,000 rows become two rows of the chunk table (not a
    100,000-row LocalRelation), and a join on the frame gives the LocalRelation's answer."""
    table = _table("long", 100_000)
    got = arrow_frame(spark, table, SCHEMAS["long"], bound=100_000)
    local = spark.createDataFrame(table, SCHEMAS["long"])
    chunk_rows = got._jdf.queryExecution().analyzed().children().apply(0)  # MapInArrow's child
    assert "LocalRelation" in chunk_rows.toString() and chunk_rows.stats().rowCount().get() == 2
    probe = spark.range(0, 1_000_001, 7).select(F.col("id").alias("g"))
    assert probe.join(got, "g").groupBy().sum("group_index").first()[0] == \
        probe.join(local, "g").groupBy().sum("group_index").first()[0]


def test_strings_reach_python_and_back_in_a_session_with_64_bit_offsets(spark, monkeypatch):
    monkeypatch.setattr(arrow_frames, "CHUNK_ROWS", 300)
    table = _table("string", 1_000)
    want = spark.createDataFrame(table, SCHEMAS["string"]).collect()
    with settings(spark, MATRIX_SHAPES["all-hostile"]):
        assert arrow_frame(spark, table, SCHEMAS["string"], bound=10**6).collect() == want


@pytest.mark.parametrize("release", ["set-union", "count-release", "top-k", "distinct-count"])
def test_a_seeded_grouped_release_is_the_same_whichever_path_its_key_table_took(spark, monkeypatch, release):
    df = spark.range(3_000).select((F.col("id") % 600).alias("person_id"),
                                   F.concat(F.lit("i"), (F.col("id") % 7).cast("string")).alias("item"),
                                   (F.col("id") % 5 * 10).alias("g"))
    keys = [0, 10, 20, 30, 40, 50, 60]
    kwargs = {
        "set-union": dict(epsilon=2.0, delta=1e-6, count=True),
        "count-release": dict(rho=2.0, delta=1e-6, method="bounded", max_items=3),
        "top-k": dict(k=2, epsilon=2.0, delta=1e-6),
        "distinct-count": dict(epsilon=2.0),
    }[release]
    function = {"set-union": dp_spark.set_union, "count-release": dp_spark.count_release,
                "top-k": dp_spark.top_k, "distinct-count": dp_spark.distinct_count}[release]

    def run():
        out = function(df, group_by="g", groups=keys, seed=21, **kwargs)
        report = out.to_dict()
        for volatile in ("created", "library"):
            report.pop(volatile)
        return report, sorted(map(str, out.groups.collect()))

    local = run()
    monkeypatch.setattr(arrow_frames, "LOCAL_ROWS", 0)  # every key table through the chunked path
    chunked = run()
    assert chunked == local and local[1]
