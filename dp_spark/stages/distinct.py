"""Spark stages of the distinct-count release (Knop & Steinke, NeurIPS 2023).

Each method reduces the (person, item) table to the vector DC(D; l), l = 1..max_bound (or a lower
bound of it with the same sensitivity), so only ``max_bound`` numbers reach the driver, never
per-person data. The exception is ``matching``: it collects the deduplicated edge list, each person
truncated to a public number of items, once the release has decided privately that it fits under
``edge_limit``.

Every function here returns NON-PRIVATE values and draws no noise. They become private only when the
mechanism layer adds noise calibrated to their sensitivity: entry l moves by at most l when one
person is added or removed."""

from __future__ import annotations

import logging
from functools import partial
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark import checks
from dp_spark.errors import LimitError
from dp_spark.settings.distinct_count import DEFAULT_EDGE_LIMIT, MAX_SHARDS, METHODS, limited
from dp_spark.sparkjobs import spark_job
from dp_spark.stages.edges import GROUP, ITEM, PERSON, edges
from dp_spark.stages.kernels import flow_bounded_counts, greedy_match_rounds, murmur3_long, xxhash64_long
from dp_spark.stages.partitioning import TASKS_PER_SLOT, cluster_parallelism, partition_labels, python_partitions
from dp_spark.stages.python_worker import worker_pass
from dp_spark.summaries.packed_arrays import binary_values

log = logging.getLogger(__name__)

ROUND = "round"
ITEM_KEY = "item_key"
_SHARD = "_shard"
_PH = "_person_key"
_IH = "_item_key"
_BUCKET = "_bucket"
_COUNT = "_count"
#: At most this many matched items per packed row (12 bytes each: 48 MiB a row).
_PACK_ITEMS = 1 << 22
_KEYS = "_keys"
_ROUNDS = "_rounds"
_PACKED_SCHEMA = T.StructType([
    T.StructField(_BUCKET, T.LongType()),
    T.StructField(_KEYS, T.BinaryType()),
    T.StructField(_ROUNDS, T.BinaryType()),
])
_HISTOGRAM_SCHEMA = T.StructType([T.StructField(ROUND, T.BinaryType()), T.StructField(_COUNT, T.BinaryType())])


def default_shards(spark) -> int:
    """Data-independent default number of greedy shards for direct callers of the stage (the release
    passes its own): the cluster's parallelism
    (:func:`~dp_spark.stages.partitioning.cluster_parallelism`), at most MAX_SHARDS. Never
    ``spark.sql.shuffle.partitions``: the shard count changes the counts, and a session setting must
    not."""
    return min(MAX_SHARDS, cluster_parallelism(spark))


def greedy_partitions(spark, shards: int) -> int:
    """Partitions of the greedy pass for ``shards`` shards, from the shard count and the cluster's
    task slots only (:mod:`dp_spark.stages.partitioning`). One per shard up to
    :func:`~dp_spark.stages.partitioning.python_partitions`; above that, among the divisors of
    ``shards`` up to that cap (and ``shards`` itself, up to 8 times the cap), the count whose
    busiest slot runs the fewest shards (ties: more partitions); failing both, the cap. Every shard
    stays one sequence in one task, so the counts are the same for any number of partitions
    (tested)."""
    shards, cap = int(shards), python_partitions(spark)
    if shards <= cap:
        return shards
    slots = max(1, cap // TASKS_PER_SLOT)
    options = [d for d in range(1, cap + 1) if shards % d == 0]
    if shards <= 8 * cap:
        options.append(shards)
    best = min(options, key=lambda t: (-(-t // slots) * (shards / t), -t))
    if shards > 8 * cap and 2 * best < cap:
        return cap
    return best


# --------------------------------------------------------------------- greedy

def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray | pa.Array]:
    """(codes, the distinct values: a numpy array for long ids, else the Arrow dictionary): a hash
    factorisation, no sort."""
    column = column.combine_chunks()
    if pa.types.is_integer(column.type):
        codes, uniques = pd.factorize(column.to_numpy(zero_copy_only=False))
        return np.asarray(codes, dtype=np.int64), uniques
    encoded = pc.dictionary_encode(column)
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64), encoded.dictionary


def _value_rank(values: np.ndarray | pa.Array) -> np.ndarray:
    """The rank of each of :func:`_codes`' distinct values as a sort would order them (longs
    numerically, strings byte-wise)."""
    if isinstance(values, np.ndarray):
        order = np.argsort(values, kind="stable")
    else:
        order = pc.sort_indices(values).to_numpy()
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


def _visiting_order(shard_of: np.ndarray, key_of: np.ndarray, rank_of) -> np.ndarray:
    """Argsort of the distinct persons by (shard, order key, value rank): a sort by the 64-bit key,
    then a stable sort by shard; only when two keys collide (probability about n²/2^65) the
    three-key sort, with ``rank_of()``. The same order either way (tested)."""
    visit = np.argsort(key_of)
    sorted_key = key_of[visit]
    if np.any(sorted_key[1:] == sorted_key[:-1]):
        return np.lexsort((rank_of(), key_of, shard_of))
    if len(visit) and shard_of.min() != shard_of.max():
        shard_sorted = shard_of[visit]
        if shard_of.min() >= 0 and shard_of.max() < 1 << 15:  # a 16-bit stable sort is a radix sort
            shard_sorted = shard_sorted.astype(np.int16)
        visit = visit[np.argsort(shard_sorted, kind="stable")]
    return visit


def _visit_order(table: pa.Table, shards: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(person code of every row, visiting position of every distinct person, shard of every
    position) for a partition of :func:`sharded_edges` rows; persons are visited by (shard,
    xxhash64(person), person). Lean rows get the shard pmod(murmur3(person), ``shards``) and the
    order key computed here (Spark's hashes bit for bit); other rows carry both, checked to be
    functions of the person."""
    person, person_values = _codes(table.column(PERSON))
    n_persons = len(person_values)
    if _SHARD not in table.column_names:  # lean rows: the shard and order key from the distinct persons
        if shards is None or not isinstance(person_values, np.ndarray):
            raise ValueError("greedy partition: lean rows need long persons and the shard count")
        shard_of = np.mod(murmur3_long(person_values).astype(np.int64), int(shards))
        key_of = xxhash64_long(person_values)
    else:
        shard = table.column(_SHARD).to_numpy()
        person_key = table.column(_PH).to_numpy()
        # Per distinct person: its shard and order key (functions of the person).
        shard_of = np.empty(n_persons, dtype=shard.dtype)
        key_of = np.empty(n_persons, dtype=np.int64)
        shard_of[person] = shard
        key_of[person] = person_key
        if not (np.array_equal(shard_of[person], shard) and np.array_equal(key_of[person], person_key)):
            raise ValueError("greedy partition: the shard and the person key must be functions of the person")
    visit = _visiting_order(shard_of, key_of, lambda: _value_rank(person_values))
    position = np.empty(n_persons, dtype=np.int64)
    position[visit] = np.arange(n_persons)
    return person, position, shard_of[visit]


def _item_order(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(each row's position among the partition's distinct item keys in increasing order, those
    keys)."""
    item_codes, items = pd.factorize(table.column(_IH).to_numpy())
    item_order = np.argsort(items, kind="stable")
    item_position = np.empty(len(items), dtype=np.int64)
    item_position[item_order] = np.arange(len(items))
    return item_position[item_codes], np.asarray(items, dtype=np.int64)[item_order]


def _firsts(values: np.ndarray) -> np.ndarray:
    """True where an entry of a sorted array differs from its predecessor
    (and at the start): the first of every run of equal values."""
    first = np.ones(len(values), dtype=bool)
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return first


def _adjacency(owner: np.ndarray, item: np.ndarray, n_owners: int, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (owner, item) edges sorted by (owner, item), ``owner`` in 0..n_owners-1 and
    ``item`` in 0..n_items-1: one sort of the key owner·n_items + item below _ONE_KEY_LIMIT, else a
    two-key sort."""
    if int(n_owners) * max(int(n_items), 1) < _ONE_KEY_LIMIT:
        keys = np.sort(owner * n_items + item)
        return np.divmod(keys[_firsts(keys)], n_items)
    order = np.lexsort((item, owner))
    owner, item = owner[order], item[order]
    keep = _firsts(owner) | _firsts(item)
    return owner[keep], item[keep]


def _matched_by_shard(batches: Iterator[pa.RecordBatch], max_bound: int,
                      shards: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Algorithm 2's greedy on each shard of a partition of :func:`sharded_edges` rows.

    Full rows are (shard, person order key, person, item key); lean rows (a long person) are
    (person, item key), and the shard and order key are computed here from the distinct persons
    (:func:`_visit_order`), so they never cross to Python. Inside a shard persons are visited by
    (xxhash64(person), person), each person's deduplicated items by key. Yields per shard (the
    matched item keys in increasing order, their rounds as int32). Only distinct values are sorted;
    the result equals that of sorting the rows."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return
    table = pa.Table.from_batches(collected)
    person, position, visit_shard = _visit_order(table, shards)
    n_persons = len(position)
    row_item, sorted_items = _item_order(table)
    n_items = len(sorted_items)
    pair_person, pair_item = _adjacency(position[person], row_item, n_persons, n_items)
    indptr = np.zeros(n_persons + 1, dtype=np.int64)
    np.cumsum(np.bincount(pair_person, minlength=n_persons), out=indptr[1:])
    cuts = np.append(np.flatnonzero(np.diff(visit_shard)) + 1, n_persons)
    lo = 0
    for hi in cuts:
        rounds = greedy_match_rounds(indptr[lo:hi + 1] - indptr[lo], pair_item[indptr[lo]:indptr[hi]],
                                     n_items, max_bound)
        hit = rounds > 0
        yield sorted_items[hit], rounds[hit].astype(np.int32, copy=False)
        lo = hi


@worker_pass
def _greedy_partition(batches: Iterator[pa.RecordBatch], max_bound: int,
                      shards: int | None = None) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of :func:`greedy_rounds`: (item key, round) of :func:`_matched_by_shard`."""
    for keys, rounds in _matched_by_shard(batches, max_bound, shards):
        yield pa.RecordBatch.from_arrays([pa.array(keys, pa.int64()), pa.array(rounds, pa.int32())],
                                         names=[ITEM_KEY, ROUND])


def greedy_rounds(edge_df: DataFrame, max_bound: int, shards: int, partitions: int | None = None) -> DataFrame:
    """(item key, round) for every item some shard's greedy matched: sharded Algorithm 2
    (ALGORITHMS.md 1.4a).

    Person p goes to shard pmod(murmur3(p), shards), Spark's hash partitioning. Inside a shard
    persons are visited by (xxhash64(person), person) and each person's items by xxhash64(item):
    orders fixed by the ids alone, so the same in neighbouring data sets. ``shards=1`` is the
    paper's single-sequence Algorithm 2. ``partitions`` (default :func:`greedy_partitions`) only
    lays the shards out over tasks; each shard lies whole in one partition, so the rows do not
    depend on it.

    Items are identified by their 64-bit key. A collision (probability about n²/2^65 for n items)
    counts two items once: that only lowers the count (the lower bound stays valid) and leaves
    privacy intact, since the key is a function of each row alone.

    Sensitivity l: adding a person changes only its own shard, where the set matched by round l
    grows by at most l items and never shrinks
    (:func:`~dp_spark.stages.kernels.greedy_match_rounds_reference`); the union over shards is
    monotone in each, so it too grows by at most l. And g_l <= DC(D; l): give each matched item to
    one person that matched it by round l; nobody receives more than l of its own items."""
    if partitions is None:
        partitions = greedy_partitions(edge_df.sparkSession, shards)
    return sharded_edges(edge_df, shards, partitions).mapInArrow(
        partial(_greedy_partition, max_bound=max_bound, shards=int(shards)), ROUND_SCHEMA)


ROUND_SCHEMA = T.StructType([
    T.StructField(ITEM_KEY, T.LongType()),
    T.StructField(ROUND, T.IntegerType()),
])


def sharded_edges(edge_df: DataFrame, shards: int, partitions: int | None = None, *,
                  extra: tuple = (), split_by: str | None = None) -> DataFrame:
    """The rows the greedy kernels read, every shard (persons with equal pmod(murmur3(person),
    shards)) whole in one of ``partitions`` partitions (default: one per shard): hash-partitioned by
    person when ``partitions`` divides ``shards``, else by the shard number; explicit counts, which
    adaptive execution keeps (if Spark merges the exchange with an earlier one, a partition holds
    several whole shards: :mod:`dp_spark.stages.partitioning`; the kernels separate them). A long
    person column gives lean rows (person, item key); other types give (shard, person order key,
    person, item key). ``extra``: further columns after the item key. ``split_by`` (a column among
    ``extra``): partition by (shard, that column) instead, so every (shard, value) is whole in one
    partition, for any ``partitions`` >= 1. NON-PRIVATE intermediate data."""
    shards = int(shards)
    partitions = shards if partitions is None else int(partitions)
    if partitions < 1 or (split_by is None and partitions > shards):
        raise ValueError("sharded_edges: partitions must be between 1 and the number of shards")
    # hashed before the shuffle: the shuffle moves a long, not the item
    keyed = edge_df.select(PERSON, F.xxhash64(ITEM).alias(_IH), *extra)
    shard = F.pmod(F.hash(PERSON), F.lit(shards)).cast("int")
    lean = isinstance(edge_df.schema[PERSON].dataType, T.LongType)
    if split_by is not None:
        laid_out = keyed.repartition(partitions, shard, F.col(split_by))
    else:
        laid_out = (keyed.repartition(partitions, PERSON) if shards % partitions == 0
                    else keyed.repartition(partitions, shard))  # the same partition as by a shard column
    if lean:
        return laid_out
    return laid_out.select(shard.alias(_SHARD), F.xxhash64(PERSON).alias(_PH), PERSON, _IH,
                           *[c for c in keyed.columns if c not in (PERSON, _IH)])


def greedy_counts(edge_df: DataFrame, max_bound: int, shards: int, partitions: int | None = None, *,
                  buckets: int | None = None, _pack_items: int = _PACK_ITEMS) -> np.ndarray:
    """NON-PRIVATE: sharded greedy counts g_1..g_L of an edge table (sensitivity l each:
    :func:`greedy_rounds`), the same as :func:`counts_from_round_table` of :func:`greedy_rounds`
    (tested) for any ``partitions`` and ``buckets``.

    Each shard's matched items are cut into ``buckets`` ranges of the 64-bit key space and shipped
    packed (:func:`_packed_rounds`); a pass per range (:func:`_combined_rounds`) takes every item's
    smallest round over the shards and counts items by it, and the driver sums at most ``buckets``
    sparse histograms. ``buckets`` only splits the work; default two per task slot, at least one per
    8 shards. Chosen by measurement: benchmarks/results/2026-11-26-distinct-count-20m-evening.md."""
    spark = edge_df.sparkSession
    if partitions is None:
        partitions = greedy_partitions(spark, shards)
    if buckets is None:
        buckets = max(python_partitions(spark), -(-int(shards) // 8))
    buckets = int(buckets)
    labels = partition_labels(buckets)
    packed = sharded_edges(edge_df, shards, partitions).mapInArrow(
        partial(_packed_rounds, max_bound=max_bound, shards=int(shards), labels=tuple(labels),
                pack_items=int(_pack_items)), _PACKED_SCHEMA)
    combined = packed.repartition(buckets, _BUCKET).mapInArrow(
        partial(_combined_rounds, max_bound=max_bound), _HISTOGRAM_SCHEMA)
    # the same words as matching_counts': the distinct-count release picks one of the two by a noisy count
    with spark_job("computing the bounded counts"):
        rows = combined.collect()  # at most one row per bucket: (rounds reached, items per round)
    hist = np.zeros(max_bound + 1, dtype=np.int64)
    for row in rows:
        np.add.at(hist, np.frombuffer(row[ROUND], dtype=np.int32), np.frombuffer(row[_COUNT], dtype=np.int64))
    return np.cumsum(hist[1:])


def _key_cuts(keys: np.ndarray, buckets: int) -> np.ndarray:
    """Offsets (``buckets`` + 1) where sorted int64 ``keys`` cross the boundaries of ``buckets``
    equal ranges of the 64-bit key space; xxhash64 keys fill the ranges evenly."""
    width = -(-(1 << 64) // int(buckets))
    bounds = np.array([min(-(1 << 63) + j * width, (1 << 63) - 1) for j in range(1, int(buckets))], dtype=np.int64)
    return np.concatenate([[0], np.searchsorted(keys, bounds), [len(keys)]])


@worker_pass
def _packed_rounds(batches: Iterator[pa.RecordBatch], max_bound: int, shards: int | None, labels: tuple,
                   pack_items: int = _PACK_ITEMS) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of :func:`greedy_counts`: each shard's matched items cut into ``len(labels)``
    key ranges; per range, rows (labels[j], the keys' int64 bytes, the rounds' int32 bytes) of at
    most ``pack_items`` items. Label j sends a row to partition j under ``repartition(len(labels),
    _bucket)`` (:func:`~dp_spark.stages.partitioning.partition_labels`)."""
    for keys, rounds in _matched_by_shard(batches, max_bound, shards):
        cuts = _key_cuts(keys, len(labels))
        out_label, out_keys, out_rounds, items = [], [], [], 0
        for j, label in enumerate(labels):
            for lo in range(int(cuts[j]), int(cuts[j + 1]), pack_items):
                hi = min(lo + pack_items, int(cuts[j + 1]))
                out_label.append(label)
                out_keys.append(keys[lo:hi].tobytes())
                out_rounds.append(rounds[lo:hi].tobytes())
                items += hi - lo
                if items >= pack_items:  # a batch holds fewer than 2 * pack_items items
                    yield _packed_batch(out_label, out_keys, out_rounds)
                    out_label, out_keys, out_rounds, items = [], [], [], 0
        if out_label:
            yield _packed_batch(out_label, out_keys, out_rounds)


def _packed_batch(labels: list, keys: list, rounds: list) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(labels, pa.int64()), pa.array(keys, pa.binary()),
                                       pa.array(rounds, pa.binary())], schema=pa.schema(
        [(_BUCKET, pa.int64()), (_KEYS, pa.binary()), (_ROUNDS, pa.binary())]))


@worker_pass
def _combined_rounds(batches: Iterator[pa.RecordBatch], max_bound: int) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of :func:`greedy_counts`' combine: every item's smallest round over the
    shards (all its rows are in this partition, as its key range is), counted by that round. One
    sparse row: (the rounds reached as int32 bytes, the item count of each as int64 bytes)."""
    keys, rounds = [], []
    for batch in batches:
        keys.append(binary_values(batch.column(_KEYS), np.int64)[0])
        rounds.append(binary_values(batch.column(_ROUNDS), np.int32)[0])
    key = np.concatenate(keys) if keys else np.empty(0, dtype=np.int64)
    if not len(key):
        return
    rnd = np.concatenate(rounds)
    order = np.argsort(key)
    key, rnd = key[order], rnd[order]
    smallest = np.minimum.reduceat(rnd, np.flatnonzero(_firsts(key)))
    reached, count = np.unique(smallest, return_counts=True)
    yield pa.RecordBatch.from_arrays(
        [pa.array([reached.astype(np.int32).tobytes()], pa.binary()),
         pa.array([count.astype(np.int64).tobytes()], pa.binary())], names=[ROUND, _COUNT])


# ------------------------------------------------------------------- sampling

def sampling_rounds(edge_df: DataFrame, max_bound: int, salt: int) -> DataFrame:
    """(item, rank) for the sampling baseline: each person ranks its distinct items by a salted
    hash; keeping ranks <= l is a random-looking choice of min(l, |u_i|) items, nested across l.

    A person's choice depends only on its own (person, item) ids and the salt, so adding a person
    adds at most l items to the kept union for bound l and changes nothing else: sensitivity l. The
    salt is not privacy noise: the argument holds for any fixed salt."""
    order = Window.partitionBy(PERSON).orderBy(
        F.xxhash64(F.lit(int(salt)), PERSON, ITEM), ITEM
    )
    return (
        edge_df.dropDuplicates([PERSON, ITEM])
        .withColumn(ROUND, F.row_number().over(order))
        .where(F.col(ROUND) <= max_bound)
        .select(ITEM, ROUND)
    )


def counts_from_round_table(round_df: DataFrame, max_bound: int, key: str = ITEM) -> np.ndarray:
    """Combine (item, round) rows: round(x) = min over rows; g_l = #{x : round(x) <= l}. Collects at
    most ``max_bound`` rows."""
    per_item = round_df.groupBy(key).agg(F.min(ROUND).alias(ROUND))
    hist_df = per_item.where(F.col(ROUND) <= max_bound).groupBy(ROUND).count()
    with spark_job("counting matched items per round"):
        rows = hist_df.collect()
    hist = np.zeros(max_bound + 1, dtype=np.int64)
    for row in rows:
        hist[int(row[ROUND])] = int(row["count"])
    return np.cumsum(hist[1:])


# ------------------------------------------------------------------- matching

def matching_pairs(edge_df: DataFrame, item_cap: int | None = None) -> DataFrame:
    """The distinct (person, item) pairs exact matching runs on.

    With ``item_cap`` = P each person keeps its first P distinct items in the public order
    (xxhash64(item), item): a per-person transformation, so neighbouring tables stay neighbours;
    DC(truncated D; l) still has sensitivity l and never exceeds DC(D; l), and the number of pairs
    has sensitivity P. NON-PRIVATE intermediate data."""
    dedup = edge_df.dropDuplicates([PERSON, ITEM])
    if item_cap is None:
        return dedup.select(PERSON, ITEM)  # not the edge table's group column: the pairs are collected
    order = Window.partitionBy(PERSON).orderBy(F.xxhash64(ITEM), ITEM)
    return (
        dedup.withColumn("_rank", F.row_number().over(order))
        .where(F.col("_rank") <= int(item_cap))
        .select(PERSON, ITEM)
    )


def count_pairs(pairs_df: DataFrame) -> int:
    """NON-PRIVATE: the number of rows of :func:`matching_pairs` (sensitivity P when each person is
    truncated to P items; only used through noise)."""
    with spark_job("counting (person, item) pairs for the matching size check"):
        return int(pairs_df.count())


def matching_counts(
    edge_df: DataFrame, max_bound: int, edge_limit: int | None, *, item_cap: int | None = None,
    pairs: DataFrame | None = None, bounds=None,
) -> np.ndarray:
    """Exact DC(D; l) (Algorithm 1) by maximum flow on the driver, on :func:`matching_pairs` (or
    ``pairs``); with ``bounds`` at those l only
    (:func:`~dp_spark.stages.kernels.flow_bounded_counts`).

    With an ``edge_limit``, collects at most ``edge_limit + 1`` rows and raises LimitError when more
    exist: a NON-PRIVATE decision, for direct callers only. The distinct-count release passes
    ``edge_limit=None`` after deciding privately that the pairs fit."""
    if pairs is None:
        pairs = matching_pairs(edge_df, item_cap)
    with spark_job("computing the bounded counts"):  # greedy_counts' words (a noisy choice between them)
        pdf = (pairs if edge_limit is None else pairs.limit(edge_limit + 1)).toPandas()
    if edge_limit is not None and len(pdf) > edge_limit:
        raise LimitError(
            f"method 'matching' needs the whole deduplicated edge list on the driver "
            f"and this input has more than edge_limit={edge_limit:,} distinct "
            "(person, item) pairs. Use method='greedy' (scales with Spark), or "
            "raise edge_limit if the driver has the memory."
        )
    person_codes, persons = pd.factorize(pdf[PERSON])
    item_codes, items = pd.factorize(pdf[ITEM])
    del pdf
    return flow_bounded_counts(person_codes, item_codes, len(persons), len(items), max_bound, bounds)


# ----------------------------------------------------------------- entry point

def bounded_distinct_counts(
    df: DataFrame,
    person_col: str,
    item_col: str,
    max_bound: int,
    method: str = "greedy",
    *,
    shards: int | None = None,
    edge_limit: int | None = DEFAULT_EDGE_LIMIT,
    salt: int = 0,
    item_cap: int | None = None,
) -> np.ndarray:
    """NON-PRIVATE: the vector (DC(D; l))_{l=1..max_bound} or its greedy / sampling lower bound,
    int64 (entry l-1 is bound l). Each entry has sensitivity l under adding or removing one person
    and never exceeds DC(D; l).

    Methods: ``greedy`` (sharded Algorithm 2), ``matching`` (exact, Algorithm 1; collects the edge
    list up to ``edge_limit``, None: no non-private size refusal), ``sampling`` (the paper's
    baseline). ``item_cap`` (matching only): truncate each person first (:func:`matching_pairs`)."""
    validate_stage_parameters(max_bound, method, shards, edge_limit if edge_limit is not None else 1)
    return bounded_counts_of_edges(edges(df, person_col, item_col), max_bound, method, shards=shards,
                                   edge_limit=edge_limit, salt=salt, item_cap=item_cap)


def bounded_counts_of_edges(
    edge_df: DataFrame,
    max_bound: int,
    method: str = "greedy",
    *,
    shards: int | None = None,
    edge_limit: int | None = DEFAULT_EDGE_LIMIT,
    salt: int = 0,
    item_cap: int | None = None,
) -> np.ndarray:
    """NON-PRIVATE: :func:`bounded_distinct_counts` of an edge table built by
    :func:`dp_spark.stages.edges.edges`, with parameters already checked."""
    if method == "greedy":
        shards = shards or default_shards(edge_df.sparkSession)
        # not the shard count: it may be a noisy choice, and nothing drawn may leave the process
        # before the release is recorded (a keyed retry would draw it again)
        log.info("distinct-count: greedy matching, bounds 1..%d", max_bound)
        return greedy_counts(edge_df, max_bound, shards)
    if method == "sampling":
        log.info("distinct-count: sampling baseline, bounds 1..%d", max_bound)
        return counts_from_round_table(sampling_rounds(edge_df, max_bound, salt), max_bound)
    log.info("distinct-count: exact matching on the driver, bounds 1..%d", max_bound)
    return matching_counts(edge_df, max_bound, edge_limit, item_cap=item_cap)


def validate_stage_parameters(max_bound, method, shards, edge_limit) -> None:
    """The stage's parameters, by the release plan's checks (method; the public limits of max_bound,
    shards and edge_limit)."""
    checks.choice(method, "method", METHODS)
    limited(max_bound, "max_bound")
    if shards is not None:
        limited(shards, "shards")
    limited(edge_limit, "edge_limit")


# ---------------------------------------------------------------- per group

#: The grouped kernel's input column: each row's group index (0..groups-1,
#: the key's position among the public keys; dp_spark.releases.groups).
GROUP_INDEX = "group_index"
#: The grouped kernel holds at most 2^GROUP_INDEX_BITS groups (above every release's key limit,
#: ``dp_spark.keys.MAX_GROUP_KEYS``). Nothing packs the index into fewer bits: a virtual person is
#: person position × groups + group index and a histogram cell group × candidates + bucket, in int64.
GROUP_INDEX_BITS = 20
#: Above this many (virtual person, item) keys a partition sorts its edges by two keys instead of one 64-bit key.
_ONE_KEY_LIMIT = 1 << 62
_CAND = "_cap"
_GO = "_group_order"

#: One shard: the kernel emits its histogram itself (tests switch it off to compare with the per-item path).
_KERNEL_HISTOGRAM = True
GROUPED_HISTOGRAM_SCHEMA = T.StructType([
    T.StructField(_CAND, T.IntegerType()),
    T.StructField(GROUP_INDEX, T.IntegerType()),
    T.StructField(_BUCKET, T.IntegerType()),
    T.StructField(_COUNT, T.LongType()),
])
GROUPED_ROUND_SCHEMA = T.StructType([
    T.StructField(_CAND, T.IntegerType()),
    T.StructField(GROUP_INDEX, T.IntegerType()),
    T.StructField(ITEM_KEY, T.LongType()),
    T.StructField(ROUND, T.IntegerType()),
])


def _group_ranks(pair: np.ndarray, order_key: np.ndarray, groups: int) -> np.ndarray:
    """The rank (1 = first) of every distinct sorted pair ``pair`` = person position·G + group among
    its person's pairs in the public order (``order_key`` = xxhash64(person, group), then group
    index): the order of :func:`dp_spark.stages.groups.cap_groups` (ties, probability 2^-64 per
    pair, fall there to the group value, here to the index). One sort of a 64-bit key (person
    position, top bits of the order key) when it has no ties, else a two-key sort; the same ranks
    either way (tested)."""
    person = pair // groups
    bits = int(person[-1]).bit_length() if len(person) else 0  # pair is sorted: the last person is the largest
    shift = 63 - bits
    order = None
    if shift >= 16:
        top = ((order_key.view(np.uint64) ^ np.uint64(1 << 63)) >> np.uint64(64 - shift)).view(np.int64)
        one_key = (person << shift) | top
        order = np.argsort(one_key)
        if not _firsts(one_key[order]).all():
            order = None
    if order is None:
        order = np.lexsort((order_key, person))  # stable: ties of the key stay in group order (pair is sorted)
    starts = _firsts(person[order])
    first = np.flatnonzero(starts)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - first[np.cumsum(starts) - 1] + 1
    return rank


#: Virtual items are numbered (group, key rank) directly while that range, times the partition's greedy
#: calls (each allocates and scans arrays over it), is at most this many times the partition's edges.
_SPARSE_FACTOR = 4


def _virtual_items(group: np.ndarray, key: np.ndarray, sorted_keys: np.ndarray, groups: int, calls: int):
    """Numbers for the virtual items (group index, item key) of the deduplicated edges (``key``:
    position in ``sorted_keys``): (each edge's number, how many numbers, a map from numbers to
    (group index, item key) arrays). The greedy needs only equal numbers for equal items. Direct
    numbers (group position × keys + key rank) while that range times ``calls`` stays within
    _SPARSE_FACTOR × the edges, else a factorisation."""
    n_keys = len(sorted_keys)
    present = np.flatnonzero(np.bincount(group, minlength=groups))
    local = np.zeros(groups, dtype=np.int64)
    local[present] = np.arange(len(present))
    number = local[group] * n_keys + key
    if len(present) * n_keys * int(calls) <= _SPARSE_FACTOR * len(number):
        return number, len(present) * n_keys, lambda hit: (present[hit // n_keys], sorted_keys[hit % n_keys])
    codes, uniques = pd.factorize(number)
    uniques = np.asarray(uniques, dtype=np.int64)

    def item_of(hit):
        g, k = np.divmod(uniques[hit], n_keys)
        return present[g], sorted_keys[k]
    return np.asarray(codes, dtype=np.int64), len(uniques), item_of


@worker_pass
def _grouped_greedy_partition(batches: Iterator[pa.RecordBatch], max_bound: int, shards: int | None, groups: int,
                              caps: tuple | None, buckets: tuple | None = None) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of the grouped greedy: Algorithm 2's greedy run independently for every (cap
    candidate k, group g) on each shard. NON-PRIVATE.

    Rows are :func:`sharded_edges`' plus ``group_index``: without ``caps`` every (shard, group)
    whole in the partition; with ``caps`` every shard whole, plus the group order key
    xxhash64(person, group). A virtual person (person, g), with ``caps`` (person, g, k) for every k
    whose cap keeps g (rank of g <= caps[k], :func:`_group_ranks`), holds the person's items of g as
    virtual items, in the ungrouped order. Virtual groups never share an item, so each (k, g) is
    exactly the sharded greedy of g's rows capped at caps[k] (tested), and the ungrouped argument
    holds per virtual group. Emits (k, group index, item key, round) per matched virtual item (k = 0
    without ``caps``); with ``buckets`` (only when one greedy call matches an item: one shard) their
    histogram instead: (k, group index, j, items whose round is in (buckets[j-1], buckets[j]])."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return
    table = pa.Table.from_batches(collected)
    person, position, visit_shard = _visit_order(table, shards)
    row_key, sorted_keys = _item_order(table)
    row_group = table.column(GROUP_INDEX).to_numpy().astype(np.int64)
    if row_group.min() < 0 or row_group.max() >= groups:  # the caller's contract (the release's indices are 0..G-1)
        raise ValueError(f"grouped greedy: group_index must be in 0..{groups - 1} (the number of groups given)")
    pair = position[person] * groups + row_group  # the virtual person (person, group), in visiting order
    # every virtual person's deduplicated adjacency list, by item key (the ungrouped kernel's order)
    edge_pair, edge_key = _adjacency(pair, row_key, len(position) * groups, len(sorted_keys))
    calls = (1 if caps is None else len(caps)) * (1 + np.count_nonzero(np.diff(visit_shard)))  # upper bound
    edge_item, n_items, item_of = _virtual_items(edge_pair % groups, edge_key, sorted_keys, groups, calls)
    heads = np.flatnonzero(_firsts(edge_pair))  # each virtual person's first edge
    head_pair = edge_pair[heads]
    degree = np.diff(np.append(heads, len(edge_pair)))
    head_shard = visit_shard[head_pair // groups]
    if caps is None:
        kept_by_cap = [None]
    else:  # each (person, group)'s rank among the person's groups; cap k keeps ranks <= caps[k]
        # each pair's order key in head order (the distinct pairs, sorted, are the heads)
        codes, row_pairs = pd.factorize(pair)
        key_of_code = np.empty(len(row_pairs), dtype=np.int64)
        key_of_code[codes] = table.column(_GO).to_numpy()
        order_key = key_of_code[np.argsort(row_pairs)]
        rank = _group_ranks(head_pair, order_key, groups)
        kept_by_cap = [rank <= c for c in caps]
    # every (candidate, shard) is its own greedy: virtual groups never share an item
    for k, kept in enumerate(kept_by_cap):
        sel_shard, sel_degree = (head_shard, degree) if kept is None else (head_shard[kept], degree[kept])
        sel_items = edge_item if kept is None else edge_item[np.repeat(kept, degree)]
        indptr = np.zeros(len(sel_degree) + 1, dtype=np.int64)
        np.cumsum(sel_degree, out=indptr[1:])
        cuts = np.append(np.flatnonzero(np.diff(sel_shard)) + 1, len(sel_degree))
        lo = 0
        for hi in cuts:
            rounds = greedy_match_rounds(indptr[lo:hi + 1] - indptr[lo], sel_items[indptr[lo]:indptr[hi]],
                                         n_items, max_bound)
            hit = np.flatnonzero(rounds)
            if buckets is not None:  # (group, smallest candidate >= the round) counts
                cell = item_of(hit)[0] * len(buckets) + np.searchsorted(np.asarray(buckets), rounds[hit])
                counts = np.bincount(cell, minlength=groups * len(buckets))
                cell = np.flatnonzero(counts)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(np.full(len(cell), k, dtype=np.int32)), pa.array(cell // len(buckets), pa.int32()),
                     pa.array(cell % len(buckets), pa.int32()), pa.array(counts[cell], pa.int64())],
                    names=[_CAND, GROUP_INDEX, _BUCKET, _COUNT])
            else:
                item_group, item_key = item_of(hit)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(np.full(len(hit), k, dtype=np.int32)), pa.array(item_group, pa.int32()),
                     pa.array(item_key, pa.int64()), pa.array(rounds[hit], pa.int32())],
                    names=[_CAND, GROUP_INDEX, ITEM_KEY, ROUND])
            lo = hi


def grouped_greedy_counts(edge_df: DataFrame, max_bound: int, shards: int, groups: int, candidates,
                          caps=None, partitions: int | None = None) -> np.ndarray:
    """NON-PRIVATE: ``out[g, j]`` = the greedy count of group index g at bound ``candidates[j]``, in
    one pass; with ``caps`` (increasing m_1 < … < m_K) ``out[k, g, j]`` on the rows of every
    person's first ``caps[k]`` groups in the public order
    (:func:`dp_spark.stages.groups.cap_groups`, applied inside the kernel).

    The edge table needs ``group_index`` (0..``groups``-1, at most 2^GROUP_INDEX_BITS) and, with
    ``caps``, ``group``. Shards are the ungrouped release's; each (cap, group) is the sharded greedy
    (:func:`greedy_rounds`) of that group's rows alone, so groups never interact. Adding one person
    y changes the counts of (k, g) only if y keeps g under caps[k], each by 0..l, never down (the
    ungrouped argument per virtual group; the cap is computed from y's own rows): at most m_k groups
    move at cap k. Without ``caps`` nothing is capped (y's groups move; at most m only when the
    caller's m >= the number of keys, as the release ensures). Items are keyed by xxhash64(item)
    within a group, as in :func:`greedy_rounds`. The driver receives at most (tasks ×) K × groups ×
    len(candidates) rows, as Arrow (never Rows), summed into one int64 array. An ungrouped
    release's edge table (one group, no cap, no ``group_index``;
    never a grouped run's, whose Spark jobs must not depend on how many keys a private key step
    released) runs :func:`greedy_counts`, with the same counts
    (tests/spark/test_grouped_cap_bound.py)."""
    if not 1 <= groups <= 1 << GROUP_INDEX_BITS:
        raise ValueError(f"groups must be 1..{1 << GROUP_INDEX_BITS}")
    cands = [int(c) for c in candidates]
    if cands != sorted(set(cands)) or cands[0] < 1 or cands[-1] > max_bound:
        raise ValueError("candidates must increase within 1..max_bound")
    if caps is not None:
        caps = tuple(int(c) for c in caps)
        if not caps or list(caps) != sorted(set(caps)) or caps[0] < 1:
            raise ValueError("caps must be increasing whole numbers >= 1")
    elif groups == 1 and GROUP_INDEX not in edge_df.columns:  # an ungrouped release: the ungrouped kernel
        return greedy_counts(edge_df, cands[-1], shards, partitions)[np.asarray(cands) - 1][None, :]
    if caps is None:  # groups are independent: every (shard, group) whole in a task, shards split over tasks
        if partitions is None:  # the cluster's, never the number of groups (a private key step may draw it)
            partitions = python_partitions(edge_df.sparkSession)
        rows = sharded_edges(edge_df, shards, partitions, extra=(F.col(GROUP_INDEX),), split_by=GROUP_INDEX)
    else:  # the cap ranks a person's groups: every person whole in a task (one task per shard)
        if partitions is None:
            partitions = greedy_partitions(edge_df.sparkSession, shards)
        rows = sharded_edges(edge_df, shards, partitions,
                             extra=(F.col(GROUP_INDEX), F.xxhash64(PERSON, GROUP).alias(_GO)))
    kernel = partial(_grouped_greedy_partition, max_bound=cands[-1], shards=int(shards), groups=int(groups),
                     caps=caps)
    n_caps = 1 if caps is None else len(caps)
    if int(shards) == 1 and _KERNEL_HISTOGRAM:  # one shard: a virtual item is matched by one greedy call at most
        # the tasks' histograms (at most partitions × caps × groups × candidates rows), summed here
        hist_df = rows.mapInArrow(partial(kernel, buckets=tuple(cands)), GROUPED_HISTOGRAM_SCHEMA)
        count = _COUNT
    else:  # several shards: an item may be matched in several, its round is the smallest
        per_item = (rows.mapInArrow(kernel, GROUPED_ROUND_SCHEMA)
                    .groupBy(_CAND, GROUP_INDEX, ITEM_KEY).agg(F.min(ROUND).alias(ROUND)))
        bucket = F.lit(len(cands) - 1)
        for j in range(len(cands) - 2, -1, -1):
            bucket = F.when(F.col(ROUND) <= cands[j], F.lit(j)).otherwise(bucket)
        hist_df = (per_item.select(_CAND, GROUP_INDEX, bucket.alias(_BUCKET))
                   .groupBy(_CAND, GROUP_INDEX, _BUCKET).count())
        count = "count"
    with spark_job("counting matched items per group and bound"):
        parts = hist_df.toArrow()  # as Arrow, never Rows: at most partitions × caps × groups × candidates rows
    cell = ((parts.column(_CAND).to_numpy().astype(np.int64) * groups
             + parts.column(GROUP_INDEX).to_numpy()) * len(cands) + parts.column(_BUCKET).to_numpy())
    hist = np.zeros(n_caps * groups * len(cands), dtype=np.int64)
    np.add.at(hist, cell, parts.column(count).to_numpy().astype(np.int64))  # exact int64 sums
    del parts, cell
    hist = hist.reshape(n_caps, groups, len(cands))
    out = np.cumsum(hist, axis=2, out=hist)  # in place: no second caps × groups × candidates array
    return out[0] if caps is None else out


def joint_counts(edge_df: DataFrame, caps, n_keys: int, max_bound: int, shards: int, cands) -> np.ndarray:
    """NON-PRIVATE: ``at[k, g, j]``, :func:`grouped_greedy_counts` at every cap candidate
    ``caps[k]`` in one pass. Logs nothing. With privately chosen keys the caller passes the cap
    candidates of the release's public key limit, never of the number of keys the step released."""
    return grouped_greedy_counts(edge_df, max_bound, shards, n_keys, cands, caps=caps)
