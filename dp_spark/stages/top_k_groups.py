"""The grouped top-k on the executors: each group's counts gathered whole in one task and handed to
the mechanism layer's per-group selection (:class:`dp_spark.mechanisms.top_k.groups.GroupSelection`);
only the released (group index, rank, item) rows leave. No privacy noise is drawn in this module;
the selection it is handed draws each group's from that group's own stream.

Input: the release template's grouped edge table (``group_index``: the group's position in the public
or released keys, canonical order), capped to at most m groups per person. Per (group, item) the
count of distinct persons (:func:`dp_spark.stages.item_counts.grouped_item_counts`: one person moves
each by at most 1, all the same way, in the ≤ m groups it keeps). Then, per group:

- with a public domain: the counts of the domain's items (a join with the public domain table,
  position ``_index``), as a dense vector in domain order (absent items 0);
- without: the k̄+1 largest counts (a window per group), in the canonical order count descending,
  item ascending (the order :func:`dp_spark.stages.item_counts.top_item_counts` collects for the
  ungrouped release).

Every group index 0..G−1 gets one row of its own (a ``spark.range`` of the public number of keys,
with no count), so a group without rows still runs its mechanism (all zeros, or ⊥) and has its row:
whether a group appears never depends on the data. The rows are hash-partitioned by group index and
sorted by (group index, count descending, item ascending) inside each partition; the Python pass
(``mapInArrow``) sees each group once and whole (:func:`dp_spark.stages.set_union._whole_buckets`),
so what a group's mechanism gets, and with a seeded root what it draws, never depends on the
partitioning. Nothing on the executors logs.

The output (``group_index``, ``rank``, ``_key``, ``bottom``) is the private output: ``_key`` the
item (no domain) or its domain position; a group whose mechanism released nothing has one row with
rank and key null and ``bottom`` true (⊥). Unseeded, the draws come from the executors' OS entropy:
the release evaluates the output once (:func:`dp_spark.stages.set_union.materialize`)."""

from __future__ import annotations

from functools import partial
from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.stages.edges import ITEM, item_type
from dp_spark.stages.item_counts import BROADCAST_ITEMS, COUNT, grouped_item_counts
from dp_spark.stages.partitioning import python_partitions
from dp_spark.stages.set_union import _whole_buckets

GROUP_INDEX = "group_index"
RANK = "rank"
KEY = "_key"
BOTTOM = "bottom"
INDEX = "_index"
_ORDER = "_order"

#: What the release hands :func:`group_selections`: (group index, counts, (k̄+1)-th count) ->
#: (indices into counts in rank order, ⊥ follows), e.g.
#: :class:`dp_spark.mechanisms.top_k.groups.GroupSelection`.
Select = Callable[[int, np.ndarray, float], tuple[np.ndarray, bool]]


def domain_frame(spark, items: Sequence, dtype) -> DataFrame:
    """The public domain table (``item``, ``_index``): item i of ``items`` at position i."""
    schema = T.StructType([T.StructField(ITEM, dtype, False), T.StructField(INDEX, T.LongType(), False)])
    pdf = pd.DataFrame({ITEM: pd.Series(list(items), dtype=object),
                        INDEX: np.arange(len(items), dtype=np.int64)})
    return spark.createDataFrame(pdf, schema)


def with_domain(frame: DataFrame, domain: DataFrame, size: int, on, how: str = "inner") -> DataFrame:
    """``frame`` joined with the public domain table on ``on``; broadcast when the domain (its public
    ``size``) has at most :data:`BROADCAST_ITEMS` items."""
    return frame.join(F.broadcast(domain) if size <= BROADCAST_ITEMS else domain, on=on, how=how)


def _group_counts(edge_df: DataFrame, kbar: int | None, domain: DataFrame | None, size: int | None) -> DataFrame:
    """(group_index, _key, count): the counts each group's mechanism reads (module docstring): the
    domain's (``domain``), or the k̄+1 largest."""
    counts = grouped_item_counts(edge_df, GROUP_INDEX)
    if domain is not None:
        return with_domain(counts, domain, size, ITEM).select(GROUP_INDEX, F.col(INDEX).alias(KEY), COUNT)
    order = Window.partitionBy(GROUP_INDEX).orderBy(F.col(COUNT).desc(), F.col(ITEM).asc())
    return (counts.withColumn(_ORDER, F.row_number().over(order)).where(F.col(_ORDER) <= int(kbar) + 1)
            .select(GROUP_INDEX, F.col(ITEM).alias(KEY), COUNT))


def _select_partition(batches: Iterator[pa.RecordBatch], select: Select, kbar: int, size: int | None,
                      top: bool) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of :func:`group_selections`: rows (group_index, _key, count) sorted by (group,
    count descending with the group's own null-count row last, key); one ``select`` call per group,
    on the k̄ largest counts (``top``) or the domain's ``size`` counts in domain order."""
    for group, rows in _whole_buckets(batches, 0):
        count = rows.column(2).combine_chunks()
        present = pc.is_valid(count)
        keys = rows.column(1).combine_chunks().filter(present)
        values = count.filter(present).to_numpy(zero_copy_only=False).astype(np.int64)
        if size is not None:  # the domain's counts in domain order; keys are domain positions
            dense = np.zeros(size, dtype=np.int64)
            dense[keys.to_numpy(zero_copy_only=False).astype(np.int64)] = values
            order = np.argsort(-dense, kind="stable") if top else np.arange(size)  # ties: domain order
            keys, values = pa.array(order, type=pa.int64()), dense[order]
        if top:  # the k̄ largest, and the (k̄+1)-th
            chosen, bottom = select(group, values[:kbar], float(values[kbar]) if len(values) > kbar else 0.0)
        else:
            chosen, bottom = select(group, values, 0.0)
        released = keys.take(pa.array(np.asarray(chosen, dtype=np.int64)))
        n = len(released)
        ranks = pa.array(np.arange(1, n + 1, dtype=np.int32)) if n else pa.nulls(1, pa.int32())
        released = released if n else pa.nulls(1, keys.type)
        length = max(n, 1)  # ⊥ only: one row, rank and key null
        yield pa.RecordBatch.from_arrays(
            [pa.array(np.full(length, group, dtype=np.int32)), ranks, released,
             pa.array(np.full(length, bool(bottom) or not n))],
            names=[GROUP_INDEX, RANK, KEY, BOTTOM])


def group_selections(edge_df: DataFrame, n_groups: int, select: Select, *, kbar: int,
                     domain: DataFrame | None = None, size: int | None = None, top: bool = True,
                     partitions: int | None = None) -> DataFrame:
    """(group_index, rank, _key, bottom): every group's released items, chosen on the executors by
    ``select`` (module docstring), for the groups 0..``n_groups``−1 (public: the number of public
    keys, or of the keys a private key step released, whose plan shape does not depend on it).
    ``domain``: the public domain table (:func:`domain_frame`) of ``size`` items, or None;
    ``top``: the selection reads the k̄ largest counts (ties: item ascending, or domain order) and
    the (k̄+1)-th, else the domain's counts in domain order. ``partitions``: of the Python pass (default two per task slot; performance
    only). Lazy; the private output once evaluated: evaluate it once (module docstring)."""
    spark = edge_df.sparkSession
    key_type = T.LongType() if domain is not None else item_type(edge_df)
    counts = _group_counts(edge_df, kbar if domain is None else None, domain, size)
    every = spark.range(int(n_groups)).select(F.col("id").cast("int").alias(GROUP_INDEX),
                                              F.lit(None).cast(key_type).alias(KEY),
                                              F.lit(None).cast("long").alias(COUNT))
    rows = (counts.select(F.col(GROUP_INDEX).cast("int").alias(GROUP_INDEX), KEY, COUNT).unionByName(every)
            .repartition(int(partitions or python_partitions(spark)), GROUP_INDEX)
            .sortWithinPartitions(GROUP_INDEX, F.col(COUNT).desc_nulls_last(), F.col(KEY).asc()))
    schema = T.StructType([T.StructField(GROUP_INDEX, T.IntegerType(), False),
                           T.StructField(RANK, T.IntegerType(), True),
                           T.StructField(KEY, key_type, True),
                           T.StructField(BOTTOM, T.BooleanType(), False)])
    kernel = partial(_select_partition, select=select, kbar=int(kbar), size=size, top=bool(top) or domain is None)
    return rows.mapInArrow(kernel, schema)
