"""How many partitions a stage that hands rows to Python uses.

Every stage whose rows go through a Python worker (``mapInArrow``, ``mapInPandas``) picks its number
of partitions from public values only: the release's size parameters (shards) and the cluster's
parallelism (``sparkContext.defaultParallelism``). Never from ``spark.sql.shuffle.partitions``: that
setting belongs to whoever built the session (Spark's default 200 makes 200 tiny Python tasks) and
says nothing about the Python work.

Each such stage repartitions with an explicit count, ``repartition(n, col)``, which adaptive query
execution neither coalesces nor splits, so a row's partition is a fixed function of its key and
``n``. One exception (tests/spark/test_session_shapes.py): when the input is already
hash-partitioned by the same key into ``n`` partitions (e.g. an aggregation or window with
``spark.sql.shuffle.partitions`` = n), Spark drops the repartition and adaptive execution may
coalesce the earlier exchange, so a partition may hold several whole hash groups. A Python pass may
rely on every key's rows being in one partition, never on one hash group per partition.

Privacy: nothing here reads data. The cluster's parallelism is not a function of the data, and
partitions are chosen only where the partitioning does not change what is computed, or changes only
a seeded run's exact output (set-union's noise step: every item still gets its own draw)."""

from __future__ import annotations

import numpy as np

#: Python tasks per task slot: two, so a slow task leaves work for the other slots. Chosen by
#: measurement: benchmarks/results/2026-11-26-distinct-count-20m-evening.md and
#: 2026-11-26-stream-state-partitions.md.
TASKS_PER_SLOT = 2

#: The parallelism assumed when the cluster's cannot be read (Spark Connect and serverless sessions
#: have no SparkContext and may not set ``spark.default.parallelism``).
FALLBACK_PARALLELISM = 8


def cluster_parallelism(spark) -> int:
    """The cluster's task slots: ``sparkContext.defaultParallelism`` (classic
    sessions), else ``spark.default.parallelism`` if set, else
    :data:`FALLBACK_PARALLELISM`. Public: not a function of any data."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext
        pass
    try:
        return max(1, int(spark.conf.get("spark.default.parallelism")))
    except Exception:  # noqa: BLE001 - unset or not a number
        return FALLBACK_PARALLELISM


def python_partitions(spark, cap: int | None = None) -> int:
    """Partitions of a Python pass that may be split freely (noise steps,
    per-item work): :data:`TASKS_PER_SLOT` per task slot, at most ``cap``."""
    n = TASKS_PER_SLOT * cluster_parallelism(spark)
    return max(1, min(n, int(cap)) if cap is not None else n)


def partition_labels(partitions: int) -> list[int]:
    """Long values v_0..v_{n-1} (n = ``partitions``), the smallest >= 0 with pmod(hash(v_j), n) = j
    (:func:`dp_spark.stages.kernels.murmur3_long`): under ``repartition(n, column)`` n labels fill n
    partitions one each (small ints would collide)."""
    from dp_spark.stages.kernels import murmur3_long  # lazy: scipy.sparse, 260-310 ms per worker

    n = int(partitions)
    if n < 1:
        raise ValueError("partition_labels: partitions must be >= 1")
    labels: dict[int, int] = {}
    start, width = 0, 64 * n
    while len(labels) < n:
        values = np.arange(start, start + width, dtype=np.int64)
        for value, part in zip(values.tolist(), np.mod(murmur3_long(values).astype(np.int64), n).tolist()):
            labels.setdefault(part, value)
        start += width
    return [labels[j] for j in range(n)]
