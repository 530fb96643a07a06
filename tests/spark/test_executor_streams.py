"""Noise drawn on the executors is the same however often Spark runs a task.

An unseeded release's executor noise (set-union's noise buckets and a private key step, grouped
top-k's per-group selections) comes from :class:`dp_spark.noise.rng.StreamRoot`: ChaCha20 under a
key drawn from the release's generator, at a position fixed by the public bucket or group index.
So the lazy private output, evaluated again in another partitioning — what a retried task, a
speculative copy or a zombie attempt after a fetch failure does — gives exactly the same rows: no
unit is ever published with two different draws. Each test also checks that another key changes
the output (so "the same rows" is not vacuous)."""

from __future__ import annotations

import numpy as np
import pytest

from dp_spark.mechanisms.set_union import ThresholdStep, derive_randomness, plan_set_union
from dp_spark.mechanisms.top_k.groups import GroupSelection
from dp_spark.noise import make_rng
from dp_spark.noise.rng import StreamRoot
from dp_spark.stages import top_k_groups
from dp_spark.stages.edges import edges
from dp_spark.stages.set_union import set_union_items_of_edges


@pytest.fixture(scope="module")
def zipf_events(spark):
    """600 persons, 1-4 items each from a Zipf-like vocabulary of 80, 7 groups: many items sit near
    set-union's threshold and many groups' top counts are close, so the draws decide the output."""
    rng = np.random.default_rng(4)
    rows = []
    for person in range(600):
        for item in rng.zipf(1.4, size=int(rng.integers(1, 5))) % 80:
            rows.append((person, f"w{int(item)}", int(person % 7)))
    return spark.createDataFrame(rows, "person long, item string, group_index int")


def _items(df) -> list[str]:
    return sorted(r["item"] for r in df.collect())


def test_set_union_noise_is_the_same_on_every_evaluation_and_partitioning(zipf_events):
    edge_df = edges(zipf_events.drop("group_index"), "person", "item")
    numeric = plan_set_union(1.0, 1e-3, 3, "policy-laplace")

    def lazy(randomness, partitions):
        salt, root = randomness
        assert root.secret is not None  # the unseeded form: a key, not a seed
        return set_union_items_of_edges(edge_df, method=numeric.method, max_items=3, salt=salt,
                                        threshold=ThresholdStep(numeric, root), gamma=numeric.gamma, shards=1,
                                        partitions=partitions)

    release = derive_randomness(make_rng(), seeded=False)  # one release: its salt and key, in the task closure
    first = _items(lazy(release, 4))
    again = lazy(release, 9)
    assert _items(again) == first == _items(again)  # two evaluations, two partitionings: one draw per item
    others = {tuple(_items(lazy(derive_randomness(make_rng(), seeded=False), 4))) for _ in range(2)}
    assert others != {tuple(first)}, "other keys never changed the released set: the test would be vacuous"


@pytest.fixture(scope="module")
def tied_events(spark):
    """7 groups; in each, three items held by 30 persons each (a tie) and seven by one person: the three
    clear the unknown-domain threshold against the 7th count, and which two are released, in which order,
    is the draws' alone."""
    rows, person = [], 0
    for group in range(7):
        for j in range(10):
            for _ in range(30 if j < 3 else 1):
                rows.append((person, f"i{j}", group))
                person += 1
    return spark.createDataFrame(rows, "person long, item string, group_index int")


def test_grouped_top_k_selections_are_the_same_on_every_evaluation_and_partitioning(tied_events):
    def lazy(root, partitions):
        select = GroupSelection.laplace("unknown-domain", 2, 1.0, 1e-3, 1, 6, root)
        return top_k_groups.group_selections(tied_events, 7, select, kbar=6, partitions=partitions)

    def rows(df):
        return sorted(tuple(r) for r in df.collect())

    root = StreamRoot.of(make_rng(), seeded=False)
    first = rows(lazy(root, 3))
    again = lazy(root, 8)
    assert rows(again) == first == rows(again)
    others = {tuple(rows(lazy(StreamRoot.of(make_rng(), seeded=False), 3))) for _ in range(2)}
    assert others != {tuple(first)}, "other keys never changed the selections: the test would be vacuous"
