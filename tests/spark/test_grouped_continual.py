"""Grouped continual-distinct (issue 24) and the continual stage's partitions
(issue 26): the one-pass grouped stage equals the ungrouped stage per group;
on random subset / whole-item neighbours through the real Spark cap at most
2m (m) groups' streams change; seeded API and CLI runs; every public key
released; null groups dropped per row; refusals before anything is spent;
an ungrouped call unchanged; the flip-cell sum's partitions never the
session's shuffle partitions."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark import cli
from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.errors import ParameterError, SchemaError
from dp_spark.mechanisms.continual_distinct.mechanisms import grouped_label
from dp_spark.plan import MAX_PUBLIC_GROUPS
from dp_spark.stages.continual import (
    continual_summaries,
    event_columns,
    flip_cell_table,
    sum_partitions,
    time_mapping,
    valid_events,
)
from dp_spark.stages.continual import GROUP_INDEX, grouped_cells, grouped_events
from dp_spark.stages.edges import GROUP
from dp_spark.stages.groups import cap_groups
from dp_spark.stages.partitioning import python_partitions
from tests.spark.seeded import EVENTS as SEEDED_EVENTS

SCHEMA = "time long, item string, op int, g string"
KEYS = ["a", "b", "c", "d"]
H = 16


def random_events(rng, items, horizon=H, groups=KEYS):
    rows = []
    for x in items:
        for _ in range(int(rng.integers(1, 9))):
            rows.append((int(rng.integers(1, horizon + 1)), f"x{x}", int(rng.choice([1, 1, -1])),
                         str(rng.choice(groups))))
    return rows


def stage(spark, rows, m, shards=2, horizon=H):
    """The grouped stage as the release runs it: valid events with the group,
    restricted to the public keys (index added), each item capped to m groups."""
    df = spark.createDataFrame(rows, SCHEMA)
    cols = event_columns(df, "time", "item", "op")
    events = grouped_events(df, cols, time_mapping(cols.kind, None, None), horizon, "g", "time", "item", "op")
    keys = spark.createDataFrame([(k, i) for i, k in enumerate(KEYS)], f"{GROUP} string, {GROUP_INDEX} int")
    capped = cap_groups(events.join(F.broadcast(keys), on=GROUP), m)
    return capped, grouped_cells(capped, len(KEYS), horizon, shards=shards)


def _same(x, y) -> bool:
    return (np.array_equal(x.z, y.z) and np.array_equal(x.z_truncated, y.z_truncated)
            and np.array_equal(x.over_counts, y.over_counts))


def test_every_groups_cells_are_the_ungrouped_stage_on_its_capped_events(spark):
    rng = np.random.default_rng(3)
    rows = random_events(rng, range(25))
    for m, shards in ((len(KEYS), 1), (1, 3), (2, 2)):
        capped, cells = stage(spark, rows, m, shards)
        for g, key in enumerate(KEYS):
            mine = capped.where(F.col(GROUP_INDEX) == g).select(F.col("step").alias("time"), "item", "op")
            want = continual_summaries(mine, horizon=H, shards=1).summaries
            assert _same(cells.summaries(g), want), (m, shards, key)
        per_item = capped.groupBy("item").agg(F.countDistinct(GROUP).alias("n")).agg(F.max("n")).first()[0]
        assert per_item <= m


@pytest.mark.parametrize("seed", range(3))
def test_a_neighbour_changes_at_most_2m_groups_through_the_spark_cap(spark, seed):
    """Random neighbours through the real stage: one item's events, a random
    subset of them (the release's relation) or all of them, removed."""
    rng = np.random.default_rng(40 + seed)
    m = int(rng.integers(1, 3))
    rows = random_events(rng, range(12))
    x = "x0"
    for whole in (True, False):
        keep = [r for r in rows if r[1] != x or (not whole and rng.random() < 0.5)]
        _, full = stage(spark, rows, m)
        _, less = stage(spark, keep, m)
        changed = [g for g in range(len(KEYS)) if not _same(full.summaries(g), less.summaries(g))]
        assert len(changed) <= (m if whole else 2 * m)
        assert set(np.asarray(KEYS)[changed]) <= {r[3] for r in rows if r[1] == x}
        for g in changed:  # each group's count moves by at most 1 at every step
            assert np.max(np.abs(np.cumsum(full.summaries(g).z) - np.cumsum(less.summaries(g).z))) <= 1


@pytest.fixture(scope="module")
def table(spark):
    rng = np.random.default_rng(11)
    rows = random_events(rng, range(60), groups=["g0", "g1", "g2"])
    rows += [(3, "only-null-group", 1, None)]  # a null group: dropped from every group
    return spark.createDataFrame(rows, "time long, item string, op int, country string")


def test_seeded_api_run_releases_every_public_key(spark, table):
    keys = ["g0", "g1", "g2", "empty"]
    budget = PrivacyFilter(ZCDP(2.0))
    first = dp_spark.continual_distinct(table, rho=1.0, horizon=H, group_by="country", groups=keys, max_groups=1,
                                        seed=4, budget=budget)
    again = dp_spark.continual_distinct(table, rho=1.0, horizon=H, group_by="country", groups=keys, max_groups=1,
                                        seed=4)
    assert budget.spent.rho == pytest.approx(1.0)
    assert first.result == again.result
    frame = first.groups.orderBy("country", "step").toPandas()
    assert list(frame.columns) == ["country", "step", "count", "std", "error_bound", "error"]
    assert len(frame) == len(keys) * H and sorted(set(frame["country"])) == sorted(keys)
    assert frame.equals(again.groups.orderBy("country", "step").toPandas())
    assert [g["group"] for g in first.result["groups"]] == sorted(keys)  # the keys' canonical order
    assert first.result["groups_released"] == 4 and first.result["simultaneous_confidence"] == pytest.approx(0.8)
    assert sum(s["rho"] for s in first.budget_split) == pytest.approx(1.0)
    assert first.parameters["rho_per_group"] == pytest.approx(0.5)  # auto: ρ/(2m)
    assert "each group's series spends ρ/2" in first.statement
    assert all(r.step in {s["step"] for s in first.budget_split} for r in first.noise)
    assert "series" not in first.artifacts
    from dp_spark.report import report_schema
    import jsonschema

    jsonschema.validate(json.loads(first.to_json()), report_schema())


def test_the_factor_is_min_2m_g_also_for_keys_from_a_file(spark, table, tmp_path):
    """Three public keys, m = 2: ρ/min(4, 3) = ρ/3 per group, the same when
    the keys come from a file (the plan is rebuilt with G before spending)."""
    keys_file = tmp_path / "keys.csv"
    keys_file.write_text("country\ng0\ng1\ng2\n")
    runs = [dp_spark.continual_distinct(table, rho=0.9, horizon=H, group_by="country", groups=keys, max_groups=2,
                                        seed=3, budget=PrivacyFilter(ZCDP(1.0)))
            for keys in (["g2", "g0", "g1"], str(keys_file))]
    for release in runs:
        assert release.parameters["rho_per_group"] == pytest.approx(0.3)
        assert "spends ρ/3" in release.statement and "min(2m, G) = min(4, 3)" in release.statement
        assert sum(s["rho"] for s in release.budget_split) <= 0.9
    assert runs[1].parameters["groups"] == "public: the file " + str(keys_file)
    assert runs[0].groups.toPandas().equals(runs[1].groups.toPandas())  # the same seeded release


def test_bounded_with_one_group_per_item_gives_every_group_the_full_rho(spark, table):
    release = dp_spark.continual_distinct(table, rho=1.0, horizon=H, method="bounded", max_flippancy=4,
                                          group_by="country", groups=["g0", "g1"], max_groups=1, seed=2)
    assert release.parameters["rho_per_group"] == 1.0
    assert "parallel composition" in release.statement


def test_null_groups_are_dropped_per_row(spark):
    rows = [(1, "x", 1, None), (2, "y", 1, "a"), (3, "x", 1, "a")]
    df = spark.createDataFrame(rows, SCHEMA)
    cols = event_columns(df, "time", "item", "op")
    events = grouped_events(df, cols, time_mapping(cols.kind, None, None), 4, "g", "time", "item", "op")
    assert sorted((r["step"], r["item"]) for r in events.collect()) == [(2, "y"), (3, "x")]


def test_refusals_come_before_anything_is_spent(spark, table):
    budget = PrivacyFilter(ZCDP(5.0))
    call = dict(rho=1.0, horizon=H, budget=budget)
    with pytest.raises(SchemaError, match="nope"):
        dp_spark.continual_distinct(table, group_by="nope", groups=["a"], max_groups=1, **call)
    many = spark.range(MAX_PUBLIC_GROUPS + 1).select(F.col("id").cast("string").alias("country"))
    with pytest.raises(ParameterError, match="more than 1,024 public keys"):
        dp_spark.continual_distinct(table, group_by="country", groups=many, max_groups=1, **call)
    wide = spark.range(600).select(F.col("id").cast("string").alias("country"))  # 600 × 8,192 > 2^22
    with pytest.raises(ParameterError, match="groups × steps"):
        dp_spark.continual_distinct(table, group_by="country", groups=wide, max_groups=1, rho=1.0, horizon=8000,
                                    budget=budget)
    with pytest.raises(ParameterError, match="groups × steps"):  # a list: refused by the plan already
        dp_spark.continual_distinct(table, group_by="country", groups=[str(i) for i in range(600)], max_groups=1,
                                    rho=1.0, horizon=8000, budget=budget)
    with pytest.raises(ParameterError, match="max_groups"):
        dp_spark.continual_distinct(table, group_by="country", groups=["g0"], **call)
    with pytest.raises(ParameterError, match="release.groups"):
        dp_spark.continual_distinct(table.withColumnRenamed("country", "step"), group_by="step", groups=["g0"],
                                    max_groups=1, **call)
    with pytest.raises(ParameterError, match="differ|both name"):
        dp_spark.continual_distinct(table, group_by="item", groups=["g0"], max_groups=1, **call)
    assert budget.spent.rho == 0.0


def test_an_ungrouped_call_is_unchanged(spark, table):
    plain = dp_spark.continual_distinct(table, rho=1.0, horizon=H, seed=3)
    explicit = dp_spark.continual_distinct(table, rho=1.0, horizon=H, seed=3, group_by=None, groups=None,
                                           max_groups=None)
    assert plain.result == explicit.result and plain.budget_split == explicit.budget_split
    assert "group_by" not in plain.parameters and "groups" not in plain.artifacts


def test_cli_writes_the_groups_output(spark, table, tmp_path):
    data, keys, report = tmp_path / "t.parquet", tmp_path / "keys.csv", tmp_path / "r.json"
    table.write.parquet(str(data))
    keys.write_text("country\ng0\ng1\ng2\nnone\n")
    out = tmp_path / "groups.parquet"
    args = ["continual-distinct", "--input", str(data), "--horizon", str(H), "--rho", "1", "--group-by", "country",
            "--groups", str(keys), "--max-groups", "2", "--seed", "1", "--quiet"]
    assert cli.main(args + ["--groups-output", str(out), "--output", str(report)]) == 0
    written = spark.read.parquet(str(out)).toPandas()
    assert sorted(set(written["country"])) == ["g0", "g1", "g2", "none"] and len(written) == 4 * H
    doc = json.loads(report.read_text())
    assert doc["result"]["groups_released"] == 4 and doc["parameters"]["max_groups"] == 2
    assert not (tmp_path / "r_series.parquet").exists()  # a grouped run writes no ungrouped series
    assert cli.main(args + ["--series", str(tmp_path / "s.parquet")]) == 2  # --series with --group-by: refused
    assert cli.main(["continual-distinct", "--input", str(data), "--horizon", str(H), "--groups-output",
                     str(tmp_path / "x.parquet"), "--seed", "1", "--quiet"]) == 2  # without --group-by: refused


def test_the_flip_cell_sum_never_uses_the_sessions_shuffle_partitions(spark):
    """Issue 26: the sum of the shards' cell chunks has stages.partitioning's
    count (two per task slot, at most the shards) whatever the session's
    spark.sql.shuffle.partitions: one exchange by chunk feeds it."""
    df = spark.createDataFrame(random_events(np.random.default_rng(1), range(30)), SCHEMA)
    cols = event_columns(df, "time", "item", "op")
    events = valid_events(df, cols, time_mapping(cols.kind, None, None), H)
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        for session_partitions, shards in (("200", 3), ("1", 5), ("7", 1)):
            spark.conf.set("spark.sql.shuffle.partitions", session_partitions)
            cells = flip_cell_table(events, 4, shards, H)
            assert sum_partitions(spark, shards) == python_partitions(spark, shards)
            assert cells.rdd.getNumPartitions() == python_partitions(spark, shards)
            plan = cells._jdf.queryExecution().executedPlan().toString()
            by_chunk = re.findall(r"hashpartitioning\(chunk#\d+, (\d+)\)", plan)
            n = python_partitions(spark, shards)
            assert set(by_chunk) == {str(n)} if n > 1 else "Exchange SinglePartition" in plan
            assert "ENSURE_REQUIREMENTS" not in plan  # no exchange beyond the two explicit ones
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


#: Every method the grouped form supports, with its parameters (issue 37 §1).
METHODS = {"auto": {}, "select": {}, "adaptive": {}, "bounded": {"max_flippancy": 4}, "baseline": {}}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_an_ungrouped_release_is_the_one_key_grouped_release(spark, method):
    """Issue 37 §1 (one body: ungrouped is one group): seeded, an ungrouped
    release equals the grouped release with one public key and m = 1 on the
    same events, all in that key — the same released numbers at every step,
    the same final values, the same noise records in the order drawn (the
    grouped step label adds its per-group wording) and the same charges
    (but the rounding room of the grouped split's last step)."""
    rows = [(t, item, op, "k") for t, item, op in SEEDED_EVENTS]
    df = spark.createDataFrame(rows, "time long, item string, op int, g string")
    given = dict(rho=1.0, horizon=64, method=method, seed=37, **METHODS[method])
    plain = dp_spark.continual_distinct(df.drop("g"), **given)
    grouped = dp_spark.continual_distinct(df, group_by="g", groups=["k"], max_groups=1, **given)
    assert grouped.parameters["group_budget_factor"] == 1 and grouped.parameters["rho_per_group"] == 1.0
    series = plain.series.orderBy("step").toPandas()
    groups = grouped.groups.orderBy("step").toPandas()
    assert groups["step"].tolist() == series["step"].tolist() == list(range(1, 65))
    assert groups["count"].tolist() == series["estimate"].astype(np.int64).tolist()
    assert series["estimate"].nunique() > 1  # noisy numbers: the comparison means something
    np.testing.assert_array_equal(groups["std"].to_numpy(), series["std"].to_numpy())
    np.testing.assert_array_equal(groups["error_bound"].to_numpy(), series["error_bound"].to_numpy())
    (last,) = grouped.result["groups"]
    assert last["final_estimate"] == plain.result["final_estimate"]
    assert (last["final_std"], last["final_error_bound"]) == (plain.result["final_std"],
                                                              plain.result["final_error_bound"])
    assert list(grouped.noise) == [r.at(grouped_label(r.step, 1)) for r in plain.noise]
    # the charges: the same but the last, which the grouped split charges what is left of ρ (its
    # rounding room, mechanisms "Groups"): never less than the counter spends, a few ulps at most more
    charged, spent = [s["rho"] for s in grouped.budget_split], [s["rho"] for s in plain.budget_split]
    assert charged[:-1] == spent[:-1] and spent[-1] <= charged[-1] <= spent[-1] * (1 + 1e-12)
