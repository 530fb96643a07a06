"""Spark stage of the grouped continual-distinct release (issue 24; no privacy noise).

Every value computed here is NON-PRIVATE.

:func:`grouped_events` — the event table of a grouped run: the valid events
(:func:`dp_spark.stages.continual.valid_events`: the same per-row rules)
with the group column normalised (long or string, like the person-level
edge table's; a row with a null group is dropped per row) and the column
``person`` holding the item: the privacy unit of this release is the item,
and the release template's group cap (:func:`dp_spark.stages.groups.cap_groups`,
which keeps each ``person``'s first m groups in the public order
``(xxhash64(person, group), group)``) then caps every ITEM to at most m of
its groups — a per-item transformation.

:func:`grouped_cells` — ONE Spark pass for every group: the capped events go
to item shards (``pmod(murmur3(item), shards)``, as the ungrouped stage);
each shard runs the ungrouped per-item kernel on virtual items
(group, item), so the groups never interact (an item's events in two groups
are two independent streams), and emits (group, step, level) flip cells;
the JVM sums them per cell (:func:`dp_spark.stages.continual.sum_partitions`
partitions, never the session's shuffle partitions) and the cells reach the
driver as Arrow batches (:func:`dp_spark.stages.continual.collect_cells`,
whatever the session's Arrow setting). At most
groups × T × (J + 2) cells reach the driver; the release limits groups × T
before anything is read (:func:`dp_spark.settings.continual_distinct.validate_grouped_size`).
:class:`GroupedCells` rebuilds one group's ``StreamSummaries`` at a time,
exactly what the ungrouped stage returns for that group's events
(tests/spark/test_grouped_continual.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.sparkjobs import spark_job
from dp_spark.stages.continual import (
    CROSS,
    DELTA,
    ITEM,
    LEVEL,
    OP,
    ORDER,
    STEP,
    EventColumns,
    TimeMapping,
    collect_cells,
    default_shards,
    sum_partitions,
    summed_cells,
    valid_events,
)
from dp_spark.stages.edges import GROUP, PERSON, group_column
from dp_spark.summaries.continual_distinct import StreamSummaries, flip_cells, flip_events, summaries_from_cells

#: The column the release template adds: the key's position in the public key tuple.
GROUP_INDEX = "group_index"

GROUP_CELL_SCHEMA = T.StructType([
    T.StructField(GROUP_INDEX, T.IntegerType()),
    T.StructField(STEP, T.LongType()),
    T.StructField(LEVEL, T.IntegerType()),
    T.StructField(DELTA, T.LongType()),
    T.StructField(CROSS, T.LongType()),
])
_GROUP_CELL_ARROW = pa.schema([(GROUP_INDEX, pa.int32()), (STEP, pa.int64()), (LEVEL, pa.int32()),
                               (DELTA, pa.int64()), (CROSS, pa.int64())])


def grouped_events(df: DataFrame, columns: EventColumns, mapping: TimeMapping, horizon: int, group_col: str,
                   time_col: str, item_col: str, op_col: str) -> DataFrame:
    """The valid events (step, [order_key,] item, op) with ``group`` (the
    normalised ``group_col``; rows with a null group dropped) and ``person``
    (= item: the unit the template's group cap partitions by). Schema checks
    only: the group column exists, is none of the event columns, is not all
    nulls. Lazy: no data is read."""
    group = group_column(df, group_col, (time_col, item_col, op_col))
    events = valid_events(df, columns, mapping, horizon, extra=(group,))
    return events.where(F.col(GROUP).isNotNull()).withColumn(PERSON, F.col(ITEM))


def _group_shard_cells(pdf: pd.DataFrame, max_level: int, tree_horizon: int) -> pd.DataFrame:
    """The (group, step, level) flip cells of one item shard: the ungrouped
    kernel on virtual items (group, item); a flip's step is encoded as
    group·T + step so that ``flip_cells`` keeps groups apart."""
    groups = pdf[GROUP_INDEX].to_numpy(dtype=np.int64)
    items, _ = pd.factorize(pdf[ITEM], sort=False)
    width = int(items.max()) + 1 if len(items) else 1
    virtual = groups * width + items.astype(np.int64)
    flips = flip_events(pdf[STEP].to_numpy(dtype=np.int64), virtual, pdf[OP].to_numpy(dtype=np.int64),
                        pdf[ORDER].to_numpy() if ORDER in pdf.columns else None)
    group_of_flip = flips.item // width
    encoded = dataclasses.replace(flips, time=group_of_flip * tree_horizon + (flips.time - 1))
    step, level, delta, cross = flip_cells(encoded, max_level)
    return pd.DataFrame({GROUP_INDEX: (step // tree_horizon).astype(np.int32), STEP: step % tree_horizon + 1,
                         LEVEL: level.astype(np.int32), DELTA: delta, CROSS: cross})


def _partition_group_cells(batches, max_level: int, tree_horizon: int):
    """mapInArrow body: the flip cells of one item shard's events, all groups."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return
    cells = _group_shard_cells(pa.Table.from_batches(collected).to_pandas(), max_level, tree_horizon)
    if len(cells):
        yield pa.RecordBatch.from_pandas(cells, schema=_GROUP_CELL_ARROW, preserve_index=False)


@dataclass(frozen=True)
class GroupedCells:
    """Every group's flip cells (NON-PRIVATE), sorted by group; ``summaries(g)``
    is group g's ``StreamSummaries`` (built on demand: one group's dense
    arrays at a time on the driver)."""

    n_groups: int
    tree_horizon: int
    max_level: int
    group: np.ndarray
    step: np.ndarray
    level: np.ndarray
    delta: np.ndarray
    cross: np.ndarray

    def summaries(self, g: int) -> StreamSummaries:
        lo, hi = np.searchsorted(self.group, [g, g + 1])
        return summaries_from_cells(self.step[lo:hi], self.level[lo:hi], self.delta[lo:hi], self.cross[lo:hi],
                                    self.tree_horizon, self.max_level)


def grouped_cells(capped: DataFrame, n_groups: int, tree_horizon: int, shards: int | None = None,
                  max_level: int | None = None) -> GroupedCells:
    """Every group's flip cells from the capped grouped events (columns
    step, [order_key,] item, op, ``group_index``) in one Spark job (module
    docstring). ``shards``: item shards (default
    :func:`dp_spark.stages.continual.default_shards`); a speed setting,
    the cells are the same for every value."""
    spark = capped.sparkSession
    top = int(tree_horizon).bit_length() - 1
    max_level = top if max_level is None else int(max_level)
    shards = default_shards(spark) if shards is None else int(shards)
    keep = [c for c in (STEP, ORDER, ITEM, OP, GROUP_INDEX) if c in capped.columns]
    partitioned = capped.select(*keep).repartition(shards, ITEM)
    cells = partitioned.mapInArrow(partial(_partition_group_cells, max_level=max_level,
                                           tree_horizon=int(tree_horizon)), GROUP_CELL_SCHEMA)
    summed = summed_cells(cells, [GROUP_INDEX, STEP, LEVEL], sum_partitions(spark, shards))
    with spark_job("computing every group's per-step flip counts"):
        got = collect_cells(summed, [GROUP_INDEX, STEP, LEVEL, DELTA, CROSS])  # <= groups × T × (J + 2) rows
    order = np.argsort(got[GROUP_INDEX], kind="stable")
    arrays = [got[c][order] for c in (GROUP_INDEX, STEP, LEVEL, DELTA, CROSS)]
    return GroupedCells(int(n_groups), int(tree_horizon), max_level, *arrays)
