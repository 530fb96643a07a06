"""Composite (group, item) keys: the Spark stage of the grouped set-union and
grouped count-release (issue 24). No privacy noise; NON-PRIVATE outputs.

The grouped set-union and count-release run their ONE ungrouped mechanism on
the composite key (group, item) instead of the item: a person's budget flows
across groups, no per-group split.

- :func:`composite_edges`: the edge table of a grouped run (``person``,
  ``item``, ``group``, ``group_index``: the public keys' positions, added by
  :func:`dp_spark.releases.groups.grouped_edges`) with ``item`` replaced by
  the string ``"<group_index>:<item>"``. The map (group_index, item) ->
  composite is injective (the index holds digits only, so the first ``:``
  separates it; a whole-number item's decimal text casts back exactly) and
  works row by row, so it is a per-person transformation: on add/remove-one-
  person neighbours the composite tables differ in that person's rows only.
  Hence every per-person contribution bound of the ungrouped release holds
  for the composite items (set-union: at most Δ0 distinct composite items per
  person after its restriction, over all groups together; count-release:
  each (group, item) count of distinct persons moves by at most 1 per
  person, all in the same direction); tests/spark/test_group_items.py checks
  both on random neighbours.
- :func:`split_composite`: a DataFrame of released composite items back to
  the public group key (under its own name) and the item, in the item's
  normalised type (long or string): post-processing of released values and
  the public keys.
- :func:`parse_composite`: the same for one released value on the driver.
- :func:`released_per_group`: the number of released composite items per
  group index (post-processing of the released set; at most one row per
  public key reaches the driver).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.stages.edges import ITEM, PERSON

#: Separates the group index from the item in a composite key.
SEPARATOR = ":"
#: The group index column of a grouped edge table (dp_spark.releases.groups.GROUP_INDEX).
GROUP_INDEX = "group_index"


def composite_edges(edge_df: DataFrame) -> DataFrame:
    """(person, item): the grouped edge table with ``item`` the composite
    string ``"<group_index>:<item>"`` (module doc). Lazy; per row."""
    composite = F.concat(F.col(GROUP_INDEX).cast("string"), F.lit(SEPARATOR), F.col(ITEM).cast("string"))
    return edge_df.select(PERSON, composite.alias(ITEM))


def _index_of(column: str = ITEM):
    return F.substring_index(F.col(column), SEPARATOR, 1).cast("int")


def _item_of(column: str = ITEM, integral: bool = False):
    rest = F.substr(F.col(column), F.instr(F.col(column), SEPARATOR) + F.lit(1))
    return rest.cast("long") if integral else rest


def split_composite(frame: DataFrame, keys: tuple, group_by: str, group_type, integral: bool) -> DataFrame:
    """(``group_by``, item, the frame's other columns): ``frame``'s composite
    ``item`` split into the public key (looked up by index in ``keys``, a
    broadcast of the public keys) and the item (long when ``integral``).
    Released values and public keys only."""
    spark = frame.sparkSession
    schema = T.StructType([T.StructField(GROUP_INDEX, T.IntegerType(), False),
                           T.StructField(group_by, group_type, False)])
    key_df = spark.createDataFrame([(i, k) for i, k in enumerate(keys)], schema)
    rest = [c for c in frame.columns if c != ITEM]
    split = frame.select(_index_of().alias(GROUP_INDEX), _item_of(ITEM, integral).alias(ITEM), *rest)
    return split.join(F.broadcast(key_df), on=GROUP_INDEX, how="inner").select(group_by, ITEM, *rest)


def parse_composite(value: str, integral: bool) -> tuple[int, object]:
    """(group index, item) of one released composite key."""
    index, _, item = str(value).partition(SEPARATOR)
    return int(index), (int(item) if integral else item)


def released_per_group(frame: DataFrame, n_groups: int) -> list[int]:
    """The number of released composite items of each group index 0..G-1
    (post-processing of the released set; at most G rows are collected)."""
    counts = [0] * int(n_groups)
    for row in frame.groupBy(_index_of().alias(GROUP_INDEX)).count().collect():  # <= G rows of released sizes
        counts[int(row[GROUP_INDEX])] = int(row["count"])
    return counts
