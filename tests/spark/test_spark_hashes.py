"""The greedy kernel's numpy copies of Spark's hashes of a long
(dp_spark.stages.kernels.murmur3_long, xxhash64_long) equal Spark's
``hash`` and ``xxhash64`` bit for bit, and the stage's lean rows (person,
item key) give the counts of rows that carry Spark's shard and order key."""

from __future__ import annotations

import numpy as np
from pyspark.sql import functions as F

from dp_spark.stages.distinct import ITEM, PERSON, _IH, _greedy_partition, ROUND_SCHEMA, counts_from_round_table
from dp_spark.stages.distinct import ITEM_KEY, greedy_counts, sharded_edges
from dp_spark.stages.kernels import murmur3_long, xxhash64_long


def test_numpy_hashes_equal_sparks(spark):
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.integers(-2**63, 2**63 - 1, size=3000, dtype=np.int64),
                             np.arange(-40, 40, dtype=np.int64),
                             np.array([2**63 - 1, -2**63, 2**32, 2**32 - 1, -2**32], dtype=np.int64)])
    rows = (spark.createDataFrame([(int(v),) for v in values], "p long")
            .select("p", F.hash("p").alias("m"), F.xxhash64("p").alias("x")).collect())
    p = np.array([r["p"] for r in rows], dtype=np.int64)
    np.testing.assert_array_equal(murmur3_long(p), np.array([r["m"] for r in rows], dtype=np.int32))
    np.testing.assert_array_equal(xxhash64_long(p), np.array([r["x"] for r in rows], dtype=np.int64))


def test_lean_stage_counts_equal_the_full_rows_counts(spark):
    rng = np.random.default_rng(3)
    n = 3000
    pdf_rows = [(int(p), f"w{int(x)}") for p, x in zip(rng.integers(-10**12, 10**12, size=n // 6).repeat(6),
                                                        np.floor(rng.pareto(1.1, n) * 4))]
    edge_df = spark.createDataFrame(pdf_rows, f"{PERSON} long, {ITEM} string")
    for shards, partitions in ((1, 1), (5, 5), (6, 3), (7, 2)):
        lean = sharded_edges(edge_df, shards, partitions)
        assert lean.columns == [PERSON, _IH]
        shard = F.pmod(F.hash(PERSON), F.lit(shards)).cast("int").alias("_shard")
        full = (edge_df.select(shard, F.xxhash64(PERSON).alias("_person_key"), PERSON, F.xxhash64(ITEM).alias(_IH))
                .repartition(partitions, "_shard"))
        want = counts_from_round_table(full.mapInArrow(lambda b: _greedy_partition(b, 9), ROUND_SCHEMA), 9, ITEM_KEY)
        np.testing.assert_array_equal(greedy_counts(edge_df, 9, shards, partitions), want)
