"""Streaming continual-distinct on the local session: a few micro-batches,
a restart from the checkpoint with a re-executed batch, a crash between the
state save and the sink write, refusals to start a new state over old output,
the horizon stop, bad input, the interval-trigger step grid, and the CLI demo.
Deterministic except the interval test: trigger availableNow, one file per step."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.cli import main
from dp_spark.mechanisms.continual_distinct import ContinualCounter, stream_summaries
from dp_spark.errors import InputError, ParameterError, SchemaError, SparkJobError
from dp_spark.marking import mark_record  # a seeded run's sink records are marked
from dp_spark.noise import make_rng
from dp_spark.streaming import MechanismCheckpoint, StepSink, continual_distinct_stream
from dp_spark.streaming.query import GRID_CONDITION

HORIZON = 4
RHO = 0.5
SEED = 9


def _write_step(directory: Path, step: int, rows: list[tuple]) -> None:
    """One JSON-lines file per step; names and mtimes increase with the step."""
    path = directory / f"events-{step:04d}.json"
    path.write_text("".join(json.dumps({"time": t, "item": i, "op": o}) + "\n" for t, i, o in rows))
    stamp = 1_700_000_000 + step
    os.utime(path, (stamp, stamp))


def _steps(seed: int) -> dict[int, list[tuple]]:
    """Five steps of random events (the fifth is beyond the horizon)."""
    rng = np.random.default_rng(seed)
    out = {}
    for step in range(1, HORIZON + 2):
        n = int(rng.integers(20, 40))
        out[step] = [
            (float(step) + float(rng.integers(0, 4)) / 4, f"x{int(rng.integers(0, 15))}", int(rng.choice([-1, 1])))
            for _ in range(n)
        ]
    return out


def _expected(steps: dict[int, list[tuple]], released: int = HORIZON) -> list[float]:
    """The same mechanism run offline on the exact summaries with the same seed."""
    rows = [(step, *event) for step in range(1, HORIZON + 1) for event in steps.get(step, [])]
    summaries = stream_summaries(
        [r[0] for r in rows], [r[2] for r in rows], [r[3] for r in rows], HORIZON, order=[r[1] for r in rows]
    )
    counter = ContinualCounter(HORIZON, RHO, "auto")
    rng = make_rng(SEED)
    return [
        counter.step(rng, z=summaries.z[t], z_truncated=summaries.z_truncated[:, t],
                     over_counts=summaries.over_counts[:, t]).estimate
        for t in range(released)
    ]


def test_stream_restart_resumes_without_redrawing_or_respending(spark, tmp_path, monkeypatch, report_schema):
    import jsonschema

    source, ckpt, sink = tmp_path / "in", tmp_path / "ckpt", tmp_path / "out"
    source.mkdir()
    steps = _steps(seed=4)
    budget = PrivacyFilter(ZCDP(1.0))
    run = dict(checkpoint=str(ckpt), sink=str(sink), rho=RHO, horizon=HORIZON, seed=SEED, budget=budget,
               state_partitions=1)

    for step in (1, 2):
        _write_step(source, step, steps[step])
    first = continual_distinct_stream(spark, str(source), **run)
    assert first.series.toPandas().step.tolist() == [1, 2] and first.parameters["resumed"] is False
    assert budget.spent.rho == pytest.approx(RHO)
    released = {p.name: p.read_bytes() for p in sink.iterdir()}
    assert sorted(released) == ["step-000000001.json", "step-000000002.json"]

    # Crash after the last step was saved, before Spark committed its batch:
    # on restart Spark re-executes that batch; it must not count as a new step.
    commits = ckpt / "spark" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    for step in (3, 4, 5):  # step 5 lies beyond the horizon
        _write_step(source, step, steps[step])

    # Crash between saving step 3's state and writing its record to the sink.
    real_write = StepSink.write

    def crash_at_step_3(self, record):
        if record["step"] == 3:
            raise OSError("simulated crash after the state was saved")
        real_write(self, record)

    monkeypatch.setattr(StepSink, "write", crash_at_step_3)
    with pytest.raises(SparkJobError, match="streaming query failed"):
        continual_distinct_stream(spark, str(source), **run)
    monkeypatch.setattr(StepSink, "write", real_write)
    saved = MechanismCheckpoint(ckpt).load()
    assert saved["step"] == 3 and not StepSink(sink).has(3)  # drawn and saved, not yet published
    for name, content in released.items():  # the re-executed step-2 batch rewrote the same bytes
        assert (sink / name).read_bytes() == content

    # The restart writes the SAVED record (no new noise), Spark re-executes the
    # uncommitted batch (recognised, not counted), then step 4 follows.
    second = continual_distinct_stream(spark, str(source), **run)
    assert json.loads((sink / "step-000000003.json").read_text()) == mark_record(saved["last_record"], True)

    assert second.parameters["resumed"] is True
    assert second.series.toPandas().step.tolist() == [1, 2, 3, 4] and second.released_count == HORIZON
    for name, content in released.items():  # released steps are never re-drawn or changed
        assert (sink / name).read_bytes() == content
    np.testing.assert_allclose(second.series.toPandas().estimate, _expected(steps), rtol=0, atol=1e-9)
    report = second.to_dict()
    jsonschema.validate(json.loads(json.dumps(report)), report_schema)
    assert report["result"]["method"] == "auto" and report["result"]["released_count"] == HORIZON
    assert report["privacy"]["rho"] == RHO and sum(p["rho"] for p in report["budget_split"]) == pytest.approx(RHO)
    assert budget.spent.rho == pytest.approx(RHO)  # the resumed run spent nothing
    assert any("reached its horizon" in note for note in report["result"]["notes"])
    state = MechanismCheckpoint(ckpt).load()
    assert state["step"] == HORIZON

    assert report["parameters"]["step_grid"] == "available-now" and GRID_CONDITION in report["statement"]
    assert GRID_CONDITION in report["privacy"]["neighbouring"]

    with pytest.raises(ParameterError, match="checkpoint was created with rho"):
        continual_distinct_stream(spark, str(source), **{**run, "rho": 0.7})
    with pytest.raises(ParameterError, match="checkpoint was created with step_grid"):
        continual_distinct_stream(spark, str(source), **{**run, "trigger": "1 second"})
    # Every option that fixes what a step means is fixed per checkpoint (one line naming it).
    other = tmp_path / "other-in"
    other.mkdir()
    shutil.copy(source / "events-0001.json", other)
    for change, fragment in [
        ({"files_per_step": 2}, r"files_per_step = 1 \(--files-per-step\), not 2"),
        ({"horizon": 8}, r"horizon = 4 \(--horizon\), not 8"),
        ({"method": "baseline"}, r"method = 'auto' \(--method\), not 'baseline'"),
        ({"schema": "time double, thing string, op long"}, "another schema of the input files"),
    ]:
        if "schema" in change:
            from pyspark.sql.types import _parse_datatype_string

            change = {"schema": _parse_datatype_string(change["schema"])}
        with pytest.raises(ParameterError, match=fragment) as info:
            continual_distinct_stream(spark, str(source), **{**run, **change})
        assert "\n" not in str(info.value)
    with pytest.raises(ParameterError, match=r"source = '.*/in' \(--input\), not '.*/other-in'"):
        continual_distinct_stream(spark, str(other), **run)
    # The state file carries a checksum: an edited file (step 4 -> 2) is refused.
    saved_text = (ckpt / "mechanism.json").read_text()
    edited = json.loads(saved_text)
    edited["step"] = 2
    (ckpt / "mechanism.json").write_text(json.dumps(edited))
    with pytest.raises(InputError, match="fails its checksum"):
        continual_distinct_stream(spark, str(source), **run)
    (ckpt / "mechanism.json").write_text(saved_text)
    third = continual_distinct_stream(spark, str(source), **run)  # finished: nothing runs, nothing changes
    pd.testing.assert_frame_equal(third.series.toPandas(), second.series.toPandas())

    # The mechanism state lost while Spark's checkpoint and the sink remain: a
    # new state would restart at step 0, spend rho again and re-draw released
    # steps. Refused before spending; nothing changes.
    published = {p.name: p.read_bytes() for p in sink.iterdir()}
    (ckpt / "mechanism.json").rename(tmp_path / "mechanism.json.bak")
    with pytest.raises(InputError, match="holds a Spark checkpoint .* but no mechanism state"):
        continual_distinct_stream(spark, str(source), **run)
    # A new checkpoint pointed at the old sink: refused too.
    with pytest.raises(InputError, match="already holds step records"):
        continual_distinct_stream(spark, str(source), **{**run, "checkpoint": str(tmp_path / "new")})
    assert budget.spent.rho == pytest.approx(RHO)
    assert not (ckpt / "mechanism.json").exists() and not (tmp_path / "new" / "mechanism.json").exists()
    assert {p.name: p.read_bytes() for p in sink.iterdir()} == published
    # The sink never replaces a released record by a different one.
    changed = {**json.loads(published["step-000000001.json"]), "estimate": 0.5}
    with pytest.raises(InputError, match="different record for step 1"):
        StepSink(sink).write(changed)
    assert (sink / "step-000000001.json").read_bytes() == published["step-000000001.json"]


def test_cli_stream_drops_bad_values_reports_progress_and_interrupts_cleanly(capsys, spark, tmp_path,
                                                                            monkeypatch):
    """A bad value in a micro-batch (op other than ±1, null or non-finite
    time) used to fail the step after ρ was spent and halt the query; now the
    event is dropped (the series equals the stream without it). Each released
    step prints a progress line, and Ctrl-C says how many steps are released
    and where instead of "no output was written"."""
    import dp_spark.streaming.query as query

    source = tmp_path / "in"
    source.mkdir()
    steps = {1: [(1.0, "a", 1), (1.0, "b", 1)], 2: [(2.0, "a", -1), (2.5, "c", 1)], 3: [(3.0, "b", -1)]}
    bad = {1: [(1.0, "u", 3), (1.0, "b", 0)], 2: [(None, "u", 1), (2.0, "u", None)], 3: []}
    for step in steps:
        _write_step(source, step, steps[step] + bad[step])
    real_await = getattr(query, "_await", None)

    def interrupted(*args, **kwargs):
        real_await(*args, **kwargs)
        raise KeyboardInterrupt  # Ctrl-C after the query released the files present

    monkeypatch.setattr(query, "_await", interrupted, raising=False)
    argv = ["continual-distinct", "--stream", "--input", str(source), "--horizon", str(HORIZON),
            "--rho", str(RHO), "--seed", str(SEED), "--checkpoint", str(tmp_path / "ckpt"),
            "--sink", str(tmp_path / "out"), "--state-partitions", "1", "--output", str(tmp_path / "r.json")]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 130, err
    assert "no output was written" not in err and "3 of 4 steps are released in" in err, err
    assert str(tmp_path / "out") in err and "run the same command again to resume" in err
    assert [line for line in err.splitlines() if "released" in line][:3] == [
        f"continual-distinct: step {t}/{HORIZON} released" for t in (1, 2, 3)]
    monkeypatch.undo()
    code = main([*argv, "--quiet"])  # resumes: nothing new to read, the report of the 3 steps
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "step 1/" not in err  # --quiet: no progress lines
    got = json.loads((tmp_path / "r.json").read_text())
    assert got["result"]["released_count"] == 3
    estimates = [r["estimate"] for r in StepSink(tmp_path / "out").read()]
    np.testing.assert_allclose(estimates, _expected(steps, released=3), rtol=0, atol=1e-9)


def test_stream_file_with_other_columns_fails_its_step(spark, tmp_path):
    """A later CSV file whose header differs from the stream's read as rows of
    nulls and used to be released as an empty step; now the step fails with a
    one-line error naming the file and the missing column, and nothing of it
    is released. (A CSV header is the file's, not one item's rows; JSON keys
    are checked per row instead, see the next test.)"""
    source = tmp_path / "in"
    source.mkdir()
    (source / "events-0001.csv").write_text("time,item,op\n1.0,a,1\n1.2,b,1\n")
    os.utime(source / "events-0001.csv", (1_700_000_001, 1_700_000_001))
    run = dict(checkpoint=str(tmp_path / "ckpt"), sink=str(tmp_path / "out"), rho=RHO, horizon=HORIZON,
               seed=SEED, state_partitions=1, fmt="csv")
    assert continual_distinct_stream(spark, str(source), **run).released_count == 1
    path = source / "events-0002.csv"
    path.write_text("time,thing,op\n2.0,c,1\n")
    os.utime(path, (1_700_000_002, 1_700_000_002))
    with pytest.raises(InputError, match=r"source file 'events-0002.csv' has no column 'item'.*step 2 was not"):
        continual_distinct_stream(spark, str(source), **run)
    assert not StepSink(tmp_path / "out").has(2) and MechanismCheckpoint(tmp_path / "ckpt").load()["step"] == 1


def test_stream_json_rows_without_a_key_are_dropped_not_a_failed_step(spark, tmp_path):
    """Issue 21 §3: a JSON-lines file whose rows lack a key failed its step
    (after ρ was spent) when that item's events were alone in the file, and
    was dropped when other items were there. A missing key is a bad value:
    the item-only file, an empty file and a mixed file all release their
    step, and the series equals the stream without the keyless rows."""
    source = tmp_path / "in"
    source.mkdir()
    _write_step(source, 1, [(1.0, "a", 1), (1.2, "b", 1)])
    files = {2: '{"item": "c", "op": 1}\n{"item": "c", "op": -1}\n',  # one item's rows, no "time"
             3: "",  # an empty file: a step without events
             4: '{"time": 4, "item": "a", "op": -1}\n{"time": 4, "op": 1}\n{"time": 4, "item": "d"}\n'}
    for step, text in files.items():
        path = source / f"events-{step:04d}.json"
        path.write_text(text)
        os.utime(path, (1_700_000_000 + step, 1_700_000_000 + step))
    budget = PrivacyFilter(ZCDP(1.0))
    got = continual_distinct_stream(spark, str(source), checkpoint=str(tmp_path / "ckpt"), sink=str(tmp_path / "out"),
                                    rho=RHO, horizon=HORIZON, seed=SEED, state_partitions=1, budget=budget)
    assert got.released_count == HORIZON
    expected = _expected({1: [(1.0, "a", 1), (1.2, "b", 1)], 4: [(4.0, "a", -1)]})
    np.testing.assert_allclose(got.series.toPandas().estimate, expected, rtol=0, atol=1e-9)


@pytest.mark.parametrize("leftover", ["spark-checkpoint", "sink-steps"])
def test_cli_stream_refuses_a_new_state_over_old_output(capsys, spark, tmp_path, leftover):
    source = tmp_path / "in"
    source.mkdir()
    _write_step(source, 1, [(1.0, "a", 1)])
    if leftover == "spark-checkpoint":
        (tmp_path / "ckpt" / "spark" / "offsets").mkdir(parents=True)
        fragment = "holds a Spark checkpoint (spark/) but no mechanism state"
    else:
        StepSink(tmp_path / "out").write({"step": 1, "estimate": 3.0, "std": 1.0, "error_bound": 4.0,
                                          "flippancy_bound": 1})
        fragment = "already holds step records"
    code = main(["continual-distinct", "--stream", "--input", str(source), "--horizon", "4",
                 "--checkpoint", str(tmp_path / "ckpt"), "--sink", str(tmp_path / "out"),
                 "--budget-rho", "1", "--output", str(tmp_path / "report.json")])
    out, err = capsys.readouterr()
    assert code == 2 and fragment in err, err
    assert err.count("error") == 1 and "Traceback" not in err and "at org.apache" not in err, err
    assert not MechanismCheckpoint(tmp_path / "ckpt").exists() and not (tmp_path / "report.json").exists()


def test_interval_trigger_makes_a_step_of_every_interval(spark, tmp_path):
    """Interval trigger: a file for step 1 only, yet steps 2 and 3 follow (no-data
    micro-batches), so a missing file cannot shift later steps. Seeded: the
    estimates equal an offline run with zero change at steps 2 and 3."""
    source = tmp_path / "in"
    source.mkdir()
    rows = [(1.0, "a", 1), (1.0, "b", 1), (1.5, "b", -1), (1.2, "c", 1)]
    _write_step(source, 1, rows)
    got = continual_distinct_stream(spark, str(source), checkpoint=str(tmp_path / "ckpt"),
                                    sink=str(tmp_path / "out"), rho=RHO, horizon=3, seed=SEED,
                                    trigger="1 second", timeout=90, state_partitions=1)
    assert got.series.toPandas().step.tolist() == [1, 2, 3] and got.parameters["step_grid"] == "interval"
    assert any("each trigger interval is one step" in note for note in got.notes)
    counter = ContinualCounter(4, RHO, "auto")
    rng = make_rng(SEED)
    summaries = stream_summaries([1, 1, 1, 1], ["a", "b", "b", "c"], [1, 1, -1, 1], 4, order=[1.0, 1.0, 1.5, 1.2])
    want = [counter.step(rng, z=summaries.z[t], z_truncated=summaries.z_truncated[:, t],
                         over_counts=summaries.over_counts[:, t]).estimate for t in range(3)]
    np.testing.assert_allclose(got.series.toPandas().estimate, want, rtol=0, atol=1e-9)


def test_cli_stream_demo(capsys, tmp_path, spark):
    report = tmp_path / "report.json"
    argv = ["continual-distinct", "--stream", "--horizon", "2", "--demo-flippancy", "2",
            "--checkpoint", str(tmp_path / "ckpt"), "--sink", str(tmp_path / "steps"),
            "--series", str(tmp_path / "series.csv"), "--state-partitions", "1", "--seed", "5",
            "--output", str(report)]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    got = json.loads(report.read_text())
    assert got["result"]["released_count"] == 2 and got["parameters"]["mode"] == "stream"
    assert pd.read_csv(tmp_path / "series.csv").step.tolist() == [1, 2]
    assert len(list((tmp_path / "ckpt" / "demo-input").glob("events-*.json"))) == 2
    shutil.rmtree(tmp_path / "ckpt")


def test_stream_refuses_inexact_item_ids_and_large_parameters_before_spending(spark, tmp_path):
    """Float item ids (0.0 and -0.0 are one value to Spark, two to the
    per-item state) are refused from the schema, before ρ is spent or a
    checkpoint is created; so are parameters above their public limits."""
    source = tmp_path / "in"
    source.mkdir()
    (source / "events-0001.json").write_text('{"time": 1, "item": 0.0, "op": 1}\n{"time": 1, "item": -0.0, "op": 1}\n')
    budget = PrivacyFilter(ZCDP(1.0))
    from pyspark.sql.types import StructType

    # declared: without a schema JSON values are read as their text ("0.0", "-0.0": two exact ids)
    run = dict(checkpoint=str(tmp_path / "ckpt"), sink=str(tmp_path / "out"), rho=RHO, horizon=HORIZON,
               budget=budget, schema=StructType.fromDDL("time LONG, item DOUBLE, op INT"))
    with pytest.raises(SchemaError, match="item column 'item' holds floating-point numbers"):
        continual_distinct_stream(spark, str(source), **run)
    assert budget.spent.rho == 0.0 and not MechanismCheckpoint(tmp_path / "ckpt").exists()
    for change, fragment in [({"horizon": 2**22 + 1}, r"at most 2\^22"), ({"horizon": None}, "horizon is required"),
                             ({"files_per_step": 1001}, "at most 1,000"),
                             ({"state_partitions": 1001}, "at most 1,000")]:
        with pytest.raises(ParameterError, match=fragment):
            continual_distinct_stream(spark, str(source), **{**run, **change})
    assert budget.spent.rho == 0.0 and not (tmp_path / "ckpt").exists()


def test_cli_stream_passes_schema_to_the_source(capsys, spark, tmp_path):
    """--schema reaches the streaming source: item ids written as digits are
    inferred as integers without it; with 'item STRING' the checkpoint records
    (and the query reads) them as strings."""
    source = tmp_path / "in"
    source.mkdir()
    for step, rows in {1: [("10", 1), ("20", 1)], 2: [("10", -1), ("30", 1)]}.items():
        path = source / f"events-{step:04d}.csv"
        path.write_text("item,op\n" + "".join(f"{i},{o}\n" for i, o in rows))
        os.utime(path, (1_700_000_000 + step, 1_700_000_000 + step))
    report = tmp_path / "report.json"
    code = main(["continual-distinct", "--stream", "--input", str(source), "--format", "csv", "--horizon", "2",
                 "--schema", "item STRING, op INT", "--checkpoint", str(tmp_path / "ckpt"),
                 "--sink", str(tmp_path / "out"), "--state-partitions", "1", "--seed", "3",
                 "--output", str(report)])
    out, err = capsys.readouterr()
    assert code == 0, err
    saved = json.loads(MechanismCheckpoint(tmp_path / "ckpt").load()["config"]["schema"])
    assert [(f["name"], f["type"]) for f in saved["fields"]] == [("item", "string"), ("op", "integer")]
    assert json.loads(report.read_text())["result"]["released_count"] == 2


@pytest.mark.parametrize("extra", ["2.5,new,+", "soon,new,1"], ids=["op-plus", "time-text"])
def test_stream_csv_types_never_inferred_from_the_rows(spark, tmp_path, extra):
    """Issue 21 §2: the stream's schema was inferred from the files present,
    so one item's op "+" made the op column text and refused the stream
    (its neighbour ran). Columns are strings and op/time parse per row: both
    neighbours release every step, with the same series (the bad event is
    dropped)."""
    series = []
    for name, rows in (("base", []), ("neighbour", [extra])):
        source = tmp_path / name / "in"
        source.mkdir(parents=True)
        for step in range(1, HORIZON + 1):
            lines = [f"{step},x{step},1", f"{step}.5,y,{1 if step % 2 else -1}"] + (rows if step == 2 else [])
            path = source / f"events-{step:04d}.csv"
            path.write_text("time,item,op\n" + "".join(line + "\n" for line in lines))
            os.utime(path, (1_700_000_000 + step, 1_700_000_000 + step))
        got = continual_distinct_stream(spark, str(source), checkpoint=str(tmp_path / name / "ckpt"),
                                        sink=str(tmp_path / name / "out"), rho=RHO, horizon=HORIZON, seed=SEED,
                                        state_partitions=1, fmt="csv")
        assert got.released_count == HORIZON
        series.append(got.series.toPandas().estimate.tolist())
    assert series[0] == series[1]


def test_stream_json_without_times_needs_time_col_none(spark, tmp_path):
    """JSON keys are never taken from the rows, so the time column is part of
    the stream's schema whenever time_col is set: rows without it are bad
    events (dropped). A stream whose files carry no times says so with
    time_col=None, and every event counts (in file order within a step)."""
    source = tmp_path / "in"
    source.mkdir()
    for step in range(1, HORIZON + 1):
        path = source / f"events-{step:04d}.json"
        path.write_text(json.dumps({"item": f"x{step}", "op": 1}) + "\n")
        os.utime(path, (1_700_000_000 + step, 1_700_000_000 + step))
    got = continual_distinct_stream(spark, str(source), checkpoint=str(tmp_path / "ckpt"), sink=str(tmp_path / "out"),
                                    rho=RHO, horizon=HORIZON, seed=SEED, state_partitions=1, time_col=None)
    assert got.released_count == HORIZON
    expected = _expected({step: [(float(step), f"x{step}", 1)] for step in range(1, HORIZON + 1)})
    np.testing.assert_allclose(got.series.toPandas().estimate, expected, rtol=0, atol=1e-9)
