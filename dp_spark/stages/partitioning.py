"""How many partitions a stage that hands rows to Python uses (issue 26).

Every stage whose rows go through a Python worker (``mapInArrow``,
``mapInPandas``) picks its own number of partitions from public values only:
the release's public size parameters (shards) and the cluster's parallelism
(``sparkContext.defaultParallelism``, the number of task slots Spark itself
sizes jobs by). Never from ``spark.sql.shuffle.partitions``: that setting
belongs to whoever built the session (Spark's default 200 makes 200 Python
tasks of a few rows each; a notebook may have set 1) and says nothing about
how much Python work there is.

Each such stage repartitions with an explicit number, ``repartition(n,
col)``: adaptive query execution neither coalesces nor splits an explicit
count (it does coalesce ``repartition(col)`` and the exchanges of
aggregations and ``groupBy().applyInPandas``, measured on Spark 4). The
partition a row goes to is then a fixed function of its key and ``n``.
One exception (issue 35, found by tests/spark/test_session_shapes.py): when
the input is already hash-partitioned by the same key into ``n`` partitions
(an aggregation or window by that key with ``spark.sql.shuffle.partitions``
= n, e.g. the grouped releases' per-person group cap), Spark drops the
repartition as redundant and adaptive execution may coalesce that earlier
exchange, so a partition holds several of the ``n`` hash groups, each still
whole. A Python pass may therefore rely on every key's rows being in one
partition, never on one hash group per partition (set-union's sequential
pass separates its shards itself).

Privacy: nothing here reads data. The cluster's parallelism is not a
function of the data, and the stages choose partitions only where the
partitioning does not change what is computed (every result is stated
per function), or where a seeded run's exact output is the only thing it
changes (set-union's noise step: every item still gets its own draw).
"""

from __future__ import annotations

import numpy as np

#: Python tasks per task slot: two, so a slow task (a larger shard, a busy
#: core) leaves work for the other slots. Measured on 2 cores (continual
#: distinct, benchmarks/README.md): 4 shards beat 2 and 8.
TASKS_PER_SLOT = 2

#: The parallelism assumed when the cluster's cannot be read (Spark Connect
#: and serverless sessions have no SparkContext and may not set
#: ``spark.default.parallelism``).
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
    """Long values v_0..v_{n-1} (n = ``partitions``) with pmod(hash(v_j), n)
    = j, Spark's hash of a long (:func:`dp_spark.stages.kernels.murmur3_long`):
    rows whose long column holds v_j go to partition j under
    ``repartition(n, column)``, so n labels fill n partitions one each
    (small ints would collide: a hash partitioning of 0..n-1 leaves some
    partitions empty and others doubled). The smallest such v_j >= 0."""
    # kernels imports scipy.sparse (260-310 ms measured, against ~8 ms for this module), which the
    # Python workers of every stage that picks its partitions would load with it
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
