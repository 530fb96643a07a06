"""Issue 40 follow-ups (three privacy/robustness edges of the grouped releases):

- the grouped distinct-count with privately chosen keys and ``max_groups=None`` counts at the cap
  candidates of the release's public key limit, whatever number of keys the key step released, and
  chooses m among the candidates up to that released number;
- the grouped joint top-k refuses a total work G·d·k above ``MAX_GROUPED_JOINT_WORK`` before
  anything is read or spent;
- the groups-per-person histogram reaches the driver as Arrow, also at M = 100,000.
"""

from __future__ import annotations

import collections

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import dp_spark
from dp_spark.accounting import ApproxDP, PrivacyFilter
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.distinct_count.cap_bound import cap_candidates
from dp_spark.releases import distinct_count as distinct_release
from dp_spark.releases import group_cap
from dp_spark.releases import group_keys as key_step
from dp_spark.plans.top_k import MAX_GROUPED_JOINT_WORK
from dp_spark.settings.groups import MAX_GROUPS_LIMIT
from dp_spark.stages.groups import GROUP, groups_per_person_histogram

EDGE_SCHEMA = "person long, item string, group string"


def _person_with_groups(spark, person: int, n_groups: int, offset: int = 0) -> DataFrame:
    """``person``'s rows in ``n_groups`` distinct groups (two rows in the first: a repeat)."""
    ids = spark.range(offset, offset + n_groups)
    rows = ids.select(F.lit(person).cast("long").alias("person"), F.lit("i").alias("item"),
                      F.concat(F.lit("g"), F.col("id").cast("string")).alias(GROUP))
    repeat = spark.createDataFrame([(person, "j", f"g{offset}")], EDGE_SCHEMA)
    return rows.unionByName(repeat)


def test_histogram_at_the_largest_cap_comes_as_arrow_and_counts_by_hand(spark, monkeypatch):
    """M = MAX_GROUPS_LIMIT (100,000) with a few persons, some above M groups (capped at M), one at
    exactly M, one just below, small ones and a person with only a null group: the histogram equals a
    brute-force count of the rows, and no DataFrame is collected as Python Rows on the way."""
    top = MAX_GROUPS_LIMIT
    assert top == 100_000
    parts = [_person_with_groups(spark, 1, top + 3), _person_with_groups(spark, 2, top),
             _person_with_groups(spark, 3, top - 1, offset=7), _person_with_groups(spark, 4, 1),
             _person_with_groups(spark, 5, 3, offset=top), _person_with_groups(spark, 6, 3, offset=11),
             spark.createDataFrame([(7, "z", None), (4, "z", None)], EDGE_SCHEMA)]
    edges = parts[0]
    for part in parts[1:]:
        edges = edges.unionByName(part)
    edges = edges.repartition(3)
    rows = edges.toPandas()  # the brute force: every row, counted in Python
    per_person = collections.defaultdict(set)
    for person, group in zip(rows["person"].tolist(), rows[GROUP].tolist()):
        if group is not None:
            per_person[person].add(group)
    expected = np.zeros(top, dtype=np.int64)
    for groups in per_person.values():
        expected[min(len(groups), top) - 1] += 1
    assert expected[top - 1] == 2 and expected[top - 2] == 1 and expected[2] == 2 and expected[0] == 1

    def no_rows(self, *args, **kwargs):
        raise AssertionError("the histogram collected Python Rows")

    monkeypatch.setattr(type(edges), "collect", no_rows)  # the session's DataFrame class (classic or Connect)
    hist = groups_per_person_histogram(edges, top)
    monkeypatch.undo()
    assert hist.dtype == np.int64 and hist.shape == (top,)
    np.testing.assert_array_equal(hist, expected)
    assert groups_per_person_histogram(edges.limit(0), top).sum() == 0  # no person: all zeros


def _jobs_in(spark, group: str) -> list:
    return list(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def test_grouped_joint_top_k_above_the_total_work_is_refused_before_reading_or_spending(spark, unreadable_events):
    """G·d·k above MAX_GROUPED_JOINT_WORK: refused before any data is read (the input's files are gone)
    and before anything is spent, with keys chosen privately (G = the key limit, 100,000; no Spark job
    at all) and with public keys from a DataFrame (G counted when the keys are read, before spending)."""
    events = unreadable_events.withColumn("g", F.lit("x"))
    budget = PrivacyFilter(ApproxDP(5.0, 1e-3))
    sc = spark.sparkContext
    sc.setJobGroup("i40-joint-work", "edges test")
    try:
        spark.range(3).count()  # the detector sees a job of this thread
        assert len(_jobs_in(spark, "i40-joint-work")) >= 1
        sc.setJobGroup("i40-joint-work-private", "edges test")
        with pytest.raises(ParameterError, match="the keys are chosen privately"):
            dp_spark.top_k(events, k=11, epsilon=1.0, method="joint", domain=[f"d{j}" for j in range(20_000)],
                           group_by="g", max_groups=2, budget=budget)
        assert _jobs_in(spark, "i40-joint-work-private") == []
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
    keys = spark.range(1_000).select(F.concat(F.lit("k"), F.col("id").cast("string")).alias("g"))
    with pytest.raises(ParameterError, match=r"1,000 public keys × domain size 40,001 × k = 500"):
        dp_spark.top_k(events, k=500, epsilon=1.0, method="pnf-joint", domain=[f"d{j}" for j in range(40_001)],
                       group_by="g", groups=keys, max_groups=1, budget=budget)
    assert 1_000 * 40_001 * 500 > MAX_GROUPED_JOINT_WORK
    assert budget.spent.epsilon == 0.0 and budget.spent.delta == 0.0


def _country_events(spark, extra=()):
    rng = np.random.default_rng(40)
    rows = [(p, f"i{int(rng.integers(60))}", f"g{p % 3}") for p in range(900) for _ in range(3)]
    rows += [(p, f"i{int(rng.integers(60))}", f"g{(p + 1) % 3}") for p in range(0, 900, 4)]  # some in 2 groups
    return spark.createDataFrame(rows + list(extra), "person_id long, item string, country string")


def _releasing(extra):
    """The key step, releasing also the key ``extra`` (as if its group had passed the threshold)."""
    real = key_step.choose_keys

    def choose(plan, edge_df, rng):
        keys, record, facts = real(plan, edge_df, rng)
        if extra is not None:
            keys = pa.chunked_array([*keys.chunks, pa.array([extra], keys.type)], keys.type)
            facts = {**facts, "group_keys_released": len(keys)}
        return keys, record, facts
    return choose


def test_private_keys_count_at_the_limits_caps_whatever_number_of_keys_was_released(spark, monkeypatch):
    """Neighbouring tables D and D + y, y the only person of a group "rare", where the key step releases
    "rare" on D + y only (forced by wrapping the step: the released key count differs, 3 against 4):
    the grouped greedy pass of the joint (m, l) choice gets the same caps, those of the public key limit
    (100,000), so the Spark work before the record does not show the released count; the choice then
    scores only the caps up to the released count (m̂ <= it), and its record and parameters name them."""
    passes = []
    counts = distinct_release.grouped_greedy_counts

    def counting(edge_df, max_bound, shards, groups, candidates, caps=None, partitions=None):
        passes.append({"max_bound": max_bound, "shards": shards, "candidates": list(candidates),
                       "caps": None if caps is None else list(caps)})
        return counts(edge_df, max_bound, shards, groups, candidates, caps=caps, partitions=partitions)

    monkeypatch.setattr(distinct_release, "grouped_greedy_counts", counting)
    base = _country_events(spark)
    neighbour = _country_events(spark, extra=[(999, "x", "rare"), (999, "y", "rare"), (999, "x", "g0")])
    runs = {}
    for name, df, extra in (("D", base, None), ("D + y", neighbour, "rare")):
        monkeypatch.setattr(key_step, "choose_keys", _releasing(extra))
        runs[name] = dp_spark.distinct_count(df, epsilon=2.0, group_by="country", max_groups=None, shards=1,
                                             max_bound=16, seed=5)
    released = {name: r.result["group_keys_released"] for name, r in runs.items()}
    assert released == {"D": 3, "D + y": 4}  # seeded: the key step releases g0, g1, g2 of D
    assert sorted(runs["D + y"].groups.toPandas()["country"]) == ["g0", "g1", "g2", "rare"]
    assert len(passes) == 2 and passes[0] == passes[1]  # the same pass: caps, shards, bounds
    assert passes[0]["caps"] == cap_candidates(100_000)
    for name, release in runs.items():
        n = released[name]
        assert release.parameters["max_groups_candidates"] == cap_candidates(n)  # the candidates scored
        assert 1 <= release.parameters["max_groups"] <= n
        record = next(r for r in release.noise if r.step.startswith("group cap m and bound l, jointly"))
        assert f"the group cap m in {', '.join(map(str, cap_candidates(n)))} and" in record.target


def test_top_k_private_keys_count_the_cap_histogram_at_the_key_limit(spark, monkeypatch):
    """The grouped top-k's private cap (max_groups=None) on keys a private key step released: on the
    neighbours above (3 and 4 keys released) the groups-per-person histogram is counted at the same
    public length, the key limit (100,000), not at the released count; m is chosen in 1..n for the n
    released keys (its record says so) and the cap keeps at most n groups."""
    lengths = []
    histogram = group_cap.groups_per_person_histogram

    def counting(edge_df, max_groups_max):
        lengths.append(max_groups_max)
        return histogram(edge_df, max_groups_max)

    monkeypatch.setattr(group_cap, "groups_per_person_histogram", counting)
    base = _country_events(spark)
    neighbour = _country_events(spark, extra=[(999, "x", "rare"), (999, "y", "rare"), (999, "x", "g0")])
    for df, extra, n in ((base, None, 3), (neighbour, "rare", 4)):
        monkeypatch.setattr(key_step, "choose_keys", _releasing(extra))
        release = dp_spark.top_k(df, k=2, epsilon=2.0, delta=1e-5, group_by="country", max_groups=None, seed=5)
        assert release.result["group_keys_released"] == n
        assert 1 <= release.parameters["max_groups"] <= n
        record = next(r for r in release.noise if "the group cap m in" in r.target)
        assert f"the group cap m in 1..{n} " in record.target
    assert lengths == [100_000, 100_000]


def test_top_k_with_a_domain_keeps_keys_read_from_a_dataframe_as_arrow(spark, monkeypatch):
    """Top-k rebuilds its plan with the public domain before spending; keys read from a DataFrame stay
    one Arrow array (never a Python tuple of every key) and the report still names their source."""
    from dp_spark import plan as plan_module
    from dp_spark.keys import GroupKeys

    def no_python_keys(self):
        raise AssertionError("the keys were copied into Python objects")

    events = spark.createDataFrame([(p, f"i{p % 4}", p % 50) for p in range(400)], "person long, item string, g long")
    keys = spark.range(3_000).select(F.col("id").alias("g"))
    real = plan_module.public_keys
    seen = []
    monkeypatch.setattr(plan_module, "public_keys", lambda value, *a: seen.append(type(value)) or real(value, *a))
    monkeypatch.setattr(GroupKeys, "__iter__", no_python_keys)
    release = dp_spark.top_k(events, person_col="person", item_col="item", group_by="g", groups=keys, k=2,
                             epsilon=1.0, domain=["i0", "i1", "i2", "i3"], max_groups=1, seed=3)
    assert GroupKeys in seen  # the rebuild saw the keys already read
    assert release.parameters["groups"] == "public: a Spark DataFrame" and release.result["groups_released"] == 3_000
