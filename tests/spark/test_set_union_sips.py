"""The multi-round exact weighted Gaussian on Spark (dp_spark.stages.set_union.rounds_items_of_edges
with the constants of dp_spark.mechanisms.set_union.sips): ungrouped and on the composite key
(group, item) the grouped releases use. Stage level: the release API does not offer it yet."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import types as T

from dp_spark.keys import GroupKeys
from dp_spark.mechanisms.set_union import ThresholdStep, derive_randomness
from dp_spark.mechanisms.set_union.sips import plan_sips
from dp_spark.stages.edges import GROUP, edges
from dp_spark.stages.group_items import GROUP_INDEX, Composite
from dp_spark.stages.set_union import rounds_items_of_edges

SCHEMA = "person_id long, item string, g string"


@pytest.fixture(scope="module")
def words(spark):
    """300 persons: 40 shared words, in group even/odd by the person, and one word of their own."""
    rows = [(p, f"w{(p + k) % 40}", "even" if p % 2 == 0 else "odd") for p in range(300) for k in range(6)]
    rows += [(p, f"own{p}", "even" if p % 2 == 0 else "odd") for p in range(300)]
    return spark.createDataFrame(rows, SCHEMA).cache()


def _rounds(plan, rng):
    out = []
    for r in plan.rounds:
        salt, root = derive_randomness(rng)
        out.append((salt, ThresholdStep(r, root)))
    return out


def test_the_rounds_ungrouped(words):
    plan = plan_sips(3.0, 1e-5, 8)
    edge_df = edges(words, "person_id", "item")
    got = rounds_items_of_edges(edge_df, max_items=8, rounds=_rounds(plan, np.random.default_rng(1)))
    items = [r["item"] for r in got.collect()]
    assert len(items) == len(set(items))  # the rounds are disjoint
    items = set(items)
    assert items <= {f"w{i}" for i in range(40)} | {f"own{p}" for p in range(300)}
    assert len(items & {f"w{i}" for i in range(40)}) >= 35  # 45 persons a word: released
    assert not items & {f"own{p}" for p in range(300)}  # single-person words: ≤ δ in all
    again = rounds_items_of_edges(edge_df, max_items=8, rounds=_rounds(plan, np.random.default_rng(1)))
    assert {r["item"] for r in again.collect()} == items  # seeded: reproducible


def test_a_later_round_releases_what_the_first_left(spark):
    # Δ0 = 1. 100 persons hold a, c1..c5 and 12 of them also b: in round 1 each person keeps one of
    # its items, so the six common items clear the threshold and b (~12/7 persons) does not; round 2
    # drops the released items, so those 12 persons keep b and it clears the last round's threshold.
    # Without the drop they would keep b with chance 1/7 again and b would stay out.
    common = ["a"] + [f"c{i}" for i in range(1, 6)]
    rows = [(p, w, "x") for p in range(112) for w in common] + [(p, "b", "x") for p in range(100, 112)]
    edge_df = edges(spark.createDataFrame(rows, SCHEMA), "person_id", "item")
    plan = plan_sips(8.0, 1e-5, 1)
    got = {r["item"] for r in rounds_items_of_edges(edge_df, max_items=1,
                                                     rounds=_rounds(plan, np.random.default_rng(5))).collect()}
    assert got == set(common) | {"b"}


def test_the_rounds_grouped_on_the_composite_key(words):
    # the grouped edge table as the release builds it: the public keys' index joined, the composite key
    plan = plan_sips(3.0, 1e-5, 8)
    spark = words.sparkSession
    edge_df = edges(words, "person_id", "item", group_col="g")
    keys = spark.createDataFrame([(k, i) for i, k in enumerate(("even", "odd"))],
                                 f"{GROUP} string, {GROUP_INDEX} int")
    composite = Composite(GroupKeys.of(("even", "odd"), whole=False), T.StringType(), False)
    got = rounds_items_of_edges(composite.edges(edge_df.join(keys, on=GROUP)), max_items=8,
                                rounds=_rounds(plan, np.random.default_rng(2)))
    pairs = {(r["g"], r["item"]) for r in composite.split(got, "g").collect()}
    even_words = {f"w{(p + k) % 40}" for p in range(0, 300, 2) for k in range(6)}
    assert {g for g, _ in pairs} == {"even", "odd"}
    assert {x for g, x in pairs if g == "even"} <= even_words
    assert not {x for _, x in pairs if x.startswith("own")}
    assert len(pairs) >= 30  # ~22 persons a pair: weight ~8.3, the last round's threshold 8.49
