"""Getting a SparkSession.

``get_session()`` returns the running session (spark-submit, Databricks, a notebook, Spark Connect) and
builds a local one from ``conf/spark-defaults.yaml`` only when there is none. dp_spark uses the DataFrame
API only (built-in functions, ``mapInPandas``, ``applyInPandas``), so the same code runs on a classic
session and on Spark Connect (no RDDs, no ``SparkContext``).

Spark itself shows exact, non-private numbers about the data: the web UI lists row counts of every operator
(the exact number of persons before noise, for instance), and event logs keep them for the history server. A
session dp_spark builds therefore has ``spark.ui.enabled=false`` and ``spark.eventLog.enabled=false``
whatever the defaults file or ``conf`` say, unless the user asks for them (``allow_ui=True`` or
``DP_SPARK_ALLOW_SPARK_UI=1``; README, "Security"). A session someone else started is used as it is, with a
warning when its UI or event log is on.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from dp_spark.errors import InputError, ParameterError, SparkJobError
from dp_spark.sparkjobs import describe_failure

try:
    import resource  # Unix only: the file size limit check_local_launch reads
except ImportError:  # pragma: no cover - Windows
    resource = None

log = logging.getLogger(__name__)

#: Settings forced on every session dp_spark builds: Spark's UI and event log
#: show exact row counts (non-private values) of every stage.
PRIVATE_SETTINGS: dict[str, str] = {"spark.ui.enabled": "false", "spark.eventLog.enabled": "false"}

#: Set to 1 to let the UI / event log settings of the defaults file or ``conf`` stand.
ALLOW_UI_ENV = "DP_SPARK_ALLOW_SPARK_UI"

#: Used when conf/spark-defaults.yaml cannot be found (a non-editable install).
_FALLBACK_DEFAULTS: dict[str, Any] = {
    "master": "local[*]",
    "app_name": "dp_spark",
    "conf": {
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.shuffle.partitions": "8",
        "spark.ui.showConsoleProgress": "false",
        **PRIVATE_SETTINGS,
    },
    "log_level": "WARN",
}


def prepare_environment() -> None:
    """Set the environment pyspark needs on a fresh machine (never overriding): Python workers run the
    driver's interpreter (else pandas / Arrow UDFs fail when a virtualenv's python runs unactivated), and
    Spark binds to loopback."""
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
    """The running SparkSession (classic or Connect), or None; without importing pyspark when it is not
    imported (then none can be running)."""
    if "pyspark.sql" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def ui_allowed(allow_ui: bool | None = None) -> bool:
    """Whether the user asked for Spark's UI / event log: ``allow_ui`` if
    given, else the environment variable DP_SPARK_ALLOW_SPARK_UI=1."""
    if allow_ui is not None:
        return bool(allow_ui)
    return os.environ.get(ALLOW_UI_ENV, "").strip().lower() in {"1", "true", "yes"}


def session_settings(settings: dict[str, Any], conf: dict[str, str] | None = None,
                     allow_ui: bool | None = None) -> dict[str, str]:
    """The Spark settings of a session dp_spark builds: the defaults file's ``conf``, then ``conf``, then
    (unless the UI is allowed) :data:`PRIVATE_SETTINGS`, which win."""
    merged = {key: str(value) for key, value in {**settings.get("conf", {}), **(conf or {})}.items()}
    if not ui_allowed(allow_ui):
        merged.update(PRIVATE_SETTINGS)
    return merged


def warn_if_exposed(spark) -> list[str]:
    """Log a warning when ``spark`` (a session dp_spark did not build) has its UI or event log on (they
    expose exact row counts); return those settings."""
    exposed = []
    for key, default in (("spark.ui.enabled", "true"), ("spark.eventLog.enabled", "false")):
        try:
            value = str(spark.conf.get(key, default)).strip().lower()
        except Exception:  # noqa: BLE001 - a Connect server may refuse to show a setting
            continue
        if value == "true":
            exposed.append(key)
    if exposed:
        log.warning(
            "this Spark session has %s enabled: Spark shows exact (non-private) row counts "
            "there; for private jobs use a session with spark.ui.enabled=false and "
            "spark.eventLog.enabled=false (README, Security)",
            " and ".join(exposed),
        )
    return exposed


def get_session(
    master: str | None = None,
    conf: dict[str, str] | None = None,
    defaults: str | os.PathLike | None = None,
    log_level: str | None = None,
    allow_ui: bool | None = None,
):
    """Return the active SparkSession (unchanged; warned about if its UI or event log is on), or build a
    local one from the defaults file with ``master``, ``conf`` and ``log_level`` overriding it and the UI
    and event log off unless ``allow_ui`` (or DP_SPARK_ALLOW_SPARK_UI=1) asks for them."""
    existing = active_session()
    if existing is not None:
        warn_if_exposed(existing)
        return existing
    if launched_externally():
        from pyspark.sql import SparkSession

        # spark-submit (or SPARK_REMOTE) decided master and settings: the local defaults must not override them
        spark = SparkSession.builder.getOrCreate()
        _set_log_level(spark, log_level)
        warn_if_exposed(spark)
        return spark

    settings = load_defaults(defaults)
    master = master or settings["master"]
    check_master(master)
    if not str(master).startswith("sc://"):  # a Connect client starts no JVM of its own
        check_local_launch()
    from pyspark.sql import SparkSession

    if str(master).startswith("local"):
        # local only: on a cluster master the cluster's own settings stand
        prepare_environment()
    extra = session_settings(settings, conf, allow_ui)
    log4j = _log4j_config(defaults)
    java_options = str(extra.get("spark.driver.extraJavaOptions", ""))
    if log4j is not None and "log4j2.configurationFile" not in java_options:  # other JVM options kept beside it
        extra["spark.driver.extraJavaOptions"] = f"{java_options} -Dlog4j2.configurationFile={log4j.as_uri()}".strip()
    builder = SparkSession.builder.master(master).appName(
        settings.get("app_name", "dp_spark")
    )
    for key, value in extra.items():
        builder = builder.config(key, str(value))
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - one line, never the JVM's stack trace
        raise SparkJobError(
            f"Spark could not start a session on {master!r}: {describe_failure(exc)}; check --master, "
            "JAVA_HOME and the machine's free memory (run with --verbose for Spark's own message)."
        ) from exc
    _set_log_level(spark, log_level or settings.get("log_level"))
    return spark


#: Spark master URLs dp_spark accepts (``--master``); others would fail in the JVM with a stack trace.
_MASTER_FORMS = "local, local[N], local[*], local[N,F], spark://HOST:PORT, sc://HOST:PORT, yarn or k8s://URL"
_MASTER = re.compile(
    r"^(local(\[(\d+|\*)(,\d+)?\])?"
    r"|local-cluster\[\d+,\d+,\d+\]"
    r"|yarn"
    r"|(spark|sc|k8s|mesos)://\S+)$"
)

#: Smallest file size limit (``ulimit -f``) a local session starts under: Spark's shuffle and spill files
#: are many MiB even for a small table, and a process over the limit fails mid-job.
MIN_FILE_SIZE_LIMIT = 64 * 2**20


def check_master(master: str | None) -> None:
    """Refuse (ParameterError) a master that is not a Spark master URL, before a JVM starts."""
    if master is None:
        return
    if not isinstance(master, str) or not _MASTER.match(master.strip()):
        raise ParameterError(f"--master {master!r} is not a Spark master URL; use {_MASTER_FORMS}.")
    if re.match(r"^local\[0+(,|\])", master.strip()):
        raise ParameterError(f"--master {master!r} asks for 0 cores; use local[N] with N >= 1, or local[*].")


def check_local_launch() -> None:
    """Before dp_spark starts a JVM: require a usable ``java`` (JAVA_HOME, else PATH) and a file size limit
    Spark can work under, each refused in one line naming the fix (InputError) instead of the launcher's
    shell errors."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        if not (java.is_file() and os.access(java, os.X_OK)):
            raise InputError(
                f"JAVA_HOME is {java_home!r}, which has no bin/java; point JAVA_HOME at a Java 17 (or "
                "newer) installation, or unset it to use the java on PATH."
            )
    elif shutil.which("java") is None:
        raise InputError("no java on PATH and JAVA_HOME is not set; install Java 17 (or newer), e.g. "
                         "apt-get install openjdk-17-jre-headless, or set JAVA_HOME.")
    if resource is None:  # not on this platform
        return
    try:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (OSError, ValueError):  # not on this platform
        return
    if limit != resource.RLIM_INFINITY and 0 <= limit < MIN_FILE_SIZE_LIMIT:
        raise InputError(
            f"the file size limit (ulimit -f) is {limit // 1024:,} KiB; Spark's shuffle and temporary files "
            f"need more; raise it (ulimit -f unlimited, or at least {MIN_FILE_SIZE_LIMIT // 2**20} MiB)."
        )


def launched_externally() -> bool:
    """True under spark-submit (the JVM gateway exists, with its --master and --conf) or when SPARK_REMOTE
    names a Spark Connect server."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT") or os.environ.get("SPARK_REMOTE"))


def _set_log_level(spark, level: str | None) -> None:
    if not level:
        return
    try:
        spark.sparkContext.setLogLevel(level)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        pass
