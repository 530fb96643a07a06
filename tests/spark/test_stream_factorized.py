"""Streamed continual-distinct with method "bounded" and counter "factorized": the stream runs the
online BLT counter (dp_spark.mechanisms.continual_distinct.blt), reports its draws, resumes from
its checkpoint, and refuses a resume with another counter."""

from __future__ import annotations

import json

import pytest

from dp_spark.errors import ParameterError
from tests.spark.test_continual_streaming import HORIZON, _write_step
from tests.spark.test_stream_noise_and_partitions import _offline, _run, _whole_and_parts


def test_streamed_factorized_counter_equals_the_online_counter_and_resumes(spark, tmp_path, report_schema):
    """On the same events and seed the stream's estimates and noise records are the online BLT
    counter's; a query stopped after step 2 and resumed releases the same series and records; the
    checkpoint names the counter, and resuming it with counter "tree" is refused."""
    import jsonschema

    steps, whole, parts = _whole_and_parts(tmp_path)
    options = {"method": "bounded", "max_flippancy": 2, "counter": "factorized"}
    unbroken = _run(spark, whole, tmp_path, "whole", **options)
    estimates, records = _offline(steps, "bounded", HORIZON, max_flippancy=2, counter="factorized")
    assert unbroken.series.toPandas().estimate.tolist() == estimates
    assert list(unbroken.noise) == list(records)
    assert [r.kind for r in unbroken.noise] == ["factorized-counter"] and unbroken.noise[0].draws == HORIZON
    jsonschema.validate(json.loads(json.dumps(unbroken.to_dict())), report_schema)
    assert unbroken.parameters["counter"] == "factorized"

    first = _run(spark, parts, tmp_path, "parts", **options)
    assert first.released_count == 2
    for step in (3, 4):
        _write_step(parts, step, steps[step])
    with pytest.raises(ParameterError, match="counter = 'factorized'"):
        _run(spark, parts, tmp_path, "parts", **{**options, "counter": "tree"})
    resumed = _run(spark, parts, tmp_path, "parts", **options)
    assert resumed.released_count == HORIZON and resumed.noise == unbroken.noise
    assert resumed.series.toPandas().estimate.tolist() == estimates
    saved = json.loads((tmp_path / "ckpt-parts" / "mechanism.json").read_text())
    assert saved["config"]["counter"] == "factorized" and saved["counter"]["config"]["counter"] == "factorized"
