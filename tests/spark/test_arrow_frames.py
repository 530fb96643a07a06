"""dp_spark.stages.arrow_frames.arrow_frame: a driver-side Arrow table of public or released values as a
DataFrame, a LocalRelation up to LOCAL_ROWS (by the caller's public bound) and Arrow IPC chunks decoded
by a Python pass above; the same rows in the same order either way, and the same seeded releases."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

import dp_spark
from dp_spark.stages import arrow_frames
from dp_spark.stages.arrow_frames import LOCAL_ROWS, arrow_frame
from dp_spark.stages.group_items import BROADCAST_KEYS, join_keys
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


def _chunk_rows(frame) -> int:
    """Rows of the chunk table under a chunked frame's MapInArrow."""
    return frame._jdf.queryExecution().analyzed().children().apply(0).stats().rowCount().get()


def test_the_path_and_the_chunks_are_the_bounds_not_the_tables_length(spark, monkeypatch):
    """Under one public bound, tables of 0, 3 and 250 rows take the chunked path with the same number
    of chunk rows, ceil(bound / CHUNK_ROWS) (empty streams pad the shorter ones): what runs in Spark
    (the plan, its partitions and tasks) shows the bound, never how many rows there were."""
    monkeypatch.setattr(arrow_frames, "CHUNK_ROWS", 100)
    schema = SCHEMAS["long"]
    frames = {n: arrow_frame(spark, _table("long", n), schema, bound=LOCAL_ROWS + 1) for n in (0, 3, 250)}
    assert {n: "MapInArrow" in _plan(f) for n, f in frames.items()} == {0: True, 3: True, 250: True}
    assert {n: _chunk_rows(f) for n, f in frames.items()} == {n: -(-(LOCAL_ROWS + 1) // 100) for n in frames}
    assert len({f.rdd.getNumPartitions() for f in frames.values()}) == 1
    assert sorted(r["group_index"] for r in frames[3].collect()) == [0, 1, 2]
    assert frames[0].count() == 0 and frames[0].schema == schema
    assert frames[250].count() == 250


@pytest.mark.parametrize("n", [99, 100, 101, 200])
def test_tables_at_a_chunk_boundary(spark, monkeypatch, n):
    monkeypatch.setattr(arrow_frames, "CHUNK_ROWS", 100)
    table = _table("string", n)
    assert_df_equality(arrow_frame(spark, table, SCHEMAS["string"], bound=LOCAL_ROWS + 1),
                       spark.createDataFrame(table, SCHEMAS["string"]))


@pytest.mark.parametrize("bound", [BROADCAST_KEYS, BROADCAST_KEYS + 1])
def test_a_key_table_above_the_broadcast_limit_is_not_broadcast(spark, bound):
    """The chunked frame's size estimate is its chunk table's (a few KB), so Spark would broadcast
    1,000,000 keys unasked; join_keys broadcasts up to BROADCAST_KEYS keys and hints a sort-merge join
    above."""
    table = _table("long", 1_000)
    keys = arrow_frame(spark, table, SCHEMAS["long"], bound=bound)
    frame = spark.range(5_000).select((F.col("id") * 3).alias("g"))
    physical = join_keys(frame, keys, "g", bound)._jdf.queryExecution().executedPlan().toString()
    assert ("BroadcastHashJoin" in physical) == (bound <= BROADCAST_KEYS)
    assert ("SortMergeJoin" in physical) == (bound > BROADCAST_KEYS)


def test_a_large_table_reaches_the_plan_as_a_few_rows(spark):
    """The reason for the chunked path: 100,000 rows become two rows of the chunk table (not a
    100,000-row LocalRelation), and a join on the frame gives the LocalRelation's answer."""
    table = _table("long", 100_000)
    got = arrow_frame(spark, table, SCHEMAS["long"], bound=100_000)
    local = spark.createDataFrame(table, SCHEMAS["long"])
    assert "LocalRelation" in got._jdf.queryExecution().analyzed().children().apply(0).toString()
    assert _chunk_rows(got) == 2
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
    monkeypatch.setattr(arrow_frames, "LOCAL_ROWS", 0)  # every key table through the chunked path,
    monkeypatch.setattr(arrow_frames, "CHUNK_ROWS", 3)  # in several chunks
    chunked = run()
    assert chunked == local and local[1]


PRIVATE_KEY_RUNS = {
    "distinct-count": (dp_spark.distinct_count, dict(epsilon=2.0, max_groups=None, shards=1, max_bound=16)),
    "set-union": (dp_spark.set_union, dict(epsilon=2.0, delta=1e-5, count=True)),
    "count-release": (dp_spark.count_release, dict(rho=2.0, delta=1e-5, method="bounded", max_items=3)),
    "top-k": (dp_spark.top_k, dict(k=2, epsilon=2.0, delta=1e-5)),
}


@pytest.mark.parametrize("release", sorted(PRIVATE_KEY_RUNS))
def test_privately_chosen_keys_take_the_path_of_the_key_limit_whatever_was_released(spark, monkeypatch,
                                                                                   release):
    """Neighbouring tables D and D + y, y the only person of a group "rare" that the key step releases
    on D + y only (forced: 3 against 4 keys released): every Arrow table made into a DataFrame (the key
    table, distinct-count's release.groups) gets the same bound on both, the release's public key
    limit, so its path and chunks do not show how many keys were released."""
    from dp_spark.releases import RELEASES
    from dp_spark.releases import distinct_count as distinct_release
    from dp_spark.releases import group_keys as key_step
    from dp_spark.stages import group_items
    from tests.spark.test_edges_i40 import _country_events, _releasing

    function, kwargs = PRIVATE_KEY_RUNS[release]
    bounds = []

    def spying(spark_, table, schema, *, bound):
        bounds[-1].append(bound)
        return arrow_frame(spark_, table, schema, bound=bound)

    monkeypatch.setattr(group_items, "arrow_frame", spying)
    monkeypatch.setattr(distinct_release, "arrow_frame", spying)
    runs = {}
    for name, extra_rows, extra_key in (("D", (), None), ("D + y", [(999, "x", "rare"), (999, "y", "rare")],
                                                                   "rare")):
        monkeypatch.setattr(key_step, "choose_keys", _releasing(extra_key))
        bounds.append([])
        runs[name] = function(_country_events(spark, extra_rows), person_col="person_id", item_col="item",
                              group_by="country", seed=5, **kwargs)
    assert [r.result["group_keys_released"] for r in runs.values()] == [3, 4]
    limit = RELEASES[release].plan_function.Params.MAX_KEYS
    assert bounds[0] == bounds[1] and bounds[0] and set(bounds[0]) == {limit}


@pytest.mark.parametrize("grouped", [False, True], ids=["ungrouped", "grouped"])
def test_a_seeded_top_k_over_a_public_domain_is_the_same_whichever_path_and_join_its_domain_took(
        spark, monkeypatch, grouped):
    """The public domain table (top-k's counts of the listed items, ungrouped and per group) through
    arrow_frame: the same seeded release from Spark's path and from chunks, broadcast or (above
    BROADCAST_ITEMS, lowered here) a sort-merge join, never an unasked broadcast."""
    from dp_spark.stages import item_counts

    df = spark.range(3_000).select((F.col("id") % 600).alias("person_id"),
                                   F.concat(F.lit("i"), (F.col("id") % 11).cast("string")).alias("item"),
                                   (F.col("id") % 3 * 10).alias("g"))
    domain = [f"i{j}" for j in range(15)]  # 4 items without rows
    kwargs = dict(k=3, epsilon=2.0, domain=domain, method="joint", seed=13,
                  **(dict(group_by="g", groups=[0, 10, 20]) if grouped else {}))
    plans = []
    real_join = type(df).join

    def recording(self, other, *args, **kwargs_):
        joined = real_join(self, other, *args, **kwargs_)
        if any(c.endswith("index") and c != "group_index" for c in other.columns):  # the domain table
            plans.append(joined._jdf.queryExecution().executedPlan().toString())
        return joined

    def run():
        out = dp_spark.top_k(df, **kwargs)
        report = out.to_dict()
        for volatile in ("created", "library"):
            report.pop(volatile)
        return report, sorted(map(str, (out.groups if grouped else out.items).collect()))

    local = run()
    monkeypatch.setattr(arrow_frames, "LOCAL_ROWS", 0)
    monkeypatch.setattr(arrow_frames, "CHUNK_ROWS", 4)
    monkeypatch.setattr(item_counts, "BROADCAST_ITEMS", 5)  # the one limit of both domain joins (with_domain)
    monkeypatch.setattr(type(df), "join", recording)
    chunked = run()
    assert chunked == local and local[1]
    assert plans and all("MapInArrow" in p and "SortMergeJoin" in p for p in plans)
    assert not any(re.search(r"(?<!group)_index#", tree) for p in plans for tree in _broadcast_subtrees(p))


def _broadcast_subtrees(plan: str) -> list[str]:
    """The text of every subtree under a BroadcastExchange of a physical plan's string."""
    lines, out = plan.splitlines(), []
    for i, line in enumerate(lines):
        if "BroadcastExchange" in line:
            depth = len(line) - len(line.lstrip(" :+-"))
            tree = [line]
            for below in lines[i + 1:]:
                if len(below) - len(below.lstrip(" :+-")) <= depth:
                    break
                tree.append(below)
            out.append("\n".join(tree))
    return out
