"""No release depends on how the session was tuned (issues 26 and 35).

Issue 26: the stages that hand rows to Python choose their partitions from
public sizes (shards) and the cluster's parallelism, never from
``spark.sql.shuffle.partitions``, and adaptive execution does not change
what they compute. So a seeded release gives the same output in the
project's session (8 shuffle partitions, adaptive on), in Spark's defaults
(200, on), with adaptive execution off and with one partition, for a given
shard count.

Issue 35: a user's session may also hand Arrow columns to Python with 64-bit
offsets (``spark.sql.execution.arrow.useLargeVarTypes``), in batches of a
few rows (``spark.sql.execution.arrow.maxRecordsPerBatch``) and with ANSI
mode off. The stage tests run in each of those shapes too, and every
release of the registry runs seeded in a matrix of shapes (the end of this
module): outputs identical to the baseline's, or a refusal naming the
setting before anything is spent. The session's SQL settings are changed in
place (they are runtime settings) and restored, also on failure.
"""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.errors import DPSparkError
from dp_spark.stages.continual import continual_summaries, default_shards as continual_default_shards
from dp_spark.stages.distinct import default_shards, greedy_counts, greedy_partitions, sharded_edges
from dp_spark.stages.edges import edges
from dp_spark.stages.partitioning import TASKS_PER_SLOT, cluster_parallelism, python_partitions
from dp_spark.stages.set_union import default_partitions

ARROW_LARGE = "spark.sql.execution.arrow.useLargeVarTypes"
ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"
ANSI = "spark.sql.ansi.enabled"
ADAPTIVE = "spark.sql.adaptive.enabled"
SHUFFLE = "spark.sql.shuffle.partitions"

#: Layouts: the project's session, Spark's defaults, adaptive execution off, one partition.
LAYOUT_SHAPES = [{SHUFFLE: "8", ADAPTIVE: "true"}, {SHUFFLE: "200", ADAPTIVE: "true"},
                 {SHUFFLE: "200", ADAPTIVE: "false"}, {SHUFFLE: "1", ADAPTIVE: "true"}]
#: The stage tests' shapes: the layouts, then 64-bit Arrow offsets, Arrow
#: batches of 7 rows and ANSI mode off (each on the project's session).
SHAPES = LAYOUT_SHAPES + [{SHUFFLE: "8", ARROW_LARGE: "true"}, {SHUFFLE: "8", ARROW_BATCH: "7"},
                          {SHUFFLE: "8", ANSI: "false"}]


@contextlib.contextmanager
def settings(spark, values: dict):
    """The session's SQL settings ``values`` for the block, each restored
    afterwards (also on failure; a setting that was unset is unset again)."""
    before = {key: spark.conf.get(key, None) for key in values}
    try:
        for key, value in values.items():
            spark.conf.set(key, value)
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def in_every_shape(spark, run, shapes=SHAPES):
    """``run()`` in every shape of ``shapes``; the list of results."""
    out = []
    for shape in shapes:
        with settings(spark, shape):
            out.append(run())
    return out


@pytest.fixture(scope="module")
def people(spark):
    """A heavy-tailed (person_id, item) table: 600 persons, 1-40 rows each."""
    rng = np.random.default_rng(26)
    sizes = rng.integers(1, 41, 600)
    pdf = pd.DataFrame({
        "person_id": np.repeat(np.arange(600, dtype=np.int64), sizes),
        "item": [f"w{int(x)}" for x in np.floor(rng.pareto(1.2, sizes.sum()) * 5)],
    })
    return spark.createDataFrame(pdf).cache()


def test_partition_counts_come_from_the_cluster_not_the_session(spark):
    slots = spark.sparkContext.defaultParallelism
    assert cluster_parallelism(spark) == slots
    results = in_every_shape(spark, lambda: (python_partitions(spark), default_partitions(spark),
                                             continual_default_shards(spark), default_shards(spark)))
    assert results == [(TASKS_PER_SLOT * slots, TASKS_PER_SLOT * slots, TASKS_PER_SLOT * slots, slots)] * len(SHAPES)
    assert python_partitions(spark, cap=1) == 1
    cap = TASKS_PER_SLOT * slots
    assert greedy_partitions(spark, 3) == min(3, cap)
    assert greedy_partitions(spark, 1000 * cap) == cap  # a divisor: shard mod partitions
    small_prime = next(n for n in range(cap + 1, 10 * cap) if all(n % d for d in range(2, n)))
    assert greedy_partitions(spark, small_prime) == small_prime  # no divisor: one partition per shard
    assert greedy_partitions(spark, 1_000_003) == cap  # a prime, many shards: several per partition


def _used_partitions(df) -> int:
    return df.select(F.spark_partition_id().alias("p")).distinct().count()


def test_adaptive_execution_keeps_the_python_passes_layout(spark, people):
    """A few hundred rows: adaptive execution would coalesce an exchange of
    Spark's choosing into one partition; the explicit counts stay."""
    edge_df = edges(people, "person_id", "item")
    with settings(spark, {SHUFFLE: "200", ADAPTIVE: "true"}):
        assert _used_partitions(sharded_edges(edge_df, 3)) == 3
        assert _used_partitions(sharded_edges(edge_df, 9, 3)) == 3  # partition = shard mod 3
        for partitions in (3, 4):
            shard_sets = (sharded_edges(edge_df, 9, partitions).groupBy(F.spark_partition_id().alias("p"))
                          .agg(F.collect_set(F.pmod(F.hash("person"), F.lit(9))).alias("s")).collect())
            seen = [shard for row in shard_sets for shard in row["s"]]
            assert sorted(seen) == list(range(9))  # every shard whole in exactly one partition


def test_greedy_counts_same_for_every_layout_and_session(spark, people):
    edge_df = edges(people, "person_id", "item")
    want = greedy_counts(edge_df, 12, 5, partitions=5)
    for partitions in (1, 2, 3, 4):
        np.testing.assert_array_equal(greedy_counts(edge_df, 12, 5, partitions=partitions), want)
    for got in in_every_shape(spark, lambda: greedy_counts(edge_df, 12, 5)):
        np.testing.assert_array_equal(got, want)


def test_seeded_distinct_count_same_in_every_session(spark, people):
    def run():
        return dp_spark.distinct_count(people, epsilon=1.0, max_bound=16, shards=3, seed=7).result

    results = in_every_shape(spark, run, LAYOUT_SHAPES)  # the other shapes: the matrix below
    assert all(r == results[0] for r in results)


@pytest.mark.parametrize("method", ["policy-gaussian", "count"])
def test_seeded_set_union_same_in_every_session(spark, people, method):
    def run():
        release = dp_spark.set_union(people, epsilon=2.0, delta=0.05, max_items=5, method=method, seed=3,
                                     count=False)
        return sorted(row["item"] for row in release.items.collect())

    results = in_every_shape(spark, run, LAYOUT_SHAPES)  # the other shapes: the matrix below
    assert results[0]  # the test only means something if items are released
    assert all(r == results[0] for r in results)


def test_seeded_count_release_same_in_every_session(spark, people):
    def run():
        release = dp_spark.count_release(people, rho=2.0, delta=1e-3, seed=5)
        return release.result["released_count"], release.to_dict()["result"]

    results = in_every_shape(spark, run, LAYOUT_SHAPES)  # the other shapes: the matrix below
    assert results[0][0] > 0
    assert all(r == results[0] for r in results)


def test_continual_summaries_same_for_every_shard_count_and_session(spark):
    rng = np.random.default_rng(260)
    pdf = pd.DataFrame({"t": rng.integers(1, 60, 3000), "thing": rng.integers(0, 80, 3000),
                        "op": rng.choice([-1, 1], 3000, p=[0.4, 0.6])})
    df = spark.createDataFrame(pdf)
    want = continual_summaries(df, "t", "thing", "op", 60, shards=1).summaries
    runs = [continual_summaries(df, "t", "thing", "op", 60, shards=s).summaries for s in (2, 7)]
    runs += in_every_shape(spark, lambda: continual_summaries(df, "t", "thing", "op", 60).summaries)
    for got in runs:
        np.testing.assert_array_equal(got.z, want.z)
        np.testing.assert_array_equal(got.z_truncated, want.z_truncated)
        np.testing.assert_array_equal(got.over_counts, want.over_counts)


def test_continual_cells_reach_the_driver_as_arrow_whatever_the_sessions_arrow_setting(spark, monkeypatch):
    """Issue 26: ``toPandas`` follows spark.sql.execution.arrow.pyspark.enabled
    (off by default before Spark 4.2: rows pickled one by one); the continual stages
    collect their cells with ``toArrow`` instead, so with the setting off
    neither stage calls ``toPandas`` and the summaries are unchanged."""
    from dp_spark.stages.continual import GROUP_INDEX, grouped_cells

    rng = np.random.default_rng(2626)
    pdf = pd.DataFrame({"t": rng.integers(1, 40, 2000), "thing": rng.integers(0, 60, 2000),
                        "op": rng.choice([-1, 1], 2000, p=[0.4, 0.6]), GROUP_INDEX: rng.integers(0, 3, 2000)})
    df = spark.createDataFrame(pdf).withColumn(GROUP_INDEX, F.col(GROUP_INDEX).cast("int"))
    key = "spark.sql.execution.arrow.pyspark.enabled"
    want = continual_summaries(df, "t", "thing", "op", 40, shards=3).summaries
    events = df.select(F.col("t").alias("step"), F.col("thing").alias("item"), "op", GROUP_INDEX)
    want_groups = grouped_cells(events, 3, 64, shards=3)
    before = spark.conf.get(key)

    def refuse(self, *args, **kwargs):
        raise AssertionError("toPandas called: its speed depends on the session's Arrow setting")

    try:
        spark.conf.set(key, "false")
        monkeypatch.setattr(type(df), "toPandas", refuse)  # the session's DataFrame class (classic or Connect)
        got = continual_summaries(df, "t", "thing", "op", 40, shards=3).summaries
        got_groups = grouped_cells(events, 3, 64, shards=3)
    finally:
        spark.conf.set(key, before)
    assert want.z.any()  # the comparison only means something if items flip
    np.testing.assert_array_equal(got.z, want.z)
    np.testing.assert_array_equal(got.z_truncated, want.z_truncated)
    np.testing.assert_array_equal(got.over_counts, want.over_counts)
    for name in ("group", "step", "level", "delta", "cross"):
        np.testing.assert_array_equal(getattr(got_groups, name), getattr(want_groups, name))
    for g in range(3):
        np.testing.assert_array_equal(got_groups.summaries(g).z, want_groups.summaries(g).z)


# -- issue 35: every release in a matrix of session shapes ----------------------------------------------------
#
# A user's session may have any of these settings (dp_spark uses a session as it finds it). Every release of the
# registry runs seeded in each shape, ungrouped (its example, plus the methods that change its Spark stage),
# grouped with public keys and grouped with private keys; the seeded outputs (report: values, error statements,
# noise records, statement; artifacts: items, series, groups) must equal the baseline shape's, or the release
# refuses the shape before spending, naming the setting. One setting changed per shape, then all at once.
# Economy (the matrix runs in the whole suite): every release in every form runs in every shape; the method
# variants (STAGE_METHODS) run in the shapes that change what their Python passes read (Arrow types and batch
# boundaries) and in the all-at-once shape (which also has one partition, adaptive execution and ANSI off).

#: The baseline: the project's own session (dp_spark.session defaults: 8 shuffle partitions, adaptive on) with
#: Spark 4's defaults for the rest (ANSI on, 32-bit offsets, 10,000 rows per Arrow batch).
BASELINE = {ARROW_LARGE: "false", ARROW_BATCH: "10000", ANSI: "true", ADAPTIVE: "true", SHUFFLE: "8"}
MATRIX_SHAPES = {
    "large-var-types": {ARROW_LARGE: "true"},
    "arrow-batches-of-7": {ARROW_BATCH: "7"},
    "ansi-off": {ANSI: "false"},
    "adaptive-off": {ADAPTIVE: "false"},
    "shuffle-1": {SHUFFLE: "1"},
    "shuffle-200": {SHUFFLE: "200"},
    "all-hostile": {ARROW_LARGE: "true", ARROW_BATCH: "7", ANSI: "false", ADAPTIVE: "false", SHUFFLE: "1"},
}
#: The shapes every method variant runs in (besides the baseline).
METHOD_SHAPES = ("large-var-types", "arrow-batches-of-7", "all-hostile")


#: The seeded demo tables with a group column: persons in 1 or 2 of 4 countries, events of 3 groups.
GROUPED_PERSONS = [(p, f"item{int(30 * ((p * 37 + j * 11) % 101 / 101) ** 2)}",
                    f"g{(p * 7 + j) % 4 if p % 3 else p % 2}") for p in range(600) for j in range(1 + p % 5)]
GROUPED_EVENTS = [(t, f"i{(t * 5) % 11}", 1 if (t // 11) % 2 == 0 else -1, f"g{(t * 5) % 11 % 3}")
                  for t in range(1, 60)]
GROUP_KEYS = {"persons": ["g0", "g1", "g2", "g3"], "events": ["g0", "g1", "g2"]}

#: Methods (beyond each example's) whose Spark stage differs: distinct-count's packed combine over several shards,
#: its exact matching and sampling; top-k over a public domain; count-release's bounded baseline (noise inside
#: Spark); set-union's weighted and count policies (one histogram, no shards). Continual-distinct has one stage
#: for every method (the chunked flip cells), run by its example.
STAGE_METHODS = {
    "distinct-count": [dict(method="greedy", shards=3), dict(method="matching"), dict(method="sampling")],
    "top-k": [dict(method="joint", domain=[f"item{i}" for i in range(30)])],
    "count-release": [dict(method="bounded", max_items=3)],
    "set-union": [dict(method="weighted-gaussian"), dict(method="count")],
}


def _grouped(parameters: dict, **groups) -> dict:
    """The example's parameters, grouped by country (m = 2), with four times
    the privacy parameter (so that every group releases something)."""
    out = dict(parameters, group_by="country", max_groups=2, **groups)
    for name in ("epsilon", "rho"):
        if name in out:
            out[name] = 4 * out[name]
    return out


def matrix_cases() -> dict[str, tuple[str, dict]]:
    """Every release of the registry, by form: ``name/plain[/method]``,
    ``name/public`` and ``name/private``: (release name, keywords)."""
    from dp_spark.releases import RELEASES

    cases = {}
    for name, spec in RELEASES.items():
        example = dict(spec.example.parameters)
        cases[f"{name}/plain"] = (name, example)
        for extra in STAGE_METHODS.get(name, []):
            cases[f"{name}/plain/{extra['method']}" + ("-sharded" if "shards" in extra else "")] = (
                name, {**example, **extra})
        if "group_by" not in spec.plan_parameters():
            continue  # a release without groups has no grouped form
        cases[f"{name}/public"] = (name, _grouped(example, groups=GROUP_KEYS[spec.example.input]))
        cases[f"{name}/private"] = (name, _grouped(example))
    return cases


MATRIX = matrix_cases()


def is_method_variant(case: str) -> bool:
    return case.count("/") == 2


#: (case, shape) pairs of the matrix.
MATRIX_RUNS = [(case, shape) for shape in MATRIX_SHAPES for case in sorted(MATRIX)
               if shape in METHOD_SHAPES or not is_method_variant(case)]


def _budget(parameters: dict):
    from dp_spark.accounting import ZCDP, ApproxDP, PrivacyFilter

    return PrivacyFilter(ZCDP(1000.0, 0.5) if "rho" in parameters else ApproxDP(1000.0, 0.5))


def _outcome(spark, case: str):
    """(("released", what the release outputs) or ("refused", error type, message), the budget's spends)."""
    from dp_spark.releases import RELEASES

    name, parameters = MATRIX[case]
    spec = RELEASES[name]
    rows = GROUPED_EVENTS if spec.example.input == "events" else GROUPED_PERSONS
    schema = "time long, item string, op int, country string" if spec.example.input == "events" \
        else "person_id long, item string, country string"
    budget = _budget(parameters)
    try:
        release = spec.function(spark.createDataFrame(rows, schema), **parameters, seed=35, budget=budget)
    except DPSparkError as err:
        return ("refused", type(err).__name__, str(err)), budget.ledger
    report = release.to_dict()
    for volatile in ("created", "library"):
        report.pop(volatile)
    out = {"report": json.loads(json.dumps(report, default=str))}
    for artifact, frame in sorted(release.artifacts.items()):
        out[artifact] = sorted(json.dumps(row.asDict(recursive=True), default=str, sort_keys=True)
                               for row in frame.collect())
    return ("released", out), budget.ledger


@pytest.fixture(scope="module")
def baseline(spark):
    """Every case's outcome in the baseline shape, run once."""
    with settings(spark, BASELINE):
        return {case: _outcome(spark, case)[0] for case in MATRIX}


def test_the_matrix_covers_every_release_grouped_and_not(baseline):
    """Through the registry, so a release added later is in the matrix; and
    the baseline releases something in every case except the grouped forms
    with private keys of the releases that cannot pay a key step
    (``Params.KEYS_BUDGET`` None: continual-distinct, whose unit is the item),
    so the comparisons mean something."""
    from dp_spark.releases import RELEASES

    for name, spec in RELEASES.items():
        grouped = "group_by" in spec.plan_parameters()
        assert {f"{name}/plain", *((f"{name}/public", f"{name}/private") if grouped else ())} <= set(MATRIX)
    refused = {case for case, outcome in baseline.items() if outcome[0] == "refused"}
    assert refused == {f"{name}/private" for name, spec in RELEASES.items()
                       if "group_by" in spec.plan_parameters() and spec.plan_function.Params.KEYS_BUDGET is None}
    for case, outcome in baseline.items():
        if outcome[0] == "released":
            result = outcome[1]["report"]["result"]
            rows = [result, *(result.get("groups") or [])]
            numbers = ("released_count", "estimate", "final_estimate")
            assert any((row.get(k) or 0) > 0 for row in rows for k in numbers), case


@pytest.mark.parametrize(("case", "shape"), MATRIX_RUNS, ids=[f"{case}@{shape}" for case, shape in MATRIX_RUNS])
def test_seeded_release_is_the_same_in_every_session_shape(spark, baseline, case, shape):
    """The release's whole seeded output in the shape (report without its
    time and library version; every artifact's rows) equals the baseline's,
    or it refuses with a ParameterError naming a setting of the shape before
    anything is spent. Before issue 35's fix, distinct-count's packed
    combine read none of its rows under 64-bit offsets (estimates from
    counts of 0) and continual-distinct's unpack failed after spending;
    the grouped set-union failed in the project's own session (8 shuffle
    partitions = 8 shards) after spending."""
    with settings(spark, {**BASELINE, **MATRIX_SHAPES[shape]}):
        outcome, spends = _outcome(spark, case)
    if outcome == baseline[case]:
        return
    changed = MATRIX_SHAPES[shape]
    assert outcome[0] == "refused" and outcome[1] == "ParameterError", (case, shape, outcome, baseline[case])
    assert any(key in outcome[2] for key in changed), f"{case} in {shape}: the refusal names no setting: {outcome[2]}"
    assert not spends, f"{case} in {shape}: refused after spending {spends}"


def test_sequential_histogram_is_the_same_when_spark_merges_its_repartition(spark, people):
    """Found by the matrix (grouped set-union in the project's own session):
    when the edges are already hash-partitioned by person into as many
    partitions as there are shards (an aggregation or window by person, with
    spark.sql.shuffle.partitions = shards: the grouped release's per-person
    group cap), Spark drops the stage's repartition as redundant and
    adaptive execution coalesces the earlier exchange, so one Python task
    holds several shards. Each shard's histogram is still its own."""
    from pyspark.sql import Window

    from dp_spark.stages.set_union import _shard_histograms, sequential_histogram

    edge_df = edges(people, "person_id", "item")
    want = sorted(sequential_histogram(edge_df, "policy-gaussian", 5, 3, 4.0, 8).collect())
    windowed = (edge_df.withColumn("_n", F.count("*").over(Window.partitionBy("person")))
                .where(F.col("_n") >= 1).drop("_n"))
    with settings(spark, {SHUFFLE: "8", ADAPTIVE: "true", "spark.sql.adaptive.coalescePartitions.enabled": "true"}):
        got = sorted(sequential_histogram(windowed, "policy-gaussian", 5, 3, 4.0, 8).collect())
        layout = (_shard_histograms(windowed, "policy-gaussian", 5, 3, 4.0, 8)
                  .groupBy(F.spark_partition_id().alias("task")).agg(F.countDistinct("_shard").alias("shards"))
                  .collect())
    assert max(row["shards"] for row in layout) > 1  # the layout the test is about: several shards in one task
    assert len(want) > 10 and got == want


def _arrow_types(frame) -> set[tuple[str, str]]:
    """(column, Arrow type) of every batch a Python pass over ``frame`` reads."""
    import pyarrow as pa

    def probe(batches):
        for batch in batches:
            yield pa.RecordBatch.from_arrays([pa.array([f.name for f in batch.schema], pa.string()),
                                              pa.array([str(f.type) for f in batch.schema], pa.string())],
                                             names=["column", "type"])
    return {(r["column"], r["type"]) for r in frame.mapInArrow(probe, "column string, type string").collect()}


@pytest.mark.parametrize("large", ["false", "true"])
def test_packed_columns_reach_python_with_the_sessions_offset_width_and_are_read_whole(spark, people, large):
    """What the matrix's 64-bit shapes exercise (issue 35): under
    spark.sql.execution.arrow.useLargeVarTypes the packed columns of
    distinct-count's combine and of continual-distinct's chunk sum reach the
    Python passes as large_binary (probed with a pass over the very frames
    the combines read), and both stages give the 32-bit session's numbers:
    before the fix the greedy counts were all 0 and the continual unpack
    failed."""
    from functools import partial

    from dp_spark.stages.continual import CHUNK_SCHEMA, _partition_chunks, chunk_layout, collect_chunk_cells, \
        flip_cell_table
    from dp_spark.stages.distinct import _BUCKET, _PACK_ITEMS, _PACKED_SCHEMA, _packed_rounds
    from dp_spark.stages.partitioning import partition_labels

    edge_df = edges(people, "person_id", "item")
    rng = np.random.default_rng(35)
    steps_df = spark.createDataFrame(pd.DataFrame({"step": rng.integers(1, 30, 800), "item": rng.integers(0, 50, 800),
                                                   "op": rng.choice([-1, 1], 800, p=[0.4, 0.6]).astype(np.int32)})
                                     .astype({"item": str}))
    layout = chunk_layout(spark, 32, 5, 3)
    want_counts = greedy_counts(edge_df, 12, 5)
    want_cells = collect_chunk_cells(flip_cell_table(steps_df, 5, 3, 32, layout), layout)
    with settings(spark, {ARROW_LARGE: large}):
        labels = tuple(partition_labels(2))
        packed = sharded_edges(edge_df, 5, 5).mapInArrow(
            partial(_packed_rounds, max_bound=12, shards=5, labels=labels, pack_items=_PACK_ITEMS), _PACKED_SCHEMA)
        chunks = steps_df.repartition(3, "item").mapInArrow(partial(_partition_chunks, layout=layout), CHUNK_SCHEMA)
        width = "large_binary" if large == "true" else "binary"
        assert _arrow_types(packed.repartition(2, _BUCKET)) == {(_BUCKET, "int64"), ("_keys", width),
                                                                ("_rounds", width)}
        assert {t for c, t in _arrow_types(chunks.repartition(2, "chunk")) if c != "chunk"} == {width}
        got_counts = greedy_counts(edge_df, 12, 5)
        got_cells = collect_chunk_cells(flip_cell_table(steps_df, 5, 3, 32, layout), layout)
    assert want_counts[-1] > 0 and len(want_cells["step"]) > 10
    np.testing.assert_array_equal(got_counts, want_counts)
    for name, values in want_cells.items():
        np.testing.assert_array_equal(got_cells[name], values)


def test_the_session_check_reads_the_type_spark_hands_to_python_and_refuses_others(spark, monkeypatch):
    """dp_spark.stages.session_shape.check_session, for releases to call
    before spending: it asks the session which type a binary column reaches
    Python in (binary, or large_binary under useLargeVarTypes), accepts
    both, probes once per session and Arrow settings, and refuses any other
    type (a Spark version's view type, simulated here) with a
    ParameterError naming the settings."""
    from dp_spark.errors import ParameterError
    from dp_spark.stages import session_shape

    for large, want in (("false", "binary"), ("true", "large_binary")):
        with settings(spark, {ARROW_LARGE: large}):
            assert session_shape.packed_column_type(spark) == want
            session_shape.check_session(spark)
    probes = []
    monkeypatch.setattr(session_shape, "_checked", {})
    monkeypatch.setattr(session_shape, "packed_column_type", lambda s: probes.append(s) or "binary_view")
    with settings(spark, {ARROW_BATCH: "7"}):
        for _ in range(2):
            with pytest.raises(ParameterError, match=r"binary_view.*useLargeVarTypes.*nothing was spent"):
                session_shape.check_session(spark)
    assert len(probes) == 1  # once per session and settings


def test_a_release_refuses_an_unreadable_session_before_it_spends(spark, people, monkeypatch):
    """Every release runs the session check in its template before
    ``plan.spend``: with a session that would hand the packed columns to
    Python in a type the readers refuse (simulated), the release raises the
    ParameterError and its budget is untouched."""
    from dp_spark.accounting import PrivacyFilter, PureDP
    from dp_spark.errors import ParameterError
    from dp_spark.stages import session_shape

    monkeypatch.setattr(session_shape, "_checked", {})
    monkeypatch.setattr(session_shape, "packed_column_type", lambda s: "binary_view")
    budget = PrivacyFilter(PureDP(2.0))
    with pytest.raises(ParameterError, match="binary_view"):
        dp_spark.distinct_count(people, person_col="person_id", item_col="item", epsilon=1.0, budget=budget)
    assert budget.spent.epsilon == 0.0


def test_speculative_sessions_run_unseeded_executor_draws(spark, monkeypatch):
    """Review RV12 asked that two attempts of one task never store different draws. Executor noise is
    ChaCha20 under the release's key at a position fixed by the public bucket or group index
    (StreamRoot), so a speculative copy draws what the first attempt drew: a session with
    spark.speculation=true runs these releases (no refusal), and what they release is stored once."""
    from dp_spark.accounting import ApproxDP, PrivacyFilter

    conf_class = type(spark.conf)
    real_get = conf_class.get

    def speculative(self, key, *args, **kwargs):
        return "true" if key == "spark.speculation" else real_get(self, key, *args, **kwargs)

    monkeypatch.setattr(conf_class, "get", speculative)
    assert spark.conf.get("spark.speculation") == "true"
    df = spark.createDataFrame([(p, f"i{p % 7}", f"g{p % 3}") for p in range(300)],
                               "person_id long, item string, g string")
    budget = PrivacyFilter(ApproxDP(20.0, 1e-3))
    union = dp_spark.set_union(df, epsilon=1.0, delta=1e-6, budget=budget)
    top = dp_spark.top_k(df, k=2, epsilon=1.0, delta=1e-6, group_by="g", groups=["g0", "g1"], max_groups=1,
                         budget=budget)
    keys = dp_spark.distinct_count(df, epsilon=1.0, group_by="g", max_groups=1, budget=budget)  # private keys
    assert union.items.count() == union.result["released_count"]
    assert sorted(map(tuple, top.groups.collect())) == sorted(map(tuple, top.groups.collect()))
    assert keys.result is not None and budget.spent.epsilon == pytest.approx(3.0)
