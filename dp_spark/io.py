"""Reading inputs and writing outputs.

Inputs: Parquet, CSV with a header row, JSON lines (optionally gzipped), or a
catalog table written ``table:db.name``. Outputs are written atomically: to a
temporary name beside the target, then renamed, so a failed run leaves an
earlier output intact.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dp_spark.errors import InputError

FORMATS = ("auto", "parquet", "csv", "json", "table")
_EXTENSIONS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
_COMPRESSION = (".gz", ".bz2", ".zst", ".snappy", ".lz4", ".deflate")


def _is_local(path: str) -> bool:
    scheme = urlparse(path).scheme
    return scheme in ("", "file") or re.match(r"^[A-Za-z]:[\\/]", path) is not None


def _local(path: str) -> Path:
    return Path(urlparse(path).path if path.startswith("file:") else path)


def detect_format(path: str) -> str:
    """Format from the path: the file extension (compression suffix ignored),
    or for a local directory, the extension of the data files inside it."""
    name = path.rstrip("/")
    for suffix in _COMPRESSION:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    ext = os.path.splitext(name)[1].lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if _is_local(path) and _local(path).is_dir():
        found = {
            _EXTENSIONS.get(os.path.splitext(n.removesuffix(s))[1].lower())
            for n in os.listdir(_local(path))
            if not n.startswith(("_", "."))
            for s in ("",) + tuple(x for x in _COMPRESSION if n.endswith(x))
        } - {None}
        if len(found) == 1:
            return found.pop()
    raise InputError(
        f"cannot tell the format of {path!r} from its name; pass --format "
        "parquet, csv or json (or format= in Python)."
    )


def read_input(spark, source: str, fmt: str = "auto", *, infer_schema: bool = True):
    """A DataFrame over ``source``: a path (local or any Hadoop filesystem) or
    ``table:db.name``. Raises InputError with a one-line message on a missing
    path, an unknown format or an unreadable table. ``infer_schema=False``
    keeps every CSV column a string (ids such as "007" stay as written)."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    if source.startswith("table:") or fmt == "table":
        name = source.removeprefix("table:")
        return _spark_read(lambda: spark.table(name), f"table {name!r}")
    if _is_local(source):
        local = _local(source)
        if not local.exists():
            raise InputError(f"input path {source!r} does not exist.")
        if not os.access(local, os.R_OK):
            raise InputError(f"input path {source!r} is not readable.")
    if fmt == "auto":
        fmt = detect_format(source)
    reader = spark.read
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", str(infer_schema).lower())
    return _spark_read(lambda: reader.format(fmt).load(source), f"{fmt} input {source!r}")


def _spark_read(load, what: str):
    from dp_spark.sparkjobs import _spark_exception_types, error_class

    try:
        df = load()
        df.columns  # forces analysis on Spark Connect too
        return df
    except _spark_exception_types() as exc:
        # Read errors concern paths and formats, not data values: keep the
        # first line of Spark's message, drop the JVM stack trace.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else error_class(exc)
        raise InputError(f"cannot read {what}: {first}") from None


def write_json_atomic(path: str | os.PathLike, payload: Any) -> None:
    """Write ``payload`` as JSON to a local path atomically."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2, sort_keys=False, ensure_ascii=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_dataframe_atomic(df, path: str, fmt: str = "parquet", seeded: bool = False) -> None:
    """Write a Spark DataFrame to a local directory atomically: Spark writes a
    sibling temporary directory, which then replaces the target. ``seeded``:
    mark the output "not for publication" (:mod:`dp_spark.marking`)."""
    from dp_spark.marking import mark_folder, mark_spark

    df = mark_spark(df, seeded)
    if not _is_local(path):
        # Object stores have no atomic rename; Spark's committer is the best we get.
        df.write.mode("overwrite").format(fmt).save(path)
        return
    target = _local(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
    try:
        writer = df.write.mode("errorifexists").format(fmt)
        if fmt == "csv":
            writer = writer.option("header", "true")
        writer.save(str(tmp))
        mark_folder(tmp, seeded)
        old = None
        if target.exists():
            old = target.parent / f".{target.name}.{uuid.uuid4().hex}.old"
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink()
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
