"""Streaming continual-distinct on the local session: a few micro-batches,
a restart from the checkpoint with a re-executed batch, the horizon stop, bad
input, and the CLI demo. Deterministic: trigger availableNow, one file per step."""

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
from dp_spark.continual import ContinualCounter, stream_summaries
from dp_spark.errors import ParameterError
from dp_spark.noise import make_rng
from dp_spark.streaming import MechanismCheckpoint, StepSink, continual_distinct_stream

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


def _expected(steps: dict[int, list[tuple]]) -> list[float]:
    """The same mechanism run offline on the exact summaries with the same seed."""
    rows = [(step, *event) for step in range(1, HORIZON + 1) for event in steps[step]]
    summaries = stream_summaries(
        [r[0] for r in rows], [r[2] for r in rows], [r[3] for r in rows], HORIZON, order=[r[1] for r in rows]
    )
    counter = ContinualCounter(HORIZON, RHO, "adaptive")
    rng = make_rng(SEED)
    return [
        counter.step(rng, z=summaries.z[t], z_truncated=summaries.z_truncated[:, t],
                     over_counts=summaries.over_counts[:, t]).estimate
        for t in range(HORIZON)
    ]


def test_stream_restart_resumes_without_redrawing_or_respending(spark, tmp_path):
    source, ckpt, sink = tmp_path / "in", tmp_path / "ckpt", tmp_path / "out"
    source.mkdir()
    steps = _steps(seed=4)
    budget = PrivacyFilter(ZCDP(1.0))
    run = dict(checkpoint=str(ckpt), sink=str(sink), rho=RHO, horizon=HORIZON, seed=SEED, budget=budget,
               state_partitions=1)

    for step in (1, 2):
        _write_step(source, step, steps[step])
    first = continual_distinct_stream(spark, str(source), **run)
    assert first.series.step.tolist() == [1, 2] and first.parameters["resumed"] is False
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
    second = continual_distinct_stream(spark, str(source), **run)

    assert second.parameters["resumed"] is True
    assert second.series.step.tolist() == [1, 2, 3, 4] and second.steps_released == HORIZON
    for name, content in released.items():  # released steps are never re-drawn or changed
        assert (sink / name).read_bytes() == content
    np.testing.assert_allclose(second.series.estimate, _expected(steps), rtol=0, atol=1e-9)
    report = second.to_dict()
    assert report["rho"] == RHO and sum(p["rho"] for p in report["budget_split"]) == pytest.approx(RHO)
    assert budget.spent.rho == pytest.approx(RHO)  # the resumed run spent nothing
    assert any("reached its horizon" in note for note in report["notes"])
    state = MechanismCheckpoint(ckpt).load()
    assert state["step"] == HORIZON

    with pytest.raises(ParameterError, match="checkpoint was created with rho"):
        continual_distinct_stream(spark, str(source), **{**run, "rho": 0.7})
    third = continual_distinct_stream(spark, str(source), **run)  # finished: nothing runs, nothing changes
    pd.testing.assert_frame_equal(third.series, second.series)


def test_cli_stream_bad_op_is_one_line_and_releases_nothing(capsys, spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    _write_step(source, 1, [(1.0, "a", 1), (1.0, "b", 3)])
    report = tmp_path / "report.json"
    report.write_text('{"earlier": true}')
    code = main(["continual-distinct", "--stream", "--input", str(source), "--horizon", "4",
                 "--checkpoint", str(tmp_path / "ckpt"), "--sink", str(tmp_path / "out"),
                 "--state-partitions", "1", "--output", str(report)])
    out, err = capsys.readouterr()
    assert code == 2 and "op other than +1/-1" in err, err
    assert len(err.strip().splitlines()) <= 2 and err.count("error") == 1, err  # a progress line at most
    assert "at org.apache" not in err and "Traceback" not in err
    assert json.loads(report.read_text()) == {"earlier": True}
    assert StepSink(tmp_path / "out").read() == []
    assert MechanismCheckpoint(tmp_path / "ckpt").load()["step"] == 0


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
    assert got["steps_released"] == 2 and got["parameters"]["mode"] == "stream"
    assert pd.read_csv(tmp_path / "series.csv").step.tolist() == [1, 2]
    assert len(list((tmp_path / "ckpt" / "demo-input").glob("events-*.json"))) == 2
    shutil.rmtree(tmp_path / "ckpt")
