"""Spark stage of the continual-distinct release (no privacy noise).

Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, "Counting Distinct Elements in the Turnstile Model
with Differential Privacy under Continual Observation" (NeurIPS 2023). From an event table ``(time,
item, op)`` this stage computes exactly the arrays of
``dp_spark.mechanisms.continual_distinct.StreamSummaries``: per step the change of the number of
present items, the same change under flippancy truncation at every w = 2^j (Algorithm 1's input),
and the number of items whose flippancy so far exceeds w (Algorithm 3's sparse-vector queries).
Nothing else reaches the driver: at most T·(J + 2) (step, level) cells. DataFrame API only, so it
runs on Spark Connect too.

1. Event times map to steps 1..T: step = ⌊(time − origin) / step_size⌋ + 1 (:class:`TimeMapping`);
   T, the horizon, is a REQUIRED public parameter. Integer and floating columns are in their own
   units, timestamp and date columns in seconds (default step_size one day). An integer column
   defaults to origin 1, step_size 1; a floating, timestamp or date column NEEDS an explicit origin:
   none is derived from the data, because the earliest event time is not public.
2. A per-row filter drops the events the rules below reject.
3. Items go to shards by ``pmod(murmur3(item), shards)``; one ``mapInArrow`` pass per partition runs
   the per-item kernels of ``dp_spark.summaries.continual_distinct`` (clamped counts, end-of-step
   existence, running flip number k) and sums the flips per (step, level) cell, level = the smallest
   j with k <= 2^j. Flips depend on one item's events only, so shard cells add up. A grouped run's
   events carry their group index g (an ungrouped run is group 0): (group, item) is the item and a
   cell of step t is keyed at g·T + t, so every group's cells come from the same pass
   (:func:`grouped_cells`).
4. Each shard packs its cells into one row per chunk of the cell key range
   (``dp_spark.summaries.continual_chunks``); the rows are hash-partitioned by chunk into
   :func:`sum_partitions` partitions and a second pass adds each chunk's cells exactly (int64). Each
   cell then sits in one row; the driver collects them as Arrow (:func:`collect_chunk_cells`) and
   rebuilds the arrays (``summaries_from_cells``), equal to
   ``dp_spark.mechanisms.continual_distinct.stream_summaries`` of the same events (tested).

Rules for bad input (the stage's contract; the release states them):

- Schema problems are public and refused before anything is read or spent (``SchemaError``): a
  missing column, an unusable type, or an item column whose Spark equality is not byte equality
  (floats; strings with a non-binary collation), which would let one item count as two
  (``dp_spark.stages.edges.require_exact_ids``).
- Value problems are handled per event, never by an error after the budget is spent: an event is
  DROPPED if its item is null, its op is not +1 / −1 (null included), its time is null or not
  finite, or its time maps to a step outside 1..horizon. Dropped events are counted nowhere.
  Privacy: the filter looks at one row at a time, so it maps every item's events to a subset of that
  item's own events; neighbouring tables (one item's events added or removed) stay neighbouring, and
  the item-level sensitivity of every summary is unchanged.
- A delete of an absent item is ignored: counts never go below zero.
- Input order is irrelevant (events are sorted by time); several events of one step are applied by
  raw time, equal times inserts first.

Messages quote parameters, never values from the data. Everything returned is NON-PRIVATE: the
mechanism layer must add noise before anything is published.

Driver memory: the dense summaries and the mechanism's arrays take about ``DRIVER_BYTES_PER_CELL``
bytes per (step, level) cell, T·(log2 T + 2) cells (``driver_bytes``: about 2.4 GB at the cap
``MAX_HORIZON`` = 2^22 steps), plus the collected flip cells (at most T·(J + 2)). Horizons above the
cap are refused before any data is read."""

from __future__ import annotations

import datetime as _dt
import logging
import math
import numbers
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.summaries.continual_chunks import (
    CELL_KEY,
    CHUNK,
    CROSS,
    DELTA,
    CellChunks,
    cell_chunks,
    item_codes,
    shard_chunk_rows,
    sum_chunk_rows,
    unpack,
)
from dp_spark.summaries.continual_distinct import StreamSummaries, summaries_from_cells
from dp_spark import checks
from dp_spark.errors import ParameterError, SchemaError
from dp_spark.settings.continual_distinct import (
    MAX_SHARDS,
    next_power_of_two,
    validate_horizon,
    validate_mapping_parameters,
    validate_shards,
)
from dp_spark.sparkjobs import spark_job
from dp_spark.stages.partitioning import python_partitions
from dp_spark.stages.edges import GROUP, PERSON, UNGROUPED, group_column, require_columns, require_exact_ids
from dp_spark.stages.python_worker import worker_pass

log = logging.getLogger(__name__)

STEP = "step"
ORDER = "order_key"
#: The column the release template adds to a grouped run's events: the key's position in the public keys.
GROUP_INDEX = "group_index"
ITEM = "item"
OP = "op"
LEVEL = "level"

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
SECONDS_PER_DAY = 86_400
_MICROS = 1_000_000
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FRACTIONAL = (T.FloatType, T.DoubleType, T.DecimalType)
_TIMESTAMPS = (T.TimestampType, T.TimestampNTZType, T.DateType)
_REFUSED_ITEM = (T.ArrayType, T.MapType, T.StructType, T.BinaryType)


# ------------------------------------------------------------------ time -> step

@dataclass(frozen=True)
class TimeMapping:
    """How event times become steps: step = ⌊(raw − origin) / size⌋ + 1.

    ``kind`` is "integer" (raw = the value), "number" (raw = the value as a double) or "timestamp"
    (raw = microseconds since the Unix epoch, UTC; dates from their midnight in the session time
    zone). ``origin`` and ``size`` are in raw units, parameters never derived from the data;
    ``describe()`` restates them for the report."""

    kind: str
    origin: int | float
    size: int | float

    def step_of(self, raw):
        """The step of one raw value (same arithmetic as the Spark column)."""
        if self.kind == "number":
            return int(math.floor((float(raw) - self.origin) / self.size)) + 1
        return (int(raw) - int(self.origin)) // int(self.size) + 1

    def column(self, raw):
        """The step as a Spark long column (for raw values inside ``in_range``)."""
        if self.kind == "number":
            return (F.floor(self._scaled(raw)) + 1).cast("long")
        shifted = raw - F.lit(int(self.origin))
        size = F.lit(int(self.size))
        return ((shifted - F.pmod(shifted, size)) / size).cast("long") + 1

    def _scaled(self, raw):
        return (raw - F.lit(float(self.origin))) / F.lit(float(self.size))

    def in_range(self, raw, horizon: int):
        """A boolean column: ``raw`` is a non-null, finite time of a step in 1..horizon. Compares
        raw values with public bounds only, so nothing can overflow (ANSI mode would raise on long
        overflow)."""
        if self.kind == "number":
            scaled = self._scaled(raw)
            return raw.isNotNull() & ~F.isnan(raw) & (scaled >= F.lit(0.0)) & (scaled < F.lit(float(horizon)))
        low = int(self.origin)
        high = min(low + int(horizon) * int(self.size) - 1, _LONG_MAX)
        return raw.isNotNull() & (raw >= F.lit(low)) & (raw <= F.lit(high))

    def describe(self) -> dict:
        out: dict = {"time_kind": self.kind}
        if self.kind == "timestamp":
            out["step_seconds"] = self.size / _MICROS
            origin = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(microseconds=int(self.origin))
            out["origin"] = origin.isoformat()
        else:
            out["step_size"] = self.size
            out["origin"] = self.origin
        return out


def time_kind(df: DataFrame, time_col: str) -> str:
    dtype = df.schema[time_col].dataType
    if isinstance(dtype, _INTEGRAL):
        return "integer"
    if isinstance(dtype, _FRACTIONAL):
        return "number"
    if isinstance(dtype, _TIMESTAMPS):
        return "timestamp"
    raise SchemaError(
        f"column {time_col!r} has type {dtype.simpleString()}; the time column must hold "
        "integers (step numbers), numbers, timestamps or dates. Cast it first "
        "(e.g. to_timestamp) or name another column with time_col= / --time-col."
    )


def raw_time(df: DataFrame, time_col: str, kind: str):
    column = F.col(time_col)
    if kind == "integer":
        return column.cast("long")
    if kind == "number":
        return column.cast("double")
    dtype = df.schema[time_col].dataType
    if not isinstance(dtype, T.TimestampType):
        column = column.cast("timestamp")
    return F.unix_micros(column)


def _origin_micros(origin) -> int:
    """A user-given origin for a timestamp column, as UTC microseconds."""
    if isinstance(origin, str):
        try:
            origin = _dt.datetime.fromisoformat(origin.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ParameterError(
                f"origin must be an ISO date or time such as 2024-01-01 or 2024-01-01T06:00:00; got {origin!r}."
            ) from None
    if isinstance(origin, _dt.datetime):
        if origin.tzinfo is None:
            origin = origin.replace(tzinfo=_dt.timezone.utc)
        delta = origin - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return (delta.days * SECONDS_PER_DAY + delta.seconds) * _MICROS + delta.microseconds
    if isinstance(origin, _dt.date):
        return (origin - _dt.date(1970, 1, 1)).days * SECONDS_PER_DAY * _MICROS
    raise ParameterError(
        f"origin for a timestamp column must be an ISO string, a datetime or a date; got {type(origin).__name__}."
    )


def time_mapping(kind: str, origin, step_size) -> TimeMapping:
    """The time → step mapping from the column kind and parameters alone (no data read). A floating
    or timestamp/date column needs ``origin``, the start of step 1 (ParameterError otherwise): the
    earliest event time is not private, so it is never a default."""
    validate_mapping_parameters(origin, step_size)
    if kind == "timestamp":
        if origin is None:
            raise ParameterError(
                "a timestamp or date time column needs origin, the start of step 1 (origin= / --origin, "
                "e.g. 2024-01-01 or 2024-01-01T06:00:00Z); it is not derived from the data because "
                "the earliest event time is not private."
            )
        seconds = SECONDS_PER_DAY if step_size is None else checks.number(step_size, "step_size")
        size = int(round(seconds * _MICROS))
        if size < 1 or abs(size - seconds * _MICROS) > 1e-6 * size:
            raise ParameterError(f"step_size for a timestamp column is in seconds, at least 1e-6; got {step_size!r}.")
        return TimeMapping("timestamp", _origin_micros(origin), size)
    if isinstance(origin, (str, _dt.date)):
        raise ParameterError(f"origin must be a number for a {kind} time column; got {origin!r}.")
    if kind == "number" and origin is None:
        raise ParameterError(
            "a non-integer (floating or decimal) time column needs origin, the start of step 1 "
            "(origin= / --origin, a number); it is not derived from the data. Integer columns "
            "default to origin 1."
        )
    start = 1 if origin is None else origin
    if kind == "integer":
        size = 1 if step_size is None else step_size
        if float(size) != int(size) or float(start) != int(start):
            return TimeMapping("number", checks.number(start, "origin"), checks.number(size, "step_size"))
        if not _LONG_MIN <= int(start) <= _LONG_MAX or int(size) > _LONG_MAX:
            raise ParameterError(f"origin and step_size must fit in a 64-bit integer; got {origin!r}, {step_size!r}.")
        return TimeMapping("integer", int(start), int(size))
    return TimeMapping("number", checks.number(start, "origin"), 1.0 if step_size is None else checks.number(step_size, "step_size"))


# ------------------------------------------------------------------ normalised events

def item_column(df: DataFrame, item_col: str):
    """The item id as a long or string column. SchemaError (schema only) for nested and binary types
    and for types whose Spark equality is not byte equality
    (:func:`~dp_spark.stages.edges.require_exact_ids`)."""
    dtype = df.schema[item_col].dataType
    if isinstance(dtype, _REFUSED_ITEM):
        raise SchemaError(
            f"column {item_col!r} has type {dtype.simpleString()}, which cannot be used as an "
            "item id; use a column of strings or integers."
        )
    require_exact_ids(df, item_col, "item")
    column = F.col(item_col)
    if isinstance(dtype, _INTEGRAL):
        return column.cast("long")
    if isinstance(dtype, T.StringType):
        return column
    return column.cast("string")


def op_column(df: DataFrame, op_col: str):
    dtype = df.schema[op_col].dataType
    if isinstance(dtype, _INTEGRAL):
        return F.col(op_col).cast("long")
    if isinstance(dtype, _FRACTIONAL):
        value = F.col(op_col).cast("double")
        return F.when(value == 1.0, F.lit(1)).when(value == -1.0, F.lit(-1)).otherwise(F.lit(0)).cast("long")
    raise SchemaError(
        f"column {op_col!r} has type {dtype.simpleString()}; the op column must be numeric, "
        "+1 for an insert and -1 for a delete."
    )


@dataclass(frozen=True)
class EventColumns:
    """The event table's checked columns (:func:`event_columns`): the time kind and the raw time,
    item and op as Spark columns."""

    kind: str
    time: object
    item: object
    op: object


def event_columns(df: DataFrame, time_col: str, item_col: str, op_col: str) -> EventColumns:
    """Every schema check of the event table, once (no data read): the three columns exist and
    differ, the item and op types are usable, the time column's kind. Returns the normalised
    columns."""
    require_columns(df, time_col, item_col, op_col)
    if len({time_col, item_col, op_col}) != 3:
        raise SchemaError("time, item and op must be three different columns.")
    item = item_column(df, item_col)
    op = op_column(df, op_col)
    kind = time_kind(df, time_col)
    return EventColumns(kind, raw_time(df, time_col, kind), item, op)


def valid_events(df: DataFrame, columns: EventColumns, mapping: TimeMapping, horizon: int,
                 extra: tuple = ()) -> DataFrame:
    """Columns step, order_key (raw time; omitted when :func:`needs_order` says it adds nothing),
    item, op and ``extra`` of the events the rules keep; every other row is DROPPED by a per-row
    filter (no job, nothing counted or raised). Item-level sensitivity is unchanged (module
    docstring). ``columns``: :func:`event_columns` of ``df``."""
    out = df.select(columns.time.alias(ORDER), columns.item.alias(ITEM), columns.op.alias(OP), *extra)
    names = [c for c in out.columns if c not in (ORDER, ITEM, OP)]
    keep = F.col(ITEM).isNotNull() & F.col(OP).isin(1, -1) & mapping.in_range(F.col(ORDER), horizon)
    step = F.when(keep, mapping.column(F.col(ORDER)))  # evaluated on kept rows only: no overflow
    order = [ORDER] if needs_order(mapping) else []
    return out.where(keep).select(step.alias(STEP), *order, ITEM, OP, *names)


def needs_order(mapping: TimeMapping) -> bool:
    """Whether raw times can order the events of one step: not when a step is one integer time unit."""
    return not (mapping.kind == "integer" and int(mapping.size) == 1)


# ------------------------------------------------------------------ per-shard kernel

#: One Spark row per (item shard, chunk) — or per chunk after the sum —
#: holding that chunk's cells packed (``dp_spark.summaries.continual_chunks``).
CHUNK_SCHEMA = T.StructType(
    [
        T.StructField(CHUNK, T.IntegerType()),
        T.StructField(CELL_KEY, T.BinaryType()),
        T.StructField(DELTA, T.BinaryType()),
        T.StructField(CROSS, T.BinaryType()),
    ]
)


@worker_pass
def _partition_chunks(batches, layout: CellChunks):
    """mapInArrow body: the flip cells of the partition's events (whole item shards, all groups),
    one row per non-empty chunk."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return
    table = pa.Table.from_batches(collected)
    rows = shard_chunk_rows(
        table.column(STEP).to_numpy(),
        item_codes(table.column(ITEM)),
        table.column(OP).to_numpy(),
        table.column(ORDER).to_numpy() if ORDER in table.column_names else None,
        layout,
        table.column(GROUP_INDEX).to_numpy() if GROUP_INDEX in table.column_names else None,
    )
    if rows is not None:
        yield rows


@worker_pass
def _partition_chunk_sums(batches, layout: CellChunks):
    """mapInArrow body of the chunk sum: the partition's chunk rows from every item shard added cell
    by cell; one row per chunk."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return
    rows = sum_chunk_rows(pa.Table.from_batches(collected), layout)
    if rows is not None:
        yield rows


def chunk_layout(spark, tree_horizon: int, max_level: int, shards: int, groups: int = 1) -> CellChunks:
    """The stage's cell chunks for ``groups`` groups: CHUNKS_PER_PARTITION per partition of the
    chunk sum (:func:`sum_partitions`); public parameters only."""
    return cell_chunks(tree_horizon, max_level, sum_partitions(spark, shards), groups)


def flip_cell_table(steps_df: DataFrame, max_level: int, shards: int, tree_horizon: int,
                    layout: CellChunks | None = None) -> DataFrame:
    """The (step, level) cells' delta and cross summed over item shards, as chunk rows
    (``CHUNK_SCHEMA``, :class:`CellChunks`); NON-PRIVATE.

    ``steps_df`` has columns step, [order_key,] item, op (:func:`valid_events`). The events are
    hash-partitioned by item into ``shards`` partitions (item x in shard pmod(murmur3(x), shards); a
    partition may hold several whole shards, :mod:`dp_spark.stages.partitioning`), the per-item
    kernel runs on each, and the chunk rows are summed per chunk in :func:`sum_partitions`
    partitions. The sums are the same for every shard count (tested). ``layout`` (default
    :func:`chunk_layout`) must be the one the caller decodes with: the cluster's parallelism, which
    sizes it, can change between calls."""
    partitions = sum_partitions(steps_df.sparkSession, shards)
    if layout is None:
        layout = chunk_layout(steps_df.sparkSession, tree_horizon, max_level, shards)
    partitioned = steps_df.repartition(int(shards), ITEM)
    chunks = partitioned.mapInArrow(partial(_partition_chunks, layout=layout), CHUNK_SCHEMA)
    by_chunk = chunks.repartition(int(partitions), CHUNK)
    return by_chunk.mapInArrow(partial(_partition_chunk_sums, layout=layout), CHUNK_SCHEMA)


def collect_chunk_cells(summed: DataFrame, layout: CellChunks) -> dict[str, np.ndarray]:
    """The summed cells of :func:`flip_cell_table` on the driver: int64 arrays group_index, step
    (1..T), level, delta, cross, one entry per non-empty cell (at most G·T·(J + 2)), sorted by
    (group, step, level) when there are several groups; NON-PRIVATE. Collected with ``toArrow``
    whatever ``spark.sql.execution.arrow.pyspark.enabled`` says (``toPandas`` without it pickles row
    by row)."""
    keys, delta, cross = unpack(summed.toArrow(), layout)
    if layout.groups > 1:  # each group's cells together (GroupedCells.summaries); one group's need no sort
        order = np.argsort(keys, kind="stable")
        keys, delta, cross = keys[order], delta[order], cross[order]
    group, step, level = layout.group_cells(keys)
    return {GROUP_INDEX: group, STEP: step, LEVEL: level, DELTA: delta, CROSS: cross}


def sum_partitions(spark, shards: int) -> int:
    """Partitions of the chunk sum: two per task slot, at most the shard count
    (:func:`dp_spark.stages.partitioning.python_partitions`). The sums are the same for every count."""
    return python_partitions(spark, int(shards))


def default_shards(spark) -> int:
    """The stage's item shards when not given: two per task slot
    (:func:`dp_spark.stages.partitioning.python_partitions`), at most MAX_SHARDS. Chosen by
    measurement: benchmarks/results/2026-11-26-stream-state-partitions.md."""
    return python_partitions(spark, MAX_SHARDS)


# ------------------------------------------------------------------ the stage

def grouped_events(df: DataFrame, columns: EventColumns, mapping: TimeMapping, horizon: int,
                   group_col: str | None, time_col: str, item_col: str, op_col: str) -> DataFrame:
    """The release's event table: :func:`valid_events` with ``group`` and ``person``. ``group`` is
    the normalised ``group_col`` (schema checks of :func:`~dp_spark.stages.edges.group_column`; a
    row with a null group is dropped), or the constant :data:`~dp_spark.stages.edges.UNGROUPED` when
    it is None. ``person`` is the item, this release's privacy unit, which the template's group cap
    (:func:`dp_spark.stages.groups.cap_groups`) caps to at most m groups: a per-item transformation.
    Lazy."""
    if group_col is None:
        group = F.lit(UNGROUPED).cast("long").alias(GROUP)
    else:
        group = group_column(df, group_col, (time_col, item_col, op_col))
    events = valid_events(df, columns, mapping, horizon, extra=(group,))
    return events.where(F.col(GROUP).isNotNull()).withColumn(PERSON, F.col(ITEM))


@dataclass(frozen=True)
class GroupedCells:
    """Every group's summed flip cells (NON-PRIVATE), sorted by (group, step, level);
    ``summaries(g)`` builds group g's ``StreamSummaries`` on demand."""

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


def grouped_cells(events: DataFrame, n_groups: int, tree_horizon: int, shards: int | None = None,
                  max_level: int | None = None) -> GroupedCells:
    """Every group's flip cells in ONE Spark pass (module docstring, steps 3–4). ``events``: step,
    [order_key,] item, op and ``group_index`` (absent: one group, 0). Each shard runs the kernel on
    virtual items (group, item), so groups never interact, and a cell of group g at step t sits at
    g·T + t. At most groups × T × (J + 2) cells reach the driver (the release limits groups × T
    first, :func:`dp_spark.settings.continual_distinct.validate_grouped_size`). One group's cells
    equal the stage's on that group's events alone (tests/spark/test_grouped_continual.py).
    ``shards`` (default :func:`default_shards`) is a speed setting: the cells are the same for every
    value."""
    spark = events.sparkSession
    top = int(tree_horizon).bit_length() - 1
    max_level = top if max_level is None else int(max_level)
    shards = default_shards(spark) if shards is None else int(shards)
    steps_df = events.select(*[c for c in (STEP, ORDER, ITEM, OP, GROUP_INDEX) if c in events.columns])
    layout = chunk_layout(spark, int(tree_horizon), max_level, shards, int(n_groups))  # once: encode, decode
    cells = flip_cell_table(steps_df, max_level, shards, int(tree_horizon), layout)
    log.info("continual-distinct: computing per-step flip counts (%d item shards)", shards)
    with spark_job("computing per-step flip counts"):
        got = collect_chunk_cells(cells, layout)  # <= groups × T × (J + 2) cells, each once
    return GroupedCells(int(n_groups), int(tree_horizon), max_level,
                        *[got[c] for c in (GROUP_INDEX, STEP, LEVEL, DELTA, CROSS)])


@dataclass(frozen=True)
class ContinualStageResult:
    """The stage's output: NON-PRIVATE summaries, ``horizon`` (the number of steps to release; the
    tree's, ``summaries.horizon``, is the next power of two) and the time mapping."""

    summaries: StreamSummaries
    horizon: int
    mapping: TimeMapping


def continual_summaries(
    df: DataFrame,
    time_col: str = "time",
    item_col: str = "item",
    op_col: str = "op",
    horizon: int | None = None,
    *,
    origin=None,
    step_size=None,
    max_level: int | None = None,
    shards: int | None = None,
) -> ContinualStageResult:
    """Exact continual-release summaries of an event table (one Spark job): the one-group
    :func:`grouped_cells` of its valid events. NON-PRIVATE: pass them through a mechanism of
    ``dp_spark.mechanisms.continual_distinct`` before releasing anything.

    ``horizon`` is REQUIRED (ParameterError before any read); events outside 1..horizon and bad rows
    are dropped per event (:func:`valid_events`). ``max_level`` J defaults to log2 of the tree
    horizon (the top level untruncated). ``shards`` defaults to :func:`default_shards` (the same
    summaries for every value)."""
    horizon = validate_horizon(horizon)
    shards = validate_shards(shards)
    columns = event_columns(df, time_col, item_col, op_col)  # the schema checks, once
    mapping = time_mapping(columns.kind, origin, step_size)
    tree_horizon = next_power_of_two(horizon)
    top = tree_horizon.bit_length() - 1
    if max_level is None:
        max_level = top
    elif isinstance(max_level, bool) or not isinstance(max_level, numbers.Integral) or not 0 <= max_level <= top:
        raise ParameterError(f"max_level must be a whole number in 0..log2(horizon); got {max_level!r}.")
    cells = grouped_cells(valid_events(df, columns, mapping, horizon), 1, tree_horizon, shards, int(max_level))
    return ContinualStageResult(cells.summaries(0), horizon, mapping)
