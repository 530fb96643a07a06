"""Grouped releases with many keys: set-union takes up to 1,000,000 public or
privately chosen keys, held as one Arrow array (GroupKeys) and joined in
Spark; no per-key Python object reaches or stays on the driver. Each release's
limit is refused with its reason (count-release, distinct-count and top-k at many
keys: their own test_*_many_groups.py)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.accounting import ZCDP, ApproxDP, PrivacyFilter
from dp_spark.errors import ParameterError
from dp_spark.keys import MAX_GROUP_KEYS, GroupKeys
from dp_spark.ledger.budget import keys_digest

KEYS = 100_000


@pytest.fixture(scope="module")
def events(spark):
    """20,000 rows over 200 of the keys 0..KEYS-1 (whole numbers: 0, 500, ...), 3 items each."""
    return spark.range(20_000).select(
        (F.col("id") % 5_000).alias("person"),
        (F.col("id") % 3).cast("string").alias("item"),
        ((F.col("id") * 7919) % 200 * 500).alias("g"),
    )


@pytest.fixture
def collected_rows(monkeypatch, spark):
    """The sizes of every DataFrame.collect() of the session's DataFrame class (Rows reach the
    driver as Python objects)."""
    sizes = []
    frame_class = type(spark.range(1))
    original = frame_class.collect

    def counting(self):
        rows = original(self)
        sizes.append(len(rows))
        return rows

    monkeypatch.setattr(frame_class, "collect", counting)
    return sizes


def test_set_union_takes_100k_public_keys_from_a_dataframe(spark, events, collected_rows):
    keys = spark.range(KEYS).select(F.col("id").alias("g")).repartition(7)
    release = dp_spark.set_union(events, person_col="person", item_col="item", group_by="g", groups=keys,
                                 epsilon=2.0, delta=1e-5, max_items=5, seed=3)
    during = list(collected_rows)
    r = release.result
    assert r["groups_released"] == KEYS and r["groups_in_report"] == 100
    assert [g["group"] for g in r["groups"]] == list(range(100))  # canonical order: by value
    pairs = release.groups.select("g", "item").collect()
    assert 0 < len(pairs) == r["released_count"] and all(p["g"] % 500 == 0 for p in pairs)
    shown = {g["group"]: g["released_count"] for g in r["groups"]}
    assert sum(shown.values()) == sum(1 for p in pairs if p["g"] < 100)
    sizes = r["group_sizes"]  # every key's number of released pairs, summarised (issue 40's HTML report)
    per_key = {}
    for p in pairs:
        per_key[p["g"]] = per_key.get(p["g"], 0) + 1
    assert sizes["groups"] == KEYS and sum(sizes["counts"]) == KEYS and sizes["counts"][0] == KEYS - len(per_key)
    want = sorted(per_key.items(), key=lambda kv: (-kv[1], kv[0]))[:len(sizes["largest"])]
    assert [(g["group"], g["size"]) for g in sizes["largest"]] == want
    assert max(during, default=0) < 1_000  # no O(keys) collect: keys and per-key counts travel as Arrow
    assert collected_rows[len(during)] == len(pairs)  # the hook sees collects


def test_the_key_table_does_not_depend_on_how_the_keys_were_given(spark, events):
    # the same key set as a list and as a reordered DataFrame: the same release and identity
    some = list(range(0, 200 * 500, 250))[::-1]  # 400 keys, half without rows
    frame = spark.createDataFrame([(k,) for k in some], "g long").repartition(5)
    kwargs = dict(person_col="person", item_col="item", group_by="g", epsilon=2.0, delta=1e-5, max_items=5,
                  seed=4, count=True)
    a = dp_spark.set_union(events, groups=some, **kwargs)
    b = dp_spark.set_union(events, groups=frame, **kwargs)
    assert a.result["groups"] == b.result["groups"] and a.result["released_count"] == b.result["released_count"]
    assert sorted(map(tuple, a.groups.select("g", "item").collect())) == \
        sorted(map(tuple, b.groups.select("g", "item").collect()))
    assert GroupKeys.of(some, whole=True).digest() == keys_digest(tuple(sorted(some)))


def test_more_keys_than_the_limit_are_refused_before_spending(spark, events):
    budget = PrivacyFilter(ApproxDP(10.0, 1e-3))
    too_many = spark.range(MAX_GROUP_KEYS + 1).select(F.col("id").alias("g"))
    with pytest.raises(ParameterError, match="more than 1,000,000 public keys"):
        dp_spark.set_union(events, person_col="person", item_col="item", group_by="g", groups=too_many,
                           epsilon=1.0, delta=1e-5, budget=budget)
    assert budget.spent.epsilon == 0


def test_a_release_with_a_lower_limit_says_which_and_why(spark, events):
    """continual-distinct keeps 1,024 keys (a counter per group on the driver, a value per group and
    step); distinct-count and top-k take 100,000; each refusal names its limit and why, before
    spending."""
    budget = PrivacyFilter(ZCDP(10.0, 1e-3))
    keys = spark.range(1_025).select(F.col("id").alias("g"))
    stream = events.select((F.col("person") % 4).alias("time"), "item", "g", F.lit(1).alias("op"))
    with pytest.raises(ParameterError, match=r"more than 1,024 public keys.*one counter per group on the driver"):
        dp_spark.continual_distinct(stream, group_by="g", groups=keys, rho=1.0, horizon=4, max_groups=1,
                                    budget=budget)
    assert budget.spent.rho == 0
    budget = PrivacyFilter(ApproxDP(10.0, 1e-3))
    many = spark.range(100_001).select(F.col("id").alias("g"))
    for release, kwargs in ((dp_spark.distinct_count, {}), (dp_spark.top_k, {"k": 2, "delta": 1e-6})):
        with pytest.raises(ParameterError, match=r"more than 100,000 public keys.*grow with the keys"):
            release(events, person_col="person", item_col="item", group_by="g", groups=many, epsilon=1.0,
                    budget=budget, **kwargs)
    assert budget.spent.epsilon == 0
