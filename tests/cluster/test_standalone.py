"""The distinct-count job under spark-submit on a real standalone cluster.

The cluster (master + one worker on loopback) comes from the module-scoped
``standalone_cluster`` fixture in conftest.py.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.cluster

JOB = ("jobs/distinct_count.py", "--config", "conf/distinct_count.yaml")
SUBMIT_OPTS = (
    "--driver-memory", "1g", "--executor-memory", "1g",
    "--conf", "spark.ui.enabled=false",  # no driver UI port to collide on
)


def _submit_opts(cluster) -> tuple[str, ...]:
    # Keep Spark's scratch out of the checkout (spark-submit runs from it).
    return (*SUBMIT_OPTS, "--conf", f"spark.sql.warehouse.dir={cluster.base / 'warehouse'}")


def _tail(text: str, n: int = 60) -> str:
    return "\n".join(text.splitlines()[-n:])


def test_distinct_count_runs_on_the_cluster(standalone_cluster, spark_submit, tmp_path):
    report_path = tmp_path / "report.json"
    proc = spark_submit(
        *_submit_opts(standalone_cluster), *JOB,
        "--rows", "50000", "--seed", "1", "--output", str(report_path),
    )
    assert proc.returncode == 0, f"spark-submit exited {proc.returncode}:\n{_tail(proc.stderr)}"

    report = json.loads(report_path.read_text())
    result = report.get("result", {})
    missing = {"estimate", "lower_bound", "bound", "confidence", "method"} - result.keys()
    assert not missing, f"report result lacks {sorted(missing)}: {sorted(result)}"
    assert report["privacy"]["epsilon"] == 1.0
    assert report["seeded"] is True
    assert result["lower_bound"] <= result["estimate"]

    # Proof that the work ran on the cluster's executor, not in the driver.
    app_dirs = standalone_cluster.app_dirs()
    registered = standalone_cluster.master_registered_apps()
    local_hint = ""
    if "Starting executor ID driver" in proc.stderr:
        local_hint = (
            "\nThe driver log shows 'Starting executor ID driver': the job ran in local "
            "mode and ignored spark-submit's --master."
        )
    assert app_dirs or registered, (
        f"no application reached the cluster: worker dir {standalone_cluster.work_dir} "
        f"is empty and the master log registered no app.{local_hint}"
    )
    if app_dirs:
        executors = [p for p in app_dirs[-1].iterdir() if p.is_dir()]
        assert executors, f"{app_dirs[-1]} holds no executor directory"


def test_bad_input_path_is_one_line_exit_2(standalone_cluster, spark_submit, tmp_path):
    missing = tmp_path / "no-such-table.parquet"
    report_path = tmp_path / "report.json"
    proc = spark_submit(
        *_submit_opts(standalone_cluster), *JOB, "--input", str(missing), "--output", str(report_path), "--quiet"
    )
    assert proc.returncode == 2, f"spark-submit exited {proc.returncode}:\n{_tail(proc.stderr)}"
    # spark-submit's PythonRunner merges the Python driver's stderr into its
    # own stdout, so the CLI's stderr line arrives on spark-submit's stdout;
    # spark-submit's stderr holds the JVM's log lines. Check both streams.
    both = proc.stdout + "\n" + proc.stderr
    errors = [line for line in both.splitlines() if line.startswith("dp-spark: error:")]
    assert len(errors) == 1, f"expected one 'dp-spark: error:' line:\n{_tail(both)}"
    assert str(missing) in errors[0]
    for trace in ("at org.apache", "Traceback (most recent call last)", "Exception in thread"):
        assert trace not in both, f"{trace!r} in the output:\n{_tail(both)}"
    assert not report_path.exists()
