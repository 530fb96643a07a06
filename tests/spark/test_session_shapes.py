"""Issue 26: no release depends on how the session was tuned.

The stages that hand rows to Python choose their partitions from public
sizes (shards) and the cluster's parallelism, never from
``spark.sql.shuffle.partitions``, and adaptive execution does not change
their layout. So a seeded release gives the same output in the project's
session (8 shuffle partitions, adaptive on), in Spark's defaults (200, on)
and with adaptive execution off, for a given shard count. The session's SQL
settings are changed in place (they are runtime settings) and restored.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.stages.continual import continual_summaries, default_shards as continual_default_shards
from dp_spark.stages.distinct import default_shards, greedy_counts, greedy_partitions, sharded_edges
from dp_spark.stages.edges import edges
from dp_spark.stages.partitioning import TASKS_PER_SLOT, cluster_parallelism, python_partitions
from dp_spark.stages.set_union import default_partitions

#: (spark.sql.shuffle.partitions, spark.sql.adaptive.enabled): the project's
#: session, Spark's defaults, adaptive execution off, one partition.
SHAPES = [("8", "true"), ("200", "true"), ("200", "false"), ("1", "true")]
KEYS = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")


@contextlib.contextmanager
def shape(spark, shuffle: str, adaptive: str):
    before = {key: spark.conf.get(key) for key in KEYS}
    spark.conf.set(KEYS[0], shuffle)
    spark.conf.set(KEYS[1], adaptive)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)


def in_every_shape(spark, run):
    """``run()`` in every shape of SHAPES; the list of results."""
    out = []
    for shuffle, adaptive in SHAPES:
        with shape(spark, shuffle, adaptive):
            out.append(run())
    return out


@pytest.fixture(scope="module")
def people(spark):
    """A heavy-tailed (person_id, item) table: 600 persons, 1-40 rows each."""
    rng = np.random.default_rng(26)
    sizes = rng.integers(1, 41, 600)
    pdf = pd.DataFrame({
        "person_id": np.repeat(np.arange(600, dtype=np.int64), sizes),
        "item": [f"w{int(x)}" for x in np.floor(rng.pareto(1.2, sizes.sum()) * 5)],
    })
    return spark.createDataFrame(pdf).cache()


def test_partition_counts_come_from_the_cluster_not_the_session(spark):
    slots = spark.sparkContext.defaultParallelism
    assert cluster_parallelism(spark) == slots
    results = in_every_shape(spark, lambda: (python_partitions(spark), default_partitions(spark),
                                             continual_default_shards(spark), default_shards(spark)))
    assert results == [(TASKS_PER_SLOT * slots, TASKS_PER_SLOT * slots, TASKS_PER_SLOT * slots, slots)] * len(SHAPES)
    assert python_partitions(spark, cap=1) == 1
    cap = TASKS_PER_SLOT * slots
    assert greedy_partitions(spark, 3) == min(3, cap)
    assert greedy_partitions(spark, 1000 * cap) == cap  # a divisor: shard mod partitions
    small_prime = next(n for n in range(cap + 1, 10 * cap) if all(n % d for d in range(2, n)))
    assert greedy_partitions(spark, small_prime) == small_prime  # no divisor: one partition per shard
    assert greedy_partitions(spark, 1_000_003) == cap  # a prime, many shards: several per partition


def _used_partitions(df) -> int:
    return df.select(F.spark_partition_id().alias("p")).distinct().count()


def test_adaptive_execution_keeps_the_python_passes_layout(spark, people):
    """A few hundred rows: adaptive execution would coalesce an exchange of
    Spark's choosing into one partition; the explicit counts stay."""
    edge_df = edges(people, "person_id", "item")
    with shape(spark, "200", "true"):
        assert _used_partitions(sharded_edges(edge_df, 3)) == 3
        assert _used_partitions(sharded_edges(edge_df, 9, 3)) == 3  # partition = shard mod 3
        for partitions in (3, 4):
            shard_sets = (sharded_edges(edge_df, 9, partitions).groupBy(F.spark_partition_id().alias("p"))
                          .agg(F.collect_set(F.pmod(F.hash("person"), F.lit(9))).alias("s")).collect())
            seen = [shard for row in shard_sets for shard in row["s"]]
            assert sorted(seen) == list(range(9))  # every shard whole in exactly one partition


def test_greedy_counts_same_for_every_layout_and_session(spark, people):
    edge_df = edges(people, "person_id", "item")
    want = greedy_counts(edge_df, 12, 5, partitions=5)
    for partitions in (1, 2, 3, 4):
        np.testing.assert_array_equal(greedy_counts(edge_df, 12, 5, partitions=partitions), want)
    for got in in_every_shape(spark, lambda: greedy_counts(edge_df, 12, 5)):
        np.testing.assert_array_equal(got, want)


def test_seeded_distinct_count_same_in_every_session(spark, people):
    def run():
        return dp_spark.distinct_count(people, epsilon=1.0, max_bound=16, shards=3, seed=7).result

    results = in_every_shape(spark, run)
    assert all(r == results[0] for r in results)


@pytest.mark.parametrize("method", ["policy-gaussian", "count"])
def test_seeded_set_union_same_in_every_session(spark, people, method):
    def run():
        release = dp_spark.set_union(people, epsilon=2.0, delta=0.05, max_items=5, method=method, seed=3,
                                     count=False)
        return sorted(row["item"] for row in release.items.collect())

    results = in_every_shape(spark, run)
    assert results[0]  # the test only means something if items are released
    assert all(r == results[0] for r in results)


def test_seeded_count_release_same_in_every_session(spark, people):
    def run():
        release = dp_spark.count_release(people, rho=2.0, delta=1e-3, seed=5)
        return release.result["released_count"], release.to_dict()["result"]

    results = in_every_shape(spark, run)
    assert results[0][0] > 0
    assert all(r == results[0] for r in results)


def test_continual_summaries_same_for_every_shard_count_and_session(spark):
    rng = np.random.default_rng(260)
    pdf = pd.DataFrame({"t": rng.integers(1, 60, 3000), "thing": rng.integers(0, 80, 3000),
                        "op": rng.choice([-1, 1], 3000, p=[0.4, 0.6])})
    df = spark.createDataFrame(pdf)
    want = continual_summaries(df, "t", "thing", "op", 60, shards=1).summaries
    runs = [continual_summaries(df, "t", "thing", "op", 60, shards=s).summaries for s in (2, 7)]
    runs += in_every_shape(spark, lambda: continual_summaries(df, "t", "thing", "op", 60).summaries)
    for got in runs:
        np.testing.assert_array_equal(got.z, want.z)
        np.testing.assert_array_equal(got.z_truncated, want.z_truncated)
        np.testing.assert_array_equal(got.over_counts, want.over_counts)


def test_continual_cells_reach_the_driver_as_arrow_whatever_the_sessions_arrow_setting(spark, monkeypatch):
    """Issue 26: ``toPandas`` follows spark.sql.execution.arrow.pyspark.enabled
    (off by default before Spark 4.2: rows pickled one by one); the continual stages
    collect their cells with ``toArrow`` instead, so with the setting off
    neither stage calls ``toPandas`` and the summaries are unchanged."""
    from dp_spark.stages.continual_groups import GROUP_INDEX, grouped_cells

    rng = np.random.default_rng(2626)
    pdf = pd.DataFrame({"t": rng.integers(1, 40, 2000), "thing": rng.integers(0, 60, 2000),
                        "op": rng.choice([-1, 1], 2000, p=[0.4, 0.6]), GROUP_INDEX: rng.integers(0, 3, 2000)})
    df = spark.createDataFrame(pdf).withColumn(GROUP_INDEX, F.col(GROUP_INDEX).cast("int"))
    key = "spark.sql.execution.arrow.pyspark.enabled"
    want = continual_summaries(df, "t", "thing", "op", 40, shards=3).summaries
    events = df.select(F.col("t").alias("step"), F.col("thing").alias("item"), "op", GROUP_INDEX)
    want_groups = grouped_cells(events, 3, 64, shards=3)
    before = spark.conf.get(key)

    def refuse(self, *args, **kwargs):
        raise AssertionError("toPandas called: its speed depends on the session's Arrow setting")

    try:
        spark.conf.set(key, "false")
        monkeypatch.setattr(type(df), "toPandas", refuse)  # the session's DataFrame class (classic or Connect)
        got = continual_summaries(df, "t", "thing", "op", 40, shards=3).summaries
        got_groups = grouped_cells(events, 3, 64, shards=3)
    finally:
        spark.conf.set(key, before)
    assert want.z.any()  # the comparison only means something if items flip
    np.testing.assert_array_equal(got.z, want.z)
    np.testing.assert_array_equal(got.z_truncated, want.z_truncated)
    np.testing.assert_array_equal(got.over_counts, want.over_counts)
    for name in ("group", "step", "level", "delta", "cross"):
        np.testing.assert_array_equal(getattr(got_groups, name), getattr(want_groups, name))
    for g in range(3):
        np.testing.assert_array_equal(got_groups.summaries(g).z, want_groups.summaries(g).z)
