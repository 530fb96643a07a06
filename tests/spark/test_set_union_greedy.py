"""Policy Greedy DP Set Union (Carvalho, Wang, Gondara, AAAI 2022) on a local session.

What the greedy adds to the stages: each person's items ranked by the
person's own row count (the paper's local item frequency), most first, ties
by the salted hash, in one shuffle; the histogram keeps every kept item
(weight 0 included). The release, ungrouped and grouped on the composite key,
with the greedy's own threshold. The shared checks (kernel equality, the
fused path, neighbours, the probes' release rate, grouped = ungrouped with one
key) run for every policy in tests/spark/test_set_union.py.
"""

from __future__ import annotations

import re

import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.mechanisms.set_union import plan_set_union, rho_greedy, shard_cutoff
from dp_spark.stages.edges import edges
from dp_spark.stages.set_union import _shard_histograms, restricted_sets, sequential_histogram

SCHEMA = "person_id long, item string"
GREEDY = "policy-greedy"


def rows_of(counts: dict) -> list:
    """(person, item) rows: counts[person][item] copies of each."""
    return [(p, x) for p, items in counts.items() for x, n in items.items() for _ in range(n)]


def test_the_restriction_keeps_each_persons_most_frequent_items(spark):
    counts = {1: {"x": 5, "y": 3, "w": 3, "z": 1}, 2: {"z": 4, "x": 1}, 3: {"a": 1, "b": 1, "c": 1}}
    df = spark.createDataFrame(rows_of(counts), SCHEMA)
    kept = {r["person"]: list(r["items"]) for r in
            restricted_sets(edges(df, "person_id", "item"), 3, salt=7, by_frequency=True).collect()}
    assert kept[1][0] == "x" and set(kept[1][1:]) == {"y", "w"}  # z (once) dropped
    assert kept[2] == ["z", "x"]
    # ties (all once) keep the salted-hash order of the default restriction
    by_hash = {r["person"]: list(r["items"]) for r in
               restricted_sets(edges(df, "person_id", "item"), 3, salt=7).collect()}
    assert kept[3] == by_hash[3]
    # another person's rows change nothing of person 1's
    more = df.union(spark.createDataFrame(rows_of({4: {"z": 50, "y": 1}}), SCHEMA))
    again = {r["person"]: list(r["items"]) for r in
             restricted_sets(edges(more, "person_id", "item"), 3, salt=7, by_frequency=True).collect()}
    assert again[1] == kept[1] and again[2] == kept[2]


def test_the_fused_pass_fills_each_persons_most_frequent_item_first(spark):
    # One shard, Γ = 5: a person fills its most frequent kept item with its
    # whole budget (cost 5 > 1); an item it keeps but does not reach stays at 0.
    counts = {1: {"x": 2, "y": 1}, 2: {"y": 3, "x": 1}, 3: {"z": 1, "v": 2}}
    df = spark.createDataFrame(rows_of(counts), SCHEMA)
    h = {r["item"]: r["weight"] for r in
         sequential_histogram(edges(df, "person_id", "item"), GREEDY, 2, 3, 5.0, 1).collect()}
    assert h == {"x": 1.0, "y": 1.0, "v": 1.0, "z": 0.0}
    # the hash order (another policy's restriction) would not follow the counts
    laplace = {r["item"]: r["weight"] for r in
               sequential_histogram(edges(df, "person_id", "item"), "policy-laplace", 2, 3, 5.0, 1).collect()}
    assert laplace == {"x": 1.0, "y": 1.0, "v": 0.5, "z": 0.5}


def _exchanges(df) -> int:
    return len(re.findall(r"Exchange hashpartitioning", df._jdf.queryExecution().executedPlan().toString()))


def test_the_frequency_count_adds_no_shuffle(spark):
    df = spark.createDataFrame(rows_of({p: {f"i{(p * 3 + j) % 17}": 1 + j for j in range(4)} for p in range(30)}),
                               SCHEMA)
    edge_df = edges(df, "person_id", "item")
    greedy = _shard_histograms(edge_df, GREEDY, 3, 7, 2.0, 4)
    laplace = _shard_histograms(edge_df, "policy-laplace", 3, 7, 2.0, 4)
    assert _exchanges(greedy) == _exchanges(laplace) == 1
    assert "HashAggregate" in greedy._jdf.queryExecution().executedPlan().toString()


def test_one_person_spends_one_budget_whatever_the_planner_does(spark):
    """With spark.sql.requireAllClusterKeysForDistribution on (and adaptive execution off, so tiny data
    is not coalesced into one partition) the planner re-shuffles the frequency count by (person, item):
    one person holding 40 items must still spend at most 1 and keep at most Δ0 = 3 items (it spent 4 and
    kept 12 over 4 partitions before the count was repartitioned by person)."""
    df = spark.createDataFrame(rows_of({0: {f"i{j}": 1 + j % 3 for j in range(40)}}), SCHEMA)
    before = {k: spark.conf.get(k) for k in ("spark.sql.requireAllClusterKeysForDistribution",
                                             "spark.sql.adaptive.enabled")}
    try:
        spark.conf.set("spark.sql.requireAllClusterKeysForDistribution", "true")
        spark.conf.set("spark.sql.adaptive.enabled", "false")
        rows = _shard_histograms(edges(df, "person_id", "item"), GREEDY, 3, 7, 0.5, 4).collect()
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)
    weights = [r["weight"] for r in rows]
    assert len(weights) <= 3 and sum(weights) <= 1.0 + 1e-9


@pytest.fixture(scope="module")
def words(spark):
    """300 persons: 40 shared words with person-dependent repeats, and one
    word of their own each (held once)."""
    rows = [(p, f"w{(p + k) % 40}") for p in range(300) for k in range(6) for _ in range(1 + (p + k) % 3)]
    rows += [(p, f"own{p}") for p in range(300)]
    return spark.createDataFrame(rows, SCHEMA).cache()


def test_the_release_ungrouped(words):
    release = dp_spark.set_union(words, epsilon=3.0, delta=1e-5, max_items=8, method=GREEDY, seed=3)
    result = release.result
    assert result["method"] == GREEDY and result["noise"] == "laplace"
    assert result["threshold"] == plan_set_union(3.0, 1e-5, 8, GREEDY).rho  # the exact grid's, just above
    assert rho_greedy(3.0, 1e-5, 8) < result["threshold"] < rho_greedy(3.0, 1e-5, 8) * (1 + 3 * 2.0**-20) + 2.0**-18
    assert result["cutoff_per_shard"] == shard_cutoff(result["cutoff"], 8)
    assert release.to_dict()["parameters"]["algorithm"].startswith("Carvalho, Wang, Gondara 2022")
    items = {r["item"] for r in release.items.collect()}
    assert items <= {f"w{i}" for i in range(40)} | {f"own{p}" for p in range(300)}
    assert len(items & {f"w{i}" for i in range(40)}) >= 30  # the shared words come out
    assert len(items & {f"own{p}" for p in range(300)}) <= 3  # single-person words almost never
    assert result["released_count"] == len(items)


def test_the_release_grouped_on_the_composite_key(words):
    grouped_df = words.withColumn("g", F.when(F.col("person_id") % 2 == 0, "even").otherwise("odd"))
    release = dp_spark.set_union(grouped_df, epsilon=3.0, delta=1e-5, max_items=8, method=GREEDY, seed=4,
                                 group_by="g", groups=["even", "odd"])
    pairs = {(r["g"], r["item"]) for r in release.groups.collect()}
    assert {g for g, _ in pairs} == {"even", "odd"}
    even_words = {f"w{(p + k) % 40}" for p in range(0, 300, 2) for k in range(6)}
    assert {x for g, x in pairs if g == "even" and x.startswith("w")} <= even_words
    assert release.result["threshold"] == plan_set_union(3.0, 1e-5, 8, GREEDY).rho  # one mechanism: Δ0 pairs
    counts = {row["group"]: row["released_count"] for row in release.result["groups"]}
    assert counts == {g: sum(1 for k, _ in pairs if k == g) for g in ("even", "odd")}
