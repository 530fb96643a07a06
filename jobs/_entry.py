"""What every spark-submit entry script in jobs/ shares.

Makes ``dp_spark`` importable when running from a checkout that was not
installed, then runs the same command line as ``dp-spark <release>``: every
flag passes through unchanged (``--ledger``, ``--ledger-budget`` and
``--run-key`` included, as the Airflow example uses them). Under
spark-submit the session spark-submit created is used as it is.

Which Python runs: spark-submit starts the driver, and in local mode the
Python workers, with ``$PYSPARK_PYTHON`` (else ``python3`` from PATH), and
the pip-installed ``spark-submit`` finds Spark through that same Python. So
from a checkout whose venv is not activated, set that one variable::

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/spark-submit jobs/distinct_count.py \\
        --config conf/distinct_count.yaml

(with the venv activated, ``python3`` is already the venv's). On a cluster
the executors need dp_spark too: install it there and set
``spark.pyspark.python``, or pass a zip of ``dp_spark/`` with ``--py-files``.

Any release also runs through ``jobs/release.py``, its name first
(``spark-submit jobs/release.py distinct-count --epsilon 1``): a new release
needs no script of its own.
"""

import os
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]


def spark_logs_at_warn() -> bool:
    """Under spark-submit, before the SparkContext starts: Spark's own logging
    at WARN (``spark.log.level``; each start-up otherwise prints ~44 INFO
    lines), unless the user chose a level or a log4j configuration
    (``--conf spark.log.level=...``, ``-Dlog4j2.configurationFile``,
    ``$SPARK_CONF_DIR/log4j2.properties``). Returns whether it set it. Local
    sessions that dp_spark starts itself read conf/log4j2.properties."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return False
    user_dir = os.environ.get("SPARK_CONF_DIR")
    if user_dir and (Path(user_dir) / "log4j2.properties").is_file():
        return False
    try:
        from pyspark import SparkContext

        SparkContext._ensure_initialized()  # spark-submit's JVM, through its gateway
        system = SparkContext._jvm.java.lang.System
        if system.getProperty("spark.log.level") or system.getProperty("log4j2.configurationFile"):
            return False
        system.setProperty("spark.log.level", "WARN")  # read by the SparkConf of the coming context
        return True
    except Exception:  # noqa: BLE001 - logging is never worth failing the job
        return False


def stderr_to_spark_submit_stderr() -> bool:
    """Under spark-submit, errors go to spark-submit's stderr. Spark starts
    this driver with its stderr merged into its stdout (PythonRunner), so
    ``dp-spark: error: ...`` would otherwise reach the caller's stdout, mixed
    with the result. The driver's fd 2 is pointed at the stderr of the JVM
    that started it (Linux: /proc/<parent>/fd/2). Returns whether it did."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return False
    parent = os.getppid()
    try:
        if Path(f"/proc/{parent}/comm").read_text().strip() != "java":
            return False
        fd = os.open(f"/proc/{parent}/fd/2", os.O_WRONLY | os.O_APPEND)
    except OSError:
        return False  # not Linux, or no access: stderr stays merged into stdout
    sys.stderr.flush()
    os.dup2(fd, 2)
    os.close(fd)
    return True


def run(command: str, argv: list[str] | None = None) -> int:
    """Run ``dp-spark <command>`` with ``argv`` (default: this script's
    arguments); ``command`` is a key of :data:`dp_spark.releases.RELEASES`
    (tests/unit/test_registry.py checks every script in jobs/)."""
    try:
        import dp_spark  # noqa: F401
    except ImportError:  # a checkout without installing
        sys.path.insert(0, str(CHECKOUT))
    from dp_spark.releases import RELEASES

    if command not in RELEASES:  # a job names the release it runs, as dp_spark.releases.RELEASES does
        raise SystemExit(f"{sys.argv[0]}: {command!r} is not a release ({', '.join(RELEASES)})")
    stderr_to_spark_submit_stderr()
    spark_logs_at_warn()
    from dp_spark.cli import main

    return main([command, *(sys.argv[1:] if argv is None else argv)])
