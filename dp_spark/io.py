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
    ".tsv": "csv",
    ".tab": "csv",
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


#: --bad-rows -> Spark's parse mode for CSV/JSON. "fail" reads in FAILFAST mode
#: and is checked by :func:`check_rows_parse` before anything is spent.
BAD_ROWS_MODES = {"drop": "DROPMALFORMED", "fail": "FAILFAST", None: "PERMISSIVE"}


def _csv_char(value: str, name: str) -> str:
    """A one-character CSV option; '\\t' and 'tab' mean a tab."""
    text = {"\\t": "\t", "tab": "\t", "TAB": "\t"}.get(value, value)
    if not isinstance(text, str) or len(text) != 1:
        raise InputError(f"--{name} must be one character (or '\\t' for a tab); got {value!r}.")
    return text


def reader_options(fmt: str, *, infer_schema: bool = True, delimiter: str | None = None, header: bool = True,
                   quote: str = '"', encoding: str = "UTF-8", bad_rows: str | None = None,
                   schema: str | None = None) -> dict[str, str]:
    """Spark reader options for a CSV/JSON input (empty for other formats)."""
    if bad_rows not in BAD_ROWS_MODES:
        raise InputError(f"--bad-rows must be 'drop' or 'fail'; got {bad_rows!r}.")
    import codecs

    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise InputError(f"unknown --encoding {encoding!r}; use e.g. UTF-8, ISO-8859-1 or UTF-16.") from None
    if fmt == "csv":
        return {
            "header": str(bool(header)).lower(),
            "inferSchema": str(infer_schema and schema is None).lower(),
            "sep": _csv_char(delimiter or ",", "delimiter"),
            "quote": _csv_char(quote, "quote"),
            "encoding": encoding,
            "mode": BAD_ROWS_MODES[bad_rows],
        }
    if fmt == "json":
        return {"encoding": encoding, "mode": BAD_ROWS_MODES[bad_rows]}
    return {}


def parse_schema(ddl: str | None):
    """A StructType from a DDL string ('user STRING, item STRING'), or None."""
    if ddl is None:
        return None
    from pyspark.sql.types import StructType

    try:
        return StructType.fromDDL(ddl)
    except Exception:  # noqa: BLE001 - pyspark raises several types for bad DDL
        raise InputError(
            f"--schema {ddl[:80]!r} is not a Spark DDL schema; write it as 'name TYPE, name TYPE', "
            "e.g. 'user STRING, item STRING, time TIMESTAMP'."
        ) from None


def read_input(spark, source: str, fmt: str = "auto", *, infer_schema: bool = True, delimiter: str | None = None,
               header: bool = True, quote: str = '"', encoding: str = "UTF-8", schema: str | None = None,
               bad_rows: str | None = None):
    """A DataFrame over ``source``: a path (local or any Hadoop filesystem) or
    ``table:db.name``. Raises InputError with a one-line message on a missing
    path, an unknown format, an unreadable file or header. ``infer_schema=False``
    keeps every CSV column a string (ids such as "007" stay as written).
    CSV/JSON: ``delimiter`` (default ',', a tab for .tsv/.tab names), ``header``, ``quote``, ``encoding``, ``schema``
    (a DDL string instead of inference) and ``bad_rows`` ("drop": rows that do
    not parse are dropped, never counted; "fail": read in FAILFAST mode, see
    :func:`check_rows_parse`; None: Spark's permissive default)."""
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
    if _is_local(source) and _local(source).is_dir():
        check_folder_format(_local(source), fmt)
    if delimiter is None and re.search(r"\.(tsv|tab)(\.\w+)?/?$", source.lower()):
        delimiter = "\t"
    options = reader_options(fmt, infer_schema=infer_schema, delimiter=delimiter, header=header, quote=quote,
                             encoding=encoding, bad_rows=bad_rows, schema=schema)
    struct = parse_schema(schema)
    reader = spark.read.options(**options)
    if struct is not None:
        if fmt == "parquet":
            raise InputError("--schema is for CSV and JSON inputs; a Parquet file carries its own schema.")
        reader = reader.schema(struct)
    df = _spark_read(lambda: reader.format(fmt).load(source), f"{fmt} input {source!r}")
    check_header(df, source)
    return df


def check_folder_format(folder: Path, fmt: str) -> None:
    """Refuse a folder whose data files are of another format than ``fmt``
    (found by their names, before anything is read)."""
    for name in sorted(os.listdir(folder)):
        if name.startswith(("_", ".")):
            continue
        stem = name
        for suffix in _COMPRESSION:
            stem = stem.removesuffix(suffix)
        other = _EXTENSIONS.get(os.path.splitext(stem)[1].lower())
        if other is not None and other != fmt:
            raise InputError(
                f"the input folder {str(folder)!r} holds {other} files (e.g. {name[:80]!r}) besides {fmt} "
                "data; keep one format per input folder."
            )


def check_header(df, source: str) -> None:
    """Refuse column names that are not readable text (a binary file read as
    CSV, a wrong --encoding): they are never echoed, since they are data."""
    single = df.columns[0] if len(df.columns) == 1 else ""
    if any(sep in single for sep in ("\t", ";", "|")) and single.replace("\t", " ").isprintable():
        raise InputError(
            f"the header of {source!r} reads as a single column that holds separators; pass the file's "
            "--delimiter (e.g. '\\t' for tabs, ';' or '|')."
        )
    for name in df.columns:
        if not name or len(name) > 200 or any(
            ch == "\ufffd" or (not ch.isprintable() and ch != " ") for ch in name
        ):
            raise InputError(
                f"the header of {source!r} is not readable text (binary data, or the wrong --encoding, "
                "--delimiter or --format); its column names are not shown because they may be data."
            )


def check_rows_parse(df, source: str) -> None:
    """--bad-rows fail: read every row once (nothing is released or spent)
    and refuse the input if any row does not parse. The refusal reveals that
    a malformed row exists (never how many or which); it happens before the
    privacy budget is charged."""
    from dp_spark.sparkjobs import spark_job

    with spark_job(f"checking that every row of {source!r} parses (--bad-rows fail)"):
        df.write.format("noop").mode("overwrite").save()


def _spark_read(load, what: str):
    from dp_spark.sparkjobs import _spark_exception_types, describe_failure

    try:
        df = load()
        df.columns  # forces analysis on Spark Connect too
        return df
    except _spark_exception_types() as exc:
        # One sentence chosen from the error's condition; Spark's own text can
        # quote data (a malformed header, a bad value), so it is not shown.
        raise InputError(f"cannot read {what}: {describe_failure(exc)}") from None


def spark_frame(df, name: str = "df"):
    """``df`` as a Spark DataFrame (classic or Connect): a pandas DataFrame is
    converted with the active session (it is already on the driver, so
    nothing is collected); anything else is refused with a message saying
    what to pass. Every release function calls this first."""
    module = type(df).__module__ or ""
    if module.startswith("pyspark.sql"):
        return df
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(df, pd.DataFrame):
        from dp_spark.session import get_session

        frame = df.copy()
        for column in frame.columns:  # Spark has no nanosecond timestamps
            if str(frame[column].dtype).startswith("datetime64[ns"):
                frame[column] = frame[column].astype(str(frame[column].dtype).replace("ns", "us"))
        return get_session().createDataFrame(frame)
    from dp_spark.errors import SchemaError

    raise SchemaError(
        f"{name} must be a Spark DataFrame (or a pandas DataFrame, converted with the active "
        f"session); got {type(df).__module__}.{type(df).__name__}. Convert it with "
        "spark.createDataFrame(...) or read the data with spark.read."
    )


def _short(name: str) -> str:
    """The start of a file name, for the temporary names beside it: any name
    the file system takes as an output leaves room for them (64 bytes at
    most, never a split character)."""
    return os.fsencode(name)[:64].decode("utf-8", "ignore")


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to a local path atomically: a temporary file in
    the same folder, fsynced, then renamed over the target."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{_short(target.name)}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | os.PathLike, payload: Any) -> None:
    """Write ``payload`` as JSON to a local path atomically."""
    write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


def _refuse_foreign(target: Path, path: str) -> None:
    """Never replace what dp_spark did not write (a folder without its
    marker, a file that is not one of its outputs); an empty folder may go.
    Every caller (the CLI, ``Release.write(overwrite=True)``) gets this."""
    if not target.exists() and not target.is_symlink():
        return
    from dp_spark.commands.outputs import not_ours

    foreign = not_ours(target)
    if foreign:
        raise InputError(
            f"{path!r} already exists and is {foreign}, not an output of an earlier dp_spark run; it is "
            "replaced only when dp_spark wrote it (or it is an empty folder). Choose another path."
        )


def write_dataframe_atomic(df, path: str, fmt: str = "parquet", seeded: bool = False) -> None:
    """Write a Spark DataFrame to a local directory atomically: Spark writes a
    sibling temporary directory, which then replaces the target. A local
    folder gets the file ``_DP_SPARK_OUTPUT`` (so a later ``--overwrite``
    knows dp_spark wrote it); ``seeded``: mark the output "not for
    publication" (:mod:`dp_spark.marking`)."""
    from dp_spark.marking import mark_folder, mark_output_folder, mark_spark

    df = mark_spark(df, seeded)
    if not _is_local(path):
        # Object stores have no atomic rename; Spark's committer is the best we get.
        df.write.mode("overwrite").format(fmt).save(path)
        return
    target = _local(path).resolve()
    _refuse_foreign(target, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{_short(target.name)}.{uuid.uuid4().hex}.tmp"
    try:
        writer = df.write.mode("errorifexists").format(fmt)
        if fmt == "csv":
            writer = writer.option("header", "true")
        writer.save(str(tmp))
        mark_folder(tmp, seeded)
        mark_output_folder(tmp)
        old = None
        if target.exists():
            old = target.parent / f".{_short(target.name)}.{uuid.uuid4().hex}.old"
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink()
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
