"""Grouped count-release with many keys (issue 40): up to 1,000,000 public keys,
held as one Arrow array and joined in Spark. The bounded baseline's released
(group, item) pairs stay in Spark (``release.groups``, stored once); the
driver receives one number per key (Arrow) and at most REPORT_ROWS rows of the
report's first keys; pcr's rows are bounded by k̄ (public). What reaches the
driver, which Spark jobs run and whether a run is refused depend on the public
keys and parameters only."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark import sparkjobs
from dp_spark.errors import ParameterError
from dp_spark.keys import MAX_GROUP_KEYS
from dp_spark.plans.count_release import Params
from dp_spark.releases.count_release import REPORT_ROWS
from dp_spark.stages.session_shape import check_session
from tests.spark.test_session_shapes import MATRIX_SHAPES, settings
from tests.unit import helpers

KEYS = 100_000
#: The groups holding rows: 0..49 (among the report's first 100 keys) and 50,000..99,000.
DATA_GROUPS = [*range(50), *(k * 1000 for k in range(50, 100))]
BOUNDED = dict(method="bounded", max_items=3, rho=2.0, delta=1e-6)
PCR = dict(method="pcr", kbar=400, rho=2.0, delta=1e-6)
COMMON = dict(person_col="person", item_col="item", group_by="g")


def _group(k):
    return F.when(k < 50, k).otherwise(k * 1000)


@pytest.fixture(scope="module")
def events(spark):
    """20,000 rows, 5,000 persons, 300 (group, item) pairs of 50 to 67 persons each in 100 of the keys
    0..KEYS-1; a person holds at most 3 pairs."""
    return spark.range(20_000).select(
        (F.col("id") % 5_000).alias("person"),
        (F.col("id") % 3).cast("string").alias("item"),
        _group((F.col("id") * 7919) % 100).alias("g"),
    ).cache()


@pytest.fixture(scope="module")
def true_counts(events):
    """(g, item) -> distinct persons (NON-PRIVATE: the test's reference)."""
    per_person = events.groupBy("person").agg(F.countDistinct("g", "item").alias("n")).agg(F.max("n")).first()[0]
    assert per_person <= BOUNDED["max_items"]  # the bound keeps every pair: bounded counts are the true ones
    rows = events.groupBy("g", "item").agg(F.countDistinct("person").alias("n")).collect()
    return {(r["g"], r["item"]): r["n"] for r in rows}


@pytest.fixture
def driver_calls(monkeypatch, spark):
    """(method, rows) of every DataFrame.collect / toArrow / toPandas of the session's DataFrame class:
    what reaches the driver, as Rows, Arrow or pandas."""
    calls = []
    frame_class = type(spark.range(1))
    for name in ("collect", "toArrow", "toPandas"):
        original = getattr(frame_class, name)

        def hooked(self, *args, _original=original, _name=name, **kwargs):
            out = _original(self, *args, **kwargs)
            calls.append((_name, len(out) if _name != "toArrow" else out.num_rows))
            return out

        monkeypatch.setattr(frame_class, name, hooked)
    return calls


@pytest.fixture
def job_descriptions(monkeypatch):
    """Every Spark job description the release sets (dp_spark.sparkjobs.spark_job)."""
    seen = []
    real = sparkjobs.set_job_description

    def recording(text):
        seen.append(text)
        return real(text)

    monkeypatch.setattr(sparkjobs, "set_job_description", recording)
    return seen


def _keys_frame(spark, n=KEYS):
    return spark.range(n).select(F.col("id").alias("g")).repartition(7)


@pytest.mark.parametrize("kwargs", [BOUNDED, PCR], ids=["bounded", "pcr"])
def test_100k_public_keys_from_a_dataframe(spark, events, true_counts, driver_calls, kwargs):
    release = dp_spark.count_release(events, **COMMON, **kwargs, groups=_keys_frame(spark), seed=3)
    during = list(driver_calls)
    r = release.result
    assert r["groups_released"] == KEYS and r["groups_in_report"] == 100
    assert [g["group"] for g in r["groups"]] == list(range(100))  # canonical order: by value
    pairs = release.groups.toPandas()
    assert list(pairs.columns) == ["g", "item", "count", "sigma", "error"]
    assert len(pairs) == r["released_count"] > 0 and not pairs.duplicated(["g", "item"]).any()
    got = {(g, i): c for g, i, c in zip(pairs["g"], pairs["item"], pairs["count"])}
    assert set(got) <= set(true_counts)  # only pairs of public keys with rows
    assert all(abs(got[p] - true_counts[p]) <= 6 * s for p, s in zip(got, pairs["sigma"]))
    if kwargs is BOUNDED:  # every pair count (50 to 67) is far above the selection threshold (about 7)
        assert r["selection_threshold"] < 10 and set(got) == set(true_counts) and r["selected"] == len(got)
        assert pairs["error"].nunique() == 1 and "keeps at most 3 pairs" in pairs["error"][0]
    # the report: the first 100 keys' numbers and rows, matching release.groups
    shown = {g["group"]: g["released_count"] for g in r["groups"]}
    assert shown == {k: int((pairs["g"] == k).sum()) for k in range(100)}
    sizes = r["group_sizes"]  # every key's number of released pairs, summarised for the HTML report
    per_key = pairs.groupby("g").size()
    assert sizes["groups"] == KEYS and sum(sizes["counts"]) == KEYS and sizes["counts"][0] == KEYS - len(per_key)
    assert sizes["largest"][0]["size"] == per_key.max() and sizes["largest"][0]["group"] == per_key.idxmax()
    head = pairs[pairs["g"] < 100]
    assert sorted((x["group"], x["item"], x["count"]) for x in r["items"]) == \
        sorted(zip(head["g"], head["item"], head["count"]))
    # no O(keys) Rows or pandas on the driver; Arrow: the key read (KEYS rows) and at most a row per key with
    # released pairs (100 here) or the report's rows
    rows_collected = [n for name, n in during if name in ("collect", "toPandas")]
    assert max(rows_collected, default=0) <= kwargs.get("kbar", 0) + 1
    arrow = sorted(n for name, n in during if name == "toArrow")
    assert arrow[-1] == KEYS and max(arrow[:-1], default=0) <= max(len(DATA_GROUPS), len(r["items"]))
    assert ("toPandas", len(got)) in driver_calls[len(during):]  # the hook sees the test's own call


@pytest.mark.parametrize("kwargs", [BOUNDED, PCR], ids=["bounded", "pcr"])
def test_the_same_release_from_a_key_list_and_a_reordered_key_frame(spark, events, kwargs):
    some = [k for k in DATA_GROUPS if k % 2 == 0] + list(range(100_000, 100_400))  # 450 keys, 400 without rows
    frame = spark.createDataFrame([(k,) for k in some[::-1]], "g long").repartition(5)
    a = dp_spark.count_release(events, **COMMON, **kwargs, groups=some, seed=4)
    b = dp_spark.count_release(events, **COMMON, **kwargs, groups=frame, seed=4)
    assert a.result == b.result and a.result["groups_released"] == len(some)
    assert a.result["released_count"] == b.groups.count() > 0
    assert sorted(map(tuple, a.groups.collect())) == sorted(map(tuple, b.groups.collect()))
    assert a.budget_split == b.budget_split and a.noise == b.noise


@pytest.mark.parametrize("kwargs", [BOUNDED, PCR], ids=["bounded", "pcr"])
def test_the_seeded_grouped_release_is_the_same_in_a_hostile_session(spark, events, kwargs):
    """64-bit Arrow offsets, Arrow batches of 7 rows, ANSI off, adaptive execution off and one shuffle
    partition: the same report and release.groups as the project's session (the stored pairs, the per-key
    numbers and the report's rows travel as Arrow)."""
    def run():
        release = dp_spark.count_release(events, **COMMON, **kwargs, groups=_keys_frame(spark, 1_000), seed=8)
        return release.result, sorted(map(tuple, release.groups.collect()))

    plain = run()
    with settings(spark, MATRIX_SHAPES["all-hostile"]):
        hostile = run()
    assert plain[0]["released_count"] > 0 and hostile == plain


@pytest.mark.parametrize("kwargs", [BOUNDED, PCR], ids=["bounded", "pcr"])
def test_keys_without_rows_release_nothing_in_the_same_shape(spark, events, kwargs):
    release = dp_spark.count_release(events, **COMMON, **kwargs, groups=list(range(100_000, 100_150)), seed=9)
    r = release.result
    assert r["released_count"] == 0 and r["items"] == [] and r["groups_released"] == 150
    assert r["groups"] == [{"group": k, "released_count": 0} for k in range(100_000, 100_100)]
    assert release.groups.count() == 0
    assert release.groups.schema.simpleString() == "struct<g:bigint,item:string,count:bigint,sigma:double,error:string>"


def test_bounded_release_groups_is_evaluated_once(spark, events):
    """release.groups reads the stored pairs: its plan neither re-runs the noise step nor reads the
    input (every action returns the same rows, also after the input's cache is dropped)."""
    release = dp_spark.count_release(events, **COMMON, **BOUNDED, groups=_keys_frame(spark, 1_000), seed=5)
    first = sorted(map(tuple, release.groups.collect()))
    plan = release.groups._jdf.queryExecution().optimizedPlan().toString()
    assert "MapInPandas" not in plan and "Range" not in plan
    assert sorted(map(tuple, release.groups.collect())) == first


def test_more_keys_than_the_limit_are_refused_before_spending(spark, events):
    assert Params.MAX_KEYS == MAX_GROUP_KEYS == 1_000_000
    budget = PrivacyFilter(ZCDP(10.0, 1e-3))
    with pytest.raises(ParameterError, match=r"more than 1,000,000 public keys.*runs in Spark and on Arrow arrays"):
        dp_spark.count_release(events, **COMMON, **BOUNDED, groups=_keys_frame(spark, MAX_GROUP_KEYS + 1),
                               budget=budget)
    assert budget.spent.rho == 0 and budget.ledger == []


def _neighbours(spark, events):
    """D: the events plus 40 pairs (keys 60..99, item "b") of 5 to 9 persons each, around the bounded
    selection's threshold, so what is released varies with the draw and the neighbour; D + y (a person
    holding 40 pairs in 20 public keys and rows in a group that is no key) and D - x."""
    edge = [(20_000 + 10 * j + i, "b", 60 + j) for j in range(40) for i in range(5 + j % 5)]
    base = events.unionByName(spark.createDataFrame(edge, "person long, item string, g long"))
    y = [(10**6, str(j % 3), g) for j, g in enumerate([*range(10), *range(60_000, 70_000, 1_000)] * 2)]
    y.append((10**6, "0", 10**7))
    added = base.unionByName(spark.createDataFrame(y, "person long, item string, g long"))
    return {"D": base, "D+y": added, "D-x": base.where(F.col("person") != 20_000)}


@pytest.mark.parametrize("kwargs", [BOUNDED, PCR], ids=["bounded", "pcr"])
def test_neighbours_differ_only_in_released_values(spark, events, driver_calls, job_descriptions, kwargs):
    """On neighbouring inputs (one person added or removed), each with two draws, the run is refused or not
    alike, runs the same Spark jobs with the same descriptions, brings the same kinds of results to the
    driver in the same order, and its report has the same shape and keys; only the released values differ
    (their number is a DP output: bounded's selection, pcr's filter), and they do differ here (bounded: in
    number too), so a shape that followed them would show."""
    check_session(spark)  # its one probe per session (a collect) is not part of any run here
    shapes, released, outputs = {}, set(), set()
    for name, df in _neighbours(spark, events).items():
        for seed in (6, 9):
            del driver_calls[:], job_descriptions[:]
            release = dp_spark.count_release(df, **COMMON, **kwargs, groups=_keys_frame(spark), seed=seed)
            r = release.result
            shapes[name, seed] = {
                "jobs": list(job_descriptions),
                "driver": [call for call, _ in driver_calls],
                "key read": max(n for call, n in driver_calls if call == "toArrow"),
                "result keys": sorted(r), "errors keys": sorted(release.errors),
                "groups": [g["group"] for g in r["groups"]], "released groups": r["groups_released"],
                "split steps": [s["step"] for s in release.budget_split] if kwargs is BOUNDED else None,
                "schema": release.groups.schema.simpleString(),
            }
            pairs = release.groups.select("g", "item", "count").toPandas()
            released.add(r["released_count"])
            outputs.add(frozenset(zip(pairs["g"], pairs["item"], pairs["count"])))
            assert set(pairs["g"]) <= set(range(KEYS))  # public keys only: never y's 10**7
    first = shapes["D", 6]
    assert first["groups"] == list(range(100)) and first["released groups"] == KEYS
    for key, shape in shapes.items():
        assert shape == first, key
    assert len(outputs) > 1  # the released values differ between the runs ...
    if kwargs is BOUNDED:  # ... and so does their number (pcr's stops at ρ, here after the same number)
        assert len(released) > 1, f"every run released {released} pairs: the case cannot show their number"


def test_cli_groups_output_writes_every_pair_of_100k_keys(spark, events, tmp_path, capsys):
    data, keys, report, out = (tmp_path / "e.parquet", tmp_path / "keys.csv", tmp_path / "r.json",
                               tmp_path / "pairs.parquet")
    events.write.parquet(str(data))
    keys.write_text("g\n" + "\n".join(map(str, range(KEYS))) + "\n")
    code, _, err = helpers.run_cli(
        capsys, "count-release", "--input", str(data), "--person-col", "person", "--item-col", "item",
        "--rho", "2", "--delta", "1e-6", "--method", "bounded", "--max-items", "3", "--group-by", "g",
        "--groups", str(keys), "--groups-output", str(out), "--output", str(report), "--seed", "7", "--quiet")
    assert code == 0, err
    doc = json.loads(report.read_text())
    written = spark.read.parquet(str(out)).toPandas()
    assert doc["result"]["groups_released"] == KEYS and doc["result"]["released_count"] == len(written) == 300
    assert len(doc["result"]["items"]) == 150 <= REPORT_ROWS  # the pairs of keys 0..49
    assert np.isin(written["g"].unique(), DATA_GROUPS).all()
