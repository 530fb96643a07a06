"""Continual-distinct on a local session: the Spark stage against the numpy
reference, the release through its Python API, and the CLI subcommand."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest

import dp_spark
from dp_spark import checks
from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.cli import main
from dp_spark.mechanisms.continual_distinct import existence_and_flippancy, stream_summaries, summaries_from_existence
from dp_spark.errors import BudgetExceededError, ParameterError, SchemaError
from dp_spark.settings.continual_distinct import MAX_HORIZON, driver_bytes
from dp_spark.stages.continual import continual_summaries

from tests.unit.test_continual import HAND_EVENTS, HAND_OVER, HAND_Z, HAND_Z_TRUNCATED


def _assert_same(got, want):
    assert got.horizon == want.horizon and got.max_level == want.max_level
    np.testing.assert_array_equal(got.z, want.z)
    np.testing.assert_array_equal(got.z_truncated, want.z_truncated)
    np.testing.assert_array_equal(got.over_counts, want.over_counts)


def _random_events(seed: int, n: int, steps: int, items: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "t": rng.integers(1, steps + 1, n),
        "thing": rng.integers(0, items, n),
        "op": rng.choice([-1, 1], n, p=[0.45, 0.55]),
    })


# ------------------------------------------------------------------ the stage

def test_stage_on_the_hand_worked_stream(spark):
    df = spark.createDataFrame(HAND_EVENTS, "time long, item string, op int")
    out = continual_summaries(df, horizon=8, shards=2)
    assert out.horizon == 8
    assert out.summaries.z.tolist() == HAND_Z
    assert out.summaries.z_truncated.tolist() == HAND_Z_TRUNCATED
    assert out.summaries.over_counts.tolist() == HAND_OVER


def test_stage_equals_reference_on_random_integer_streams(spark):
    """Integer times (the step), integer items, unsorted with many duplicate
    steps; horizon 45 (the trees run over 64 steps)."""
    pdf = _random_events(seed=1, n=4000, steps=45, items=60)
    out = continual_summaries(spark.createDataFrame(pdf), "t", "thing", "op", 45, shards=3)
    assert out.horizon == 45 and out.summaries.horizon == 64
    want = stream_summaries(pdf.t.to_numpy(), pdf.thing.to_numpy(), pdf.op.to_numpy(), 64)
    _assert_same(out.summaries, want)
    dense = summaries_from_existence(existence_and_flippancy(pdf.t, pdf.thing, pdf.op, 64))
    _assert_same(out.summaries, dense)  # an independent event-by-event loop


def test_stage_orders_events_inside_a_step_by_raw_time(spark):
    """Fractional times, step_size 0.25 and origin 0: several raw times per step,
    so the in-step order decides; equal raw times apply inserts first."""
    rng = np.random.default_rng(2)
    n = 3000
    raw = rng.integers(0, 120, n) / 8.0  # 0 .. 14.875, many exact ties
    pdf = pd.DataFrame({"time": raw, "item": rng.integers(0, 40, n).astype(str),
                        "op": rng.choice([-1.0, 1.0], n)})
    out = continual_summaries(spark.createDataFrame(pdf), horizon=60, origin=0, step_size=0.25, shards=2)
    steps = np.floor(raw / 0.25).astype(np.int64) + 1
    want = stream_summaries(steps, pdf.item.to_numpy(), pdf.op.to_numpy().astype(int), 64, order=raw)
    _assert_same(out.summaries, want)
    assert out.horizon == 60 and out.summaries.horizon == 64
    unordered = stream_summaries(steps, pdf.item.to_numpy(), pdf.op.to_numpy().astype(int), 64)
    assert not np.array_equal(want.z, unordered.z)  # the order key matters on this stream


def test_stage_maps_timestamps_to_steps(spark):
    base = dt.datetime(2024, 3, 1, 0, 0, tzinfo=dt.timezone.utc)
    rng = np.random.default_rng(3)
    n = 600
    minutes = rng.integers(0, 16 * 60, n)
    items = rng.integers(0, 25, n)
    ops = rng.choice([-1, 1], n)
    rows = [(base + dt.timedelta(minutes=int(m)), f"u{int(i)}", int(o)) for m, i, o in zip(minutes, items, ops)]
    df = spark.createDataFrame(rows, "time timestamp, item string, op int")
    out = continual_summaries(df, horizon=16, origin="2024-03-01T00:00:00Z", step_size=3600, shards=2)
    want = stream_summaries(minutes // 60 + 1, items, ops, 16, order=minutes)
    _assert_same(out.summaries, want)
    assert out.mapping.describe() == {"time_kind": "timestamp", "step_seconds": 3600.0,
                                      "origin": "2024-03-01T00:00:00+00:00"}  # the parameter, restated
    # No origin is ever derived from the data (the earliest event time is not
    # private): timestamp, date and floating time columns must name one.
    poisoned = df.selectExpr("time", "item", "CAST(raise_error('read!') AS INT) AS op")
    floats = poisoned.selectExpr("CAST(unix_seconds(time) AS DOUBLE) AS time", "item", "op")
    dates = poisoned.selectExpr("CAST(time AS DATE) AS time", "item", "op")
    for table, kind in ((poisoned, "timestamp"), (dates, "timestamp"), (floats, "non-integer")):
        with pytest.raises(ParameterError, match=f"{kind}.*needs origin") as info:
            continual_summaries(table, horizon=16, step_size=3600)  # refused before any read
        assert "2024-03" not in str(info.value)


def test_stage_bad_input_rules(spark):
    good = [(1, "a", 1), (2, "b", 1), (3, "a", -1)]
    nulls = spark.createDataFrame(good + [(2, None, 1)], "time long, item string, op int")
    out = continual_summaries(nulls, horizon=4, shards=1)  # null item: dropped
    assert out.summaries.z.tolist() == [1, 1, -1, 0]
    for bad in [(2, "c", 2), (None, "c", 1), (999, "c", 1), (0, "c", 1), (2, "c", None)]:
        df = spark.createDataFrame(good + [bad], "time long, item string, op int")
        assert continual_summaries(df, horizon=4, shards=1).summaries.z.tolist() == [1, 1, -1, 0]  # dropped
    with pytest.raises(SchemaError, match="'when' is not in the input"):
        continual_summaries(nulls, "when", horizon=4)
    text_time = spark.createDataFrame([("x", "a", 1)], "time string, item string, op int")
    with pytest.raises(SchemaError, match="time column must hold"):
        continual_summaries(text_time, horizon=4)
    empty = spark.createDataFrame([], "time long, item string, op int")
    with pytest.raises(ParameterError, match="horizon is required"):
        continual_summaries(empty)
    assert continual_summaries(empty, horizon=3).summaries.z.tolist() == [0, 0, 0, 0]
    with pytest.raises(ParameterError, match="horizon"):
        continual_summaries(nulls, horizon=0)
    # The horizon cap bounds the driver's arrays (~24 bytes per (step, level) cell).
    assert MAX_HORIZON == 2**22 and 2e9 < driver_bytes(MAX_HORIZON) < 3e9
    with pytest.raises(ParameterError, match=r"at most 2\^22 = 4,194,304 steps .*GB at the cap"):
        continual_summaries(nulls, horizon=MAX_HORIZON + 1)


# ------------------------------------------------------------------ the release

@pytest.fixture(scope="module")
def events(spark):
    """A stream with known maximum flippancy 4 (every item flips 1..4 times)."""
    rng = np.random.default_rng(11)
    rows = []
    for item in range(400):
        flips = int(rng.integers(1, 5))
        steps = np.sort(rng.choice(np.arange(1, 101), flips, replace=False))
        rows += [(int(s), f"i{item}", 1 if k % 2 == 0 else -1) for k, s in enumerate(steps)]
    pdf = pd.DataFrame(rows, columns=["time", "item", "op"]).sample(frac=1.0, random_state=0)
    truth = np.cumsum(stream_summaries(pdf.time, pdf.item, pdf.op, 128).z)[:100]
    return spark.createDataFrame(pdf).cache(), truth


def test_release_report_and_series(events, report_schema):
    import jsonschema

    df, truth = events
    release = dp_spark.continual_distinct(df, rho=0.5, horizon=100, seed=1)
    series = release.series.toPandas()  # a Spark DataFrame artifact, one row per step
    assert list(series.columns) == ["step", "estimate", "std", "error_bound", "flippancy_bound"] and len(series) == 100
    assert series.step.tolist() == list(range(1, 101))
    report = release.to_dict()
    jsonschema.validate(json.loads(json.dumps(report)), report_schema)
    assert report["release"] == "continual-distinct" and report["privacy"]["privacy_unit"] == "item"
    assert report["privacy"]["kind"] == "zcdp" and report["privacy"]["rho"] == 0.5
    assert report["privacy"]["approx_dp_equivalent"]["delta"] == 1e-6
    assert report["parameters"]["method"] == "select" and report["result"]["method"] == "select"
    assert report["result"]["released_count"] == 100 and report["result"]["horizon"] == 100
    assert report["result"]["final_estimate"] == series.estimate.iloc[-1]
    assert sum(part["rho"] for part in report["budget_split"]) == pytest.approx(0.5)
    assert report["seeded"] is True and report["publishable"] is False
    assert report["parameters"]["tree_horizon"] == 128 and report["parameters"]["horizon_given"] is True
    assert "item" in report["statement"] and "not a person" in report["statement"]
    assert len(report["parameters"]["rules"]) == 4
    # The default ("select") states its bound without assumptions: it holds on this fixture (several
    # events per step). "auto" states its bound assuming <= 1 change per step, which this fixture
    # breaks: the assumption is in its statement. Algorithm 3's bound needs none: check that one holds.
    assert "per step" not in report["statement"]
    assert np.all(np.abs(series.estimate - truth) <= series.error_bound)
    auto = dp_spark.continual_distinct(df, rho=0.5, horizon=100, method="auto", seed=1)
    assert "at most 1 per step" in auto.to_dict()["statement"]
    adaptive = dp_spark.continual_distinct(df, rho=0.5, horizon=100, method="adaptive", seed=1).series.toPandas()
    assert np.all(np.abs(adaptive.estimate - truth) <= adaptive.error_bound)  # the stated bound holds
    again = dp_spark.continual_distinct(df, rho=0.5, horizon=100, seed=1)
    pd.testing.assert_frame_equal(series, again.series.toPandas())
    unseeded = dp_spark.continual_distinct(df, rho=0.5, horizon=100, method="bounded", max_flippancy=3)
    assert unseeded.to_dict()["publishable"] is True
    assert unseeded.flippancy_bound == 4  # rounded up to a power of two, stated in the notes
    assert any("rounded up" in n or "was used as w" in n for n in unseeded.notes)


def test_every_mechanism_is_exact_when_the_noise_vanishes(events, monkeypatch):
    """With ρ = 1e12 the noise is negligible: each mechanism returns the true
    count at every step (adaptive and baseline included), so the wiring from
    the stage to the series is right. A release refuses ρ above
    checks.RHO_RANGE (no privacy at all); this wiring test lifts that cap
    explicitly, for itself only."""
    monkeypatch.setattr(checks, "RHO_RANGE", (checks.RHO_RANGE[0], 1e12))
    df, truth = events
    for method, extra in (("select", {}), ("auto", {}), ("adaptive", {}), ("bounded", {"max_flippancy": 4}),
                          ("baseline", {})):
        release = dp_spark.continual_distinct(df, rho=1e12, horizon=100, method=method, seed=2, **extra)
        assert release.result["method"] == method and release.parameters["method"] == method
        np.testing.assert_allclose(release.series.toPandas().estimate, truth, atol=0.05)


def test_release_refuses_bad_parameters_and_overspending_before_reading(spark, events):
    df, _ = events
    budget = PrivacyFilter(ZCDP(1.0))
    budget.spend(ZCDP(0.8))
    poisoned = df.selectExpr("time", "item", "CAST(raise_error('read!') AS INT) AS op")  # any read fails
    with pytest.raises(BudgetExceededError):
        dp_spark.continual_distinct(poisoned, rho=0.5, horizon=100, budget=budget)
    assert budget.spent.rho == pytest.approx(0.8)
    for kwargs, fragment in [
        ({"rho": 0.0}, "rho"),
        ({"rho": 1.0, "method": "bounded"}, "max_flippancy"),
        ({"rho": 1.0, "max_flippancy": 4}, "only to method 'bounded'"),
        ({"rho": 1.0, "method": "magic"}, "method must be one of auto, select, adaptive, bounded, baseline"),
        ({"rho": 1.0, "horizon": -3}, "horizon"),
        ({"rho": 1.0, "step_size": 0}, "step_size"),
        ({"rho": 1.0, "horizon": 2**22 + 1}, r"at most 2\^22"),
        ({"rho": 1.0, "horizon": None}, "horizon is required"),
        ({"rho": 1.0, "shards": 10**6}, "shards must be at most 10,000: each shard is one Python task"),
    ]:
        with pytest.raises(ParameterError, match=fragment):
            dp_spark.continual_distinct(poisoned, **{"horizon": 100, **kwargs})
    # A timestamp time column without origin: refused before spending or reading.
    stamped = poisoned.selectExpr("timestamp_seconds(time) AS time", "item", "op")
    fresh = PrivacyFilter(ZCDP(1.0))
    with pytest.raises(ParameterError, match="needs origin"):
        dp_spark.continual_distinct(stamped, rho=0.5, horizon=100, budget=fresh)
    assert fresh.spent.rho == 0.0


# ------------------------------------------------------------------ the CLI

def _cli(capsys, *argv):
    code = main(["continual-distinct", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_built_in_stream_writes_series_and_report(capsys, tmp_path, spark):
    report_path = tmp_path / "report.json"
    code, out, err = _cli(capsys, "--rows", "3000", "--horizon", "64", "--demo-flippancy", "4", "--seed", "3",
                          "--output", str(report_path))
    assert code == 0, err
    report = json.loads(report_path.read_text())
    assert report["result"]["horizon"] == 64 and report["result"]["method"] == "select"
    assert report["privacy"]["privacy_unit"] == "item" and report["result"]["released_count"] == 64
    series = pd.read_parquet(tmp_path / "report_series.parquet")  # default: beside the report
    assert series.step.tolist() == list(range(1, 65)) and "estimate" in series
    assert "NOT private" in out
    csv_path = tmp_path / "series.csv"
    code, out, err = _cli(capsys, "--rows", "3000", "--horizon", "64", "--method", "baseline",
                          "--series", str(csv_path), "--seed", "3", "--quiet")
    assert code == 0, err
    assert json.loads(out)["result"]["method"] == "baseline" and len(pd.read_csv(csv_path)) == 64


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--rho", "0"], "rho must be a positive finite number (> 0)"),
        (["--method", "bounded"], "needs max_flippancy"),
        (["--budget-rho", "0.1", "--rho", "0.5"], "budget"),
        (["--series", "out.txt"], "--series must end in"),
        (["--stream", "--input", "{tmp}", "--format", "json"], "horizon is required"),
        (["--input", "{tmp}/bad.json"], "horizon is required"),
        (["--input", "{tmp}/float_item.json", "--horizon", "8", "--schema", "time LONG, item DOUBLE, op INT"],
         "item column 'item' holds floating-point"),
        (["--shards", "10001"], "shards must be at most 10,000"),
        (["--stream", "--files-per-step", "1001"], "files_per_step must be at most 1,000: every file"),
        (["--stream", "--state-partitions", "5000"], "state_partitions must be at most 1,000: each partition"),
        (["--input", "{tmp}/float.json", "--horizon", "8", "--schema", "time DOUBLE, item STRING, op INT"],
         "needs origin, the start of step 1"),
        (["--horizon", str(2**22 + 1)], "horizon must be at most 2^22"),
    ],
)
def test_cli_bad_input_one_line_exit_2_and_output_kept(capsys, tmp_path, spark, argv, fragment):
    (tmp_path / "bad.json").write_text('{"time": 1, "item": "a", "op": 1}\n{"time": 2, "item": "a", "op": 5}\n')
    (tmp_path / "float.json").write_text('{"time": 1.5, "item": "a", "op": 1}\n')
    (tmp_path / "float_item.json").write_text('{"time": 1, "item": 1.5, "op": 1}\n')
    report = tmp_path / "report.json"
    report.write_text('{"release": "distinct-count", "version": "2.0", "earlier": true}')  # an earlier dp_spark report
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = _cli(capsys, *argv, "--output", str(report), "--overwrite")
    assert code == 2, err
    assert fragment in err, err
    assert len([line for line in err.splitlines() if "error" in line]) == 1, err
    assert "Traceback" not in err and "at org.apache" not in err
    assert json.loads(report.read_text()) == {"release": "distinct-count", "version": "2.0", "earlier": True}


# ------------------------------------------------------------------ privacy hardening (issue 9)

def _poisoned(df):
    """The same schema, but any read of the rows fails: a release given it
    proves it refused before reading."""
    return df.selectExpr("time", "item", "CAST(raise_error('read!') AS INT) AS op")


def test_horizon_is_required_before_any_read(spark):
    """Issue 9, finding 1: a horizon taken from the data (last step rounded up to
    a power of two) makes the series length depend on one item's events. It is
    a required public parameter; events beyond it are dropped, never used to
    resize anything."""
    base = spark.createDataFrame([(1, "a", 1), (2, "b", 1), (4, "a", -1)], "time long, item string, op int")
    budget = PrivacyFilter(ZCDP(1.0))
    with pytest.raises(TypeError, match="horizon"):  # a required keyword-only parameter
        dp_spark.continual_distinct(_poisoned(base), rho=0.5, budget=budget)
    with pytest.raises(ParameterError, match="horizon is required"):
        dp_spark.continual_distinct(_poisoned(base), rho=0.5, horizon=None, budget=budget)
    assert budget.spent.rho == 0.0
    with pytest.raises(ParameterError, match="horizon is required"):
        continual_summaries(_poisoned(base))
    # One extra item at step 5 changes nothing about the shape of the output.
    more = base.union(spark.createDataFrame([(5, "z", 1)], "time long, item string, op int"))
    small = dp_spark.continual_distinct(base, rho=0.5, horizon=4, seed=1)
    large = dp_spark.continual_distinct(more, rho=0.5, horizon=4, seed=1)
    assert small.series.count() == large.series.count() == 4
    pd.testing.assert_frame_equal(small.series.toPandas(), large.series.toPandas())  # the late event is dropped
    assert small.to_dict()["budget_split"] == large.to_dict()["budget_split"]


def test_bad_values_are_dropped_per_event_after_no_error(spark):
    """Issue 9, finding 2: a bad value inside a row (op other than ±1, null or
    non-finite time, a step before 1 or beyond the horizon) used to raise AFTER
    ρ was spent, so 'error' vs 'series' told neighbours apart. Each such event
    is now dropped (a per-row filter: every item keeps a subset of its own
    events), so the release equals the release without those rows."""
    good = [(1.0, "a", 1), (2.0, "b", 1), (3.0, "a", -1), (3.5, "c", 1)]
    bad = [(2.0, "u", 2), (2.0, "u", None), (None, "u", 1), (float("nan"), "u", 1),
           (float("inf"), "u", 1), (-3.0, "u", 1), (0.5, "u", 1), (9.0, "u", 1), (1e300, "u", 1),
           (-1e300, "u", -1), (2.0, "b", 0)]
    schema = "time double, item string, op int"
    clean = spark.createDataFrame(good, schema)
    dirty = spark.createDataFrame(good + bad, schema)
    budget = PrivacyFilter(ZCDP(2.0))
    want = dp_spark.continual_distinct(clean, rho=0.5, horizon=4, origin=1, seed=3)
    got = dp_spark.continual_distinct(dirty, rho=0.5, horizon=4, origin=1, seed=3, budget=budget)
    pd.testing.assert_frame_equal(got.series.toPandas(), want.series.toPandas())
    assert budget.spent.rho == pytest.approx(0.5)
    assert any("dropped" in rule for rule in got.to_dict()["parameters"]["rules"])
    # Integer times at the long range's ends must not overflow (ANSI mode raises).
    ints = spark.createDataFrame(
        [(1, "a", 1), (2**63 - 1, "u", 1), (-(2**63), "u", 1), (0, "u", 1), (5, "u", 1)],
        "time long, item string, op long",
    )
    out = continual_summaries(ints, horizon=4, shards=1)
    assert out.summaries.z.tolist() == [1, 0, 0, 0]
    stamps = spark.createDataFrame(
        [(dt.datetime(2024, 1, 1, 5), "a", 1), (None, "u", 1), (dt.datetime(2023, 12, 31), "u", 1),
         (dt.datetime(2024, 1, 9), "u", 1)], "time timestamp, item string, op int")
    out = continual_summaries(stamps, horizon=4, origin="2024-01-01", shards=1)
    assert out.summaries.z.tolist() == [1, 0, 0, 0]


@pytest.mark.parametrize("ddl", ["float", "double", "string collate UTF8_LCASE"])
def test_inexact_item_ids_are_refused_before_spending(spark, ddl):
    """Issue 9, finding 4: 0.0 / -0.0 (floats) or 'Bob' / 'bob' (UTF8_LCASE) are one
    value to Spark and two to the per-item kernel, so one item could move a
    node by 2. Refused from the schema alone, before spending or reading."""
    df = spark.createDataFrame([], f"time long, item {ddl}, op int")
    budget = PrivacyFilter(ZCDP(1.0))
    with pytest.raises(SchemaError, match=r"item column 'item' .*(floating-point|collation)"):
        dp_spark.continual_distinct(_poisoned(df), rho=0.5, horizon=4, budget=budget)
    assert budget.spent.rho == 0.0
    with pytest.raises(SchemaError, match="item column"):
        continual_summaries(df, horizon=4)


def test_stage_decodes_with_the_layout_it_encoded_with(spark, monkeypatch):
    """The cell chunks are sized from the cluster's parallelism, which can
    change between two calls (executors join or leave): the stage builds the
    layout once and decodes with it, so the summaries stay exact when the
    parallelism changes after the layout was built (a second layout would
    cut the keys at other places)."""
    import dp_spark.stages.continual as continual

    pdf = _random_events(seed=5, n=3000, steps=60, items=50)
    want = stream_summaries(pdf.t.to_numpy(), pdf.thing.to_numpy(), pdf.op.to_numpy(), 64)
    calls = []

    def drifting(spark_, shards):  # the first call sizes 4 partitions, every later one 6
        calls.append(shards)
        return 4 if len(calls) == 1 else 6

    monkeypatch.setattr(continual, "sum_partitions", drifting)
    out = continual_summaries(spark.createDataFrame(pdf), "t", "thing", "op", 60, shards=6)
    assert len(calls) >= 2  # the parallelism was read again after the layout
    _assert_same(out.summaries, want)
