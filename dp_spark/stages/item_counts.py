"""Per-item counts of distinct persons: the Spark stage of top-k and count-release. No privacy
noise; every function returns NON-PRIVATE values, private only through the mechanism layer.

The statistic: ``count(x)`` = the number of distinct persons with a row holding item x. Adding or
removing one person changes every count by at most 1, all in the same direction; a person may touch
every count. This is the histogram the top-k mechanisms (:mod:`dp_spark.mechanisms.top_k`) and
Private Count Release assume.

What reaches the driver is bounded by the job's parameters, never by the number of persons or rows:

* :func:`top_item_counts`: the k̄+1 largest counts, ties by item ascending (a public rule);
* :func:`domain_item_counts`: one count per item of a public domain (absent items count 0);
* :func:`bounded_item_counts`, :func:`select_items`, :func:`noisy_counts_of_items`,
  :func:`collect_item_counts`, :func:`store_item_counts`: the contribution-bounding baseline. Each
  person keeps at most m distinct items chosen by a salted hash; the mechanism layer's noisy
  threshold and count noise run inside ``mapInPandas`` (keyed per item,
  :mod:`dp_spark.mechanisms.count_release.keyed`), and only the released (item, noisy count) rows
  are collected (ungrouped) or stored by the executors (grouped: one row per released (group, item)
  pair, as many as the data gives, stay in Spark).

DataFrame API only, so Spark Connect works; actions run inside :func:`dp_spark.sparkjobs.spark_job`."""

from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.errors import InputError, ParameterError, SchemaError
from dp_spark.io import read_input
from dp_spark.public_inputs import refuse_private_as_public
from dp_spark.sparkjobs import spark_job
from dp_spark.stages.arrow_frames import arrow_frame, join_public
from dp_spark.stages.edges import GROUP, ITEM, PERSON, check_id_columns, edges, item_type  # noqa: F401 - check_id_columns re-exported
from dp_spark.stages.partitioning import python_partitions
from dp_spark.stages.python_worker import worker_pass
from dp_spark.stages.set_union import materialize

log = logging.getLogger(__name__)

COUNT = "count"
RANK = "_rank"
#: The position column of the public domain table (:func:`domain_frame`).
INDEX = "_index"
_LONG_MAX = 2**63 - 1
#: Public lists of at most this many items are broadcast to the join with the
#: counts (a size of the public list, never of the data); longer ones are
#: shuffled like the counts.
BROADCAST_ITEMS = 1_000_000


# --------------------------------------------------------------------- input

#: The edge table: :func:`dp_spark.stages.edges.edges`, the package's one
#: builder (its schema checks include :func:`check_id_columns`).
edge_table = edges


def integral_items(edge_df: DataFrame) -> bool:
    """Whether the normalised item column is a long (else it is a string)."""
    return isinstance(item_type(edge_df), T.LongType)


# -------------------------------------------------------------------- counts

def item_counts(edge_df: DataFrame) -> DataFrame:
    """(item, count): distinct persons per item. NON-PRIVATE; never collected
    whole by the library."""
    return edge_df.dropDuplicates([PERSON, ITEM]).groupBy(ITEM).agg(F.count(F.lit(1)).alias(COUNT))


@dataclass(frozen=True)
class TopCounts:
    """The k̄ largest per-item counts (rank order: count descending, item
    ascending) and the (k̄+1)-th largest count (0 when there are at most k̄
    items). NON-PRIVATE."""

    items: list
    counts: np.ndarray
    next_count: int

    def __len__(self) -> int:
        return len(self.items)


def top_item_counts(edge_df: DataFrame, kbar: int) -> TopCounts:
    """Collect the k̄+1 largest counts (at most k̄+1 rows), ties by item ascending: a public rule
    that does not depend on who holds the items."""
    ranked = item_counts(edge_df).orderBy(F.col(COUNT).desc(), F.col(ITEM).asc()).limit(int(kbar) + 1)
    with spark_job("collecting the largest item counts"):
        rows = ranked.collect()
    items = [row[ITEM] for row in rows[:kbar]]
    counts = np.array([int(row[COUNT]) for row in rows[:kbar]], dtype=np.int64)
    next_count = int(rows[kbar][COUNT]) if len(rows) > kbar else 0
    return TopCounts(items, counts, next_count)


def top_of_domain(domain: Sequence, counts: np.ndarray, kbar: int) -> TopCounts:
    """:func:`top_item_counts`' summary from the counts of a public domain (ties: domain order).
    NON-PRIVATE."""
    order = np.argsort(-np.asarray(counts, dtype=np.int64), kind="stable")
    head = order[:kbar]
    next_count = int(counts[order[kbar]]) if len(order) > kbar else 0
    return TopCounts([domain[i] for i in head], np.asarray(counts, dtype=np.int64)[head], next_count)


def domain_item_counts(edge_df: DataFrame, domain: Sequence) -> np.ndarray:
    """int64 counts aligned with ``domain`` (public, normalised, distinct:
    :func:`normalise_domain`); data items outside it are ignored, absent ones count 0. Collects at
    most ``len(domain)`` rows. NON-PRIVATE."""
    return counts_of_items(item_counts(edge_df), domain)


def domain_frame(spark, items: Sequence, dtype) -> DataFrame:
    """The public domain table (``item``, ``_index``): item i of ``items`` at position i, from Arrow
    (:func:`~dp_spark.stages.arrow_frames.arrow_frame`, its path chosen by the list's public length)."""
    schema = T.StructType([T.StructField(ITEM, dtype, False), T.StructField(INDEX, T.LongType(), False)])
    table = pa.table({ITEM: pa.array(list(items)), INDEX: pa.array(np.arange(len(items), dtype=np.int64))})
    return arrow_frame(spark, table, schema, bound=len(items))


def with_domain(frame: DataFrame, domain: DataFrame, size: int, on, how: str = "inner") -> DataFrame:
    """``frame`` joined with the public domain table on ``on``: broadcast when the domain (its public
    ``size``) has at most :data:`BROADCAST_ITEMS` items (already on the driver: neither side is
    shuffled), a sort-merge join above (:func:`~dp_spark.stages.arrow_frames.join_public`)."""
    return join_public(frame, domain, on, broadcast=size <= BROADCAST_ITEMS, how=how)


def counts_of_items(counts_df: DataFrame, items: Sequence, group_index: str | None = None,
                    n_groups: int = 1) -> np.ndarray:
    """int64 counts of an (item, count) DataFrame for the public list ``items`` (absent: 0), in its
    order; with ``group_index``, of a (group_index, item, count) one as an ``n_groups`` ×
    len(``items``) matrix. Collects at most that many rows; a list of at most
    :data:`BROADCAST_ITEMS` is broadcast. NON-PRIVATE."""
    by = () if group_index is None else (group_index,)
    out = np.zeros((*(int(n_groups) for _ in by), len(items)), dtype=np.int64)
    if not len(items):
        return out
    dom = domain_frame(counts_df.sparkSession, items, counts_df.schema[ITEM].dataType)
    joined = with_domain(counts_df, dom, len(items), ITEM).select(*by, INDEX, COUNT)
    with spark_job("counting persons per domain item of every group" if by else "counting persons per listed item"):
        pdf = joined.toPandas()
    if len(pdf):
        out[tuple(pdf[c].to_numpy(dtype=np.int64) for c in (*by, INDEX))] = pdf[COUNT].to_numpy(dtype=np.int64)
    return out


# ------------------------------------------------------- contribution bounding

def bound_contributions(edge_df: DataFrame, max_items: int, salt: int) -> DataFrame:
    """(person, item): every person keeps at most ``max_items`` distinct items, those with the
    smallest xxhash64(salt, person, item) (ties by item): a random-looking choice.

    Sensitivity: a person's choice depends only on its own ids and the salt, so adding or removing a
    person changes only its own kept rows: at most ``max_items`` counts move, each by 1 (L2
    sqrt(max_items), L-infinity 1). The salt is not privacy noise: the argument holds for every
    fixed salt."""
    order = Window.partitionBy(PERSON).orderBy(F.xxhash64(F.lit(int(salt)), PERSON, ITEM), ITEM)
    return (
        edge_df.dropDuplicates([PERSON, ITEM])
        .withColumn(RANK, F.row_number().over(order))
        .where(F.col(RANK) <= int(max_items))
        .select(PERSON, ITEM)
    )


def bounded_item_counts(edge_df: DataFrame, max_items: int, salt: int,
                        restrict_to: DataFrame | None = None) -> DataFrame:
    """(item, count) after :func:`bound_contributions`; with ``restrict_to`` (an ``item`` column of
    public, already released items) restricted to those items first. NON-PRIVATE."""
    if restrict_to is not None:
        edge_df = edge_df.join(restrict_to.select(ITEM), ITEM, "left_semi")
    return bound_contributions(edge_df, max_items, salt).groupBy(ITEM).agg(F.count(F.lit(1)).alias(COUNT))


@worker_pass
def _select_batches(batches: Iterator[pd.DataFrame], select: Callable) -> Iterator[pd.DataFrame]:
    """mapInPandas body: ``select(items, counts)`` (a mechanism-layer function with its own noise
    key) decides which items of each batch are kept."""
    for batch in batches:
        if not len(batch):
            continue
        keep = np.asarray(select(batch[ITEM].to_numpy(), batch[COUNT].to_numpy(dtype=np.int64)), dtype=bool)
        if keep.any():
            yield batch.loc[keep, [ITEM]]


def select_items(counts_df: DataFrame, select: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> DataFrame:
    """(item): the items of an (item, count) DataFrame whose noisy count clears a threshold, decided
    inside Spark by ``select(items, counts)`` (a picklable pure-numpy mechanism-layer function, e.g.
    ``functools.partial(dp_spark.mechanisms.count_release.gaussian_threshold_select, ...)``). Lazy.
    ``select`` must key each item's noise by the item: then every evaluation and retried task
    selects the same items whatever the partitioning, so the result may be used twice in a plan."""
    schema = T.StructType([T.StructField(ITEM, counts_df.schema[ITEM].dataType, False)])
    return _python_tasks(counts_df.select(ITEM, COUNT)).mapInPandas(partial(_select_batches, select=select), schema)


def _python_tasks(df: DataFrame) -> DataFrame:
    """``df`` coalesced to at most two partitions per task slot
    (:func:`dp_spark.stages.partitioning.python_partitions`), whatever the session's shuffle
    partitions. The noise here is keyed per item, so the output does not depend on the partitioning."""
    return df.coalesce(python_partitions(df.sparkSession))


@worker_pass
def _noise_batches(batches: Iterator[pd.DataFrame], add_noise: Callable) -> Iterator[pd.DataFrame]:
    """mapInPandas body: ``add_noise(items, counts)`` (a mechanism-layer function with its own noise
    key) returns the noisy int64 counts."""
    for batch in batches:
        if not len(batch):
            continue
        noisy = np.asarray(add_noise(batch[ITEM].to_numpy(), batch[COUNT].to_numpy(dtype=np.int64)), dtype=np.int64)
        yield pd.DataFrame({ITEM: batch[ITEM].to_numpy(), COUNT: noisy})


def noisy_counts_of_items(counts_df: DataFrame, items_df: DataFrame,
                          add_noise: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> DataFrame:
    """(item, count): every item of ``items_df`` (distinct, selected privately) with its count in
    ``counts_df`` (0 when absent) plus noise drawn inside Spark by ``add_noise(items, counts)`` (a
    pure-numpy mechanism-layer function keyed per item, e.g.
    ``functools.partial(dp_spark.mechanisms.count_release.keyed_noisy_counts, ...)``). Lazy; private
    only if ``add_noise`` is a DP mechanism for the counts."""
    joined = (
        items_df.select(ITEM)
        .join(counts_df.select(ITEM, COUNT), ITEM, "left")
        .select(ITEM, F.coalesce(F.col(COUNT), F.lit(0).cast("long")).alias(COUNT))
    )
    schema = T.StructType([
        T.StructField(ITEM, items_df.schema[ITEM].dataType, False),
        T.StructField(COUNT, T.LongType(), False),
    ])
    return _python_tasks(joined).mapInPandas(partial(_noise_batches, add_noise=add_noise), schema)


def collect_item_counts(df: DataFrame, minimum: float | None = None) -> tuple[int, list[tuple]]:
    """Collect an (item, count) DataFrame of RELEASED (noisy) counts in one Spark job: (number of
    rows, [(item, count), ...] with count >= ``minimum`` (all when None), largest first, ties by
    item). Call it only on the output."""
    if minimum is None:
        ordered = df.select(ITEM, COUNT).orderBy(F.col(COUNT).desc(), F.col(ITEM).asc())
        with spark_job("collecting the released counts"):
            pdf = ordered.toPandas()
        return len(pdf), list(zip(_python_values(pdf[ITEM]), (int(c) for c in pdf[COUNT].tolist())))
    kept = F.when(F.col(COUNT) >= F.lit(float(minimum)), F.struct(F.col(ITEM), F.col(COUNT)))
    summary = df.agg(F.count(F.lit(1)).alias("_rows"), F.collect_list(kept).alias("_kept"))
    with spark_job("collecting the released counts"):
        (row,) = summary.collect()
    pairs = [(row_[ITEM], int(row_[COUNT])) for row_ in row["_kept"]]
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return int(row["_rows"]), pairs


def store_item_counts(df: DataFrame, minimum: float | None = None) -> tuple[DataFrame, int]:
    """Evaluate an (item, count) DataFrame of RELEASED (noisy) counts once and keep it in Spark:
    (the stored rows with count >= ``minimum``, all when None: a lazy filter over the store; the
    number of stored rows, before that filter). Nothing but one number collected. Known gap: with
    adaptive execution on, the number of Spark jobs of the noisy pipeline feeding this store can
    depend on whether any item cleared the selection (an empty side short-cuts a join), as it does
    for the ungrouped collect; job counts are visible in Spark's UI before the ledger record.

    The store is :func:`dp_spark.stages.set_union.materialize` (a local checkpoint): the returned
    DataFrame's plan reads the stored rows, so it holds neither the noise function nor its key, and
    no later action (``release.groups``, ``--groups-output``) re-runs the noise step or re-reads the
    input. Call it only on the output of a DP mechanism."""
    with spark_job("computing and storing the released counts"):
        stored = materialize(df.select(ITEM, COUNT))
        total = stored.count()
    kept = stored if minimum is None else stored.where(F.col(COUNT) >= F.lit(float(minimum)))
    return kept, int(total)


def _python_values(series: pd.Series) -> list:
    return [v.item() if isinstance(v, np.generic) else v for v in series.tolist()]


# -------------------------------------------------------------- public domain

def normalise_domain(domain: Iterable, integral: bool) -> list:
    """Check and normalise a public domain (a list of possible items).

    ``integral``: the item column holds integers, so every domain item must be a whole number (int,
    integral float or digit string); otherwise items are compared as strings (``str``).
    ParameterError for an empty domain, a null, an item of the wrong kind or an item listed twice;
    the domain is public, so messages may quote it."""
    if domain is None or isinstance(domain, (str, bytes)) or not isinstance(domain, Iterable):
        raise ParameterError(
            "domain must be a list of the possible items (or, on the command line, "
            "--domain PATH of a file with one item per line or a CSV/Parquet file)."
        )
    out: list = []
    for value in domain:
        if isinstance(value, np.generic):
            value = value.item()
        if value is None or (isinstance(value, float) and math.isnan(value)):
            raise ParameterError("the domain holds a null item; remove it (null items are never counted).")
        if integral:
            out.append(_whole(value))
        else:
            out.append(value if isinstance(value, str) else str(value))
    if not out:
        raise ParameterError("the domain is empty; give at least k possible items.")
    seen: set = set()
    for value in out:
        if value in seen:
            raise ParameterError(
                f"the domain lists item {value!r} more than once; list every possible item exactly once."
            )
        seen.add(value)
    return out


def _whole(value) -> int:
    if isinstance(value, bool):
        raise ParameterError(f"domain item {value!r} is not a whole number, but the item column holds integers.")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        number = int(value)
    else:
        raise ParameterError(
            f"domain item {value!r} is not a whole number, but the item column holds integers; "
            "give the domain as integers."
        )
    if not -_LONG_MAX - 1 <= number <= _LONG_MAX:
        raise ParameterError(f"domain item {value!r} does not fit a 64-bit integer like the item column.")
    return number


_TABULAR = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def read_domain(spark, path: str, item_col: str, private=None) -> list:
    """The raw items of a public domain file (normalise them with :func:`normalise_domain`). A file
    that is, holds or lies inside the files of ``private`` (the release's input DataFrame) is
    refused before it is read (ParameterError,
    :func:`dp_spark.public_inputs.refuse_private_as_public`: paths only).

    ``.csv`` (with a header; no type inference: "007" stays "007", an empty cell is a null) and
    ``.parquet`` / ``.pq`` (file or directory) are read with Spark, column ``item_col`` or the only
    column; anything else is text, one item per line (whitespace and blank lines ignored).
    InputError for a missing or unreadable file, SchemaError for a missing column."""
    if private is not None:
        refuse_private_as_public(private, domain=path)
    local = not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path) or path.startswith("file:")
    local_path = path[len("file:"):] if path.startswith("file:") else path
    if local and not os.path.exists(local_path):
        raise InputError(f"domain file {path!r} does not exist.")
    ext = os.path.splitext(path.rstrip("/"))[1].lower()
    fmt = _TABULAR.get(ext)
    if fmt is None and local and os.path.isdir(local_path):
        fmt = "parquet"
    if fmt is None:
        if local:
            try:
                with open(local_path, encoding="utf-8") as fh:
                    lines = fh.read().splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"cannot read domain file {path!r}: {type(exc).__name__}") from None
        else:
            with spark_job("reading the domain file"):
                lines = [row[0] for row in spark.read.text(path).collect()]
        return [line.strip() for line in lines if line.strip()]
    table = read_input(spark, path, fmt, infer_schema=False)
    columns = list(table.columns)
    if item_col in columns:
        column = item_col
    elif len(columns) == 1:
        column = columns[0]
    else:
        raise SchemaError(
            f"domain file {path!r} has no column {item_col!r} (columns: {', '.join(columns)}); "
            "name the column like the item column, or give a file with one item per line."
        )
    with spark_job("reading the domain file"):
        pdf = table.select(column).toPandas()
    return [None if (isinstance(v, float) and math.isnan(v)) else v for v in _python_values(pdf[column])]


# ------------------------------------------------------------ per group
#
# The top-k's one pass per group, on the release template's grouped edge table (with ``group_index``,
# the group's position in the public keys), already capped to at most m groups per person
# (:func:`dp_spark.stages.groups.cap_groups`), or on an ungrouped table (``group_index=GROUP``: its
# one group; the plain per-item counts above run). Adding or removing one person y moves each
# (group, item) count by at most 1, all in the same direction, only in the <= m groups y keeps
# (tests/spark/test_grouped_top_k.py). NON-PRIVATE; at most G × (k̄ + 1) rows or G × d numbers
# reach the driver.

def grouped_item_counts(edge_df: DataFrame, group_index: str = "group_index") -> DataFrame:
    """(group_index, item, count): distinct persons per (group, item). NON-PRIVATE; never collected
    whole."""
    return (edge_df.dropDuplicates([group_index, PERSON, ITEM]).groupBy(group_index, ITEM)
            .agg(F.count(F.lit(1)).alias(COUNT)))


def grouped_top_item_counts(edge_df: DataFrame, n_groups: int, kbar: int,
                            group_index: str = "group_index") -> list[TopCounts]:
    """Per group 0..``n_groups``−1 the :class:`TopCounts` of its (group, item) counts, by a window
    per group (count descending, item ascending), so at most ``n_groups`` × (k̄ + 1) rows reach the
    driver. A group without rows gets empty counts and next count 0. NON-PRIVATE."""
    if group_index == GROUP:  # an ungrouped table: its one group's top is the table's (Spark's top-N)
        return [top_item_counts(edge_df, kbar)]
    order = Window.partitionBy(group_index).orderBy(F.col(COUNT).desc(), F.col(ITEM).asc())
    ranked = (grouped_item_counts(edge_df, group_index).withColumn(RANK, F.row_number().over(order))
              .where(F.col(RANK) <= int(kbar) + 1).select(group_index, RANK, ITEM, COUNT))
    with spark_job("collecting the largest item counts of every group"):
        rows = ranked.collect()  # at most n_groups × (kbar + 1) rows
    per: list[list] = [[] for _ in range(int(n_groups))]
    for row in rows:
        per[int(row[group_index])].append((int(row[RANK]), row[ITEM], int(row[COUNT])))
    out = []
    for group_rows in per:
        group_rows.sort()
        head = group_rows[:kbar]
        next_count = group_rows[kbar][2] if len(group_rows) > kbar else 0
        out.append(TopCounts([item for _, item, _ in head], np.array([c for _, _, c in head], dtype=np.int64),
                             next_count))
    return out


def grouped_domain_item_counts(edge_df: DataFrame, domain: Sequence, n_groups: int,
                               group_index: str = "group_index") -> np.ndarray:
    """int64 ``n_groups`` × len(``domain``) matrix of the counts of each domain item in each group
    (0 when absent; items outside the domain ignored); at most ``n_groups`` × d rows collected.
    NON-PRIVATE."""
    if group_index == GROUP:  # an ungrouped table: its one group's counts are the table's
        return domain_item_counts(edge_df, domain)[None, :]
    return counts_of_items(grouped_item_counts(edge_df, group_index), domain, group_index, n_groups)
