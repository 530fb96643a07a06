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
(``mapInArrow``) sees each group once and whole (:func:`_complete_groups`), so what a group's mechanism gets, and with a seeded root what it draws, never depends on the
partitioning. Nothing on the executors logs.

The output (``group_index``, ``rank``, ``_key``, ``bottom``) is the private output: ``_key`` the
item (no domain) or its domain position; a group whose mechanism released nothing has one row with
rank and key null and ``bottom`` true (⊥). Group g draws from the release's stream g (unseeded:
ChaCha20 under the release's key, the same on every evaluation); the release evaluates the output
once (:func:`dp_spark.stages.set_union.materialize`), so the returned plan holds no key."""

from __future__ import annotations

from functools import partial
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.stages.edges import ITEM, item_type
from dp_spark.stages.item_counts import (  # noqa: F401 - domain_frame re-exported for the release
    COUNT, INDEX, domain_frame, grouped_item_counts, with_domain,
)
from dp_spark.stages.partitioning import python_partitions
from dp_spark.stages.python_worker import worker_pass

GROUP_INDEX = "group_index"
RANK = "rank"
KEY = "_key"
BOTTOM = "bottom"
_ORDER = "_order"

#: What the release hands :func:`group_selections`: (group index, counts, (k̄+1)-th count) ->
#: (indices into counts in rank order, ⊥ follows), e.g.
#: :class:`dp_spark.mechanisms.top_k.groups.GroupSelection`.
Select = Callable[[int, np.ndarray, float], tuple[np.ndarray, bool]]


def _group_counts(edge_df: DataFrame, kbar: int | None, domain: DataFrame | None, size: int | None) -> DataFrame:
    """(group_index, _key, count): the counts each group's mechanism reads (module docstring): the
    domain's (``domain``), or the k̄+1 largest."""
    counts = grouped_item_counts(edge_df, GROUP_INDEX)
    if domain is not None:
        return with_domain(counts, domain, size, ITEM).select(GROUP_INDEX, F.col(INDEX).alias(KEY), COUNT)
    order = Window.partitionBy(GROUP_INDEX).orderBy(F.col(COUNT).desc(), F.col(ITEM).asc())
    return (counts.withColumn(_ORDER, F.row_number().over(order)).where(F.col(_ORDER) <= int(kbar) + 1)
            .select(GROUP_INDEX, F.col(ITEM).alias(KEY), COUNT))


class _Selected:
    """The released rows of the groups of one partition, gathered until a batch is written."""

    def __init__(self) -> None:
        self.groups: list[np.ndarray] = []
        self.ranks: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []  # row index into the batch's keys; -1: ⊥ only (null key)
        self.bottoms: list[np.ndarray] = []

    def add(self, group: int, rows: np.ndarray, bottom: bool) -> None:
        n = len(rows)
        self.groups.append(np.full(max(n, 1), group, dtype=np.int32))
        self.ranks.append(np.arange(1, n + 1, dtype=np.int32) if n else np.zeros(1, dtype=np.int32))
        self.rows.append(rows.astype(np.int64) if n else np.full(1, -1, dtype=np.int64))
        self.bottoms.append(np.full(max(n, 1), bool(bottom) or not n))

    def batch(self, keys: pa.Array | None) -> pa.RecordBatch:
        """One output batch (group_index, rank, _key, bottom): ``_key`` the rows' ``keys`` (None: the
        rows are the keys, domain positions); rank and key null on a ⊥-only row."""
        rows = np.concatenate(self.rows)
        none = rows < 0
        ranks = np.concatenate(self.ranks)
        index = pa.array(np.where(none, 0, rows), mask=none, type=pa.int64())
        taken = index if keys is None else keys.take(index)
        return pa.RecordBatch.from_arrays(
            [pa.array(np.concatenate(self.groups)), pa.array(ranks, mask=none), taken,
             pa.array(np.concatenate(self.bottoms))], names=[GROUP_INDEX, RANK, KEY, BOTTOM])


def _complete_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """(rows, starts): the partition's rows in chunks holding whole groups only (a group's rows may
    arrive over several batches: the last group of a chunk is carried to the next, its batches
    copied together once, when it ends: linear in its rows), ``starts`` the
    row where each group begins (and the end). Groups arrive sorted by index; a group seen twice
    would draw its stream twice: refused (a defect)."""
    pending: list[pa.RecordBatch] = []  # the rows of the group carried over, not yet copied together
    pending_id, last = None, -1
    for batch in batches:
        if not batch.num_rows:
            continue
        first_id, last_id = batch.column(0)[0].as_py(), batch.column(0)[-1].as_py()
        if pending and first_id == pending_id == last_id:  # the carried group goes on: copy it once, at its end
            pending.append(batch)
            continue
        chunk = pa.Table.from_batches([*pending, batch]).combine_chunks().to_batches()[0]
        ids = chunk.column(0).to_numpy(zero_copy_only=False)
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        if (np.diff(ids[starts]) <= 0).any() or ids[0] <= last:
            raise RuntimeError("dp_spark defect: a group arrived in two runs; its rows must be sorted")
        whole = int(starts[-1])  # the last group may continue in the next batch
        pending, pending_id = [chunk.slice(whole)], int(ids[whole])
        if whole:
            last = int(ids[whole - 1])
            yield chunk.slice(0, whole), np.r_[starts[:-1], whole]
    if pending:
        chunk = pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
        ids = chunk.column(0).to_numpy(zero_copy_only=False)
        if ids[0] <= last:
            raise RuntimeError("dp_spark defect: a group arrived in two runs; its rows must be sorted")
        yield chunk, np.r_[np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]), len(ids)]


@worker_pass
def _select_partition(batches: Iterator[pa.RecordBatch], select: Select, kbar: int, size: int | None,
                      top: bool) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of :func:`group_selections`: rows (group_index, _key, count) sorted by (group,
    count descending, key), each group ending with its own null-count row; one ``select`` call per
    group, on the k̄ largest counts (``top``) or the domain's ``size`` counts in domain order."""
    for chunk, starts in _complete_groups(batches):
        ids = chunk.column(0).to_numpy(zero_copy_only=False)
        keys = chunk.column(1)
        counts = chunk.column(2).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        positions = keys.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64) if size is not None else None
        out = _Selected()
        for lo, hi in zip(starts[:-1], starts[1:]):
            hi -= 1  # the group's own null-count row comes last
            values = counts[lo:hi]
            if size is not None:  # the domain's counts in domain order; keys are domain positions
                dense = np.zeros(size, dtype=np.int64)
                dense[positions[lo:hi]] = values
                order = np.argsort(-dense, kind="stable") if top else np.arange(size)  # ties: domain order
                values, rows = dense[order], order
            else:
                rows = np.arange(lo, hi)
            if top:  # the k̄ largest, and the (k̄+1)-th
                chosen, bottom = select(int(ids[lo]), values[:kbar], float(values[kbar]) if len(values) > kbar else 0.0)
            else:
                chosen, bottom = select(int(ids[lo]), values, 0.0)
            out.add(int(ids[lo]), rows[np.asarray(chosen, dtype=np.int64)], bottom)
        yield out.batch(keys if size is None else None)


def group_selections(edge_df: DataFrame, n_groups: int, select: Select, *, kbar: int,
                     domain: DataFrame | None = None, size: int | None = None, top: bool = True,
                     partitions: int | None = None) -> DataFrame:
    """(group_index, rank, _key, bottom): every group's released items, chosen on the executors by
    ``select`` (module docstring), for the groups 0..``n_groups``−1 (public: the number of public
    keys, or of the keys a private key step released, whose plan shape does not depend on it).
    ``domain``: the public domain table (:func:`~dp_spark.stages.item_counts.domain_frame`) of
    ``size`` items, or None;
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
