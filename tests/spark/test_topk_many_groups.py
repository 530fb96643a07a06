"""Top-k per group at 100,000 keys (issue 40): every group's mechanism runs on the executors
(dp_spark.stages.top_k_groups) with its own stream, derived from the release's root by the group's
index; nothing per key reaches the driver as a Row; every key has its rows (also without data); a
seeded release is the same whatever the partitioning of the input and of the per-group pass; the
number of rows released depends on the keys only (domain methods); privately chosen keys past the
old 1,024."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.accounting import ApproxDP, PrivacyFilter
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k.groups import GroupSelection
from dp_spark.noise.rng import StreamRoot
from dp_spark.plans.top_k import MAX_TOP_K_KEYS, Params
from dp_spark.stages import top_k_groups
from tests.spark.test_many_groups import collected_rows  # noqa: F401 - the fixture counting DataFrame.collect rows

KEYS = 100_000
DOMAIN = [str(j) for j in range(6)]


@pytest.fixture(scope="module")
def events(spark):
    """20,000 rows over 200 of the keys 0..KEYS-1 (0, 500, ...), items "0".."5" skewed to the small ones."""
    return spark.range(20_000).select(
        (F.col("id") % 5_000).alias("person"),
        (F.pmod(F.col("id") * 31, F.lit(7)) % 6).cast("string").alias("item"),
        ((F.col("id") * 7919) % 200 * 500).alias("g"),
    ).cache()


def test_the_limit_is_100k_keys():
    assert Params.MAX_KEYS == MAX_TOP_K_KEYS >= 100_000


def test_top_k_takes_100k_public_keys_from_a_dataframe(spark, events, collected_rows):
    keys = spark.range(KEYS).select(F.col("id").alias("g")).repartition(7)
    release = dp_spark.top_k(events, person_col="person", item_col="item", group_by="g", groups=keys,
                             epsilon=2.0, k=2, domain=DOMAIN, method="cdp-peel", max_groups=1, seed=3)
    during = list(collected_rows)
    r = release.result
    assert r["groups_released"] == KEYS and r["groups_in_report"] == 100
    assert [g["group"] for g in r["groups"]] == list(range(100))  # canonical order: by value
    assert r["released_count"] == 2 * KEYS  # every key, also the 99,800 without rows, gets k items
    assert max(during, default=0) < 1_000  # nothing O(keys) collected as Rows
    frame = release.groups
    assert frame.columns == ["g", "rank", "item", "error"]
    per_key = frame.groupBy("g").agg(F.count("*").alias("n"), F.min("rank").alias("lo"), F.max("rank").alias("hi"))
    summary = per_key.agg(F.count("*").alias("keys"), F.min("n"), F.max("n"), F.min("lo"), F.max("hi")).first()
    assert tuple(summary) == (KEYS, 2, 2, 1, 2)
    shown = [(i["group"], i["rank"], i["item"]) for i in r["items"]]
    head = frame.where(F.col("g") < 100).toPandas()
    assert shown == list(zip(head["g"], head["rank"], head["item"]))  # the report's items: release.groups' first
    assert frame.where(F.col("g") == 500).select("item").first()[0] in DOMAIN


def test_unknown_domain_gives_every_key_without_rows_its_bottom_row(spark, events):
    n = 20_000
    keys = spark.range(n).select(F.col("id").alias("g")).repartition(3)
    release = dp_spark.top_k(events, person_col="person", item_col="item", group_by="g", groups=keys,
                             epsilon=8.0, delta=1e-6, k=2, kbar=10, max_groups=1, seed=4)
    assert release.result["method"] == "unknown-domain"
    frame = release.groups
    bottoms = frame.where(F.col("rank").isNull())
    assert bottoms.where(F.col("g") % 500 != 0).count() == n - 40  # no rows: ⊥, with its error statement
    assert "⊥" in bottoms.first()["error"]
    assert frame.select("g").distinct().count() == n
    summary = {g["group"]: g for g in release.result["groups"]}
    assert summary[1] == {"group": 1, "released_count": 0, "bottom": True}
    assert summary[0]["released_count"] == 2 and not summary[0]["bottom"]  # ~17 persons an item: both clear


def _groups(release):
    return release.groups.toPandas()


@pytest.mark.parametrize("method, extra", [("joint", {"domain": DOMAIN, "epsilon": 0.3}),
                                           ("unknown-domain", {"delta": 1e-6, "kbar": 10, "epsilon": 8.0})])
def test_a_seeded_release_is_the_same_whatever_the_partitioning(spark, events, monkeypatch, method, extra):
    """1 or 7 partitions of the per-group pass, the input repartitioned: the same rows, the same report.
    The noise decides the order of near ties (another draw order would show)."""
    keys = [j * 250 for j in range(400)]  # half without rows
    kwargs = dict(person_col="person", item_col="item", group_by="g", groups=keys, k=2,
                  method=method, max_groups=2, seed=11, **extra)
    runs = []
    for parts, table in ((1, events), (7, events.repartition(5, "person")), (3, events.coalesce(1))):
        monkeypatch.setattr(top_k_groups, "python_partitions", lambda spark, parts=parts: parts)
        runs.append(dp_spark.top_k(table, **kwargs))
    frames = [_groups(r) for r in runs]
    for run, frame in zip(runs[1:], frames[1:]):
        assert frame.equals(frames[0]) and run.result == runs[0].result
    other = _groups(dp_spark.top_k(events, **{**kwargs, "seed": 12}))
    assert not other.equals(frames[0])  # the comparison is not vacuous


def test_the_number_of_rows_depends_on_the_keys_only(spark, events):
    """Neighbours (a person added holding every item in many groups, or a person removed): a domain
    method returns k rows for every key, in both, whatever the draws."""
    keys = [j * 250 for j in range(400)]
    added = spark.createDataFrame([(99_999, item, g) for item in DOMAIN for g in keys[:300]],
                                  "person long, item string, g long")
    removed = events.where(F.col("person") != 17)
    for table in (events, events.unionByName(added), removed):
        for seed in (1, 2):
            release = dp_spark.top_k(table, person_col="person", item_col="item", group_by="g", groups=keys,
                                     epsilon=1.0, k=3, domain=DOMAIN, method="pnf-peel", max_groups=2, seed=seed)
            counted = release.groups.groupBy("g").count()
            assert counted.count() == len(keys) and counted.where(F.col("count") != 3).count() == 0
            assert release.result["released_count"] == 3 * len(keys)


def test_keys_chosen_privately_may_be_more_than_1024(spark):
    """2,000 group values with 80 persons each (one group a person): the private key step (ε = 1)
    releases most, and more than the old limit of 1,024 are kept."""
    table = spark.range(160_000).select((F.col("id")).alias("person"),
                                        (F.col("id") % 3).cast("string").alias("item"),
                                        (F.col("id") % 2_000).alias("g"))
    release = dp_spark.top_k(table, person_col="person", item_col="item", group_by="g", epsilon=10.0,
                             delta=1e-5, k=1, kbar=3, max_groups=1, seed=2)
    n = release.result["groups_released"]
    assert 1_024 < n <= 2_000
    assert release.groups.select("g").distinct().count() == n


def test_more_keys_than_the_limit_are_refused_before_spending(spark, events):
    budget = PrivacyFilter(ApproxDP(10.0, 1e-3))
    too_many = spark.range(MAX_TOP_K_KEYS + 1).select(F.col("id").alias("g"))
    with pytest.raises(ParameterError, match="more than 100,000 public keys"):
        dp_spark.top_k(events, person_col="person", item_col="item", group_by="g", groups=too_many, k=2,
                       domain=DOMAIN, epsilon=1.0, max_groups=1, budget=budget)
    big = [str(j) for j in range(30_000)]  # 100,000 keys × 30,000 items: above the executors' work limit
    with pytest.raises(ParameterError, match="per-group mechanisms"):
        dp_spark.top_k(events, person_col="person", item_col="item", group_by="g",
                       groups=spark.range(KEYS).select(F.col("id").alias("g")), k=2, domain=big,
                       method="cdp-peel", epsilon=1.0, max_groups=1, budget=budget)
    assert budget.spent.epsilon == 0


def test_the_selection_draws_per_group_whatever_the_other_groups(spark, events):
    """A group's draws depend on its index and the root only: the same seeded release on a key set with
    other keys added keeps the released items of the keys at the same index."""
    keys = [j * 500 for j in range(200)]
    kwargs = dict(person_col="person", item_col="item", group_by="g", epsilon=0.3, k=2, domain=DOMAIN,
                  method="cdp-peel", max_groups=1, seed=5)
    small = _groups(dp_spark.top_k(events, groups=keys, **kwargs))
    large = _groups(dp_spark.top_k(events, groups=keys + [10**9 + j for j in range(50)], **kwargs))
    assert large[large["g"] < 10**9].reset_index(drop=True).equals(small)
    assert np.all(large.groupby("g").size() == 2)


def _partition_rows(rng, groups: int):
    """(group_index, _key, count) rows as the stage sorts them: per group its counts descending, then
    its own null-count row; some groups without counts."""
    ids, keys, counts, nulls = [], [], [], []
    for g in range(groups):
        n = int(rng.integers(0, 12))
        values = np.sort(rng.integers(1, 40, size=n))[::-1]
        ids += [g] * (n + 1)
        keys += [f"i{j}" for j in range(n)] + [None]
        counts += values.tolist() + [0]
        nulls += [False] * n + [True]
    return pa.RecordBatch.from_arrays([pa.array(np.array(ids, dtype=np.int32)), pa.array(keys, pa.string()),
                                       pa.array(counts, pa.int64(), mask=np.array(nulls))],
                                      names=["group_index", "_key", "count"])


@pytest.mark.parametrize("seed", range(3))
def test_the_python_pass_is_the_same_wherever_the_batches_break(seed):
    """The per-group pass alone (no Spark): the same released rows from one batch and from the rows broken
    into batches anywhere (a group over several batches), with a seeded root; a group arriving twice is
    refused, as it would draw its stream twice."""
    rng = np.random.default_rng(seed)
    rows = _partition_rows(rng, 60)
    select = GroupSelection.laplace("unknown-domain", 3, 6.0, 1e-6, 1, 8, StreamRoot(seed, ()))
    whole = pa.Table.from_batches(list(top_k_groups._select_partition(iter([rows]), select, 8, None, True)))
    cuts = np.sort(rng.choice(np.arange(1, rows.num_rows), size=25, replace=False))
    pieces = [rows.slice(a, b - a) for a, b in zip(np.r_[0, cuts], np.r_[cuts, rows.num_rows])]
    broken = pa.Table.from_batches(list(top_k_groups._select_partition(iter(pieces), select, 8, None, True)))
    assert broken.equals(whole)
    assert sorted(set(whole.column("group_index").to_pylist())) == list(range(60))  # every group its rows
    assert 0 < whole.column("rank").null_count < 60  # some groups release items, some only ⊥
    twice = [rows.slice(0, 30), rows.slice(0, 30)]
    with pytest.raises(RuntimeError, match="two runs"):
        list(top_k_groups._select_partition(iter(twice), select, 8, None, True))


def test_an_unseeded_release_is_evaluated_once(spark, events):
    """Review RV12: the release stores its per-group output once; every read of release.groups, and
    the report, shows the same draws (near-uniform scores at a small ε, pnf-peel: the draws decide).
    That a re-run of the pass draws the same values is tests/spark/test_executor_streams.py's."""
    keys = list(range(0, 200 * 500, 500))
    release = dp_spark.top_k(events, person_col="person", item_col="item", group_by="g", groups=keys,
                             epsilon=0.05, k=3, domain=DOMAIN, method="pnf-peel", max_groups=1)
    first = release.groups.toPandas()
    again = release.groups.orderBy("g", "rank").toPandas()
    assert first.sort_values(["g", "rank"], ignore_index=True).equals(again)
    assert first.groupby("g")["item"].apply(tuple).nunique() > 1  # the draws vary over groups: not vacuous
    shown = [(i["group"], i["rank"], i["item"]) for i in release.result["items"]]
    head = again[again["g"] < keys[100]]
    assert shown == list(zip(head["g"], head["rank"], head["item"]))
