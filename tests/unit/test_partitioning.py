"""dp_spark.stages.partitioning (issue 26): partitions of the Python passes
come from the cluster's parallelism, never from the session's shuffle
partitions (stand-in session objects; no Spark)."""

from __future__ import annotations

import pytest

from dp_spark.stages.partitioning import FALLBACK_PARALLELISM, TASKS_PER_SLOT, cluster_parallelism, python_partitions


class _Conf:
    def __init__(self, values):
        self.values = values

    def get(self, key):
        if key not in self.values:
            raise KeyError(key)  # as Spark raises for an unset key without a default
        return self.values[key]


class _Context:
    def __init__(self, parallelism):
        self.defaultParallelism = parallelism


class _Classic:
    def __init__(self, parallelism, conf):
        self.sparkContext = _Context(parallelism)
        self.conf = _Conf(conf)


class _Connect:
    """Spark Connect: no SparkContext."""

    def __init__(self, conf):
        self.conf = _Conf(conf)

    @property
    def sparkContext(self):
        raise NotImplementedError("sparkContext is not available on Spark Connect")


def test_classic_session_uses_the_contexts_parallelism_not_shuffle_partitions():
    for shuffle in ("1", "8", "200"):
        spark = _Classic(6, {"spark.sql.shuffle.partitions": shuffle})
        assert cluster_parallelism(spark) == 6
        assert python_partitions(spark) == TASKS_PER_SLOT * 6


def test_connect_session_reads_default_parallelism_else_the_fallback():
    assert cluster_parallelism(_Connect({"spark.default.parallelism": "12"})) == 12
    assert cluster_parallelism(_Connect({"spark.sql.shuffle.partitions": "200"})) == FALLBACK_PARALLELISM
    assert cluster_parallelism(_Connect({"spark.default.parallelism": "auto"})) == FALLBACK_PARALLELISM


def test_caps_and_floors():
    spark = _Classic(16, {})
    assert python_partitions(spark, cap=5) == 5
    assert python_partitions(spark, cap=1000) == TASKS_PER_SLOT * 16
    assert python_partitions(_Classic(0, {})) == TASKS_PER_SLOT  # never below one slot


def test_partition_labels_hash_to_their_own_partition():
    """partition_labels(n)[j] is the smallest long >= 0 whose Spark hash
    (murmur3_long, tested bit for bit against Spark) lands in partition j
    of n: distinct labels, one per partition."""
    import numpy as np

    from dp_spark.stages.kernels import murmur3_long
    from dp_spark.stages.partitioning import partition_labels

    for n in (1, 2, 3, 4, 9, 64, 1000):
        labels = partition_labels(n)
        parts = np.mod(murmur3_long(np.array(labels, dtype=np.int64)).astype(np.int64), n)
        assert parts.tolist() == list(range(n))
        for j, label in enumerate(labels):  # the smallest: no smaller value hashes to partition j
            below = np.arange(label, dtype=np.int64)
            assert not np.any(np.mod(murmur3_long(below).astype(np.int64), n) == j)
    with pytest.raises(ValueError):
        partition_labels(0)
