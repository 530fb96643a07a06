"""Per-person group cap and the groups-per-person histogram. Spark stage, no privacy noise; every
value here is NON-PRIVATE.

Input: an edge table with columns ``person``, ``item`` and ``group``. A row whose group is null is
dropped, as :mod:`dp_spark.stages.edges` drops null persons and items.

:func:`cap_groups` keeps, for every person p, the rows of at most ``m`` of p's distinct groups G_p:
those first in the fixed public order ``(xxhash64(person, group), group)``. The kept groups of p
depend on p's own rows only, so the cap is a per-person transformation: on add/remove-one-person
neighbours D, D + y the capped tables differ exactly in y's rows, and every sensitivity proved for a
person holding at most m groups holds for the capped table (ALGORITHMS.md §8). A kept group keeps
all of p's rows in it. The grouped distinct-count applies the same cap inside its kernel
(:func:`dp_spark.stages.distinct.grouped_greedy_counts` with ``caps``).

:func:`groups_per_person_histogram` is the summary m is chosen from privately
(:func:`dp_spark.mechanisms.groups.choose_max_groups`): ``h[j-1] = #{p : min(|G_p|, M) = j}`` for j
= 1..M, M a public maximum, so the driver receives M numbers. Adding one person y changes one entry
by +1 (entry min(|G_y|, M)): the neighbouring relation the mechanism's sensitivity is proved for."""

from __future__ import annotations

import numpy as np
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from dp_spark import checks
from dp_spark.settings.groups import MAX_GROUPS_LIMIT
from dp_spark.stages.edges import ITEM, PERSON, require_columns

__all__ = ["GROUP", "MAX_GROUPS_LIMIT", "cap_groups", "groups_per_person_histogram"]

GROUP = "group"
_RANK = "_group_rank"


def _valid_groups(edge_df: DataFrame) -> DataFrame:
    require_columns(edge_df, PERSON, ITEM, GROUP)
    return edge_df.where(F.col(GROUP).isNotNull())


def cap_groups(edge_df: DataFrame, max_groups: int, public_keys: int | None = None) -> DataFrame:
    """The rows of ``edge_df`` in the at most ``max_groups`` groups of each person that come first
    in the public order ``(xxhash64(person, group), group)``; null groups dropped. A per-person
    transformation (module docstring): one shuffle by person, a dense rank, nothing collected.

    ``public_keys`` K: the caller's statement that every group value is one of K public keys (as
    :func:`dp_spark.releases.groups.grouped_edges` makes it). When m = ``max_groups`` >= K the
    window is skipped: a person's distinct groups are among the K keys, so every dense rank is <=
    |G_p| <= K <= m and ``rank <= m`` keeps every row; the result is the same table. The decision
    reads only the public m and K."""
    m = checks.integer(max_groups, "max_groups", 1, MAX_GROUPS_LIMIT)
    # public_keys = 0: a private key step released no key; the restricted table is empty, nothing to cap
    if public_keys is not None and m >= checks.integer(public_keys, "public_keys", 0, None):
        return _valid_groups(edge_df)
    order = Window.partitionBy(PERSON).orderBy(F.xxhash64(PERSON, GROUP), GROUP)
    ranked = _valid_groups(edge_df).withColumn(_RANK, F.dense_rank().over(order))
    return ranked.where(F.col(_RANK) <= m).drop(_RANK)


def groups_per_person_histogram(edge_df: DataFrame, max_groups_max: int) -> np.ndarray:
    """NON-PRIVATE: ``h`` of length M = ``max_groups_max``, ``h[j-1]`` the number of persons whose
    number of distinct non-null groups, capped at M, is j. At most M (capped count, persons) rows
    reach the driver, as one Arrow table (``toArrow``, never Python Rows: M may be
    MAX_GROUPS_LIMIT = 100,000), scattered into the int64 array."""
    top = checks.integer(max_groups_max, "max_groups_max", 1, MAX_GROUPS_LIMIT)
    per_person = _valid_groups(edge_df).groupBy(PERSON).agg(F.countDistinct(GROUP).alias("n"))
    capped = per_person.select(F.least(F.col("n"), F.lit(top)).alias("n")).groupBy("n").count()
    parts = capped.toArrow()  # at most M rows: one per capped count, each value 1..M once
    hist = np.zeros(top, dtype=np.int64)
    hist[parts.column("n").to_numpy().astype(np.int64) - 1] = parts.column("count").to_numpy().astype(np.int64)
    return hist
