"""DP Set Union on a local session: stages, the release, the CLI.

The Spark histograms are checked against the numpy kernels bit for bit
(chispa, no tolerance: the weights are deterministic), the fixed-point units
against the mechanism layer, the sharded histograms' sensitivity on random
neighbouring pairs (a person added or removed), and the whole
release statistically: with many "probe" persons each holding items nobody
else holds, the fraction of probes with any item released must be at most δ
(δ/2 for the Gaussian policies) up to sampling error — and match the exact
prediction, which is what lets this test fail.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from scipy import stats

import dp_spark
from dp_spark.accounting import ApproxDP, PrivacyFilter
from dp_spark.cli import main
from dp_spark.errors import BudgetExceededError, ParameterError, SchemaError
from dp_spark.noise import make_rng
from dp_spark.plans.set_union import plan as release_plan
from dp_spark.mechanisms.set_union import (
    BY_FREQUENCY,
    HELD_SUPPORT,
    POLICIES,
    SEQUENTIAL,
    NOISE_OF,
    build_histogram,
    derive_randomness,
    person_units,
    plan_set_union,
    shard_cutoff,
)
from dp_spark.noise.rng import StreamRoot
from dp_spark.stages.edges import edges
from dp_spark.stages.set_union import (
    DEFAULT_SHARDS,
    person_units_column,
    restricted_sets,
    sequential_histogram,
    set_union_histogram,
    weight_histogram,
)
from tests.spark.seeded import PERSONS

SCHEMA = "person_id long, item string"


@pytest.fixture(scope="module")
def small(spark):
    rng = np.random.default_rng(0)
    rows = [(int(p), f"w{int(x)}") for p in range(300)
            for x in np.minimum(rng.zipf(1.4, int(rng.integers(1, 15))), 60)]
    return spark.createDataFrame(rows, SCHEMA).cache()


def collect_sets(sets_df):
    return {r["person"]: list(r["items"]) for r in sets_df.collect()}


# -------------------------------------------------------------- restriction

def test_restriction_keeps_own_items_independently_of_others(spark, small):
    extra = spark.createDataFrame([(9999, f"w{i}") for i in range(30)], SCHEMA)
    # Reference: all of a person's items in one array, sorted by the salted
    # hash, first 4 (what the window-and-rank layout must reproduce).
    salt = F.lit(11).cast("long")
    reference = small.groupBy(F.col("person_id").alias("person")).agg(
        F.collect_set("item").alias("s")
    ).select("person", "s", F.transform(
        F.slice(F.array_sort(F.transform("s", lambda x: F.struct(
            F.xxhash64(salt, F.col("person"), x).alias("h"), x.alias("i")))), 1, 4),
        lambda t: t["i"]).alias("ref"))
    joined = restricted_sets(edges(small, "person_id", "item"), 4, salt=11).join(reference, "person", "full")
    own, kept = {}, {}
    for r in joined.collect():
        assert r["items"] is not None and r["s"] is not None  # one row per person, on both sides
        own[r["person"]], kept[r["person"]] = set(r["s"]), list(r["items"])
        assert list(r["items"]) == list(r["ref"])  # same items, in (hash, item) order
    with_extra = collect_sets(restricted_sets(edges(small.union(extra), "person_id", "item"), 4, salt=11))
    assert kept.keys() == own.keys()
    for person, items in kept.items():
        assert len(items) == len(set(items)) == min(4, len(own[person]))
        assert set(items) <= own[person]
        assert with_extra[person] == items  # nobody else's data changes the choice
    assert len(with_extra[9999]) == 4
    other_salt = collect_sets(restricted_sets(edges(small, "person_id", "item"), 4, salt=12))
    assert any(set(other_salt[p]) != set(kept[p]) for p in kept)  # the salt re-draws


def test_restriction_is_a_uniform_choice(spark):
    df = spark.createDataFrame([(p, x) for p in range(800) for x in "abcd"], SCHEMA)
    picked = restricted_sets(edges(df, "person_id", "item"), 1, salt=5)
    counts = {r["i"]: r["n"] for r in picked.select(F.col("items")[0].alias("i")).groupBy("i")
              .agg(F.count("*").alias("n")).collect()}
    assert sorted(counts) == list("abcd")
    assert stats.chisquare(list(counts.values())).pvalue > 1e-4


# ---------------------------------------------------------------- histograms

def emulate(sets_rows, policy, gamma, shards):
    """The kernel of dp_spark.mechanisms.set_union over the shards, persons in hashed order."""
    codes = {}
    total = {}
    for s in range(shards):
        members = sorted((r for r in sets_rows if r["shard"] == s), key=lambda r: (r["order"], r["person"]))
        item_sets = [[codes.setdefault(x, len(codes)) for x in r["items"]] for r in members]
        indptr = np.concatenate(([0], np.cumsum([len(x) for x in item_sets]))).astype(np.int64)
        flat = np.array([c for x in item_sets for c in x], dtype=np.int64)
        h = build_histogram(indptr, flat, len(codes), policy, gamma)
        for item, code in codes.items():
            if h[code] > 0 or (policy in HELD_SUPPORT and code < len(h)):  # greedy: kept items at 0 too
                total[item] = total.get(item, 0.0) + float(h[code])
    return total


@pytest.mark.parametrize("policy", POLICIES)
def test_spark_histogram_equals_the_kernel(spark, small, policy):
    shards = 3
    gamma = 2.5 if policy in SEQUENTIAL else None
    sets_df = restricted_sets(edges(small, "person_id", "item"), 5, salt=3)
    rows = sets_df.select(
        "person", "items",
        F.pmod(F.hash("person"), F.lit(shards)).alias("shard"), F.xxhash64("person").alias("order"),
    ).collect()
    expected = emulate(rows, policy, gamma, shards)  # additive policies: shards do not matter
    got = weight_histogram(sets_df, policy, gamma, shards)
    want = spark.createDataFrame(sorted(expected.items()), "item string, weight double")
    # Bit for bit: additive weights are exact integer sums (the emulation adds
    # them in another order), sequential shard histograms are added in shard
    # order on both sides.
    assert_df_equality(got.orderBy("item"), want, ignore_nullable=True)


@pytest.mark.parametrize("policy", SEQUENTIAL)
def test_fused_sequential_histogram_equals_sets_then_kernel(spark, small, policy):
    # The one-shuffle path (restriction inside the kernel's pass over sorted
    # rows) must give the histogram of restricted_sets + weight_histogram bit
    # for bit — also with tiny Arrow batches, so that persons (a hot one with
    # 3,000 rows and repeated items among them) straddle batch boundaries.
    hot = [(77_777, f"w{i % 700}") for i in range(3_000)] + [(77_778, "w1")] * 50
    df = small.union(spark.createDataFrame(hot, SCHEMA))
    edge_df = edges(df, "person_id", "item")
    sets_df = restricted_sets(edge_df, 6, salt=9, by_frequency=policy in BY_FREQUENCY)  # the release's order
    want = weight_histogram(sets_df, policy, 2.0, 3)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    try:
        for batch in ("7", old):
            spark.conf.set(key, batch)
            got = sequential_histogram(edge_df, policy, 6, 9, 2.0, 3)
            assert_df_equality(got.orderBy("item"), want.orderBy("item"), ignore_nullable=True)
    finally:
        spark.conf.set(key, old)


@pytest.mark.parametrize("policy", [p for p in POLICIES if p not in SEQUENTIAL])
def test_additive_histogram_equals_restricted_sets_then_weights(spark, small, policy, monkeypatch):
    # The release's path for the additive policies (one shuffle by person, the restriction and the
    # units in one Python pass, a long sum per item) must give the histogram of restricted_sets +
    # weight_histogram bit for bit: persons above Δ0 (a hot one with 3,000 rows and repeated items)
    # straddling tiny Arrow batches, any number of partitions, Spark's sort on all keys or the Python
    # pass finishing the order.
    from dp_spark.stages import set_union as stage

    hot = [(77_777, f"w{i % 700}") for i in range(3_000)] + [(77_778, "w1")] * 50
    edge_df = edges(small.union(spark.createDataFrame(hot, SCHEMA)), "person_id", "item")
    want = weight_histogram(restricted_sets(edge_df, 6, salt=9), policy).orderBy("item")
    assert want.where(F.col("weight") > 0).count() == want.count() > 50
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    try:
        for batch, partitions, python_sort in (("7", 1, True), (old, 5, True), ("5", 3, False)):
            spark.conf.set(key, batch)
            monkeypatch.setattr(stage, "_binary_ordered", lambda dtype, keep=python_sort: keep)
            got = stage.additive_histogram(edge_df, policy, 6, 9, partitions=partitions)
            assert_df_equality(got.orderBy("item"), want, ignore_nullable=True)
    finally:
        spark.conf.set(key, old)
    with pytest.raises(ParameterError, match="additive policies"):
        stage.additive_histogram(edge_df, "policy-gaussian", 6, 9)


@pytest.mark.parametrize("policy", SEQUENTIAL)
def test_fused_sum_and_threshold_equals_summed_histogram_then_threshold(spark, small, policy):
    # The release's path for the sequential policies (shard parts shuffled by
    # noise bucket, summed in shard order and thresholded in one Python pass)
    # must release exactly the items of the summed histogram thresholded with
    # the same seeded bucket generators — in any number of partitions and with
    # tiny Arrow batches, so that buckets and an item's shard parts straddle
    # batch boundaries.
    from dp_spark.mechanisms.set_union import ThresholdStep
    from dp_spark.stages.set_union import _shard_histograms, released_items, released_shard_items

    edge_df = edges(small, "person_id", "item")
    numeric = plan_set_union(1.0, 0.2, 6, policy)
    step = ThresholdStep(numeric, StreamRoot(123, ()))
    want = sorted(r["item"] for r in released_items(
        sequential_histogram(edge_df, policy, 6, 9, 2.0, 3), step, 5).collect())
    assert 0 < len(want) < small.select("item").distinct().count()
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    try:
        for batch, partitions in (("2", 1), ("7", 5), (old, 13)):
            spark.conf.set(key, batch)
            got = released_shard_items(_shard_histograms(edge_df, policy, 6, 9, 2.0, 3), step, partitions)
            assert sorted(r["item"] for r in got.collect()) == want
    finally:
        spark.conf.set(key, old)


@pytest.mark.parametrize("method", ["weighted-gaussian", "policy-gaussian", "policy-laplace"])
def test_a_seeded_release_is_the_same_in_any_partitioning(spark, small, method):
    # Each item's noise comes from its public noise bucket's generator, so the
    # released set of a seeded run does not depend on how many partitions the
    # noise step runs in, nor on the input's partitioning or Arrow batch size.
    from dp_spark.stages.set_union import NOISE_BUCKETS

    kwargs = dict(epsilon=1.0, delta=0.05, max_items=5, method=method, seed=11, count=False)
    want = sorted(r["item"] for r in dp_spark.set_union(small, **kwargs, partitions=1).items.collect())
    assert 0 < len(want) < small.select("item").distinct().count() and NOISE_BUCKETS > 13
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    try:
        for batch, partitions, parts in (("3", 7, 1), (old, 13, 9)):
            spark.conf.set(key, batch)
            got = dp_spark.set_union(small.repartition(parts), **kwargs, partitions=partitions)
            assert sorted(r["item"] for r in got.items.collect()) == want
    finally:
        spark.conf.set(key, old)


def test_spark_person_units_equal_the_mechanism_layer(spark):
    sizes = list(range(1, 3001)) + [4095, 4096, 4097, 65535, 65536, 10**6 + 3, 2**23 - 1, 2**23 + 1,
                                     2**31 - 1]
    df = spark.createDataFrame([(n,) for n in sizes], "n long")
    cols = [person_units_column(p, F.col("n")).alias(p) for p in ("count", "weighted-laplace",
                                                                   "weighted-gaussian")]
    for r in df.select("n", *cols).collect():
        for policy in ("count", "weighted-laplace", "weighted-gaussian"):
            assert r[policy] == person_units(policy, r["n"]), (policy, r["n"])


def neighbour_facts(h_with, h_without, policy, max_items):
    """Facts (S) and (T) on Spark histograms (dicts item -> weight) of a
    neighbouring pair; the list of violated facts."""
    bad = []
    items = sorted(h_with)
    if not set(h_without) <= set(h_with):
        bad.append("support")
    diff = np.array([h_with[u] - h_without.get(u, 0.0) for u in items])
    norm = np.abs(diff).sum() if NOISE_OF[policy] == "laplace" else np.sqrt(diff @ diff)
    if norm > 1 + 1e-9:
        bad.append("S")
    new = set(h_with) - set(h_without)
    if policy in HELD_SUPPORT:  # greedy: H' >= H, the new kept items weigh <= 1 in total
        if diff.min(initial=0) < -1e-9 or len(new) > max_items or sum(h_with[u] for u in new) > 1 + 1e-9:
            bad.append("T")
    elif new:
        cap = 1 / len(new) if policy.endswith("laplace") else 1 / math.sqrt(len(new))
        if len(new) > max_items or any(h_with[u] > cap + 1e-12 for u in new):
            bad.append("T")
    return bad


def test_sharded_policy_histograms_keep_sensitivity_on_random_neighbours(spark, small):
    """Neighbours of ``small`` (persons 0..299): two persons added (one fixed,
    sharing items with others and holding 3 nobody else has; one random) and
    two random persons removed; and ``small`` repartitioned and reordered,
    which must give bit-identical weights. All histograms in one Spark job."""
    rng = np.random.default_rng(8)
    added = [(4242, x) for x in ("w1", "w2", "w3", "only1", "only2", "only3")]
    k = int(rng.integers(4, 10))
    added_random = [(5000, f"w{int(x)}") for x in np.minimum(rng.zipf(1.4, k), 60)]
    added_random += [(5000, f"new{i}") for i in range(int(rng.integers(1, 4)))]
    removed = [int(p) for p in rng.choice(300, 2, replace=False)]
    variants = {
        "base": small,
        "base_shuffled": small.repartition(5).sortWithinPartitions(F.desc("item"), F.desc("person_id")),
        "add": small.union(spark.createDataFrame(added, SCHEMA)),
        "add_random": small.union(spark.createDataFrame(added_random, SCHEMA)),
        **{f"remove{p}": small.where(F.col("person_id") != p) for p in removed},
    }
    pairs = [("add", "base"), ("add_random", "base")] + [("base", f"remove{p}") for p in removed]
    max_items, gamma = 6, 3.0
    both = None
    for policy in SEQUENTIAL:
        for name, df in variants.items():
            hist_df = set_union_histogram(df, "person_id", "item", policy, max_items, 1, gamma, shards=3)
            hist_df = hist_df.withColumn("side", F.lit(f"{policy}|{name}"))
            both = hist_df if both is None else both.union(hist_df)
    h = {}
    for r in both.collect():  # one Spark job for every neighbouring pair
        h.setdefault(r["side"], {})[r["item"]] = r["weight"]
    for policy in SEQUENTIAL:
        changed = 0
        for with_, without in pairs:
            h1, h2 = h[f"{policy}|{with_}"], h.get(f"{policy}|{without}", {})
            assert neighbour_facts(h1, h2, policy, max_items) == [], (policy, with_, without)
            changed += h1 != h2
        # the pairs exercise the checks (a removed person whose items all sit
        # at the cutoff in their shard can leave the histogram unchanged)
        assert changed >= len(pairs) - 1
        new = set(h[f"{policy}|add"]) - set(h[f"{policy}|base"])
        assert new == {"only1", "only2", "only3"}
        if policy in HELD_SUPPORT:  # only the first of them in 4242's order gets weight
            assert sorted(h[f"{policy}|add"][u] for u in new)[:2] == [0.0, 0.0]
        assert {"new0"} <= set(h[f"{policy}|add_random"]) - set(h[f"{policy}|base"])
        # another input layout, the same bits (shard histograms added in shard order)
        assert h[f"{policy}|base_shuffled"] == h[f"{policy}|base"]


# ---------------------------------------------------- the release, statistically

PROBES = 2000


@pytest.fixture(scope="module")
def probes(spark):
    """PROBES persons with 3 items each that nobody else holds, beside 200
    background persons sharing 20 common items (Δ0 = 3 keeps them all)."""
    rows = [(p, f"u{p}_{k}") for p in range(PROBES) for k in range(3)]
    rows += [(10_000 + p, f"c{(p + k) % 20}") for p in range(200) for k in range(3)]
    return spark.createDataFrame(rows, SCHEMA).cache()


@pytest.mark.parametrize("policy", POLICIES)
def test_items_only_one_person_holds_are_released_with_probability_at_most_delta(probes, policy):
    eps, delta, max_items = 1.0, 0.1, 3
    release = dp_spark.set_union(probes, epsilon=eps, delta=delta, max_items=max_items, method=policy, shards=4,
                                 seed=20 + POLICIES.index(policy), count=False)
    released = [r["item"] for r in release.items.collect()]
    hit = {int(m.group(1)) for m in map(re.compile(r"u(\d+)_").match, released) if m}
    rate = len(hit) / PROBES
    plan = plan_set_union(eps, delta, max_items, policy)
    weight = {"count": 1.0, "weighted-laplace": 1 / 3, "policy-laplace": 1 / 3}.get(policy, 1 / math.sqrt(3))
    weights = [weight] * 3
    if policy in HELD_SUPPORT:  # greedy: the probe's first item gets min(1, Γ per shard), the others 0
        weights = build_histogram(np.array([0, 3]), np.arange(3), 3, policy, shard_cutoff(plan.gamma, 4)).tolist()
        assert sorted(weights) == [0.0, 0.0, 1.0]
    exact = 1 - np.prod([1 - plan.release_probability(w) for w in weights])
    bound = delta if plan.noise == "laplace" else delta / 2
    assert exact <= bound * (1 + 1e-9)
    assert rate <= bound + 4.5 * math.sqrt(bound * (1 - bound) / PROBES)
    assert abs(rate - exact) <= 4.5 * math.sqrt(exact * (1 - exact) / PROBES) + 1 / PROBES
    if policy == "count" or policy in HELD_SUPPORT:  # the bound is attained: this check can fail
        # the grid's integer threshold is the least one up to a cell of slack: two cells lower exceeds δ
        lower = dataclasses.replace(plan, rho=plan.rho - math.ldexp(2.0, -plan.grid_bits))
        assert 1 - np.prod([1 - lower.release_probability(w) for w in weights]) > delta
    assert sum(1 for x in released if x.startswith("c")) >= 10  # common items do come out


# ------------------------------------------------------------------- the API

RESULT_KEYS = {"released_count", "method", "max_items", "noise", "noise_scale", "threshold",
               "cutoff", "shards", "cutoff_per_shard"}


def test_release_report_and_items(spark, report_schema):
    import jsonschema

    # 777 persons hold "popular"; nothing in the report may reveal that count.
    rows = [(p, "popular") for p in range(777)] + [(p, f"r{p % 50}") for p in range(777)]
    df = spark.createDataFrame(rows, SCHEMA)
    release = dp_spark.set_union(df, epsilon=3.0, delta=1e-5, max_items=10, seed=1)
    report = release.to_dict()
    jsonschema.validate(json.loads(json.dumps(report)), report_schema)
    result, privacy = report["result"], report["privacy"]
    assert set(result) == RESULT_KEYS and "items" not in report and "items" not in result
    assert report["release"] == "set-union" and result["method"] == "policy-gaussian"
    assert report["parameters"]["method"] == "policy-gaussian" and "policy" not in report["parameters"]
    assert privacy["kind"] == "approx-dp" and privacy["privacy_unit"] == "person"
    assert (privacy["epsilon"], privacy["delta"]) == (3.0, 1e-5)
    assert sum(s["delta"] for s in report["budget_split"]) == pytest.approx(1e-5)
    assert release.budget_split == release_plan(epsilon=3.0, delta=1e-5, max_items=10).budget_split()
    # default shards: fixed (8), not the session's shuffle partitions (4 here)
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4" and DEFAULT_SHARDS == 8
    assert result["cutoff"] > result["threshold"] > 0 and result["shards"] == 8
    assert result["cutoff_per_shard"] == pytest.approx(result["cutoff"] / math.sqrt(8))  # Γ/√8
    assert report["parameters"]["shard_cutoff"] == "scaled" and report["parameters"]["shards"] == 8
    assert report["seeded"] and not report["publishable"]
    assert release.items.columns == ["item"] and release.items is release.artifacts["items"]
    items = sorted(r["item"] for r in release.items.collect())
    assert "popular" in items and set(items) <= {"popular", *(f"r{i}" for i in range(50))}
    assert result["released_count"] == release.released_count == len(items)
    text = json.dumps(report)
    assert "777" not in text and "items" in release.errors
    assert not re.search(r"\bweight\b\"", text)


def test_integer_items_stay_integers_and_nulls_are_dropped(spark):
    rows = [(p, p % 3) for p in range(400)] + [(None, 1), (5, None)]
    df = spark.createDataFrame(rows, "user long, thing int")
    release = dp_spark.set_union(df, epsilon=2.0, delta=1e-4, max_items=2, method="weighted-gaussian",
                                 person_col="user", item_col="thing", seed=2)
    assert dict(release.items.dtypes) == {"item": "bigint"}
    assert sorted(r["item"] for r in release.items.collect()) == [0, 1, 2]


def test_recomputing_the_items_gives_the_same_set(small):
    # Unseeded, not persisted: two actions recompute the pipeline from scratch.
    release = dp_spark.set_union(small, epsilon=1.0, delta=0.05, max_items=5, method="policy-laplace", count=False)
    first = release.items.collect()
    second = release.items.collect()
    assert sorted(first) == sorted(second) and len(first) > 0
    assert release.to_dict()["publishable"] is True and "released_count" not in release.values


def _plan_strings(df) -> str:
    """Everything a reader of the DataFrame's plan can see: explain (all
    modes), the query execution and the logical plan's JSON form."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for mode in ("extended", "formatted", "codegen", "cost"):
            df.explain(mode=mode)
    qe = df._jdf.queryExecution()
    return "\n".join([out.getvalue(), qe.toString(), qe.logical().toJSON(), qe.executedPlan().toJSON()])


#: A seed whose digits cannot occur by chance in a plan string.
KEY_SEED = 7_340_813_926_157_402_981


@pytest.mark.parametrize("policy", ["count", "policy-gaussian"])
def test_released_items_plan_holds_no_key_and_never_recomputes(small, policy):
    # Finding 8 (issue 9): the lazy plan carried the salt (a literal) and the
    # noise root (pickled into the mapInPandas function). A seeded run makes
    # the key known to the test: it must not be anywhere in the plan.
    release = dp_spark.set_union(small, epsilon=1.0, delta=0.05, max_items=5, method=policy, seed=KEY_SEED)
    salt, root = derive_randomness(make_rng(KEY_SEED))
    text = _plan_strings(release.items)
    assert len(str(salt)) > 12 and str(salt) not in text and str(KEY_SEED) not in text
    for node in ("MapInPandas", "PythonUDF", "xxhash64", "Exchange", "Window"):
        assert node not in text, node  # no noise function, no lineage back to the data
    first = sorted(r["item"] for r in release.items.collect())
    assert first == sorted(r["item"] for r in release.items.collect())
    assert release.released_count == len(first) > 0


def test_unseeded_noise_is_keyed_by_the_release_and_two_evaluations_agree(small):
    # Unseeded: the noise root holds a key drawn from the release's ChaCha20 (not the seed path), and
    # the released set is the same on every action (evaluated once).
    assert derive_randomness(make_rng(), seeded=False)[1].secret is not None
    release = dp_spark.set_union(small, epsilon=1.0, delta=0.05, max_items=5, method="policy-laplace")
    sets = [sorted(r["item"] for r in release.items.collect()) for _ in range(3)]
    assert sets[0] == sets[1] == sets[2] and release.items.count() == release.released_count


def test_seeded_release_is_reproducible(small):
    a = dp_spark.set_union(small, epsilon=1.0, delta=0.05, max_items=5, method="count", seed=4, count=False)
    b = dp_spark.set_union(small, epsilon=1.0, delta=0.05, max_items=5, method="count", seed=4, count=False)
    assert_df_equality(a.items, b.items, ignore_row_order=True)


def test_empty_table_is_a_valid_release(spark):
    empty = spark.createDataFrame([], SCHEMA)
    release = dp_spark.set_union(empty, epsilon=1.0, delta=1e-6, seed=1)
    assert release.released_count == 0


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"epsilon": 0.0}, ParameterError),
        ({"epsilon": -2.0}, ParameterError),
        ({"delta": 0.0}, ParameterError),
        ({"delta": 1.0}, ParameterError),
        ({"max_items": 0}, ParameterError),
        ({"alpha": -1.0}, ParameterError),
        ({"method": "greedy"}, ParameterError),
        ({"policy": "policy-gaussian"}, TypeError),  # method= is the one name
        ({"count": "yes"}, ParameterError),
        ({"shards": 0}, ParameterError),
        ({"shards": 10**9}, ParameterError),
        ({"partitions": 10**9}, ParameterError),
        ({"max_items": 10**12}, ParameterError),
        ({"alpha": 1e9}, ParameterError),
        ({"shard_cutoff": "half"}, ParameterError),
        ({"seed": -1}, ParameterError),
        ({"person_col": "nobody"}, SchemaError),
        ({"item_col": "nothing"}, SchemaError),
    ],
)
def test_bad_parameters(small, kwargs, error):
    args = {"epsilon": 1.0, "delta": 1e-6, **kwargs}
    with pytest.raises(error):
        dp_spark.set_union(small, **args)


def test_budget_is_checked_before_data_is_read_and_spent(small, unreadable_events):
    df = unreadable_events
    budget = PrivacyFilter(ApproxDP(1.0, 1e-5))
    with pytest.raises(BudgetExceededError):
        dp_spark.set_union(df, epsilon=2.0, delta=1e-6, budget=budget)
    assert budget.spent.epsilon == 0.0
    dp_spark.set_union(small, epsilon=0.6, delta=6e-6, max_items=3, method="count", budget=budget, seed=1,
                       count=False)
    assert (budget.spent.epsilon, budget.spent.delta) == pytest.approx((0.6, 6e-6))
    with pytest.raises(BudgetExceededError):
        dp_spark.set_union(small, epsilon=0.6, delta=1e-6, budget=budget)


# ------------------------------------------------------------------- the CLI

def run_cli(capsys, *argv):
    try:
        code = main(["set-union", *argv])
    except SystemExit as exc:  # argparse's own errors (unknown choice): exit 2, one line
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str):
    errors = [l for l in err.splitlines() if "error" in l.lower()]
    assert len(errors) == 1, err
    assert "Traceback" not in err and "at org.apache" not in err and "Py4J" not in err, err


def test_cli_writes_items_and_report(capsys, tmp_path, spark):
    report_path, items_path = tmp_path / "report.json", tmp_path / "items.parquet"
    code, out, err = run_cli(capsys, "--rows", "20000", "--seed", "1", "--max-items", "20",
                             "--epsilon", "2", "--delta", "1e-5", "--method", "policy-laplace",
                             "--items-output", str(items_path), "--output", str(report_path))
    assert code == 0, err
    report = json.loads(report_path.read_text())
    assert report["result"]["method"] == report["parameters"]["method"] == "policy-laplace"
    assert report["privacy"]["epsilon"] == 2.0
    written = spark.read.parquet(str(items_path))
    assert written.columns == ["item"] and written.count() == report["result"]["released_count"] > 0
    assert "NOT private" in out

    # Bad input: one line, exit 2, earlier outputs untouched.
    before = (report_path.read_text(), sorted(p.name for p in items_path.iterdir()))
    for argv in (["--delta", "1.5"], ["--max-items", "0"], ["--alpha", "-1"], ["--epsilon", "0"],
                 ["--method", "greedy"], ["--policy", "count"], ["--budget-epsilon", "1"], ["--shards", "0"]):
        code, out, err = run_cli(capsys, "--rows", "2000", "--seed", "1", *argv,
                                 "--items-output", str(items_path), "--output", str(report_path), "--overwrite")
        assert code == 2, (argv, err)
        assert_one_line_error(err)
    assert before == (report_path.read_text(), sorted(p.name for p in items_path.iterdir()))


LIMITS_SCRIPT = """
import sys
from dp_spark.cli import main
from pyspark import SparkContext
code = main(["set-union", *sys.argv[1:], "--rows", "1000"])
assert SparkContext._active_spark_context is None, "Spark was started"
sys.exit(code)
"""


@pytest.mark.parametrize("argv, says", [
    (["--max-items", "1000000000000"], "max_items must be a whole number from 1 to 100,000"),
    (["--shards", "100000"], "shards must be a whole number from 1 to 4,096"),
    (["--alpha", "1e9"], "alpha must be at most 1000"),
])
def test_cli_refuses_unbounded_parameters_before_spark_starts(tmp_path, argv, says):
    # Before: --max-items 1e12 ended in "unexpected MemoryError".
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", LIMITS_SCRIPT, *argv], capture_output=True, text=True,
                          env={**os.environ, "DP_SPARK_DEBUG": ""}, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert says in proc.stderr and "MemoryError" not in proc.stderr
    assert_one_line_error(proc.stderr)


DRY_RUN_SCRIPT = """
import json, sys
from dp_spark.cli import main
from pyspark import SparkContext
code = main(["set-union", "--dry-run", "--quiet", "--method", "count", "--epsilon", "2", "--max-items", "7"])
assert SparkContext._active_spark_context is None, "Spark was started"
sys.exit(code)
"""


def test_cli_dry_run_prints_the_plan_without_spark(tmp_path):
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", DRY_RUN_SCRIPT], capture_output=True, text=True,
                          env={**os.environ, "DP_SPARK_DEBUG": ""}, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    document = json.loads(proc.stdout)
    want = release_plan(epsilon=2.0, delta=1e-6, method="count", max_items=7)
    assert document["plan"] is True and document["parameters"]["method"] == "count"
    assert document["budget_split"] == want.budget_split() and document["privacy"] == want.privacy()


def test_cli_budget_refusal(capsys, tmp_path):
    code, out, err = run_cli(capsys, "--rows", "2000", "--epsilon", "2", "--delta", "1e-6",
                             "--budget-epsilon", "1", "--budget-delta", "1e-5",
                             "--output", str(tmp_path / "r.json"))
    assert code == 2 and "No data was read" in err
    assert not (tmp_path / "r.json").exists()


# Spark Connect: tests/spark/test_connect.py runs the set union on a Connect server.


def test_dp_spark_set_union_is_the_release_function_after_the_mechanisms_are_imported():
    # The mechanism package has its own name, so the lazily exported release
    # function is never shadowed by a subpackage.
    import dp_spark
    import dp_spark.mechanisms.set_union  # noqa: F401
    from dp_spark.releases.set_union import set_union

    assert dp_spark.set_union is set_union


# -- seeded cases (tests/spark/seeded.py: test_seeded_values, test_noise_records) --

#: case -> (parameters, input kind, the kinds of Release.noise in the order drawn); every method
#: The values only a grouped report has (issue 24): the per-key table and its size.
GROUPED_ONLY = {"groups", "groups_released", "groups_in_report", "group_sizes"}


def bare(record):
    """A noise record up to its target's wording (the grouped one says pairs)."""
    return dataclasses.replace(record, target="")


@pytest.mark.parametrize("method", POLICIES)
def test_an_ungrouped_release_is_the_one_key_grouped_release(spark, method):
    """Issue 37 (one body): seeded, the ungrouped release equals the grouped
    release with one public key and m = 1 on the same rows, all in that key:
    the same released items, values and noise records. ε is low enough that
    some items are held back (0 < released < 30), so a different salt,
    partitioning or noise draw on either path changes the set."""
    df = spark.createDataFrame([(p, i, "k") for p, i in PERSONS], "person_id long, item string, g string")
    kwargs = dict(epsilon=0.5, delta=1e-5, method=method, max_items=3, seed=5)
    plain = dp_spark.set_union(df, **kwargs)
    grouped = dp_spark.set_union(df, **kwargs, group_by="g", groups=["k"], max_groups=1)
    items = sorted(r["item"] for r in plain.items.collect())
    assert 0 < len(items) < 30
    assert sorted((r["g"], r["item"]) for r in grouped.groups.collect()) == [("k", i) for i in items]
    assert {k: v for k, v in grouped.result.items() if k not in GROUPED_ONLY} == plain.result
    assert grouped.result["groups"] == [{"group": "k", "released_count": len(items)}]
    assert grouped.result["group_sizes"]["largest"] == [{"group": "k", "size": len(items)}]
    assert [bare(r) for r in grouped.noise] == [bare(r) for r in plain.noise]


SEEDED_CASES = {
    f"set_union/{m}": (dict(epsilon=2.0, delta=1e-5, method=m, max_items=3), "persons", [kind])
    for m, kind in (("count", "discrete-laplace"), ("weighted-laplace", "discrete-laplace"),
                    ("weighted-gaussian", "discrete-gaussian"), ("policy-laplace", "discrete-laplace"),
                    ("policy-gaussian", "discrete-gaussian"), ("policy-greedy", "discrete-laplace"))
}


def seeded_artifacts(release):
    """The released items are pinned beside the values."""
    return {"items": sorted(r["item"] for r in release.items.collect())}


SEEDED_VALUES = {
    'set_union/count': {
        'items': [
            'item0', 'item1', 'item10', 'item11', 'item12', 'item13', 'item14', 'item15', 'item16', 'item17',
            'item18', 'item19', 'item2', 'item20', 'item21', 'item22', 'item23', 'item24', 'item25', 'item27',
            'item28', 'item3', 'item4', 'item5', 'item6', 'item7', 'item8', 'item9',
        ],
        'values': {
            'max_items': 3,
            'method': 'count',
            'noise': 'laplace',
            'noise_scale': 1.5000004777684808,
            'released_count': 28,
            'threshold': 18.87758731842041,
        },
    },
    'set_union/policy-gaussian': {
        'items': [
            'item0', 'item1', 'item10', 'item11', 'item12', 'item13', 'item14', 'item15', 'item16', 'item17',
            'item18', 'item19', 'item2', 'item20', 'item21', 'item22', 'item23', 'item24', 'item25', 'item26',
            'item27', 'item28', 'item3', 'item4', 'item5', 'item6', 'item7', 'item8', 'item9',
        ],
        'values': {
            'cutoff': 15.387387450077767,
            'cutoff_per_shard': 5.440263005347384,
            'max_items': 3,
            'method': 'policy-gaussian',
            'noise': 'gaussian',
            'noise_scale': 2.2273636769505174,
            'released_count': 29,
            'shards': 8,
            'threshold': 10.932660096176733,
        },
    },
    'set_union/policy-greedy': {
        'items': [
            'item0', 'item1', 'item10', 'item11', 'item12', 'item13', 'item14', 'item15', 'item16', 'item17',
            'item18', 'item19', 'item2', 'item20', 'item21', 'item22', 'item23', 'item24', 'item25', 'item26',
            'item27', 'item28', 'item29', 'item3', 'item4', 'item5', 'item6', 'item7', 'item8', 'item9',
        ],
        'values': {
            'cutoff': 7.529667856171727,
            'cutoff_per_shard': 2.662139600590701,
            'max_items': 3,
            'method': 'policy-greedy',
            'noise': 'laplace',
            'noise_scale': 0.5000004777684808,
            'released_count': 30,
            'shards': 8,
            'threshold': 6.529666900634766,
        },
    },
    'set_union/policy-laplace': {
        'items': [
            'item0', 'item1', 'item10', 'item11', 'item12', 'item13', 'item14', 'item15', 'item16', 'item17',
            'item18', 'item19', 'item2', 'item20', 'item21', 'item22', 'item23', 'item24', 'item25', 'item26',
            'item27', 'item28', 'item29', 'item3', 'item4', 'item5', 'item6', 'item7', 'item8', 'item9',
        ],
        'values': {
            'cutoff': 7.409895898774266,
            'cutoff_per_shard': 2.619793818954835,
            'max_items': 3,
            'method': 'policy-laplace',
            'noise': 'laplace',
            'noise_scale': 0.5000004777684808,
            'released_count': 30,
            'shards': 8,
            'threshold': 6.409894943237305,
        },
    },
    'set_union/weighted-gaussian': {
        'items': [
            'item0', 'item1', 'item10', 'item11', 'item12', 'item13', 'item14', 'item15', 'item16', 'item17',
            'item18', 'item19', 'item2', 'item20', 'item21', 'item22', 'item23', 'item24', 'item25', 'item26',
            'item27', 'item28', 'item3', 'item4', 'item5', 'item6', 'item7', 'item8', 'item9',
        ],
        'values': {
            'max_items': 3,
            'method': 'weighted-gaussian',
            'noise': 'gaussian',
            'noise_scale': 2.2212283424833004,
            'released_count': 29,
            'threshold': 10.904136110523723,
        },
    },
    'set_union/weighted-laplace': {
        'items': [
            'item0', 'item1', 'item10', 'item11', 'item12', 'item13', 'item14', 'item15', 'item16', 'item17',
            'item18', 'item19', 'item2', 'item20', 'item21', 'item22', 'item23', 'item24', 'item25', 'item27',
            'item28', 'item3', 'item4', 'item5', 'item6', 'item7', 'item8', 'item9',
        ],
        'values': {
            'max_items': 3,
            'method': 'weighted-laplace',
            'noise': 'laplace',
            'noise_scale': 0.5000004777684808,
            'released_count': 28,
            'threshold': 6.409894943237305,
        },
    },
}


@pytest.mark.parametrize("python_sort", [False, True])
@pytest.mark.parametrize("fused", [False, True])
def test_each_bucket_is_thresholded_once_whole_wherever_the_batches_break(fused, python_sort):
    # The Python pass behind released_items / released_shard_items: rows sorted by (bucket, item[,
    # shard]) arrive in Arrow batches broken anywhere (empty batches too); each bucket must reach
    # threshold(bucket, size) exactly once with all its items (a second call would reuse the bucket's
    # seeded draws), and every item must come out once. Unsorted input is refused. With python_sort
    # the rows arrive sorted by bucket only (shuffled inside each bucket) and the pass sorts each
    # bucket itself: the same calls with the same weights in the same order.
    import random

    import pyarrow as pa

    from dp_spark.stages.set_union import _combine_threshold_partition, _threshold_partition

    rng = random.Random(5)
    for _ in range(200):
        rows = []
        for bucket in sorted(rng.sample(range(256), rng.randint(1, 6))):
            for item in sorted(rng.sample(range(1000), rng.randint(1, 8))):
                for shard in (sorted(rng.sample(range(5), rng.randint(1, 3))) if fused else [0]):
                    rows.append((f"i{item:04d}", shard, rng.random(), bucket))
        if python_sort:  # Spark's sort by bucket alone leaves any order inside a bucket
            rows = sorted(rows, key=lambda r: (r[3], rng.random()))
        batches, i = [], 0
        while i < len(rows):
            part = rows[i:i + rng.randint(0, 4)]
            i += len(part)
            columns = [pa.array([r[0] for r in part], pa.string()), pa.array([r[1] for r in part], pa.int32()),
                       pa.array([r[2] for r in part], pa.float64()), pa.array([r[3] for r in part], pa.int32())]
            names = ["item", "_shard", "weight", "_bucket"]
            keep = [0, 1, 2, 3] if fused else [0, 2, 3]
            batches.append(pa.RecordBatch.from_arrays([columns[k] for k in keep], names=[names[k] for k in keep]))
        calls, seen = [], []

        def threshold(bucket, size):
            calls.append((bucket, size))

            def mask(w):
                if len(w) != size:
                    pytest.fail("partial bucket")
                seen.append(list(w))
                return np.ones(len(w), dtype=bool)
            return mask

        body = _combine_threshold_partition if fused else _threshold_partition
        out = [x for batch in body(iter(batches), threshold, python_sort=python_sort) for x in batch.column(0).to_pylist()]
        items = sorted({(r[3], r[0]) for r in rows})
        assert out == [item for _, item in items]
        by_item: dict = {}
        for item, shard, weight, bucket in sorted(rows, key=lambda r: (r[3], r[0], r[1])):
            by_item[(bucket, item)] = by_item.get((bucket, item), 0.0) + weight  # shard order, from 0.0
        assert [w for ws in seen for w in ws] == [by_item[k] for k in items]  # each item's sum, in item order
        sizes = {}
        for bucket, _ in items:
            sizes[bucket] = sizes.get(bucket, 0) + 1
        assert sorted(calls) == sorted(sizes.items()) and len(calls) == len(sizes)
    twice = pa.RecordBatch.from_arrays([pa.array(["a", "b", "c"]), pa.array([1.0, 1.0, 1.0]), pa.array([3, 4, 3])],
                                       names=["item", "weight", "_bucket"])
    with pytest.raises(RuntimeError, match="two runs"):
        list(_threshold_partition(iter([twice]), lambda b, n: (lambda w: np.ones(len(w), dtype=bool))))


@pytest.mark.parametrize("partitions", [1, 7, 128, 300])
def test_noise_buckets_spread_evenly_over_the_threshold_partitions(spark, partitions):
    """Bucket b of the threshold step lands in partition b mod P, so P <= 256 partitions each get
    ⌊256/P⌋ or ⌈256/P⌉ whole buckets (hashing the bucket id left 15 of 128 partitions idle and
    piled 8 buckets on the fullest); above 256 the extra partitions stay empty."""
    from dp_spark.stages.set_union import NOISE_BUCKETS, _BUCKET, _bucketed

    items = spark.range(5_000).select(F.col("id").cast("string").alias("item"))  # every bucket has items
    coalesce = spark.conf.get("spark.sql.adaptive.coalescePartitions.enabled")
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")  # partition ids as planned
    try:
        parts = (_bucketed(items, partitions, "item").select(F.spark_partition_id().alias("p"), _BUCKET)
                 .distinct().groupBy("p").agg(F.collect_set(_BUCKET).alias("b")).collect())
    finally:
        spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", coalesce)
    seen = {r["p"]: set(r["b"]) for r in parts}
    assert sorted(b for bs in seen.values() for b in bs) == list(range(NOISE_BUCKETS))  # each bucket in one partition
    assert all(b % partitions == p for p, bs in seen.items() for b in bs)
    assert len(seen) == min(partitions, NOISE_BUCKETS)


def test_arrow_sorts_ids_as_spark_does(spark):
    # The set-union stage leaves part of its sorting to Arrow when the ids are longs or strings of
    # the binary collation (_binary_ordered): Arrow's order must be Spark's, or a seeded release's
    # draws would land on other items (and a shard's persons be visited in another order).
    import pyarrow as pa

    from dp_spark.stages.set_union import _binary_ordered
    from pyspark.sql import types as T

    strings = ["", "a", "A", "ab", "a\x00", "a b", "Z", "z", "é", "e\u0301", "\u00ff", "\u0100", "中", "😀",
               "\uffff", "ß", "ss", "10", "9", "-1", "a" * 40, "a" * 39 + "b"]
    longs = [0, 1, -1, 2**63 - 1, -2**63, 2**31, -2**31 - 1, 7, -7, 10**12]
    for values, dtype in ((strings, T.StringType()), (longs, T.LongType())):
        assert _binary_ordered(dtype)
        frame = spark.createDataFrame([(v,) for v in values], T.StructType([T.StructField("v", dtype)]))
        want = [r["v"] for r in frame.orderBy("v").collect()]
        got = pa.table({"v": pa.array(values, type=pa.string() if dtype == T.StringType() else pa.int64())})
        assert got.sort_by([("v", "ascending")]).column("v").to_pylist() == want
    assert not _binary_ordered(T.StringType("UTF8_LCASE")) and not _binary_ordered(T.IntegerType())


@pytest.mark.parametrize("policy", SEQUENTIAL)
def test_the_shard_kernel_sorting_runs_itself_equals_the_fully_sorted_input(policy):
    # _shard_histograms lets Spark sort by xxhash64(person) alone and the kernel sort each run of
    # equal xxhash64(person) by (person, [count desc,] item key, item): the histogram must be the
    # one of the fully sorted input, bit for bit, wherever the batches break, with several persons
    # sharing an xxhash64 value (a collision) and a person's rows spread over many batches.
    import random

    import pyarrow as pa

    from dp_spark.stages.set_union import _sequential_rows_partition

    rng = random.Random(3)
    rows = []
    for person in range(120):
        order = rng.choice([-5, 0, 9, person * 1000])  # many shared xxhash64 values
        shard = person % 3
        for _ in range(rng.choice([1, 2, 5, 60])):
            item = f"w{min(int(rng.paretovariate(1.2)), 80)}"
            rows.append((shard, order, person, (person * 7919 + int(item[1:]) * 104729) % 97 - 50, item, rng.randint(1, 4)))
    keys = [("_order", "ascending"), ("person", "ascending"), ("_key", "ascending"), ("item", "ascending")]
    if policy == "policy-greedy":
        keys.insert(2, ("_freq", "descending"))
    names = ["_shard", "_order", "person", "_key", "item", "_freq"]
    table = pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})
    table = table.cast(pa.schema([("_shard", pa.int32()), ("_order", pa.int64()), ("person", pa.int64()),
                                  ("_key", pa.int64()), ("item", pa.string()), ("_freq", pa.int64())]))
    full = table.sort_by(keys)
    want = pa.Table.from_batches(list(_sequential_rows_partition(
        iter(full.select(["_shard", "person", "item"]).to_batches(max_chunksize=11)), method=policy, gamma=2.5,
        max_items=4)))
    for size in (1, 7, 64, len(rows)):
        shuffled = table.take(pa.array(sorted(range(len(rows)), key=lambda i: (rows[i][1], rng.random()))))
        got = pa.Table.from_batches(list(_sequential_rows_partition(
            iter(shuffled.to_batches(max_chunksize=size)), method=policy, gamma=2.5, max_items=4, sort_keys=keys)))
        assert got.num_rows == want.num_rows > 0
        assert got.sort_by([("_shard", "ascending"), ("item", "ascending")]).equals(
            want.sort_by([("_shard", "ascending"), ("item", "ascending")]))
