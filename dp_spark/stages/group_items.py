"""Composite (group, item) keys: the Spark stage of set-union and count-release, grouped or not. No
privacy noise; NON-PRIVATE outputs.

Set-union and count-release run their ONE mechanism on the composite key (group, item) instead of
the item: a person's budget flows across groups, with no per-group split. An ungrouped run is the
one-key run (the constant group :data:`~dp_spark.stages.edges.UNGROUPED`, :meth:`Composite.of`).

- :meth:`Composite.edges`: the run's edge table with ``item`` replaced by the string
  ``"<group_index>:<item>"`` (``group_index``: the public keys' positions, added by
  :func:`dp_spark.releases.groups.grouped_edges`); with one public key the item itself. The map is
  injective (the index holds digits only, so the first ``:`` separates it; a whole-number item's
  text casts back exactly) and works row by row: a per-person transformation, so neighbouring
  composite tables differ in that person's rows only, and every per-person contribution bound of the
  item-keyed mechanism holds for the composite items (set-union: at most Δ0 distinct composite items
  per person over all groups; count-release: each (group, item) count moves by at most 1 per person,
  all in the same direction; tests/spark/test_group_items.py).
- :meth:`Composite.split`, :meth:`Composite.parse`: released composite items back to (public key,
  item), in Spark or for one value on the driver: post-processing of released values and public
  keys.
- :meth:`Composite.per_group`: the number of released composite items per key (post-processing; at
  most one count per key reaches the driver, as Arrow).
- :func:`key_frame`, :func:`join_keys`: the key table (key, group index) made from the keys' Arrow
  array, and the join with it.

Which encoding runs depends on the number of keys only (public, or released by the private key step
before this stage): no log line, job description or exception here depends on it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.keys import GroupKeys
from dp_spark.stages.arrow_frames import arrow_frame, join_public
from dp_spark.stages.edges import GROUP, ITEM, PERSON, UNGROUPED, item_type

#: Separates the group index from the item in a composite key.
SEPARATOR = ":"
#: The group index column of a grouped edge table (dp_spark.releases.groups.GROUP_INDEX).
GROUP_INDEX = "group_index"
#: Keys up to which the key table is broadcast to the executors; a shuffle join above.
BROADCAST_KEYS = 100_000


def key_frame(spark, keys: GroupKeys, group_type, group_column: str = GROUP, *, bound: int):
    """The key table (``group_column``, ``group_index``): key i of ``keys`` with index i, made from
    the Arrow array (no Python list of keys; :func:`~dp_spark.stages.arrow_frames.arrow_frame`, whose
    path ``bound`` picks: the PUBLIC bound of :func:`join_keys`); its values and order are public."""
    schema = T.StructType([T.StructField(group_column, group_type, False),
                           T.StructField(GROUP_INDEX, T.IntegerType(), False)])
    table = pa.table({group_column: keys.arrow, GROUP_INDEX: pa.array(np.arange(len(keys), dtype=np.int32))})
    return arrow_frame(spark, table, schema, bound=bound)


def join_keys(frame, key_df, on: str, bound: int):
    """``frame`` inner-joined with the key table ``key_df`` on ``on``: broadcast when ``bound`` (a
    PUBLIC bound on the number of keys: their number when they are public, the release's limit when
    they were chosen privately, so the Spark work does not show how many were released) is at most
    :data:`BROADCAST_KEYS`, a shuffle join above (a broadcast of 10^6 keys would hold tens of MB in
    every executor; :func:`~dp_spark.stages.arrow_frames.join_public`)."""
    return join_public(frame, key_df, on, broadcast=bound <= BROADCAST_KEYS)


def _index_of(column: str = ITEM):
    return F.substring_index(F.col(column), SEPARATOR, 1).cast("int")


def _item_of(column: str = ITEM, integral: bool = False):
    rest = F.substr(F.col(column), F.instr(F.col(column), SEPARATOR) + F.lit(1))
    return rest.cast("long") if integral else rest


@dataclass(frozen=True)
class Composite:
    """The composite key of one run: its keys (a grouped run's public or released keys in canonical
    order; ungrouped, the one constant group), the group column's type and whether the item is a
    whole number (schema only). ``identity``: the item is its own key (one key known publicly);
    privately chosen keys always take the composite path, so the Spark work before the record never
    shows whether one key or more was released."""

    keys: GroupKeys
    group_type: object
    integral: bool
    identity: bool = False
    bound: int | None = None

    @classmethod
    def of(cls, edge_df: DataFrame, groups, private: bool = False, limit: int | None = None) -> "Composite":
        """The run's composite key from ``groups`` (``params.groups``: :class:`~dp_spark.keys.GroupKeys`;
        None when ungrouped), ``private`` (released by the private key step; ``limit``: the release's
        public key limit, the bound its key table's join uses) and the edge table's schema."""
        group_type = edge_df.schema[GROUP].dataType
        if groups is None:
            keys = GroupKeys.of([UNGROUPED], isinstance(group_type, T.LongType))
        else:
            keys = groups if isinstance(groups, GroupKeys) else GroupKeys.of(groups, isinstance(group_type, T.LongType))
        return cls(keys, group_type, isinstance(item_type(edge_df), T.LongType),
                   identity=len(keys) == 1 and not private, bound=limit if private else len(keys))

    def edges(self, edge_df: DataFrame) -> DataFrame:
        """(person, item) with ``item`` the composite string, or the item itself with one key. Lazy;
        per row."""
        if self.identity:
            return edge_df.select(PERSON, ITEM)
        composite = F.concat(F.col(GROUP_INDEX).cast("string"), F.lit(SEPARATOR), F.col(ITEM).cast("string"))
        return edge_df.select(PERSON, composite.alias(ITEM))

    def split(self, frame: DataFrame, group_by: str) -> DataFrame:
        """(``group_by``, item, the other columns): ``frame``'s composite ``item`` split into the
        public key (by index, joined with the key table :func:`key_frame`) and the item (long when
        ``integral``). Released values and public keys only."""
        rest = [c for c in frame.columns if c != ITEM]
        if self.identity:
            return frame.select(F.lit(self.keys[0]).cast(self.group_type).alias(group_by), ITEM, *rest)
        bound = len(self.keys) if self.bound is None else self.bound
        key_df = key_frame(frame.sparkSession, self.keys, self.group_type, group_by, bound=bound)
        split = self.indexed(frame)
        return join_keys(split, key_df, GROUP_INDEX, bound).select(group_by, ITEM, *rest)

    def indexed(self, frame: DataFrame) -> DataFrame:
        """(``group_index``, item, the other columns): ``frame``'s composite ``item`` split into the
        group index (0 with one key) and the item, without the key table (no join: a per-row
        projection). Released values only."""
        rest = [c for c in frame.columns if c != ITEM]
        if self.identity:
            return frame.select(F.lit(0).alias(GROUP_INDEX), ITEM, *rest)
        return frame.select(_index_of().alias(GROUP_INDEX), _item_of(ITEM, self.integral).alias(ITEM), *rest)

    def parse(self, value) -> tuple[int, object]:
        """(group index, item) of one released composite key."""
        if self.identity:
            return 0, value
        index, _, item = str(value).partition(SEPARATOR)
        return int(index), (int(item) if self.integral else item)

    def per_group(self, frame: DataFrame) -> np.ndarray:
        """The number of released composite items of each key, an int64 array indexed by group index
        (post-processing; at most one count per key collected, as Arrow)."""
        if self.identity:
            return np.array([frame.count()], dtype=np.int64)
        counts = np.zeros(len(self.keys), dtype=np.int64)
        table = frame.groupBy(_index_of().alias(GROUP_INDEX)).count().toArrow()  # <= G released sizes
        counts[table.column(GROUP_INDEX).to_numpy()] = table.column("count").to_numpy()
        return counts
