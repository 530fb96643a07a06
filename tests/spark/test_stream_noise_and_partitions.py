"""Streamed continual-distinct: its noise records (issue 23) and its state
partitions (issue 26), on the local session, trigger availableNow, one file
per step (deterministic, seeded)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dp_spark.mechanisms.continual_distinct import ContinualCounter, stream_summaries
from dp_spark.noise import make_rng
from dp_spark.noise.records import noise_to_dicts
from dp_spark.stages.partitioning import python_partitions
from dp_spark.streaming import MechanismCheckpoint, continual_distinct_stream
from tests.spark.test_continual_streaming import HORIZON, RHO, SEED, _steps, _write_step


def _offline(steps, method: str, released: int, **kwargs):
    """The counter the stream runs, fed the exact summaries of the same events
    with the same seed: its estimates and its noise records after ``released`` steps."""
    rows = [(step, *event) for step in range(1, HORIZON + 1) for event in steps.get(step, [])]
    s = stream_summaries([r[0] for r in rows], [r[2] for r in rows], [r[3] for r in rows], HORIZON,
                         order=[r[1] for r in rows])
    counter = ContinualCounter(HORIZON, RHO, method, **kwargs)
    rng = make_rng(SEED)
    estimates = [counter.step(rng, z=s.z[t], z_truncated=s.z_truncated[:, t], over_counts=s.over_counts[:, t]).estimate
                 for t in range(released)]
    return estimates, counter.noise_records()


def _whole_and_parts(tmp_path):
    """The seeded steps, a source directory holding all of them ("whole") and one holding steps 1-2
    ("parts", for a query stopped and resumed)."""
    steps = _steps(seed=7)
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    whole.mkdir()
    parts.mkdir()
    for step in range(1, HORIZON + 1):
        _write_step(whole, step, steps[step])
    for step in (1, 2):
        _write_step(parts, step, steps[step])
    return steps, whole, parts


def _run(spark, source, tmp_path, name: str, **options):
    return continual_distinct_stream(spark, str(source), checkpoint=str(tmp_path / f"ckpt-{name}"),
                                     sink=str(tmp_path / f"out-{name}"), rho=RHO, horizon=HORIZON, seed=SEED,
                                     **options)


@pytest.mark.parametrize("method, kwargs", [("adaptive", {}), ("bounded", {"max_flippancy": 2})])
def test_streamed_release_reports_its_noise_and_a_restart_reports_the_same(spark, tmp_path, report_schema,
                                                                            method, kwargs):
    """``release.noise`` of a stream is the counter's records of what it drew;
    the JSON report writes them; the error statement names the noise from
    them; a query stopped after step 2 and resumed from its checkpoint
    reports the records of the unbroken query. The unbroken run uses the
    default state partitions (a session with 5 shuffle partitions: not used)."""
    import jsonschema

    steps, whole, parts = _whole_and_parts(tmp_path)
    options = {"method": method, "max_flippancy": kwargs.get("max_flippancy")}

    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "5")
    try:
        unbroken = _run(spark, whole, tmp_path, "whole", **options)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    chosen = python_partitions(spark)
    assert chosen != 5
    assert MechanismCheckpoint(tmp_path / "ckpt-whole").spark_state_partitions() == chosen
    assert unbroken.parameters["state_partitions"] == chosen

    estimates, records = _offline(steps, method, HORIZON, **kwargs)
    assert unbroken.series.toPandas().estimate.tolist() == estimates
    assert unbroken.noise and [r.to_dict() for r in unbroken.noise] == noise_to_dicts(records)
    assert any(r.kind in ("binary-tree", "factorized-counter") and r.draws for r in unbroken.noise)

    first = _run(spark, parts, tmp_path, "parts", state_partitions=1, **options)
    assert first.released_count == 2
    assert list(first.noise) == list(_offline(steps, method, 2, **kwargs)[1])
    for step in (3, 4):
        _write_step(parts, step, steps[step])
    resumed = _run(spark, parts, tmp_path, "parts", state_partitions=1, **options)
    assert resumed.parameters["resumed"] is True and resumed.released_count == HORIZON
    assert resumed.noise == unbroken.noise
    pd.testing.assert_frame_equal(resumed.series.toPandas(), unbroken.series.toPandas())

    report = resumed.to_dict()
    jsonschema.validate(json.loads(json.dumps(report)), report_schema)
    assert report["noise"] == noise_to_dicts(resumed.noise)
    kinds = {r.kind for r in resumed.noise}
    words = {"binary-tree": "binary tree", "factorized-counter": "factorized counter"}
    for kind in kinds & set(words):  # the counters that ran are named, with their scales
        assert words[kind] in report["errors"]["final_estimate"] and words[kind] in resumed.to_html()
    for r in resumed.noise:
        if r.kind in words:
            assert f"{r.scale:.4g}" in report["errors"]["final_estimate"]


def test_streamed_and_batch_records_agree(spark, tmp_path):
    """The recompute baseline makes the same draws streamed and in batch
    (one per release): on the same events and seed the two releases hold
    equal records."""
    from dp_spark.releases.continual_distinct import continual_distinct

    steps = _steps(seed=8)
    source = tmp_path / "in"
    source.mkdir()
    for step in range(1, HORIZON + 1):
        _write_step(source, step, steps[step])
    streamed = _run(spark, source, tmp_path, "baseline", method="baseline")
    events = pd.DataFrame([(float(t), i, o) for step in range(1, HORIZON + 1) for t, i, o in steps[step]],
                          columns=["time", "item", "op"])
    batch = continual_distinct(spark.createDataFrame(events), rho=RHO, horizon=HORIZON, method="baseline",
                               origin=1.0, step_size=1.0, seed=SEED)
    assert streamed.noise and streamed.noise == batch.noise
    assert streamed.to_dict()["errors"]["final_estimate"] == batch.to_dict()["errors"]["final_estimate"]


def test_a_checkpoint_with_other_state_partitions_resumes(spark, tmp_path):
    """A checkpoint whose first run fixed another partition count (3: before
    issue 26 the session's shuffle partitions, e.g. a notebook's) resumes
    with the default and with another explicit count: Spark keeps its 3,
    the report says 3, and the series equals the offline counter's."""
    steps = _steps(seed=9)
    source = tmp_path / "in"
    source.mkdir()
    for step in (1, 2):
        _write_step(source, step, steps[step])
    first = _run(spark, source, tmp_path, "old", state_partitions=3)
    assert first.parameters["state_partitions"] == 3
    store = MechanismCheckpoint(tmp_path / "ckpt-old")
    assert store.spark_state_partitions() == 3
    _write_step(source, 3, steps[3])
    second = _run(spark, source, tmp_path, "old")  # the default would choose python_partitions(spark)
    assert second.parameters["state_partitions"] == 3 and second.released_count == 3
    _write_step(source, 4, steps[4])
    third = _run(spark, source, tmp_path, "old", state_partitions=2)  # ignored, with a warning
    assert third.parameters["state_partitions"] == 3 and store.spark_state_partitions() == 3
    estimates, records = _offline(steps, "auto", HORIZON)
    assert third.series.toPandas().estimate.tolist() == estimates
    assert third.noise == records
    assert np.all(np.isfinite(third.series.toPandas()["std"]))
