"""Per-person group cap and the groups-per-person histogram (issue 24).

Spark stage, no privacy noise; every value here is NON-PRIVATE.

Input: an edge table with columns ``person``, ``item`` and ``group``
(:data:`dp_spark.stages.edges.PERSON`, ``ITEM``, :data:`GROUP`). A row
whose group is null is dropped (a null is not a group key), as
:mod:`dp_spark.stages.edges` drops null persons and items.

:func:`cap_groups` keeps, for every person p, the rows of at most ``m`` of
p's distinct groups G_p: those first in the fixed public order
``(xxhash64(person, group), group)`` (as :mod:`dp_spark.stages.distinct`
orders a person's items by ``xxhash64``). The kept groups of p depend on p's
own rows only, so the cap is a per-person transformation: on add/remove-one-
person neighbours D, D + y the capped tables differ exactly in y's rows, and
every sensitivity proved for a person holding at most m groups holds for the
capped table (ALGORITHMS.md §8). No group is cut: a kept group keeps all of
p's rows in it.

:func:`cap_candidates` is :func:`cap_groups` at several caps at once: the
rows of each candidate cap as their own block of virtual groups, so one
grouped greedy pass counts every group at every cap (the grouped
distinct-count's joint choice of the cap and the bound).

:func:`groups_per_person_histogram` is the summary from which m is chosen
privately (:func:`dp_spark.mechanisms.groups.choose_max_groups`):
``h[j-1] = #{p : min(|G_p|, M) = j}`` for j = 1..M, M a public maximum, so
the driver receives M numbers, never a number of persons' worth. Adding one
person y changes one entry by +1 (entry min(|G_y|, M)); that is the
neighbouring relation the mechanism's sensitivity is proved for.
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from dp_spark import checks
from dp_spark.settings.groups import MAX_GROUPS_LIMIT
from dp_spark.stages.edges import ITEM, PERSON, require_columns

__all__ = ["GROUP", "MAX_GROUPS_LIMIT", "cap_candidates", "cap_groups", "groups_per_person_histogram"]

GROUP = "group"
_RANK = "_group_rank"
_CANDIDATE = "_cap_candidate"


def _valid_groups(edge_df: DataFrame) -> DataFrame:
    require_columns(edge_df, PERSON, ITEM, GROUP)
    return edge_df.where(F.col(GROUP).isNotNull())


def cap_groups(edge_df: DataFrame, max_groups: int, public_keys: int | None = None) -> DataFrame:
    """The rows of ``edge_df`` (person, item, group, and any other columns)
    in the at most ``max_groups`` groups of each person that come first in
    the public order ``(xxhash64(person, group), group)``; rows with a null
    group are dropped. A per-person transformation (module docstring): one
    shuffle by person, a dense rank over the person's rows, no join, nothing
    collected.

    ``public_keys`` K: the caller's statement that ``edge_df`` is already
    restricted to K public keys (every group value is one of K values, as
    :func:`dp_spark.releases.groups.grouped_edges` makes it). Then, when
    m = ``max_groups`` >= K, the cap keeps every row with a non-null group
    and the window is skipped (no shuffle, no sort). Proof: a person's
    distinct groups G_p are among the K keys, so |G_p| <= K <= m; the dense
    rank of a row of p is at most |G_p| <= m, so the filter ``rank <= m``
    keeps every row. The result is the same table, so every statement above
    (a per-person transformation, at most m groups per person) holds as it
    stands. The decision reads only m and K, both public."""
    m = checks.integer(max_groups, "max_groups", 1, MAX_GROUPS_LIMIT)
    # public_keys = 0: a private key step released no key; the restricted table is empty, nothing to cap
    if public_keys is not None and m >= checks.integer(public_keys, "public_keys", 0, None):
        return _valid_groups(edge_df)
    order = Window.partitionBy(PERSON).orderBy(F.xxhash64(PERSON, GROUP), GROUP)
    ranked = _valid_groups(edge_df).withColumn(_RANK, F.dense_rank().over(order))
    return ranked.where(F.col(_RANK) <= m).drop(_RANK)


def cap_candidates(edge_df: DataFrame, caps, groups: int, group_index: str = "group_index") -> DataFrame:
    """The edge table capped at every cap in ``caps`` at once, as one table
    of ``len(caps)·groups`` virtual groups: a row of person p in p's group of
    rank r (the dense rank of :func:`cap_groups`' public order
    ``(xxhash64(person, group), group)``) is emitted once for every
    candidate index k with ``caps[k] >= r``, with ``group_index`` replaced by
    ``k·groups + group_index``. So the rows of virtual groups k·G .. k·G+G−1
    are exactly ``cap_groups(edge_df, caps[k])`` with its group index shifted
    by k·G (tests/spark/test_grouped_cap_bound.py), and
    :func:`dp_spark.stages.distinct.grouped_greedy_counts` on the result
    computes every group's counts at every cap in one pass. Per person: a
    person's rows go to the virtual groups of their own kept groups only.
    ``groups`` G: the public number of keys (every ``group_index`` is in
    0..G−1). Cost: one window by person (as :func:`cap_groups`) and up to
    ``len(caps)`` copies of each row. NON-PRIVATE intermediate data."""
    caps = [checks.integer(m, "max_groups", 1, MAX_GROUPS_LIMIT) for m in caps]
    if not caps:
        raise ValueError("caps must not be empty")
    g = checks.integer(groups, "groups", 1, None)
    order = Window.partitionBy(PERSON).orderBy(F.xxhash64(PERSON, GROUP), GROUP)
    ranked = _valid_groups(edge_df).withColumn(_RANK, F.dense_rank().over(order))
    # the candidate indices k whose cap keeps the row's group (rank <= caps[k])
    kept = F.filter(F.array(*[F.lit(k) for k in range(len(caps))]),
                    lambda k: F.element_at(F.array(*[F.lit(m) for m in caps]), k + 1) >= F.col(_RANK))
    replicated = ranked.withColumn(_CANDIDATE, F.explode(kept)).drop(_RANK)
    return (replicated.withColumn(group_index, (F.col(_CANDIDATE) * F.lit(g) + F.col(group_index)).cast("int"))
            .drop(_CANDIDATE))


def groups_per_person_histogram(edge_df: DataFrame, max_groups_max: int) -> np.ndarray:
    """NON-PRIVATE: ``h`` of length M = ``max_groups_max`` with ``h[j-1]`` the
    number of persons whose number of distinct (non-null) groups, capped at
    M, is j. Persons without a valid row are not counted. One aggregation by
    person then by the capped count; at most M rows reach the driver."""
    top = checks.integer(max_groups_max, "max_groups_max", 1, MAX_GROUPS_LIMIT)
    per_person = _valid_groups(edge_df).groupBy(PERSON).agg(F.countDistinct(GROUP).alias("n"))
    capped = per_person.select(F.least(F.col("n"), F.lit(top)).alias("n")).groupBy("n").count()
    hist = np.zeros(top, dtype=np.int64)
    for row in capped.collect():  # at most M rows: one per capped count
        hist[int(row["n"]) - 1] = int(row["count"])
    return hist
