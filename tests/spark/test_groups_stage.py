"""The per-person group cap and the groups-per-person histogram
(dp_spark.stages.groups): on random add/remove-one-person neighbours the
capped tables differ exactly in that person's rows, every person keeps at
most m whole groups, the choice follows the public hash order, and the
histogram matches a count made by hand."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from pyspark.sql import functions as F

from dp_spark.errors import ParameterError
from dp_spark.stages.groups import GROUP, cap_groups, groups_per_person_histogram

SCHEMA = "person long, item string, group string"


def random_rows(rng, persons, groups=8, items=6, extra=()):
    rows = []
    for p in persons:
        for _ in range(int(rng.integers(1, 14))):
            rows.append((int(p), f"i{rng.integers(items)}", f"g{rng.integers(groups)}"))
    return rows + list(extra)


def as_set(df):
    return {tuple(r) for r in df.collect()}


@pytest.mark.parametrize("seed", range(6))
def test_cap_differs_only_in_the_added_persons_rows(spark, seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 4))
    persons = rng.choice(1000, size=int(rng.integers(3, 9)), replace=False)
    base = random_rows(rng, persons[1:], extra=[(int(persons[1]), "x", None)])  # a null group: dropped
    added = random_rows(rng, persons[:1])
    y = int(persons[0])
    capped = as_set(cap_groups(spark.createDataFrame(base, SCHEMA), m))
    capped_plus = as_set(cap_groups(spark.createDataFrame(base + added, SCHEMA), m))
    assert {r for r in capped_plus if r[0] != y} == capped  # everyone else's rows unchanged
    assert all(r[0] == y for r in capped_plus - capped)
    mine = {r for r in capped_plus if r[0] == y}
    alone = as_set(cap_groups(spark.createDataFrame(added, SCHEMA), m))
    assert mine == alone  # y's kept rows are a function of y's rows alone
    groups = collections.defaultdict(set)
    for person, _item, group in capped_plus:
        groups[person].add(group)
        assert group is not None
    assert all(len(g) <= m for g in groups.values())
    for person, _item, group in base + added:  # whole groups: a kept group keeps all its rows
        if group in groups[person]:
            assert (person, _item, group) in capped_plus
    for person in set(r[0] for r in base + added):  # a person with ≤ m groups keeps everything
        own = {g for q, _i, g in base + added if q == person and g is not None}
        assert len(groups[person]) == min(m, len(own))


def test_kept_groups_follow_the_public_hash_order(spark):
    rows = [(7, f"i{j}", f"g{j}") for j in range(10)]
    df = spark.createDataFrame(rows, SCHEMA)
    order = [r[GROUP] for r in df.select(GROUP, F.xxhash64("person", GROUP).alias("h"))
             .orderBy("h", GROUP).collect()]
    for m in (1, 3, 10, 12):
        kept = {r[GROUP] for r in cap_groups(df, m).collect()}
        assert kept == set(order[:m])


def test_histogram_counts_persons_by_capped_group_count(spark):
    rng = np.random.default_rng(11)
    rows = random_rows(rng, range(40), groups=12)
    df = spark.createDataFrame(rows + [(999, "z", None)], SCHEMA)  # a person with only a null group: not counted
    for top in (1, 4, 20):
        expected = np.zeros(top, dtype=np.int64)
        per_person = collections.defaultdict(set)
        for p, _i, g in rows:
            per_person[p].add(g)
        for groups in per_person.values():
            expected[min(len(groups), top) - 1] += 1
        np.testing.assert_array_equal(groups_per_person_histogram(df, top), expected)


def test_bad_cap_and_missing_group_column_are_refused(spark):
    df = spark.createDataFrame([(1, "a", "g")], SCHEMA)
    with pytest.raises(ParameterError):
        cap_groups(df, 0)
    with pytest.raises(ParameterError):
        groups_per_person_histogram(df, 0)
    from dp_spark.errors import SchemaError

    with pytest.raises(SchemaError):
        cap_groups(df.drop(GROUP), 2)


def _has_window(df) -> bool:
    return "Window" in df._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("seed", range(3))
def test_cap_at_or_above_the_public_key_count_keeps_every_row_without_the_window(spark, seed):
    """m >= K public keys on a table restricted to those keys: the skipped
    cap returns exactly the rows the windowed cap keeps (every row with a
    group), and no window (sort by person) is planned; m < K still caps."""
    rng = np.random.default_rng(40 + seed)
    keys = 5
    rows = random_rows(rng, rng.choice(1000, size=12, replace=False), groups=keys)
    df = spark.createDataFrame(rows + [(3, "x", None)], SCHEMA)  # a null group: dropped either way
    for m in (keys, keys + 3):
        skipped = cap_groups(df, m, public_keys=keys)
        assert not _has_window(skipped)
        assert sorted(map(tuple, skipped.collect())) == sorted(map(tuple, cap_groups(df, m).collect()))
        assert sorted(map(tuple, skipped.collect())) == sorted(r for r in rows if r[2] is not None)
    capped = cap_groups(df, keys - 1, public_keys=keys)
    assert _has_window(capped)
    assert sorted(map(tuple, capped.collect())) == sorted(map(tuple, cap_groups(df, keys - 1).collect()))
    with pytest.raises(ParameterError):
        cap_groups(df, 2, public_keys=-1)
    # 0 keys: a private key step released none; the caller's table is restricted to no key (empty)
    assert not _has_window(cap_groups(df.limit(0), 2, public_keys=0))
