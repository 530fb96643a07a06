"""A daily Airflow DAG running every dp_spark release, all spending from one
privacy-budget ledger.

One SparkSubmitOperator task per release of dp_spark's registry
(``dp_spark.releases.RELEASES``, read from the checkout): ``jobs/<release>.py
--config conf/<release>.yaml`` (edit the YAML files to point ``input:`` at your
tables; a release without its own script runs as ``jobs/release.py <name>``,
one without a config file with its example's parameters), each with

* ``--ledger LEDGER --ledger-budget BUDGET --run-key <dag>/<run_id>/<task>``:
  the release is charged to a named budget of the ledger before any data is
  read; a retry of the same task instance reuses its run key, so it is not
  charged twice: if the failed attempt had drawn no noise (it failed reading
  the data or in its Spark stage) it runs again under the same charge; if it
  had drawn noise and stopped before recording its release, the retry is
  refused in one line (clear the task with a new run id: a new key and a new
  charge; the earlier charge stays); and if it had recorded its release (in
  the ledger, before it is printed or written) the retry writes that recorded
  release unchanged, no new noise, or, for a DataFrame output the ledger does not hold
  (set-union's items, continual-distinct's series), is refused naming the
  first attempt's outputs. A run key never covers another release,
  parameters or input. A day whose budget is used up is refused before reading;
* ``--output``, the release's own data outputs, and ``--report-html`` under
  ``<out>/<ds>/`` (one directory per logical date).

The tasks run one after another (the ledger is one file; one release at a
time also keeps the cluster's load flat) with ``trigger_rule="all_done"``: a
release refused by the ledger or failing does not stop the next.

A budget holds one kind of guarantee, so the ledger has two: an (ε, δ)
budget for distinct-count, set-union and top-k, and a zCDP budget for
count-release and continual-distinct.

What one day's run spends on the same data, with the shipped conf/ files
(basic composition; tests/unit/test_dag_guarantee.py recomputes it):

* person level, the first four tasks together: distinct-count ε = 1,
  set-union (1, 1e-6), top-k (1, 1e-6) and count-release's ρ = 0.5 with
  δ = 1e-6 (as (5.757, 2e-6)-DP at δ' = 1e-6) compose to
  **(ε = 8.757, δ = 4e-6)-DP per day**;
* item level: continual-distinct's series is ρ = 0.5 zCDP (δ = 1e-6
  reported) for adding or removing one item's events; it protects items,
  not persons, so it is stated apart and not added to the person-level
  figure.

Days compose too: the ledger's budgets are the cap over all days together,
not per day. Create them once, before the first run
(the DAG never creates or resets a budget)::

    dp-spark ledger create /data/dp/ledger.db daily --epsilon 10 --delta 1e-5
    dp-spark ledger create /data/dp/ledger.db daily-zcdp --rho 2 --delta 1e-5

Settings (environment variables of the scheduler and workers):

==========================  ===================================================
``DP_SPARK_HOME``           the dp_spark checkout holding jobs/ and conf/
                            (default: two directories above this file)
``DP_SPARK_OUT``            where outputs go (default ``$DP_SPARK_HOME/out/airflow``)
``DP_SPARK_LEDGER``         the ledger (SQLite file or postgresql:// URL; default
                            ``$DP_SPARK_OUT/ledger.db``)
``DP_SPARK_LEDGER_BUDGET``  the (ε, δ) budget (default ``daily``)
``DP_SPARK_ZCDP_BUDGET``    the zCDP budget (default ``daily-zcdp``)
``DP_SPARK_CONN_ID``        Airflow connection of the Spark master (default
                            ``spark_default``)
``DP_SPARK_PYTHON``         the Python with dp_spark installed, for the driver
                            and the executors (sets spark.pyspark.python);
                            leave unset when the cluster already has it
==========================  ===================================================
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:  # Airflow 3
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG

HOME = Path(os.environ.get("DP_SPARK_HOME", Path(__file__).resolve().parents[2]))
OUT = os.environ.get("DP_SPARK_OUT", str(HOME / "out" / "airflow"))
LEDGER = os.environ.get("DP_SPARK_LEDGER", f"{OUT}/ledger.db")
BUDGET = os.environ.get("DP_SPARK_LEDGER_BUDGET", "daily")
ZCDP_BUDGET = os.environ.get("DP_SPARK_ZCDP_BUDGET", "daily-zcdp")
CONN_ID = os.environ.get("DP_SPARK_CONN_ID", "spark_default")
PYTHON = os.environ.get("DP_SPARK_PYTHON")

DAG_ID = "dp_spark_daily_releases"

#: The flag writing each kind of DataFrame a release returns (ReleaseSpec.artifacts).
ARTIFACT_FLAGS = {"items": "--items-output", "series": "--series"}


def _registry():
    """dp_spark's one list of the releases (``dp_spark.releases.RELEASES``;
    importing it imports no release, no pyspark, nothing beyond the standard
    library), from the checkout at DP_SPARK_HOME."""
    import sys

    if str(HOME) not in sys.path:
        sys.path.insert(0, str(HOME))
    from dp_spark.releases import RELEASES as registry

    return registry


def _job(spec) -> tuple[str, list[str]]:
    """The release's spark-submit script and its first arguments: its own
    script (else jobs/release.py and its name) and its config file."""
    own, conf = HOME / "jobs" / f"{spec.python_name}.py", HOME / "conf" / f"{spec.python_name}.yaml"
    script, args = (own, []) if own.is_file() else (HOME / "jobs" / "release.py", [spec.name])
    return str(script), args + ["--config", str(conf)]


#: task id -> ((job script, its first arguments), options writing the release's
#: data outputs, whether it spends from the zCDP budget): one task per release
#: of the registry, in its order.
RELEASES = {
    spec.python_name: (_job(spec),
                       {ARTIFACT_FLAGS[a]: f"{spec.python_name}_{a}.parquet" for a in spec.artifacts},
                       spec.example.zcdp)
    for spec in _registry().values()
    # a release runs here only with its config (conf/<name>.yaml naming the input): without one it would read
    # the built-in synthetic table and still charge the production ledger
    if (HOME / "conf" / f"{spec.python_name}.yaml").is_file()
}
#: releases whose guarantee is zCDP: they spend from the zCDP budget
ZCDP_RELEASES = tuple(task_id for task_id, (_, _, zcdp) in RELEASES.items() if zcdp)


def release_arguments(task_id: str) -> list[str]:
    """The job's command line (Jinja-templated by Airflow at run time)."""
    (_, first), outputs, _ = RELEASES[task_id]
    run_dir = f"{OUT}/{{{{ ds }}}}"
    args = [
        *first,
        "--ledger", LEDGER,
        "--ledger-budget", ZCDP_BUDGET if task_id in ZCDP_RELEASES else BUDGET,
        "--run-key", f"{{{{ dag.dag_id }}}}/{{{{ run_id }}}}/{task_id}",
        "--output", f"{run_dir}/{task_id}_report.json",
        "--report-html", f"{run_dir}/{task_id}_report.html",
    ]
    for flag, name in outputs.items():
        args += [flag, f"{run_dir}/{name}"]
    return args


def spark_conf() -> dict[str, str]:
    # No web UI: it would show every job's query plans and data samples to
    # anyone who can reach the driver's port.
    conf = {"spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "false"}
    if PYTHON:
        conf.update({"spark.pyspark.python": PYTHON, "spark.pyspark.driver.python": PYTHON})
    return conf


with DAG(
    dag_id=DAG_ID,
    description="Differentially private releases with dp_spark, one shared privacy budget",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,  # two days never spend from the ledger at once
    default_args={"retries": 1, "retry_delay": timedelta(minutes=10)},
    tags=["dp_spark", "privacy"],
) as dag:
    previous = None
    for task_id, ((script, _), _, _) in RELEASES.items():
        task = SparkSubmitOperator(
            task_id=task_id,
            conn_id=CONN_ID,
            application=script,
            application_args=release_arguments(task_id),
            name=f"dp_spark-{task_id}",
            conf=spark_conf(),
            trigger_rule="all_done",
        )
        if previous is not None:
            previous >> task
        previous = task
