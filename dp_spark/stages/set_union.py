"""Spark stages of DP Set Union (Gopi et al., ICML 2020).

Pipeline (every intermediate DataFrame is NON-PRIVATE and never collected):

1. :func:`restricted_sets`: per-person dedup and restriction to at most Δ0 items, ranked by a salted
   hash before anything is aggregated (no row ever holds more than Δ0 items).
2. :func:`weight_histogram`: the weighted histogram (item, weight): exact sums of fixed-point
   integers for ``count`` / ``weighted-*``; sequential shards for ``policy-*``, whose shard
   histograms are added in shard order. The release runs steps 1–2 fused (:func:`sequential_histogram`
   for the sequential policies, :func:`additive_histogram` for the additive ones: one shuffle and one
   Python pass over whole persons, no window, the same histogram bit for bit).
3. :func:`released_items`: noise and threshold inside Spark, by the function the release passes in
   (:class:`dp_spark.mechanisms.set_union.ThresholdStep`, one generator per noise bucket: an item's
   bucket is pmod(xxhash64(item), :data:`NOISE_BUCKETS`), public and fixed by the item alone, so a
   seeded release is the same whatever the partitioning); only the column ``item`` of the released
   items remains. For the sequential policies the release fuses the
   shard sum with this step (:func:`released_shard_items`).

No privacy noise is drawn in this module, and it imports nothing from the mechanism layer. The
privacy argument (facts (S) and (T)) is in :mod:`dp_spark.summaries.set_union`; this module
guarantees what it needs: a person's restricted set and shard depend only on that person's own rows,
and a shard's persons are visited in an order that depends only on their ids.

Determinism and the trust boundary: the weights entering step 3 are bit-identical on every
evaluation, whatever order Spark's shuffles deliver rows in (sums of longs; shard histograms
computed in a fixed order and added in shard order, never a floating-point sum over a shuffle). The
noise of bucket b is the release's :class:`~dp_spark.noise.rng.StreamRoot` stream b (unseeded:
ChaCha20 under the release's key), the same on every evaluation; the thresholded DataFrame is still
evaluated once: :func:`materialize` stores its partitions and returns a DataFrame whose plan only
reads them (no salt, no key, no pickled function, no lineage to the data). A lost stored block
fails the next action instead of running the noise step again."""

from __future__ import annotations

import logging
from functools import partial
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.errors import ParameterError
from dp_spark.stages.partitioning import partition_labels, python_partitions
from dp_spark.stages.python_worker import worker_pass
from dp_spark.stages.edges import ITEM, PERSON, edges
from dp_spark.summaries.set_union import (
    BY_FREQUENCY,
    DEFAULT_SHARDS,
    SEQUENTIAL,
    UNIT,
    UNIT_BITS,
    check_policy,
    person_units,
    sequential_update,
    update_histogram,
)

log = logging.getLogger(__name__)

ITEMS = "items"
WEIGHT = "weight"
_SHARD = "_shard"
_ORDER = "_order"
_KEY = "_key"
_RANK = "_rank"
_UNITS = "_units"
_PARTS = "_parts"
_FREQ = "_freq"
_BUCKET = "_bucket"

#: Noise buckets of the threshold step: item u draws from the generator of bucket
#: pmod(xxhash64(u), NOISE_BUCKETS), in item order within its bucket. A fixed public number, so
#: which draw an item gets never depends on the cluster. It bounds the step's parallelism (256
#: tasks) and sets its fixed cost (a generator and one exact-sampler call per bucket: about 3 ms
#: each for the discrete Gaussian, so 4,096 buckets cost ~7 s of CPU per release, 256 under 1 s);
#: a bucket's rows are held at once (about 1/256 of the distinct items).
NOISE_BUCKETS = 256

#: What the release hands :func:`released_items`: (bucket, number of its items) -> that bucket's
#: mask function (weights -> released), called once with all the bucket's weights, e.g.
#: :class:`dp_spark.mechanisms.set_union.ThresholdStep`.
Threshold = Callable[[int, int], Callable[[np.ndarray], np.ndarray]]

__all__ = [
    "ITEMS",
    "WEIGHT",
    "DEFAULT_SHARDS",
    "NOISE_BUCKETS",
    "default_partitions",
    "person_units_column",
    "restricted_sets",
    "weight_histogram",
    "released_items",
    "set_union_histogram",
    "sequential_histogram",
    "additive_histogram",
    "set_union_items",
    "materialize",
]


def default_partitions(spark) -> int:
    """Partitions of the noise + threshold step when not given: two per task slot
    (:func:`dp_spark.stages.partitioning.python_partitions`), never
    ``spark.sql.shuffle.partitions``. Every item gets its own independent draw from its noise
    bucket's generator, so the released set, also a seeded one, does not depend on it."""
    return python_partitions(spark)


# ------------------------------------------------------------ restriction

def restricted_sets(edge_df: DataFrame, max_items: int, salt: int, by_frequency: bool = False) -> DataFrame:
    """(person, items): each person's distinct items, at most ``max_items`` = Δ0.

    The paper's rule (Algorithm 1, step 2a) keeps Δ0 items chosen uniformly at random. Here they are
    the Δ0 smallest xxhash64(salt, person, item) (ties by item): for a fresh random ``salt`` a
    uniform-looking subset, independent across persons, and a deterministic function of the person's
    own rows and the salt, so neighbouring tables give every other person the same set. ``items``
    lists the kept items in (hash, item) order, so the sequential kernels see the same sequence on
    every evaluation. The rank filter runs before the per-person aggregation, so no row holds more
    than Δ0 items.

    ``by_frequency`` (Policy Greedy, Carvalho et al., AAAI 2022: the person's local item frequency):
    items ranked by the number of the person's rows holding them, most first, then by the same
    (hash, item); the Δ0 first are kept and listed in that order. Still a function of the person's
    own rows and the salt."""
    salt_col = F.lit(int(salt)).cast("long")
    keys = [F.col(_KEY), F.col(ITEM)]
    if by_frequency:
        pairs = edge_df.repartition(PERSON).groupBy(PERSON, ITEM).agg(F.count(F.lit(1)).alias(_FREQ))
        keys = [F.col(_FREQ).desc()] + keys
    else:
        pairs = edge_df.repartition(PERSON).dropDuplicates([PERSON, ITEM])  # one shuffle: all need person
    kept = (
        pairs.withColumn(_KEY, F.xxhash64(salt_col, F.col(PERSON), F.col(ITEM)))
        .withColumn(_RANK, F.row_number().over(Window.partitionBy(PERSON).orderBy(*keys)))
        .where(F.col(_RANK) <= int(max_items))
    )
    grouped = kept.groupBy(PERSON).agg(
        F.array_sort(F.collect_list(F.struct(F.col(_RANK).alias("r"), F.col(ITEM).alias("i")))).alias(_KEY)
    )
    return grouped.select(PERSON, F.transform(F.col(_KEY), lambda x: x["i"]).alias(ITEMS))


# --------------------------------------------------------------- histograms

def _largest_integer(guess: Column, fits) -> Column:
    """The largest whole u with ``fits(u)`` (monotone, exact long arithmetic), given a
    floating-point ``guess`` within one of it."""
    down = F.when(fits(guess), guess).otherwise(guess - F.lit(1))
    return F.when(fits(down + F.lit(1)), down + F.lit(1)).otherwise(down)


def person_units_column(method: str, size: Column) -> Column:
    """The additive policies' per-item increment, in units of 2^-30 rounded DOWN, of a person
    keeping ``size`` items, as a Spark long column equal to
    :func:`dp_spark.mechanisms.set_union.person_units`: 2^30 (count), ⌊2^30/size⌋
    (weighted-laplace), ⌊2^30/√size⌋ (weighted-gaussian), checked in long arithmetic (u·size ≤ 2^30
    resp. u²·size ≤ 2^60)."""
    one = 1 << UNIT_BITS
    size = size.cast("long")
    if method == "count":
        return F.lit(one).cast("long")
    if method == "weighted-laplace":
        guess = F.floor(F.lit(float(one)) / size.cast("double"))
        return _largest_integer(guess, lambda u: u * size <= F.lit(one))
    if method == "weighted-gaussian":
        guess = F.floor(F.lit(float(one)) / F.sqrt(size.cast("double")))
        return _largest_integer(guess, lambda u: u * u * size <= F.lit(one * one))
    raise ParameterError(f"person units are for count and weighted policies; got {method!r}.")


def _shard_frame(items: list, weights: np.ndarray, shard: int) -> pd.DataFrame:
    return pd.DataFrame({
        _SHARD: np.full(len(items), shard, dtype=np.int32),
        ITEM: pd.Series(items),
        WEIGHT: weights[: len(items)],
    })


@worker_pass
def _policy_partition(
    batches: Iterator[pd.DataFrame], method: str, gamma: float
) -> Iterator[pd.DataFrame]:
    """mapInPandas body: the sequential policy over each shard of the partition, streaming. Rows
    (one per person) arrive sorted by (shard, xxhash64(person), person). Emits (shard, item,
    weight)."""
    shard = None
    code_of: dict = {}
    weights = np.zeros(0, dtype=np.float64)
    for batch in batches:
        if not len(batch):
            continue
        shard_ids = batch[_SHARD].to_numpy()
        cuts = (np.flatnonzero(shard_ids[1:] != shard_ids[:-1]) + 1).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, len(batch)]):
            this = int(shard_ids[lo])
            if this != shard:
                if shard is not None and code_of:
                    yield _shard_frame(list(code_of), weights, shard)
                shard, code_of, weights = this, {}, np.zeros(1024, dtype=np.float64)
            lists = batch[ITEMS].iloc[lo:hi]
            sizes = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
            flat = [x for items in lists for x in items]
            codes = np.fromiter(
                (code_of.setdefault(x, len(code_of)) for x in flat), dtype=np.int64, count=len(flat)
            )
            if len(code_of) > len(weights):
                grown = np.zeros(max(len(code_of), 2 * len(weights)), dtype=np.float64)
                grown[: len(weights)] = weights
                weights = grown
            indptr = np.concatenate(([0], np.cumsum(sizes)))
            update_histogram(weights, indptr, codes, method, gamma)
    if shard is not None and code_of:
        yield _shard_frame(list(code_of), weights, shard)


def _summed_units(units: DataFrame) -> DataFrame:
    """(item, weight) from (item, units) rows: an exact long sum of each item's units, cast once to a
    double times 2^-30 (the additive policies' histogram, whatever produced the rows)."""
    summed = units.groupBy(ITEM).agg(F.sum(_UNITS).alias(_UNITS))
    return summed.select(ITEM, (F.col(_UNITS).cast("double") * F.lit(UNIT)).alias(WEIGHT))


def weight_histogram(sets_df: DataFrame, method: str, gamma: float | None = None, shards: int = 1) -> DataFrame:
    """(item, weight): the summed histogram of Algorithm 1 under the policy ``method``. NON-PRIVATE.

    ``count`` / ``weighted-laplace`` / ``weighted-gaussian`` are additive: each person's per-item
    increment, in whole units of 2^-30 rounded down (:func:`person_units_column`), is summed as
    longs, exact in any order; ``shards`` plays no role. The sum is an ordinary aggregation by item
    (partial sums before Spark's shuffle); only the histogram, one row per item, is then moved to
    its noise bucket's partition by :func:`released_items`. (Shuffling the exploded rows by bucket
    instead skips the partial sums and puts at most 256 distinct keys on the heavy stage.)

    ``policy-laplace`` / ``policy-gaussian`` / ``policy-greedy`` are sequential (``gamma``: every
    shard's cutoff; privacy holds for any cutoff, :func:`dp_spark.mechanisms.set_union.shard_cutoff`;
    ``policy-greedy`` follows each person's list in order, the paper's order being
    :func:`restricted_sets` with ``by_frequency``, as the release runs it). Person p goes
    to shard pmod(murmur3(p), shards) and is visited inside it by (xxhash64(person), person), both
    fixed by the id alone; each shard runs the kernel of :mod:`dp_spark.summaries.set_union` and the
    shard histograms are added per item in shard order (the same bits on every evaluation).
    ``shards=1`` is the paper's single sequential pass.

    Facts (S) and (T) (ℓ1 / ℓ2 sensitivity ≤ 1, count Δ0; light new items) hold for the result as
    :mod:`dp_spark.summaries.set_union` proves them for fixed-point weights and for sharding."""
    method = check_policy(method)
    if method not in SEQUENTIAL:
        per_person = sets_df.withColumn(_UNITS, person_units_column(method, F.size(ITEMS)))
        exploded = per_person.select(_UNITS, F.explode(ITEMS).alias(ITEM))
        return _summed_units(exploded)
    keyed = (
        sets_df.repartition(int(shards), PERSON)
        .select(
            F.pmod(F.hash(PERSON), F.lit(int(shards))).alias(_SHARD),
            F.xxhash64(PERSON).alias(_ORDER),
            PERSON,
            ITEMS,
        )
        .sortWithinPartitions(_SHARD, _ORDER, PERSON)
        .select(_SHARD, ITEMS)
    )
    schema = T.StructType([
        T.StructField(_SHARD, T.IntegerType()),
        T.StructField(ITEM, sets_df.schema[ITEMS].dataType.elementType),
        T.StructField(WEIGHT, T.DoubleType()),
    ])
    per_shard = keyed.mapInPandas(partial(_policy_partition, method=method, gamma=float(gamma)), schema)
    return _add_shards(per_shard)


def _kept_mask(person: np.ndarray, item: np.ndarray, max_items: int) -> np.ndarray:
    """Mask of the rows the restriction keeps, on rows sorted by person visiting order then
    (xxhash64(salt, person, item), item) (``person``, ``item``: integer codes): the first
    ``max_items`` distinct items of each person, :func:`restricted_sets`' rule."""
    n = len(person)
    new_person = np.ones(n, dtype=bool)
    new_person[1:] = person[1:] != person[:-1]
    distinct = new_person.copy()
    distinct[1:] |= item[1:] != item[:-1]
    seen = np.cumsum(distinct)  # distinct items so far, over the whole frame
    starts = np.flatnonzero(new_person)
    before = (seen[starts] - 1)[np.cumsum(new_person) - 1]  # distinct items before this person
    return distinct & (seen - before <= max_items)


def _local_codes(values: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(codes, uniques) of an Arrow column by Arrow's hash encoding."""
    encoded = pc.dictionary_encode(values)
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False), encoded.dictionary


class _PersonRuns:
    """Whole persons' restricted rows from row chunks: the kept rows of the last run seen (a person, or
    with ``sort_keys`` every person of the last xxhash64(person) value), which may continue in the
    next chunk, are carried over; every whole run goes to :meth:`update`. ``sort_keys``: None when
    the rows arrive in the full order (xxhash64(person), person, [count desc,] item key, item) from
    Spark; otherwise they arrive sorted by xxhash64(person) alone and each chunk's whole runs are
    sorted here by these (column, order) keys, the same order."""

    def __init__(self, sort_keys: list | None = None):
        self.sort_keys = sort_keys
        self.carry: pa.Table | None = None

    def feed(self, rows: pa.Table, max_items: int) -> None:
        """The next rows (columns ``person``, ``item``, and with ``sort_keys`` their sort columns),
        restricted (:func:`_kept_mask`) and passed to :meth:`update`, except the last run's kept rows
        (at most Δ0 a person), carried to the next call or :meth:`finish`."""
        if self.carry is not None and self.carry.num_rows:
            rows = pa.concat_tables([self.carry, rows])
        run = rows.column(_ORDER if self.sort_keys else PERSON).to_numpy()
        other = np.flatnonzero(run != run[-1])
        last = int(other[-1]) + 1 if len(other) else 0  # the last run starts here
        kept, _, _ = self._kept(rows.slice(last), max_items)
        self.carry = kept
        self.update(*self._kept(rows.slice(0, last), max_items))

    def _kept(self, rows: pa.Table, max_items: int) -> tuple[pa.Table, np.ndarray, pa.Array]:
        """(kept rows, their item codes, the codes' values) of whole runs: sorted (``sort_keys``),
        then :func:`_kept_mask`."""
        if not rows.num_rows:
            return rows, np.zeros(0, dtype=np.int64), pa.array([], type=rows.schema.field(ITEM).type)
        if self.sort_keys and rows.num_rows > 1:
            rows = rows.sort_by(self.sort_keys)
        person = rows.column(PERSON).to_numpy()
        local, uniques = _local_codes(rows.column(ITEM).combine_chunks())
        kept = np.flatnonzero(_kept_mask(person, local, max_items))
        return rows.take(pa.array(kept)), local[kept], uniques

    def finish(self, max_items: int) -> None:
        """:meth:`update` with the carried last run."""
        if self.carry is not None and self.carry.num_rows:
            self.update(*self._kept(self.carry, max_items))
        self.carry = None

    def update(self, rows: pa.Table, local: np.ndarray, uniques: pa.Array) -> None:
        """Whole, restricted persons (``rows`` in their order, each person's rows together; items as
        codes ``local`` into ``uniques``)."""
        raise NotImplementedError


def _person_bounds(rows: pa.Table) -> np.ndarray:
    """CSR bounds of the persons in ``rows`` (each person's rows together): where each starts, then
    the row count."""
    person = rows.column(PERSON).to_numpy()
    starts = np.flatnonzero(np.concatenate(([True], person[1:] != person[:-1])))
    return np.append(starts, len(person)).astype(np.int64)


class _ShardHistogram(_PersonRuns):
    """One shard's sequential histogram (:class:`_PersonRuns` fed in row chunks): item codes (order
    of first appearance) and their float64 weights as a list."""

    def __init__(self, shard: int, method: str, gamma: float, sort_keys: list | None = None):
        super().__init__(sort_keys)
        self.shard, self.method, self.gamma = shard, method, gamma
        self.code_of: dict = {}
        self.weights: list = []

    def update(self, rows: pa.Table, local: np.ndarray, uniques: pa.Array) -> None:
        """Run the policy over whole, restricted persons (``rows`` in their order; items as codes
        into ``uniques``)."""
        if not rows.num_rows:
            return
        used = np.flatnonzero(np.bincount(local, minlength=len(uniques)))
        code_of = self.code_of
        mapped = np.zeros(len(uniques), dtype=np.int64)
        mapped[used] = [code_of.setdefault(v, len(code_of)) for v in uniques.take(pa.array(used)).to_pylist()]
        self.weights.extend([0.0] * (len(code_of) - len(self.weights)))
        sequential_update(self.weights, _person_bounds(rows), mapped[local], self.method, self.gamma)

    def batch(self, item_type: pa.DataType) -> pa.RecordBatch:
        n = len(self.code_of)
        return pa.RecordBatch.from_arrays(
            [pa.array(np.full(n, self.shard, dtype=np.int32)), pa.array(list(self.code_of), type=item_type),
             pa.array(np.asarray(self.weights, dtype=np.float64))],
            names=[_SHARD, ITEM, WEIGHT],
        )


@worker_pass
def _sequential_rows_partition(
    batches: Iterator[pa.RecordBatch], method: str, gamma: float, max_items: int, sort_keys: list | None = None
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of :func:`sequential_histogram`: restriction and sequential policy in one
    pass over the partition's (shard, person, item[, sort columns]) rows, sorted by
    (xxhash64(person), person, item key), or by xxhash64(person) alone with ``sort_keys`` (the rest
    of the order is made here, :class:`_ShardHistogram`). A partition may hold several whole
    shards (Spark merged the repartition with an earlier exchange by person:
    :mod:`dp_spark.stages.partitioning`); each shard runs on its own rows in their sorted order, so
    every shard's histogram is the same in any layout. A person continuing in the next batch is
    carried over (kept rows only, at most Δ0). Emits (shard, item, weight), shards in increasing
    order."""
    hists: dict[int, _ShardHistogram] = {}
    item_type = None
    for batch in batches:
        if not batch.num_rows:
            continue
        item_type = batch.schema.field(ITEM).type
        rows = pa.Table.from_batches([batch])
        shard_ids = batch.column(_SHARD).to_numpy(zero_copy_only=False)
        shards = np.unique(shard_ids)
        for shard in shards.tolist():
            if shard not in hists:
                hists[shard] = _ShardHistogram(shard, method, gamma, sort_keys)
            hists[shard].feed(rows if len(shards) == 1 else rows.filter(pa.array(shard_ids == shard)), max_items)
    for shard in sorted(hists):
        hist = hists[shard]
        hist.finish(max_items)
        if hist.code_of:
            yield hist.batch(item_type)


class _AdditiveUnits(_PersonRuns):
    """The additive policies' increments of whole, restricted persons (:class:`_PersonRuns` fed in
    row chunks): a person keeping t items adds :func:`~dp_spark.summaries.set_union.person_units`
    (``method``, t) to each (exact int64), summed per item within each chunk; :meth:`drain` hands out
    the (item, units) batches made so far."""

    def __init__(self, method: str, max_items: int, sort_keys: list | None = None):
        super().__init__(sort_keys)
        self.table = np.array([0] + [person_units(method, t) for t in range(1, int(max_items) + 1)],
                              dtype=np.int64)
        self.out: list[pa.RecordBatch] = []

    def update(self, rows: pa.Table, local: np.ndarray, uniques: pa.Array) -> None:
        if not rows.num_rows:
            return
        sizes = np.diff(_person_bounds(rows))  # 1..Δ0: the restriction kept them
        sums = np.zeros(len(uniques), dtype=np.int64)
        np.add.at(sums, local, np.repeat(self.table[sizes], sizes))  # <= 2^30 · rows: no overflow
        used = np.flatnonzero(np.bincount(local, minlength=len(uniques)))
        self.out.append(pa.RecordBatch.from_arrays([uniques.take(pa.array(used)), pa.array(sums[used])],
                                                   names=[ITEM, _UNITS]))

    def drain(self) -> list[pa.RecordBatch]:
        out, self.out = self.out, []
        return out


@worker_pass
def _additive_rows_partition(batches: Iterator[pa.RecordBatch], method: str, max_items: int,
                             sort_keys: list | None = None) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of :func:`additive_histogram`: the partition's (person, item[, sort columns])
    rows in the order :func:`_person_rows` gives, each whole person restricted (:func:`_kept_mask`)
    and turned into units per kept item (:class:`_AdditiveUnits`). Emits (item, units), an item
    possibly in several rows (summed later, exactly, in any order)."""
    runs = _AdditiveUnits(method, max_items, sort_keys)
    for batch in batches:
        if batch.num_rows:
            runs.feed(pa.Table.from_batches([batch]), max_items)
            yield from runs.drain()
    runs.finish(max_items)
    yield from runs.drain()


def _person_rows(parted: DataFrame, salt: int, *, shards: int | None = None, freq: bool = False
                 ) -> tuple[DataFrame, list | None]:
    """``parted`` (edges hash-partitioned by person) as the rows of a pass over whole persons:
    ([shard,] xxhash64(person), person, xxhash64(salt, person, item), item[, count]) sorted by
    xxhash64(person) when person and item are longs or strings of the binary collation
    (:func:`_binary_ordered`; the sort keys returned, for the Python pass to finish the order per
    run), else sorted by Spark on all keys (None returned) and narrowed to ([shard,] person, item).
    ``shards``: the shard column pmod(murmur3(person), shards) first. ``freq``: the per-(person,
    item) count ``_freq`` is a column and sorts descending after the person."""
    salt_col = F.lit(int(salt)).cast("long")
    keys = [(_ORDER, "ascending"), (PERSON, "ascending"), (_KEY, "ascending"), (ITEM, "ascending")]
    if freq:
        keys.insert(2, (_FREQ, "descending"))
    shard = [] if shards is None else [F.pmod(F.hash(PERSON), F.lit(int(shards))).alias(_SHARD)]
    rows = parted.select(
        *shard,
        F.xxhash64(PERSON).alias(_ORDER),
        PERSON,
        F.xxhash64(salt_col, F.col(PERSON), F.col(ITEM)).alias(_KEY),
        ITEM,
        *([_FREQ] if freq else []),
    )
    if all(_binary_ordered(parted.schema[c].dataType) for c in (PERSON, ITEM)):
        return rows.sortWithinPartitions(_ORDER), keys
    rows = rows.sortWithinPartitions(*[F.col(c).desc() if o == "descending" else F.col(c) for c, o in keys])
    return rows.select(*([_SHARD] if shard else []), PERSON, ITEM), None


def additive_histogram(edge_df: DataFrame, method: str, max_items: int, salt: int,
                       partitions: int | None = None) -> DataFrame:
    """(item, weight): bit for bit :func:`weight_histogram` over :func:`restricted_sets` for the
    additive policies (``count``, ``weighted-laplace``, ``weighted-gaussian``), with one shuffle and
    no window: the edges hash-partitioned by person into ``partitions`` (default
    :func:`default_partitions`; any number gives the same histogram) in the restriction's order, one
    Python pass restricting each person to Δ0 = ``max_items`` items (the same rule, :func:`_kept_mask`)
    and adding its whole units of 2^-30 per kept item (:func:`person_units_column`'s values), then an
    exact long sum per item. A person's kept items and units depend on its own rows and the salt
    only; facts (S) and (T) as there. NON-PRIVATE."""
    method = check_policy(method)
    if method in SEQUENTIAL:
        raise ParameterError(f"additive_histogram is for the additive policies; got {method!r}.")
    parts = int(partitions or default_partitions(edge_df.sparkSession))
    rows, sort_keys = _person_rows(edge_df.repartition(parts, PERSON), salt)
    schema = T.StructType([T.StructField(ITEM, edge_df.schema[ITEM].dataType),
                           T.StructField(_UNITS, T.LongType())])
    units = rows.mapInArrow(partial(_additive_rows_partition, method=method, max_items=int(max_items),
                                    sort_keys=sort_keys), schema)
    return _summed_units(units)


def _shard_histograms(
    edge_df: DataFrame, method: str, max_items: int, salt: int, gamma: float, shards: int
) -> DataFrame:
    """(shard, item, weight): every shard's sequential histogram, at most one row per (item, shard).
    One shuffle: hash-partitioned by person into ``shards`` partitions (partition = shard =
    pmod(murmur3(person), shards), or several whole shards: :func:`_sequential_rows_partition`),
    in the order (xxhash64(person), person, xxhash64(salt, person, item), item). For the policies of
    ``BY_FREQUENCY`` (Policy Greedy) the rows are first counted per (person, item) inside the same
    partitioning and each person's items sorted by that count, most first, then as above:
    :func:`restricted_sets` with ``by_frequency``.

    When person and item are longs or strings of the binary collation (:func:`_binary_ordered`)
    Spark sorts by xxhash64(person) alone (a radix sort on one long, several times cheaper than the
    sort on all keys, whose ties within a person go through the row comparator) and the kernel sorts
    each run of equal xxhash64(person) by the remaining keys with Arrow: the same order, so the same
    histogram bit for bit."""
    parted = edge_df.repartition(int(shards), PERSON)
    by_frequency = method in BY_FREQUENCY
    if by_frequency:
        # the count must leave each person's rows in one partition: the planner reuses the person
        # partitioning by default (no second exchange), but with spark.sql.requireAllClusterKeysForDistribution
        # it re-shuffles by (person, item), and a person split over partitions would spend its budget once
        # per partition; the repartition by person after the count is free by default and restores it otherwise
        parted = (parted.groupBy(PERSON, ITEM).agg(F.count(F.lit(1)).alias(_FREQ))
                  .repartition(int(shards), PERSON))
    rows, sort_keys = _person_rows(parted, salt, shards=shards, freq=by_frequency)
    schema = T.StructType([
        T.StructField(_SHARD, T.IntegerType()),
        T.StructField(ITEM, edge_df.schema[ITEM].dataType),
        T.StructField(WEIGHT, T.DoubleType()),
    ])
    kernel = partial(_sequential_rows_partition, method=method, gamma=float(gamma), max_items=int(max_items),
                     sort_keys=sort_keys)
    return rows.mapInArrow(kernel, schema)


def sequential_histogram(
    edge_df: DataFrame, method: str, max_items: int, salt: int, gamma: float, shards: int
) -> DataFrame:
    """(item, weight): the sequential policies' summed shard histograms straight from the edges: bit
    for bit :func:`weight_histogram` over :func:`restricted_sets` (same shards, person order, item
    order and restriction) with one shuffle instead of three. Facts (S) and (T) as there: a person's
    kept items depend on its own rows and the salt, its shard and position on its id. NON-PRIVATE."""
    method = check_policy(method)
    if method not in SEQUENTIAL:
        raise ParameterError(f"sequential_histogram is for {', '.join(SEQUENTIAL)}; got {method!r}.")
    return _add_shards(_shard_histograms(edge_df, method, max_items, salt, gamma, shards))


def _add_shards(per_shard: DataFrame) -> DataFrame:
    """At most one row per (item, shard): an item's parts sorted by shard and added left to right
    from 0.0."""
    parts = per_shard.groupBy(ITEM).agg(
        F.array_sort(F.collect_list(F.struct(F.col(_SHARD), F.col(WEIGHT)))).alias(_PARTS)
    )
    total = F.aggregate(F.col(_PARTS), F.lit(0.0), lambda acc, part: acc + part[WEIGHT])
    return parts.select(ITEM, total.alias(WEIGHT))


# ------------------------------------------------------- noise + threshold

def noise_bucket(item: Column) -> Column:
    """An item's noise bucket: pmod(xxhash64(item), :data:`NOISE_BUCKETS`), public and a function
    of the item alone."""
    return F.pmod(F.xxhash64(item), F.lit(NOISE_BUCKETS)).cast("int")


def _whole_buckets(batches: Iterator[pa.RecordBatch], bucket: int) -> Iterator[tuple[int, pa.Table]]:
    """(bucket, its rows) for every bucket of a partition whose rows arrive sorted by bucket (column
    ``bucket`` of each batch): a bucket's rows are gathered across batches, so each bucket is seen
    once and whole, wherever the batches break."""
    held: list[pa.RecordBatch] = []
    current = None
    seen: set[int] = set()
    for batch in batches:
        if not batch.num_rows:
            continue
        ids = batch.column(bucket).to_numpy(zero_copy_only=False)
        cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        for start, stop in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [len(ids)]))):
            b = int(ids[start])
            if current is not None and b != current:
                yield current, pa.Table.from_batches(held)
                held = []
            if b != current:
                if b in seen:  # a bucket seen twice would reuse its generator's draws: never unsorted input
                    raise RuntimeError("dp_spark defect: a noise bucket arrived in two runs; its rows must be sorted")
                seen.add(b)
            current = b
            held.append(batch.slice(int(start), int(stop - start)))
    if held:
        yield current, pa.Table.from_batches(held)


def _binary_ordered(dtype: T.DataType) -> bool:
    """True when Arrow's sort orders values of the Spark type ``dtype`` as Spark's sort does: longs,
    and strings of the default (binary) collation (unsigned byte order in both). Other types (a
    collated string) keep their order from Spark's own sort."""
    return isinstance(dtype, T.LongType) or (type(dtype) is T.StringType and dtype == T.StringType())


def _in_order(rows: pa.Table, keys: list[str], python_sort: bool) -> pa.Table:
    """``rows`` sorted by ``keys`` (ascending, a total order on them) when ``python_sort``: the order
    Spark's ``sortWithinPartitions`` would have given (:func:`_binary_ordered` types only). Otherwise
    ``rows`` as they came (sorted by Spark)."""
    return rows.sort_by([(k, "ascending") for k in keys]) if python_sort else rows


@worker_pass
def _threshold_partition(batches: Iterator[pa.RecordBatch], threshold: Threshold,
                         python_sort: bool = False) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of :func:`released_items`: rows (item, weight, bucket) sorted by (bucket,
    item), or by bucket alone with ``python_sort`` (each bucket is then sorted by item here); each
    bucket's items go through ``threshold(bucket, size)`` (the mechanism layer's function, one call
    a bucket, exactly one draw an item); this stage draws none."""
    for bucket, rows in _whole_buckets(batches, 2):
        rows = _in_order(rows, [ITEM], python_sort)
        weight = rows.column(1).to_numpy()
        mask = threshold(bucket, len(weight))(weight)
        yield pa.RecordBatch.from_arrays([rows.column(0).combine_chunks().filter(pa.array(mask))], names=[ITEM])


def _bucket_partition(partitions: int) -> Column:
    """The partitioning column that sends noise bucket b to partition b mod ``partitions``: the
    buckets spread evenly (⌈256/P⌉ or ⌊256/P⌋ each for P ≤ 256), where hashing the bucket id itself
    (Spark's Murmur3, then mod P) leaves partitions idle and piles buckets on others. The labels
    (:func:`dp_spark.stages.partitioning.partition_labels`) depend on ``partitions`` alone: public."""
    keys = F.array(*[F.lit(int(k)).cast("long") for k in partition_labels(partitions)])  # hashed as longs
    return F.element_at(keys, F.pmod(F.col(_BUCKET), F.lit(int(partitions))) + F.lit(1))


def _bucketed(df: DataFrame, partitions: int, *order: str) -> DataFrame:
    """``df`` with its noise bucket, partitioned into ``partitions`` partitions with bucket b in
    partition b mod ``partitions`` (:func:`_bucket_partition`), and sorted by (bucket, ``order``):
    every bucket whole in one partition, its rows in a fixed order. A coalescing of partitions
    (adaptive execution) keeps buckets whole as well."""
    if _BUCKET not in df.columns:
        df = df.withColumn(_BUCKET, noise_bucket(F.col(ITEM)))
    return (df.repartition(int(partitions), _bucket_partition(partitions))
            .sortWithinPartitions(_BUCKET, *order))


def released_items(hist_df: DataFrame, threshold: Threshold, partitions: int) -> DataFrame:
    """(item): the items ``threshold`` releases: the private output.

    ``threshold`` is the release's noise + threshold step
    (:class:`dp_spark.mechanisms.set_union.ThresholdStep`: weight + noise > ρ, one generator per
    noise bucket). The histogram is hash-partitioned by noise bucket (:func:`noise_bucket`) into
    ``partitions`` partitions and sorted by (bucket, item) (long items and strings of the binary
    collation: Spark sorts by bucket alone, a radix sort, and the Python pass sorts each bucket by
    item with Arrow, the same order), so bucket b's items, in item order, use
    ``threshold(b, size)``: every item gets its own draw, and which draw depends on the item and its
    bucket's items only, never on ``partitions``, the session's shuffle settings or adaptive
    execution. Bucket b's stream is the same on every evaluation (unseeded: ChaCha20 under the
    release's key, :class:`dp_spark.noise.rng.StreamRoot`), and so are the weights
    (:func:`weight_histogram`), so a re-run task draws what the first attempt drew; the release
    still evaluates it once, through :func:`materialize`, for speed and so the returned plan holds
    neither the salt nor the key. The weights never leave this step. Lazy; the plan holds the
    salt and the noise root (unseeded: its key): hand users only the materialized result."""
    python_sort = _binary_ordered(hist_df.schema[ITEM].dataType)
    prepared = _bucketed(hist_df, partitions, *([] if python_sort else [ITEM])).select(ITEM, WEIGHT, _BUCKET)
    schema = T.StructType([T.StructField(ITEM, hist_df.schema[ITEM].dataType)])
    return prepared.mapInArrow(partial(_threshold_partition, threshold=threshold, python_sort=python_sort), schema)


def _shard_sums(shard_weights: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each item's parts (rows from ``starts[j]`` to the next start, sorted by shard) added left to
    right from 0.0: :func:`_add_shards`' additions in the same order, vectorised."""
    sizes = np.diff(np.append(starts, len(shard_weights)))
    total = np.zeros(len(starts), dtype=np.float64)
    for k in range(int(sizes.max()) if len(sizes) else 0):
        more = sizes > k
        total[more] += shard_weights[starts[more] + k]
    return total


@worker_pass
def _combine_threshold_partition(batches: Iterator[pa.RecordBatch], threshold: Threshold,
                                 python_sort: bool = False) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of :func:`released_shard_items`: rows (item, shard, weight, bucket) sorted by
    (bucket, item, shard), or by bucket alone with ``python_sort`` (each bucket is then sorted by
    (item, shard) here, at most one row per pair); within each whole bucket, each item's parts added
    in shard order (:func:`_shard_sums`), then ``threshold(bucket, size)`` draws one noise per item
    in item order, as :func:`released_items` does."""
    for bucket, rows in _whole_buckets(batches, 3):
        rows = _in_order(rows, [ITEM, _SHARD], python_sort)
        item = rows.column(0).combine_chunks()
        weight = rows.column(2).to_numpy()
        new_item = np.ones(len(item), dtype=bool)
        if len(item) > 1:
            new_item[1:] = pc.not_equal(item[1:], item[:-1]).to_numpy(zero_copy_only=False)
        starts = np.flatnonzero(new_item)
        released = threshold(bucket, len(starts))(_shard_sums(weight, starts))
        yield pa.RecordBatch.from_arrays([item.take(pa.array(starts[released]))], names=[ITEM])


def released_shard_items(per_shard: DataFrame, threshold: Threshold, partitions: int) -> DataFrame:
    """(item): bit for bit what :func:`released_items` releases from ``_add_shards(per_shard)``,
    with one shuffle and no JVM aggregation: the parts are hash-partitioned by noise bucket, sorted
    by (bucket, item, shard) (by bucket in Spark and by (item, shard) in Python for the types of
    :func:`_binary_ordered`, as :func:`released_items` does), summed and thresholded in one Python
    pass. Lazy; the same trust
    boundary as :func:`released_items`."""
    python_sort = _binary_ordered(per_shard.schema[ITEM].dataType)
    order = [] if python_sort else [ITEM, _SHARD]
    prepared = _bucketed(per_shard, partitions, *order).select(ITEM, _SHARD, WEIGHT, _BUCKET)
    schema = T.StructType([T.StructField(ITEM, per_shard.schema[ITEM].dataType)])
    return prepared.mapInArrow(partial(_combine_threshold_partition, threshold=threshold, python_sort=python_sort),
                               schema)


# ------------------------------------------------------------ entry points

def set_union_histogram(
    df: DataFrame,
    person_col: str,
    item_col: str,
    method: str,
    max_items: int,
    salt: int,
    gamma: float | None = None,
    shards: int | None = None,
) -> DataFrame:
    """NON-PRIVATE (item, weight) histogram of the input under the policy ``method``: pipeline steps
    1–2, sequential shards with the cutoff ``gamma``. Never collected by the library."""
    method = check_policy(method)
    edge_df = edges(df, person_col, item_col)
    if method in SEQUENTIAL:
        return sequential_histogram(edge_df, method, max_items, salt, gamma, shards or DEFAULT_SHARDS)
    return weight_histogram(restricted_sets(edge_df, max_items, salt), method)


def set_union_items(
    df: DataFrame,
    person_col: str,
    item_col: str,
    *,
    method: str,
    max_items: int,
    salt: int,
    threshold: Threshold,
    gamma: float | None = None,
    shards: int | None = None,
    partitions: int | None = None,
) -> DataFrame:
    """The released items (one column ``item``) of DP Set Union: the ``method`` histogram of the
    persons' Δ0 = ``max_items`` items (sequential policies in ``shards`` shards, default
    :data:`DEFAULT_SHARDS`, with the cutoff ``gamma``), then ``threshold``, the mechanism layer's
    noise + threshold step, in ``partitions`` partitions (default :func:`default_partitions`). The
    guarantee is the threshold step's: (ε, δ)-DP at person level for the plan it was built from.
    Lazy."""
    return set_union_items_of_edges(edges(df, person_col, item_col), method=method, max_items=max_items,
                                    salt=salt, threshold=threshold, gamma=gamma, shards=shards,
                                    partitions=partitions)


def set_union_items_of_edges(
    edge_df: DataFrame,
    *,
    method: str,
    max_items: int,
    salt: int,
    threshold: Threshold,
    gamma: float | None = None,
    shards: int | None = None,
    partitions: int | None = None,
) -> DataFrame:
    """:func:`set_union_items` of an edge table built by :func:`dp_spark.stages.edges.edges`. Lazy,
    the same guarantee."""
    partitions = partitions or default_partitions(edge_df.sparkSession)
    method = check_policy(method)
    log.info("set-union: %s histogram (Δ0 = %d)", method, max_items)
    if method in SEQUENTIAL:
        per_shard = _shard_histograms(edge_df, method, max_items, salt, gamma, shards or DEFAULT_SHARDS)
        return released_shard_items(per_shard, threshold, partitions)
    hist_df = additive_histogram(edge_df, method, max_items, salt)
    return released_items(hist_df, threshold, partitions)


def rounds_items_of_edges(
    edge_df: DataFrame,
    *,
    max_items: int,
    rounds: list[tuple[int, Threshold]],
    partitions: int | None = None,
) -> DataFrame:
    """The multi-round exact weighted Gaussian (:mod:`dp_spark.mechanisms.set_union.sips`) on an edge
    table: round i drops the items released by the earlier rounds from every person's rows (a left
    anti join on the released items, public DP output), then runs :func:`set_union_items_of_edges`
    (``weighted-gaussian``, Δ0 = ``max_items``) with its own salt and threshold step
    (``rounds[i]``); each round's items are stored (:func:`materialize`, one job a round) before the
    next round reads them. Returns the union of the rounds' stored items (disjoint), each item once.
    The guarantee is the module's for the rounds' plans."""
    released = None
    for salt, threshold in rounds:
        part = edge_df if released is None else edge_df.join(released, ITEM, "left_anti")
        items = materialize(set_union_items_of_edges(part, method="weighted-gaussian", max_items=max_items,
                                                     salt=salt, threshold=threshold, partitions=partitions))
        released = items if released is None else released.unionByName(items)
    if released is None:
        raise ParameterError("the multi-round set union needs at least one round")
    return released


def materialize(items_df: DataFrame) -> DataFrame:
    """Evaluate the released items once and return a DataFrame reading the stored result
    (``localCheckpoint(eager=True)``: kept by the executors' block managers, memory then disk). One
    Spark job.

    Its plan is a scan of the stored rows: it holds neither the salt nor the noise step's function
    (with its generator state, if seeded), and has no lineage to the input, so no later action can
    re-run the noise step. If a stored block is lost the next action fails rather than recomputing:
    fresh noise would be a second release."""
    return items_df.localCheckpoint(eager=True)
