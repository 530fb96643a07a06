"""Shape of the continual-distinct release on item-level neighbours (Spark).

For the batch release and the streaming query: D, D + one item whose events
are all malformed (an op other than ±1, a step before 1, a step beyond the
horizon, a null or non-finite time), and D + one item with many events late
in time (at the last steps and beyond the horizon). Whether the run raised,
the series' columns and number of rows, the report's keys, the budget spent
and the budget split must be identical: none of them may depend on one
item's events. Fixed test seeds (the seeded runs are not publishable)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import dp_spark
from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.streaming import continual_distinct_stream

HORIZON = 16
STREAM_HORIZON = 4
RHO = 0.5
SCHEMA = "time double, item string, op int"


def _base_rows(horizon: int, items: int, seed: int) -> list[tuple]:
    """Every item inserted at a random step and perhaps deleted later."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(items):
        start = int(rng.integers(1, horizon + 1))
        rows.append((float(start), f"i{i}", 1))
        if start < horizon and rng.random() < 0.5:
            rows.append((float(rng.integers(start + 1, horizon + 1)), f"i{i}", -1))
    return rows


def _malformed(horizon: int) -> list[tuple]:
    """All events of one item 'u', each malformed in its own way."""
    return [(2.0, "u", 2), (3.0, "u", 0), (3.0, "u", None), (0.0, "u", 1), (-5.0, "u", 1),
            (float(horizon + 1), "u", 1), (1e300, "u", 1), (None, "u", 1), (float("nan"), "u", 1),
            (float("inf"), "u", -1)]


def _late(horizon: int) -> list[tuple]:
    """Many events of one item 'v' at the last step and far beyond the horizon."""
    late = [(float(horizon), "v", 1 if k % 2 == 0 else -1) for k in range(50)]
    return late + [(float(horizon + k), "v", 1 if k % 2 == 0 else -1) for k in range(1, 200)]


def _shape(run) -> dict:
    budget = PrivacyFilter(ZCDP(10.0))
    try:
        release = run(budget)
    except Exception as exc:  # noqa: BLE001 - the shape records whether (and how) it raised
        return {"raised": type(exc).__name__, "spent": budget.spent.rho}
    report = release.to_dict()
    series = release.series.toPandas()
    return {
        "raised": None,
        "columns": list(series.columns),
        "rows": len(series),
        "steps": series.step.tolist(),
        "keys": sorted(report),
        "parameter_keys": sorted(report["parameters"]),
        "result_keys": sorted(report["result"]),
        "released_count": report["result"]["released_count"],
        "spent": budget.spent.rho,
        "budget_split": report["budget_split"],
    }


@pytest.mark.parametrize("method", ["adaptive", "baseline"])
def test_batch_shape_does_not_depend_on_one_item(spark, method):
    base = _base_rows(HORIZON, 40, seed=5)
    tables = {
        "D": base,
        "D + malformed item": base + _malformed(HORIZON),
        "D + late item": base + _late(HORIZON),
    }
    shapes = {}
    for name, rows in tables.items():
        df = spark.createDataFrame(rows, SCHEMA)
        shapes[name] = _shape(lambda budget, df=df: dp_spark.continual_distinct(
            df, rho=RHO, horizon=HORIZON, method=method, origin=1, seed=3, budget=budget))
    assert shapes["D"]["raised"] is None and shapes["D"]["rows"] == HORIZON
    assert shapes["D + malformed item"] == shapes["D"]
    assert shapes["D + late item"] == shapes["D"]
    # Without a horizon every table is refused alike, before anything is read or spent.
    refused = {name: _shape(lambda budget, rows=rows: dp_spark.continual_distinct(
        spark.createDataFrame(rows, SCHEMA), rho=RHO, horizon=None, origin=1, seed=3, budget=budget))
        for name, rows in tables.items()}
    assert all(shape == {"raised": "ParameterError", "spent": 0.0} for shape in refused.values()), refused


def _write_files(directory: Path, rows: list[tuple], horizon: int) -> None:
    """One JSON-lines file per step 1..horizon + 1 (the last beyond the horizon),
    cut by the step of the event's time (bad times go to step 2's file)."""
    directory.mkdir()
    by_step: dict[int, list[tuple]] = {step: [] for step in range(1, horizon + 2)}
    for row in rows:
        t = row[0]
        step = 2 if t is None or not np.isfinite(t) or t < 1 else min(int(t), horizon + 1)
        by_step[step].append(row)
    for step, events in by_step.items():
        path = directory / f"events-{step:04d}.json"
        lines = []
        for t, item, op in events:
            time = None if t is None or not np.isfinite(t) else t
            lines.append(json.dumps({"time": time, "item": item, "op": op}))
        path.write_text("".join(line + "\n" for line in lines))
        stamp = 1_700_000_000 + step
        os.utime(path, (stamp, stamp))


def test_stream_shape_does_not_depend_on_one_item(spark, tmp_path):
    base = _base_rows(STREAM_HORIZON, 12, seed=6)
    tables = {
        "D": base,
        "D + malformed item": base + _malformed(STREAM_HORIZON),
        "D + late item": base + _late(STREAM_HORIZON),
    }
    shapes = {}
    for index, (name, rows) in enumerate(tables.items()):
        source = tmp_path / f"in{index}"
        _write_files(source, rows, STREAM_HORIZON)
        shape = _shape(lambda budget, index=index, source=source: continual_distinct_stream(
            spark, str(source), checkpoint=str(tmp_path / f"ckpt{index}"), sink=str(tmp_path / f"out{index}"),
            rho=RHO, horizon=STREAM_HORIZON, seed=3, budget=budget, state_partitions=1))
        shapes[name] = shape
    assert shapes["D"]["raised"] is None and shapes["D"]["rows"] == STREAM_HORIZON
    assert shapes["D + malformed item"] == shapes["D"]
    assert shapes["D + late item"] == shapes["D"]
