"""Shared helpers for the benchmark scripts (not part of the library).

Benchmarks print plain-text tables and never assert. Everything they print
that is computed from the data without noise (true counts, DC(l) curves) is
NON-PRIVATE and labelled so; everything "released" comes from seeded
generators and is NOT for publication (anyone knowing the seed can recompute
the noise).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data"  # ../shared/data from the repo root

DRIVER_MEMORY = "6g"
MASTER = "local[2]"


def start_session(app_name: str, extra_conf: dict[str, str] | None = None):
    """The benchmark session: local[2], driver memory set before the JVM starts.

    Uses dp_spark.session.prepare_environment() (PYSPARK_PYTHON etc.) and
    dp_spark.session.get_session(), which layers ``conf`` over
    conf/spark-defaults.yaml.
    """
    from dp_spark.session import get_session, prepare_environment

    prepare_environment()
    conf = {
        "spark.driver.memory": DRIVER_MEMORY,
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    conf.update(extra_conf or {})
    return get_session(master=MASTER, conf=conf)


def session_summary(spark) -> dict[str, str]:
    """The few settings that matter for reading the numbers."""
    keys = [
        "spark.master",
        "spark.driver.memory",
        "spark.sql.shuffle.partitions",
        "spark.sql.adaptive.enabled",
        "spark.sql.execution.arrow.pyspark.enabled",
    ]
    out = {}
    for key in keys:
        try:
            out[key] = spark.conf.get(key)
        except Exception:  # noqa: BLE001 - unset keys
            out[key] = "(unset)"
    out["spark.version"] = spark.version
    out["python"] = platform.python_version()
    out["cpus"] = str(os.cpu_count())
    return out


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> str:
    """Aligned plain-text table: first column left-aligned, the others right."""
    rows = [["" if v is None else str(v) for v in row] for row in rows]
    headers = [str(h) for h in headers]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], len(v))

    def line(values):
        cells = []
        for i, v in enumerate(values):
            cells.append(v.ljust(widths[i]) if i == 0 else v.rjust(widths[i]))
        return "  ".join(cells).rstrip()

    out = []
    if title:
        out.append(title)
    out.append(line(headers))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):,.{digits}f}"
    return str(value)


def percentiles(values: Sequence[float], qs=(10, 50, 90)) -> list[float]:
    """numpy's default (linear interpolation) percentiles, as the paper's
    fractional quantiles (e.g. 702.4) suggest."""
    arr = np.asarray(values, dtype=np.float64)
    return [float(np.percentile(arr, q)) for q in qs]


def run_rng(*key: int) -> np.random.Generator:
    """A reproducible generator for one run: SeedSequence(key). SEEDED — the
    values it produces are not differentially private (not for publication)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(k) for k in key])))


class Timer:
    """with Timer() as t: ...; t.seconds"""

    def __enter__(self):
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self._start
        return False


def write_json(path: str | os.PathLike, payload: dict) -> None:
    """Write ``payload`` as JSON atomically (temp file beside the target, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2, default=_json_default)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _json_default(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def command_line() -> str:
    """The command as run (interpreter path relative to the cwd when possible)."""
    exe = sys.executable
    try:
        exe = os.path.relpath(exe)
    except ValueError:
        pass
    return " ".join([exe, *sys.argv])


#: The session shapes of ``speed_all`` (issue 26): dp_spark's own session
#: (``dp_spark.session.get_session``: conf/spark-defaults.yaml, 8 shuffle
#: partitions, adaptive on), Spark's defaults (a plain builder: 200 shuffle
#: partitions, adaptive on), and Spark's defaults with 8 shuffle partitions.
#: Every shape gets the same master, driver memory and UI setting, so only
#: the SQL tuning differs.
SESSION_SHAPES = {
    "project": None,
    "spark-defaults": {},
    "shuffle8": {"spark.sql.shuffle.partitions": "8"},
}


def start_shaped_session(app_name: str, shape: str):
    """A session of one of :data:`SESSION_SHAPES` (a JVM per process: the
    shapes run in separate processes)."""
    if SESSION_SHAPES[shape] is None:
        return start_session(app_name)
    from pyspark.sql import SparkSession

    from dp_spark.session import prepare_environment

    prepare_environment()
    builder = (SparkSession.builder.master(MASTER).appName(app_name)
               .config("spark.driver.memory", DRIVER_MEMORY).config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in SESSION_SHAPES[shape].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def person_shuffle_floor(spark, path: str, person: str = "person_id", item: str = "item") -> None:
    """The bare person-shuffle floor (issue 26): every (person, item) row of
    the Parquet file shuffled by person into the partitions dp_spark's
    Python passes use (an explicit count, two per task slot) and consumed in
    the JVM (the ``noop`` sink): the physical work any per-person release
    must do before it computes anything."""
    from dp_spark.stages.partitioning import python_partitions

    (spark.read.parquet(path).select(person, item).repartition(python_partitions(spark), person)
     .write.format("noop").mode("overwrite").save())
