"""Getting a SparkSession.

``get_session()`` returns the session that is already running (spark-submit,
Databricks, a notebook, Spark Connect) and only builds a local one when there
is none, from ``conf/spark-defaults.yaml``. Everything dp_spark runs on Spark
uses the DataFrame API only (built-in functions, ``mapInPandas``,
``applyInPandas``), so the same code runs on a classic session and on Spark
Connect, where RDDs and ``SparkContext`` do not exist.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import yaml

#: Used when conf/spark-defaults.yaml cannot be found (a non-editable install).
_FALLBACK_DEFAULTS: dict[str, Any] = {
    "master": "local[*]",
    "app_name": "dp_spark",
    "conf": {
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.shuffle.partitions": "8",
        "spark.ui.showConsoleProgress": "false",
    },
    "log_level": "WARN",
}


def prepare_environment() -> None:
    """Set the environment pyspark needs on a fresh machine (never overriding).

    Python workers must run the interpreter that runs the driver, or pandas /
    Arrow UDFs fail with ModuleNotFoundError when a virtualenv's python is run
    without activating it; and Spark should bind to loopback in local mode.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def defaults_path() -> Path | None:
    """Where the Spark defaults file is: $DP_SPARK_CONF_DIR, then the checkout's conf/."""
    candidates = []
    if os.environ.get("DP_SPARK_CONF_DIR"):
        candidates.append(Path(os.environ["DP_SPARK_CONF_DIR"]) / "spark-defaults.yaml")
    candidates.append(Path(__file__).resolve().parents[1] / "conf" / "spark-defaults.yaml")
    for path in candidates:
        if path.is_file():
            return path
    return None


def load_defaults(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The local-session settings as a dict (master, app_name, conf, log_level)."""
    path = Path(path) if path else defaults_path()
    if path is None:
        return dict(_FALLBACK_DEFAULTS)
    with open(path, encoding="utf-8") as fh:
        loaded = yaml.safe_load(fh) or {}
    merged = dict(_FALLBACK_DEFAULTS)
    merged.update(loaded)
    merged["conf"] = {**_FALLBACK_DEFAULTS["conf"], **(loaded.get("conf") or {})}
    return merged


def _log4j_config(defaults) -> Path | None:
    base = Path(defaults).parent if defaults else (defaults_path() or Path("/nonexistent")).parent
    path = base / "log4j2.properties"
    return path.resolve() if path.is_file() else None


def active_session():
    """The running SparkSession (classic or Connect), or None."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def get_session(
    master: str | None = None,
    conf: dict[str, str] | None = None,
    defaults: str | os.PathLike | None = None,
    log_level: str | None = None,
):
    """Return the active SparkSession, or build a local one.

    An existing session is returned unchanged (its configuration belongs to
    whoever started it). Otherwise a session is built from the defaults file,
    with ``master``, ``conf`` and ``log_level`` overriding it.
    """
    existing = active_session()
    if existing is not None:
        return existing
    from pyspark.sql import SparkSession

    if launched_externally():
        # spark-submit (or SPARK_REMOTE) decided master and settings: the
        # local defaults must not override them.
        spark = SparkSession.builder.getOrCreate()
        _set_log_level(spark, log_level)
        return spark

    settings = load_defaults(defaults)
    master = master or settings["master"]
    if str(master).startswith("local"):
        # Everything runs on this machine: Python workers must use this
        # interpreter and Spark should bind to loopback. On a cluster master
        # (or under spark-submit) the cluster's own settings stand.
        prepare_environment()
    extra = dict(settings["conf"])
    log4j = _log4j_config(defaults)
    if log4j is not None and "spark.driver.extraJavaOptions" not in extra:
        extra["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={log4j.as_uri()}"
    builder = SparkSession.builder.master(master).appName(
        settings.get("app_name", "dp_spark")
    )
    for key, value in {**extra, **(conf or {})}.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    _set_log_level(spark, log_level or settings.get("log_level"))
    return spark


def launched_externally() -> bool:
    """True under spark-submit (the JVM gateway already exists and carries
    spark-submit's --master and --conf) or when SPARK_REMOTE names a Spark
    Connect server."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT") or os.environ.get("SPARK_REMOTE"))


def _set_log_level(spark, level: str | None) -> None:
    if not level:
        return
    try:
        spark.sparkContext.setLogLevel(level)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        pass
