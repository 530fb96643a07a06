"""Spark stages of the distinct-count release (local[2] session)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.errors import LimitError, ParameterError, SchemaError
from dp_spark.stages import bounded_distinct_counts
from dp_spark.stages.distinct import greedy_rounds
from dp_spark.stages.edges import count_persons, count_sampled_persons, edges
from dp_spark.stages.kernels import greedy_match_rounds

from tests.unit.helpers import exact_counts


def _frame(spark, persons: dict, person_type="long", item_type="string"):
    rows = [(p, x) for p, items in persons.items() for x in sorted(items)]
    schema = f"person_id {person_type}, item {item_type}"
    return spark.createDataFrame(rows, schema)


def test_edges_drop_nulls_and_normalise_types(spark):
    df = spark.createDataFrame(
        [(1, "a"), (None, "b"), (2, None), (2, "c"), (2, "c")], "who int, what string"
    )
    expected = spark.createDataFrame([(1, "a", 0), (2, "c", 0), (2, "c", 0)], "person long, item string, group long")
    assert_df_equality(edges(df, "who", "what"), expected, ignore_row_order=True, ignore_nullable=True)


def test_edges_cast_non_string_items_to_string(spark):
    df = spark.createDataFrame([("x", 1.5), ("y", 2.0)], "p string, v double")
    out = edges(df, "p", "v")
    assert out.schema["item"].dataType == T.StringType()
    assert sorted(r.item for r in out.collect()) == ["1.5", "2.0"]


def test_edges_refuse_missing_and_nested_columns(spark):
    df = spark.createDataFrame([(1, [1, 2])], "p long, xs array<long>")
    with pytest.raises(SchemaError, match="'nope' is not in the input"):
        edges(df, "p", "nope")
    with pytest.raises(SchemaError, match="cannot be used as an id"):
        edges(df, "p", "xs")


def test_edges_refuse_a_column_of_nulls_for_every_release(spark):
    """The one edge-table builder (issue 23) refuses a void column (all nulls)
    before reading data, for distinct-count and set-union as top-k and
    count-release did; item_counts.edge_table is the same builder."""
    from dp_spark.stages import item_counts

    df = spark.sql("SELECT CAST(id AS BIGINT) AS p, NULL AS v FROM range(3)")
    for build in (edges, item_counts.edge_table):
        with pytest.raises(SchemaError, match="'v' holds only nulls"):
            build(df, "p", "v")
        with pytest.raises(SchemaError, match="different columns"):
            build(df, "p", "p")


def test_greedy_stage_matches_the_kernel_on_the_same_order(spark):
    """The Spark stage equals Algorithm 2 run on the driver in the stage's
    order (persons by (xxhash64, id), items by xxhash64), shard by shard."""
    rng = np.random.default_rng(5)
    pdf = pd.DataFrame({"person_id": rng.integers(0, 60, 600), "item": rng.integers(0, 80, 600).astype(str)})
    df = spark.createDataFrame(pdf)
    shards, max_bound = 3, 6
    got = greedy_rounds(edges(df, "person_id", "item"), max_bound, shards)
    keyed = (
        edges(df, "person_id", "item").dropDuplicates()
        .select(F.pmod(F.hash("person"), F.lit(shards)).alias("s"), F.xxhash64("person").alias("ph"),
                "person", F.xxhash64("item").alias("ih"))
        .toPandas().sort_values(["s", "ph", "person", "ih"])
    )
    best: dict = {}
    for _, shard in keyed.groupby("s"):
        uniques, codes = np.unique(shard["ih"].to_numpy(), return_inverse=True)
        starts = np.flatnonzero(shard["person"].ne(shard["person"].shift()).to_numpy())
        rounds = greedy_match_rounds(np.append(starts, len(shard)), codes, len(uniques), max_bound)
        for x, r in zip(uniques, rounds):
            if r > 0:
                best[int(x)] = min(int(r), best.get(int(x), int(r)))
    got_best = got.groupBy("item_key").agg(F.min("round").alias("r")).toPandas()
    assert dict(zip(got_best["item_key"].astype(int), got_best["r"])) == best
    assert len(best) > 40


def test_greedy_stage_with_string_persons(spark):
    persons = {f"user-{p}": {f"w{(p * 3 + k) % 17}" for k in range(p % 5 + 1)} for p in range(40)}
    rows = [(p, x) for p, items in persons.items() for x in sorted(items)]
    df = spark.createDataFrame(rows, "person_id string, item string")
    got = bounded_distinct_counts(df, "person_id", "item", 6, "greedy", shards=2)
    exact = bounded_distinct_counts(df, "person_id", "item", 6, "matching")
    assert np.all(got <= exact) and np.all(2 * got >= exact) and got[-1] == 17


def test_all_methods_on_a_hand_example(spark):
    persons = {0: {"a", "b", "c"}, 1: {"a"}, 2: {"d"}}
    df = _frame(spark, persons)
    exact = bounded_distinct_counts(df, "person_id", "item", 4, "matching")
    assert exact.tolist() == [3, 4, 4, 4]
    for method in ("greedy", "sampling"):
        counts = bounded_distinct_counts(df, "person_id", "item", 4, method)
        assert counts.dtype == np.int64 and len(counts) == 4
        assert np.all(counts <= exact) and counts[-1] == 4  # everyone fits at l >= 3


@pytest.mark.parametrize("method", ["greedy", "matching", "sampling"])
def test_empty_table_gives_zero_counts(spark, method):
    df = spark.createDataFrame([], "person_id long, item string")
    assert bounded_distinct_counts(df, "person_id", "item", 3, method).tolist() == [0, 0, 0]


def test_duplicate_rows_do_not_count_twice(spark):
    df = spark.createDataFrame([(1, "a")] * 5 + [(2, "a")] * 3, "person_id long, item string")
    for method in ("greedy", "matching", "sampling"):
        assert bounded_distinct_counts(df, "person_id", "item", 2, method).tolist() == [1, 1]


@pytest.mark.parametrize("method", ["greedy", "matching", "sampling"])
def test_neighbouring_tables_move_each_count_by_at_most_l(spark, method):
    """Sensitivity through Spark itself: add one random person to random data."""
    rng = np.random.default_rng(11)
    max_bound = 5
    for trial in range(3):
        persons = {int(p): set(rng.integers(0, 40, rng.integers(1, 9)).astype(str)) for p in range(25)}
        extra = set(rng.integers(0, 60, rng.integers(1, 12)).astype(str))
        before = bounded_distinct_counts(_frame(spark, persons), "person_id", "item", max_bound, method, salt=trial)
        after = bounded_distinct_counts(
            _frame(spark, {**persons, 1000 + trial: extra}), "person_id", "item", max_bound, method, salt=trial
        )
        diff = after - before
        assert np.all(diff >= 0) and np.all(diff <= np.arange(1, max_bound + 1)), diff
        assert np.all(after <= exact_counts({**persons, 1000 + trial: extra}, max_bound))


def test_sampled_person_count_is_a_fixed_per_person_sample(spark):
    """The input of the automatic shard choice: on random neighbouring tables
    (one person added, with any items and duplicate rows) the sampled count
    moves by 0 or 1, and by 1 exactly when that person's id is in the sample,
    which does not depend on the other rows; one_in=1 is the full count; the
    scaled count estimates the number of persons."""
    rng = np.random.default_rng(12)
    in_sample = {}
    for trial in range(4):
        persons = {int(p): set(rng.integers(0, 30, rng.integers(1, 6)).astype(str)) for p in range(300)}
        df = edges(_frame(spark, persons), "person_id", "item")
        base = count_sampled_persons(df, 4)
        for extra_id in (5000 + trial, 7000 + trial):
            extra = set(rng.integers(0, 50, rng.integers(1, 8)).astype(str))
            grown = count_sampled_persons(edges(_frame(spark, {**persons, extra_id: extra}), "person_id", "item"), 4)
            assert grown - base in (0, 1)
            in_sample[extra_id] = grown - base
        assert count_sampled_persons(df, 1) == count_persons(df) == 300
        assert 300 / 4 - 4 * np.sqrt(300 / 4) <= base <= 300 / 4 + 4 * np.sqrt(300 / 4)
    # membership is a function of the id alone: the same id, other rows, same answer
    other = {int(p): {"x"} for p in range(10, 20)}
    for extra_id, moved in in_sample.items():
        df_without = edges(_frame(spark, other), "person_id", "item")
        df_with = edges(_frame(spark, {**other, extra_id: {"y", "z"}}), "person_id", "item")
        assert count_sampled_persons(df_with, 4) - count_sampled_persons(df_without, 4) == moved
    assert set(in_sample.values()) <= {0, 1}


def test_release_with_automatic_shards_takes_a_pandas_frame(spark):
    """A pandas input is converted once, before the plan is spent; the
    automatic shard count then reads that frame's person column."""
    import dp_spark

    pdf = pd.DataFrame({"person_id": [1, 1, 2, 3, 3, 3], "item": ["a", "b", "a", "c", "d", "a"]})
    release = dp_spark.distinct_count(pdf, epsilon=1.0, max_bound=4, seed=1)
    assert release.to_dict()["parameters"]["shards_chosen"].startswith("automatically")
    assert release.estimate >= 0


def test_person_ids_read_the_person_column_alone_and_keep_sensitivity_one(spark, tmp_path):
    """person_ids (the ungrouped release's shard-count input): every non-null
    person id as the edge table spells it, whatever its items (a person
    whose items are all null is kept), from a plan that reads the person
    column only; on neighbouring tables (one person added, its items null
    or not, duplicate rows) the sampled count moves by 0 or 1."""
    from dp_spark.stages.edges import person_ids

    df = spark.createDataFrame([(1, "a"), (1, "b"), (2, None), (None, "c"), (3, "a")], "who int, what string")
    assert sorted(r.person for r in person_ids(df, "who").distinct().collect()) == [1, 2, 3]
    assert person_ids(df, "who").schema["person"].dataType == T.LongType()
    df.write.parquet(str(tmp_path / "t"))
    scan = person_ids(spark.read.parquet(str(tmp_path / "t")), "who")._jdf.queryExecution().executedPlan().toString()
    assert "ReadSchema: struct<who:int>" in scan  # the item column is not read
    rng = np.random.default_rng(3)
    persons = {int(p): set(rng.integers(0, 30, rng.integers(1, 6)).astype(str)) for p in range(200)}
    base_df = _frame(spark, persons)
    base = count_sampled_persons(person_ids(base_df, "person_id"), 4)
    assert base == count_sampled_persons(edges(base_df, "person_id", "item"), 4)  # no null items: the same
    moved = []
    for extra_id in range(900, 940):
        rows = [(extra_id, None), (extra_id, None)] if extra_id % 2 else [(extra_id, "q"), (extra_id, "q")]
        grown_df = base_df.union(spark.createDataFrame(rows, "person_id long, item string"))
        moved.append(count_sampled_persons(person_ids(grown_df, "person_id"), 4) - base)
    assert set(moved) == {0, 1}


def test_release_counts_the_sample_on_the_person_column_alone(spark, monkeypatch):
    """The ungrouped release's automatic shard count reads person_ids (the
    person column alone), once."""
    import dp_spark
    from dp_spark.stages import edges as edges_module

    seen = []
    real = edges_module.count_sampled_persons

    def spy(frame, one_in):
        seen.append(frame.columns)
        return real(frame, one_in)

    monkeypatch.setattr(edges_module, "count_sampled_persons", spy)
    df = _frame(spark, {p: {f"i{(p * 7 + k) % 40}" for k in range(p % 4 + 1)} for p in range(60)})
    dp_spark.distinct_count(df, epsilon=1.0, max_bound=8, seed=2)
    assert seen == [["person"]]


def test_truncated_matching_keeps_sensitivity_and_stays_below_exact(spark):
    """Matching on each person's first P items (public hash order), the
    release's exact path: per-person truncation keeps sensitivity l and the
    counts stay <= DC(D; l); the number of pairs moves by at most P."""
    from dp_spark.stages.distinct import count_pairs, matching_pairs

    rng = np.random.default_rng(5)
    max_bound = cap = 4
    for trial in range(3):
        persons = {int(p): set(rng.integers(0, 40, rng.integers(1, 12)).astype(str)) for p in range(25)}
        extra = set(rng.integers(0, 60, rng.integers(1, 15)).astype(str))
        tables = [_frame(spark, persons), _frame(spark, {**persons, 1000 + trial: extra})]
        before, after = (bounded_distinct_counts(t, "person_id", "item", max_bound, "matching", item_cap=cap)
                         for t in tables)
        diff = after - before
        assert np.all(diff >= 0) and np.all(diff <= np.arange(1, max_bound + 1)), diff
        assert np.all(after <= exact_counts({**persons, 1000 + trial: extra}, max_bound))
        pairs = [count_pairs(matching_pairs(edges(t, "person_id", "item"), cap)) for t in tables]
        assert 1 <= pairs[1] - pairs[0] <= cap
        assert pairs[0] == sum(min(len(v), cap) for v in persons.values())


def test_greedy_single_shard_close_to_exact_on_random_data(spark):
    rng = np.random.default_rng(3)
    persons = {int(p): set(rng.integers(0, 200, rng.integers(1, 15)).astype(str)) for p in range(80)}
    df = _frame(spark, persons)
    exact = bounded_distinct_counts(df, "person_id", "item", 10, "matching")
    single = bounded_distinct_counts(df, "person_id", "item", 10, "greedy", shards=1)
    assert np.all(single <= exact) and np.all(2 * single >= exact)
    assert exact.tolist() == exact_counts(persons, 10).tolist()


def test_matching_refuses_above_the_edge_limit(spark):
    df = spark.createDataFrame([(p, str(p)) for p in range(20)], "person_id long, item string")
    with pytest.raises(LimitError, match="method='greedy'") as info:
        bounded_distinct_counts(df, "person_id", "item", 3, "matching", edge_limit=10)
    assert "20" not in str(info.value)  # the true size is not revealed
    assert bounded_distinct_counts(df, "person_id", "item", 3, "matching", edge_limit=20).tolist() == [20] * 3


def test_sampling_depends_on_the_salt_only(spark):
    rng = np.random.default_rng(2)
    persons = {int(p): set(rng.integers(0, 30, 8).astype(str)) for p in range(30)}
    df = _frame(spark, persons)
    runs = {salt: bounded_distinct_counts(df, "person_id", "item", 3, "sampling", salt=salt).tolist()
            for salt in (1, 1, 2, 3, 4)}
    assert runs[1] == bounded_distinct_counts(df, "person_id", "item", 3, "sampling", salt=1).tolist()
    assert len({tuple(v) for v in runs.values()}) > 1  # the salt does change the choice


def test_stage_parameter_checks(spark):
    df = spark.createDataFrame([(1, "a")], "person_id long, item string")
    for kwargs in ({"max_bound": 0}, {"method": "nope"}, {"max_bound": 2, "shards": 0},
                   {"max_bound": 10**7}, {"shards": 10**5}, {"edge_limit": 10**9}):
        args = {"max_bound": 2, "method": "greedy", **kwargs}
        with pytest.raises(ParameterError):
            bounded_distinct_counts(df, "person_id", "item", args.pop("max_bound"), args.pop("method"), **args)


def test_packed_greedy_counts_equal_the_per_item_combine(spark):
    """greedy_counts ships each shard's matched items packed by key range
    and combines them in Python; it must equal the per-item JVM combine
    (counts_from_round_table of greedy_rounds) for any shard count, number
    of key ranges and pack size, including packs split mid-range (small
    _pack_items) and one range. And the labels send range j to partition j."""
    from dp_spark.stages.distinct import ITEM_KEY, counts_from_round_table, greedy_counts
    from dp_spark.stages.partitioning import partition_labels

    rng = np.random.default_rng(11)
    n = 4000
    pdf = pd.DataFrame({"person_id": rng.zipf(1.6, n) % 500, "item": (rng.zipf(1.3, n) % 900).astype(str)})
    edge_df = edges(spark.createDataFrame(pdf), "person_id", "item")
    max_bound = 7
    for shards in (1, 3, 5):
        want = counts_from_round_table(greedy_rounds(edge_df, max_bound, shards), max_bound, ITEM_KEY)
        assert want[-1] > 100 and want[0] < want[-1]  # several rounds matter
        for buckets, pack in ((None, 1 << 22), (1, 37), (3, 5), (8, 1000), (64, 3)):
            got = greedy_counts(edge_df, max_bound, shards, buckets=buckets, _pack_items=pack)
            assert got.tolist() == want.tolist(), (shards, buckets, pack)
    # a tiny table: most shards and key ranges (and so combine partitions) are empty
    tiny = edges(spark.createDataFrame([(7, "a"), (7, "b"), (7, "b")], "person_id long, item string"),
                 "person_id", "item")
    assert greedy_counts(tiny, 3, 5, buckets=16, _pack_items=1).tolist() == [1, 2, 2]
    labels = partition_labels(5)
    placed = (spark.createDataFrame([(v,) for v in labels] * 3, "_bucket long").repartition(5, "_bucket")
              .select("_bucket", F.spark_partition_id().alias("p")).distinct().collect())
    assert sorted((labels.index(r["_bucket"]), r["p"]) for r in placed) == [(j, j) for j in range(5)]
