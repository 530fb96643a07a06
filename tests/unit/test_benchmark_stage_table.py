"""benchmarks/grouped_scale.py's ``--stages`` reader on a small event log written here."""

from __future__ import annotations

import json

from benchmarks.grouped_scale import stage_table


def _task(stage: int, run_ms: int, cpu_ns: int, read_rows: int = 0, written_rows: int = 0) -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Task Metrics": {
        "Executor Run Time": run_ms, "Executor CPU Time": cpu_ns,
        "Shuffle Read Metrics": {"Total Records Read": read_rows, "Local Bytes Read": 2**20, "Remote Bytes Read": 0},
        "Shuffle Write Metrics": {"Shuffle Records Written": written_rows, "Shuffle Bytes Written": 2**21}}}


def test_stage_table_sums_tasks_per_stage_of_each_job_group(tmp_path):
    events = [
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Stage IDs": [0, 1],
         "Properties": {"spark.jobGroup.id": "release"}},
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Stage IDs": [2], "Properties": {"spark.jobGroup.id": "plain"}},
        {"Event": "SparkListenerJobStart", "Job ID": 2, "Stage IDs": [3], "Properties": {"spark.jobGroup.id": "warm"}},
        _task(1, 1500, 1_000_000_000, read_rows=10),
        _task(1, 500, 250_000_000, read_rows=5, written_rows=3),
        _task(0, 100, 50_000_000, written_rows=15),
        _task(2, 40, 30_000_000),
        _task(3, 999, 999),
        {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 1, "Submission Time": 2000,
                                                                "Completion Time": 4500}},
        {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 0, "Submission Time": 1000,
                                                                "Completion Time": 1900}},
        {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 2, "Submission Time": 0,
                                                                "Completion Time": 50}},
        {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 3, "Submission Time": 0,
                                                                "Completion Time": 10}},
    ]
    log = tmp_path / "app"
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    table = stage_table(str(log), ("plain", "release"))
    assert list(table) == ["plain", "release"]  # the order asked for; the warm-up group left out
    first, second = table["release"]
    assert (first["stage"], first["tasks"], first["wall_s"], first["write_rows"]) == (0, 1, 0.9, 15)
    assert (second["stage"], second["tasks"], second["wall_s"]) == (1, 2, 2.5)
    assert (second["run_s"], second["jvm_cpu_s"], second["read_rows"], second["write_rows"]) == (2.0, 1.25, 15, 3)
    assert (second["read_mib"], second["write_mib"]) == (2.0, 4.0)
    assert [r["stage"] for r in table["plain"]] == [2] and table["plain"][0]["run_s"] == 0.04
