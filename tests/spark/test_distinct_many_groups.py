"""The grouped distinct-count at 100,000 public keys (issue 40): the keys come
as a repartitioned Spark DataFrame, every group's mechanism runs vectorised on
the driver over numpy arrays, ``release.groups`` is built from Arrow, and no
O(keys) list of Rows is collected; the noise records are per step, not per
group."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.plans import distinct_count as plans
from tests.spark.test_many_groups import collected_rows  # noqa: F401 - the fixture counting Rows collects

KEYS = 100_000
ROWS = 20_000


@pytest.fixture(scope="module")
def events(spark):
    """ROWS rows of 5,000 persons over 200 of the keys 0..KEYS-1 (0, 500, ...), 40 items."""
    return spark.range(ROWS).select(
        (F.col("id") % 5_000).alias("person"),
        (F.col("id") % 40).cast("string").alias("item"),
        ((F.col("id") * 7919) % 200 * 500).alias("g"),
    )


def _keys(spark, partitions: int):
    return spark.range(KEYS).select(F.col("id").alias("g")).repartition(partitions)


def _run(events, keys, **kw):
    return dp_spark.distinct_count(events, person_col="person", item_col="item", group_by="g", groups=keys,
                                   epsilon=1.0, max_bound=16, shards=1, seed=3, **kw)


def _digest(frame):
    """An order-free fingerprint of every row of a groups frame (computed in Spark)."""
    return frame.select(F.sum(F.xxhash64(*frame.columns) % (1 << 40)).alias("h"), F.count("*").alias("n")).first()


def test_100k_public_keys_from_a_dataframe(spark, events, collected_rows):
    assert plans.Params.MAX_KEYS == KEYS
    release = _run(events, _keys(spark, 7), max_groups=2)
    during = list(collected_rows)
    r = release.result
    assert r["groups_released"] == KEYS and r["groups_in_report"] == 100
    assert [g["group"] for g in r["groups"]] == list(range(100))  # canonical order: by value
    assert max(during, default=0) < 1_000  # no O(keys) collect: keys, counts and released values travel as Arrow
    frame = release.groups
    assert frame.columns == ["g", "estimate", "lower_bound", "bound", "error"]
    stats = frame.agg(F.count("*").alias("n"), F.countDistinct("g").alias("keys"),
                      F.sum((F.col("g") % 500 == 0).cast("int")).alias("with_rows_possible"),
                      F.min("estimate").alias("low"), F.sum(F.col("error").isNull().cast("int")).alias("no_error"),
                      F.sum((~F.col("error").contains(F.concat(F.lit("at most "), F.col("bound").cast("string"),
                                                                F.lit(" items per person")))).cast("int"))
                      .alias("wrong_error")).first()
    assert (stats["n"], stats["keys"], stats["with_rows_possible"]) == (KEYS, KEYS, 200)
    assert stats["low"] >= 0 and stats["no_error"] == 0 and stats["wrong_error"] == 0
    shown = frame.where(F.col("g") < 100).orderBy("g").select("g", "estimate", "lower_bound", "bound").collect()
    assert [dict(row.asDict(), group=row["g"]) for row in shown] == \
        [dict(g, g=g["group"]) for g in r["groups"]]  # the report's first rows are release.groups' first rows
    # records per step, not per group: one for the selections, one per released bound
    select = [n for n in release.noise if n.kind == "gem"]  # a record's step is its budget step's label
    counts = [n for n in release.noise if n.kind == "discrete-laplace"]
    assert len(select) == 1 and select[0].draws == KEYS
    assert len(counts) <= len(release.parameters["bound_candidates"]) and sum(n.draws for n in counts) == KEYS
    assert collected_rows[-1] == len(shown) == 100  # the hook sees collects


def test_the_output_does_not_depend_on_how_the_keys_are_partitioned(spark, events):
    a = _run(events, _keys(spark, 7), max_groups=1)
    b = _run(events, _keys(spark, 3), max_groups=1)
    assert a.result["groups"] == b.result["groups"]
    assert _digest(a.groups) == _digest(b.groups)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_100k_keys_with_the_cap_and_bound_chosen_jointly(spark, events, collected_rows, noise):
    release = _run(events, _keys(spark, 5), max_groups=None, noise=noise)
    assert max(collected_rows, default=0) < 1_000
    r, p = release.result, release.parameters
    assert r["groups_released"] == KEYS and p["max_groups_candidates"][-1] == KEYS
    (count,) = [n for n in release.noise if n.kind == f"discrete-{noise}"]
    assert count.draws == KEYS and count.parameters["bound"] == p["bound"]
    assert release.groups.where(F.col("bound") != p["bound"]).count() == 0


def test_the_report_summarises_every_group(spark, events):
    """result["group_sizes"]: the 12 largest estimates of all 100,000 groups and a histogram of all
    of them (what the HTML report draws), equal to release.groups' estimates."""
    release = _run(events, _keys(spark, 4), max_groups=1)
    sizes = release.result["group_sizes"]
    assert sizes["groups"] == KEYS and sum(sizes["counts"]) == KEYS and len(sizes["largest"]) == 12
    top = release.groups.orderBy(F.col("estimate").desc(), "g").limit(12).select("g", "estimate").collect()
    assert [(g["group"], g["size"]) for g in sizes["largest"]] == [(row["g"], row["estimate"]) for row in top]
    assert "group_sizes" in release.errors
