"""Reading inputs and writing outputs.

Inputs: Parquet, CSV with a header row, JSON lines (optionally compressed), or a catalog table
``table:db.name``. Outputs are written atomically (to a temporary name beside the target, then renamed), so
a failed run leaves an earlier output intact. A DataFrame output may also be a catalog table
(:mod:`dp_spark.tables`).
"""

from __future__ import annotations

import codecs
import datetime as _dt
import glob
import json
import math
import numbers
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dp_spark import session
from dp_spark.errors import InputError, ParameterError, SchemaError
from dp_spark.marking import mark_folder, mark_output_folder, mark_spark, mark_table_frame, not_ours
from dp_spark.sparkjobs import describe_failure, error_conditions, spark_exception_types, spark_job
# re-exported: catalog table outputs live in dp_spark.tables
from dp_spark.tables import (TABLE_PREFIX, check_table_output, is_table, qualified_table,  # noqa: F401
                             table_name, write_table)

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


#: A Windows drive letter starting a local path (``C:\\data``), not a URI scheme.
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def is_local(path: str) -> bool:
    scheme = urlparse(path).scheme
    return scheme in ("", "file") or _WINDOWS_DRIVE.match(path) is not None


def local_path(path: str) -> Path:
    return Path(urlparse(path).path if path.startswith("file:") else path)


#: The characters Hadoop's glob reads as a pattern in a path.
SPARK_GLOB = re.compile(r"[*?\[\]{}\\]")


def _glob_escaped(path: str) -> str:
    return SPARK_GLOB.sub(lambda m: "\\" + m.group(0), path)


def literal_glob(source: str) -> bool:
    """Whether ``source`` is an existing local file or folder whose name holds glob characters."""
    return bool(is_local(source) and SPARK_GLOB.search(source) and local_path(source).exists())


def refuse_csv_literal_glob(source: str, fmt: str, what: str = "input path") -> None:
    """Refuse (InputError, naming the fix) a CSV file whose name holds glob characters: Spark's multi-line
    CSV reader lists its files by the pattern again, unescaped (``data[1].csv`` reads ``data1.csv``, or
    fails). Parquet and JSON files of such names are read as named. ``fmt`` "auto": the format from the name
    (undecidable: left to the reader)."""
    if not literal_glob(source):
        return
    if fmt == "auto":
        try:
            fmt = detect_format(source)
        except InputError:
            return
    if fmt == "csv":
        raise InputError(f"{what} {source!r} is a CSV file whose name holds glob characters ([ ] {{ }} * ? \\), "
                         "which Spark's CSV reader reads as a pattern, not as this name; rename the file (and any "
                         "folder on its path) without them.")


def spark_source(source: str) -> str:
    """``source`` as the JVM should read it. A relative local path is made absolute against this process's
    current folder (the JVM resolves it against the folder it started in, another one after ``os.chdir``, so
    dp_spark's checks and Spark's read would name different files), with glob characters of the current
    folder escaped. A local file or folder existing under its literal name has its glob characters escaped
    too. Other URIs are unchanged."""
    if not is_local(source) or _WINDOWS_DRIVE.match(source):
        return source
    literal = literal_glob(source)
    if source.startswith("file:") or os.path.isabs(source):
        return _glob_escaped(source) if literal else source
    return os.path.join(_glob_escaped(os.getcwd()), _glob_escaped(source) if literal else source)


def detect_format(path: str) -> str:
    """Format from the path: the file extension (compression suffix ignored), or for a local directory the
    extension of the data files inside it."""
    name = path.rstrip("/")
    for suffix in _COMPRESSION:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    ext = os.path.splitext(name)[1].lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if is_local(path) and local_path(path).is_dir():
        found = {
            _EXTENSIONS.get(os.path.splitext(n.removesuffix(s))[1].lower())
            for n in os.listdir(local_path(path))
            if not n.startswith(("_", "."))
            for s in ("",) + tuple(x for x in _COMPRESSION if n.endswith(x))
        } - {None}
        if len(found) == 1:
            return found.pop()
    raise InputError(
        f"cannot tell the format of {path!r} from its name; pass --format "
        "parquet, csv or json (or format= in Python)."
    )


#: --bad-rows -> Spark's parse mode for CSV/JSON ("fail": checked by :func:`check_rows_parse`).
BAD_ROWS_MODES = {"drop": "DROPMALFORMED", "fail": "FAILFAST", None: "PERMISSIVE"}


def _csv_char(value: str, name: str) -> str:
    """A one-character CSV option; '\\t' and 'tab' mean a tab."""
    text = {"\\t": "\t", "tab": "\t", "TAB": "\t"}.get(value, value)
    if not isinstance(text, str) or len(text) != 1:
        raise InputError(f"--{name} must be one character (or '\\t' for a tab); got {value!r}.")
    return text


_INFERENCE_REFUSED = (
    "type inference is not supported: it reads the private rows, so one person's value could change a "
    "column's type (ids \"007\" and \"7\" merged, items released as numbers or as text, a bad value "
    "dropped or refused). Columns are read as strings; declare types with --schema (schema=)."
)


def reader_options(fmt: str, *, infer_schema: bool = False, delimiter: str | None = None, header: bool = True,
                   quote: str = '"', encoding: str = "UTF-8", bad_rows: str | None = None,
                   schema: str | None = None) -> dict[str, str]:
    """Spark reader options for a CSV/JSON input (empty for other formats). Never infers types from the rows
    (``infer_schema=True`` is refused): CSV columns are strings unless ``schema`` declares them."""
    if infer_schema:
        raise InputError(_INFERENCE_REFUSED)
    if bad_rows not in BAD_ROWS_MODES:
        raise InputError(f"--bad-rows must be 'drop' or 'fail'; got {bad_rows!r}.")

    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise InputError(f"unknown --encoding {encoding!r}; use e.g. UTF-8, ISO-8859-1 or UTF-16.") from None
    if fmt == "csv":
        quote_char = _csv_char(quote, "quote")
        return {
            "header": str(bool(header)).lower(),
            "inferSchema": "false",
            "sep": _csv_char(delimiter or ",", "delimiter"),
            # RFC 4180 (Python's csv, pandas, Excel): a doubled quote inside a quoted field, which may hold
            # line breaks (Spark's defaults split such a record and keep the doubled quotes); a backslash is
            # an ordinary character. The person-level guarantee assumes well-formed RFC 4180: a stray quote
            # joins the following rows into one value (one person's row changes others'; README), and one
            # record per line would split quoted line breaks into rows of persons in no data.
            "quote": quote_char,
            "escape": quote_char,
            "multiLine": "true",
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


def read_input(spark, source: str, fmt: str = "auto", *, columns=None, infer_schema: bool = False,
               delimiter: str | None = None, header: bool = True, quote: str = '"', encoding: str = "UTF-8",
               schema: str | None = None, bad_rows: str | None = None):
    """A DataFrame over ``source``: a path (local or any Hadoop filesystem) or ``table:db.name``. Raises
    InputError with a one-line message on a missing path, an unknown format, an unreadable file or header.

    No decision about the columns depends on the rows: CSV/JSON are never read with type inference. Without
    ``schema`` (a DDL string declaring names and types), every CSV column is a string (names from the
    header) and JSON lines are read with exactly ``columns`` (required), each a string: numbers keep their
    text, a missing key is null. Parquet and tables carry their own schema. CSV/JSON: ``delimiter`` (default
    ',', a tab for .tsv/.tab), ``header``, ``quote``, ``encoding``, ``bad_rows`` ("drop": rows that do not
    parse are dropped; "fail": :func:`check_rows_parse`; None: Spark's permissive default). CSV is RFC 4180
    (:func:`reader_options`), so each CSV file is read whole by one task."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    if source.startswith("table:") or fmt == "table":
        name = source.removeprefix("table:")
        return _spark_read(lambda: spark.table(name), f"table {name!r}")
    check_input_path(source)
    if fmt == "auto":
        fmt = detect_format(source)
    if is_local(source) and local_path(source).is_dir():
        check_folder_format(local_path(source), fmt)
    refuse_csv_literal_glob(source, fmt)
    if delimiter is None and re.search(r"\.(tsv|tab)(\.\w+)?/?$", source.lower()):
        delimiter = "\t"
    options = reader_options(fmt, infer_schema=infer_schema, delimiter=delimiter, header=header, quote=quote,
                             encoding=encoding, bad_rows=bad_rows, schema=schema)
    struct = parse_schema(schema)
    reader = spark.read.options(**options)
    if struct is not None and fmt == "parquet":
        raise InputError("--schema is for CSV and JSON inputs; a Parquet file carries its own schema.")
    if struct is None and fmt == "json":
        struct = string_schema(columns)
    if struct is not None:
        reader = reader.schema(struct)
    if fmt == "parquet":
        check_parquet_schemas(spark, source)  # footers only: before anything is read or spent
    where = spark_source(source)  # a relative path: the file Python checked, whatever the JVM's folder
    df = _spark_read(lambda: reader.format(fmt).load(where), f"{fmt} input {source!r}")
    check_header(df, source)
    if fmt in ("csv", "json") and bad_rows != "fail":
        df = df.where(~undecodable(df, columns))  # "fail": refused by check_rows_parse instead
    return df


#: What a decoder puts for bytes that are not valid in the --encoding.
REPLACEMENT = "\ufffd"


def undecodable(df, columns=None):
    """A condition true on rows where a string column (``columns`` when given, else all) holds U+FFFD, what
    a decoder puts for bytes not valid in the --encoding: a bad value (the row is dropped; ``--bad-rows
    fail`` refuses the input), never a merged "caf\ufffd" standing for café, cafè and cafê."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    names = [f.name for f in df.schema.fields if isinstance(f.dataType, StringType)
             and (not columns or f.name in columns)]
    bad = F.lit(False)
    for name in names:
        bad = bad | F.coalesce(F.instr(F.col(f"`{name}`"), REPLACEMENT) > 0, F.lit(False))
    return bad


def _parquet_files(folder: Path) -> list[Path]:
    out = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        out.extend(Path(root) / n for n in sorted(names) if not n.startswith(("_", ".")) and not n.endswith(".crc"))
    return out


def _type_family(arrow_type) -> str:
    import pyarrow as pa

    if pa.types.is_integer(arrow_type):
        return "integer"
    if pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type):
        return "number"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    if pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type):
        return "timestamp"
    return str(arrow_type)


def check_parquet_schemas(spark, source: str) -> None:
    """Refuse, before anything is read or spent, a Parquet input whose files disagree on a column's type
    (Spark would take one file's schema and fail mid-release on the other). Footers are public metadata, so
    the message names the column, the types and the files. Local paths: every footer is read with pyarrow
    (integer, float and string widths reconciled as Spark reads them); other filesystems: Spark's schema
    merge."""
    if not is_local(source):
        try:
            spark.read.option("mergeSchema", "true").parquet(source).columns
        except Exception as exc:  # noqa: BLE001 - any Spark failure of the merge

            if any(c.startswith("CANNOT_MERGE") for c in error_conditions(exc)):
                raise InputError(
                    f"the Parquet files of {source!r} disagree on a column's type; rewrite them with one "
                    "schema (nothing was read or spent)."
                ) from None
        return
    local = local_path(source)
    if local.is_dir():
        files = _parquet_files(local)
    elif _GLOB.search(str(local)) and not local.exists():
        matches = sorted(Path(m) for m in pattern_matches(local))
        files = [f for m in matches for f in (_parquet_files(m) if m.is_dir() else [m])]
    else:
        return
    import pyarrow.parquet as pq

    seen: dict[str, tuple[str, str, str]] = {}
    for path in files:
        try:
            schema = pq.read_schema(path)
        except Exception:  # noqa: BLE001 - an unreadable footer is Spark's to report
            continue
        for field in schema:
            family = _type_family(field.type)
            first = seen.setdefault(field.name, (family, str(field.type), path.name))
            if first[0] != family:
                raise InputError(
                    f"the Parquet files of {source!r} disagree on column {field.name!r}: {first[1]} in "
                    f"{first[2]!r}, {field.type} in {path.name!r}; rewrite them with one type for it "
                    "(nothing was read or spent)."
                )


_GLOB = re.compile(r"[*?\[{]")


def pattern_matches(local: Path) -> list[str]:
    """The local paths a Hadoop glob pattern matches, for the checks before
    Spark: ``{a,b}`` (Hadoop's) read as a looser ``*``."""
    return glob.glob(re.sub(r"\{[^{}]*\}", "*", str(local)))


def check_input_path(source: str) -> None:
    """Refuse a local input path that does not exist or cannot be read, or a glob pattern (Hadoop's syntax)
    that matches no file. No Spark needed; other filesystems are left to Spark."""
    if str(source).startswith("table:") or not is_local(source):
        return
    local = local_path(source)
    if _GLOB.search(str(local)) and not local.exists():
        if not pattern_matches(local):
            raise InputError(f"input pattern {source!r} matches no files.")
        return
    if not local.exists():
        raise InputError(f"input path {source!r} does not exist.")
    if not os.access(local, os.R_OK):
        raise InputError(f"input path {source!r} is not readable.")


def check_column_names(names) -> None:
    """Refuse column names Spark would not read as one top-level column (a dot or a backtick). No Spark
    needed."""
    for name in names:
        if name and ("." in name or "`" in name):
            raise ParameterError(
                f"column name {name!r} holds a {'dot' if '.' in name else 'backtick'}, which Spark reads as a "
                "field of a struct column; rename the column (for CSV, --schema names the columns in "
                "order, e.g. --schema 'person_id STRING, item_name STRING')."
            )


def string_schema(columns):
    """The schema of a JSON input read without --schema: ``columns`` (the
    names the release needs, never names found in the rows), each a string."""
    from pyspark.sql.types import StringType, StructField, StructType

    names = list(dict.fromkeys(c for c in (columns or ()) if c))
    if not names:
        raise InputError(
            "a JSON input needs its column names and types declared: pass --schema (schema=), e.g. "
            "'user STRING, item STRING', or columns= in Python; they are never inferred from the rows."
        )
    return StructType([StructField(name, StringType(), True) for name in names])


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
    """--bad-rows fail: read every row once (nothing released or spent) and refuse the input if a row does
    not parse or (CSV/JSON) holds a value that is not valid text in the --encoding. The refusal reveals that
    such a row exists (never how many or which), before the budget is charged."""
    with spark_job(f"checking that every row of {source!r} parses (--bad-rows fail)"):
        df.write.format("noop").mode("overwrite").save()
        found = _is_text_source(source) and df.where(undecodable(df)).limit(1).count() > 0
    if found:
        raise InputError(
            f"some values of {source!r} are not valid text in the given --encoding (--bad-rows fail; "
            "which ones is not shown); pass the file's --encoding (e.g. ISO-8859-1), or --bad-rows drop "
            "to drop those rows."
        )


def _is_text_source(source: str) -> bool:
    """Whether ``source`` is decoded from text (CSV/JSON; an unknown name too)."""
    if str(source).startswith("table:"):
        return False
    try:
        return detect_format(source) != "parquet"
    except InputError:
        return True


def _spark_read(load, what: str):
    try:
        df = load()
        df.columns  # forces analysis on Spark Connect too
        return df
    except spark_exception_types() as exc:
        # Spark's own text can quote data (a malformed header, a bad value): never shown
        raise InputError(f"cannot read {what}: {describe_failure(exc)}") from None


def spark_frame(df, name: str = "df"):
    """``df`` as a Spark DataFrame (classic or Connect): a pandas DataFrame is converted with the active
    session (it is on the driver already); anything else is refused saying what to pass. Every release
    function calls this first."""
    module = type(df).__module__ or ""
    if module.startswith("pyspark.sql"):
        return df
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(df, pd.DataFrame):
        frame = df.copy()
        for column in frame.columns:  # Spark has no nanosecond timestamps
            if str(frame[column].dtype).startswith("datetime64[ns"):
                frame[column] = frame[column].astype(str(frame[column].dtype).replace("ns", "us"))
        return session.get_session().createDataFrame(frame)

    raise SchemaError(
        f"{name} must be a Spark DataFrame (or a pandas DataFrame, converted with the active "
        f"session); got {type(df).__module__}.{type(df).__name__}. Convert it with "
        "spark.createDataFrame(...) or read the data with spark.read."
    )


def short_name(name: str) -> str:
    """The start of a file name (at most 64 bytes, never a split character), for temporary names beside it."""
    return os.fsencode(name)[:64].decode("utf-8", "ignore")


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to a local path atomically: a temporary file in the same folder, fsynced, then
    renamed over the target."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{short_name(target.name)}.", suffix=".tmp", dir=target.parent)
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
    """Refuse to replace what dp_spark did not write (a folder without its marker, a file not one of its
    outputs); an empty folder may go."""
    if not target.exists() and not target.is_symlink():
        return

    foreign = not_ours(target)
    if foreign:
        raise InputError(
            f"{path!r} already exists and is {foreign}, not an output of an earlier dp_spark run; it is "
            "replaced only when dp_spark wrote it (or it is an empty folder). Choose another path."
        )


#: Spark's CSV writer options for RFC 4180 output, read back exactly by Python's csv and pandas: quotes
#: doubled, not backslash-escaped, and leading/trailing spaces kept (Spark trims them by default).
CSV_WRITE_OPTIONS = {"header": "true", "quote": '"', "escape": '"', "ignoreLeadingWhiteSpace": "false",
                     "ignoreTrailingWhiteSpace": "false"}


def write_dataframe_atomic(df, path: str, fmt: str = "parquet", seeded: bool = False,
                           overwrite: bool = False) -> None:
    """Write a Spark DataFrame to a local directory atomically (a sibling temporary directory replaces the
    target), marked with ``_DP_SPARK_OUTPUT`` so a later ``--overwrite`` knows dp_spark wrote it;
    ``seeded``: marked "not for publication" (:mod:`dp_spark.marking`). ``table:db.name``: a catalog table
    (:func:`write_table`, which refuses an existing table unless ``overwrite`` and dp_spark wrote it). For
    paths, ``overwrite`` is the caller's check; a folder dp_spark did not write is always refused. CSV is
    RFC 4180 (:data:`CSV_WRITE_OPTIONS`); a seeded CSV gets the last column ``not_for_publication``, as a
    CSV keeps no column metadata."""
    if is_table(path):
        write_table(df, path, seeded=seeded, overwrite=overwrite, fmt="parquet" if fmt == "csv" else fmt)
        return
    df = mark_table_frame(df, seeded) if fmt == "csv" else mark_spark(df, seeded)
    options = CSV_WRITE_OPTIONS if fmt == "csv" else {}
    if not is_local(path):
        # object stores have no atomic rename: Spark's committer writes in place
        df.write.mode("overwrite").format(fmt).options(**options).save(path)
        return
    target = local_path(path).resolve()
    _refuse_foreign(target, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{short_name(target.name)}.{uuid.uuid4().hex}.tmp"
    try:
        df.write.mode("errorifexists").format(fmt).options(**options).save(str(tmp))
        mark_folder(tmp, seeded)
        mark_output_folder(tmp)
        old = None
        if target.exists():
            old = target.parent / f".{short_name(target.name)}.{uuid.uuid4().hex}.old"
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink()
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


# -- per-row parsing of the time and op columns read as strings ---------------------------------

#: An integer step as written: optional sign and digits.
_INTEGER_TEXT = r"^\s*[+-]?[0-9]+\s*$"


def string_time_kind(origin) -> str:
    """How a time column read as strings is parsed, from the PUBLIC parameter ``origin`` alone (never the
    rows): "timestamp" for an ISO date/time (text or a date), "number" for a number that is not whole, else
    "integer" (step numbers). Other types: declare them with --schema."""
    if isinstance(origin, (str, _dt.date)):
        return "timestamp"
    if isinstance(origin, numbers.Real) and not isinstance(origin, bool):
        value = float(origin)
        if not math.isfinite(value) or value != int(value):
            return "number"
    return "integer"


def parsed_time(column, kind: str):
    """A string time column parsed per row, null where a value does not parse (the release drops it):
    "integer" a whole number ("2.5" does not parse), "number" a double, "timestamp" an ISO date or
    date/time."""
    from pyspark.sql import functions as F

    text = F.trim(column)
    if kind == "integer":
        return F.when(text.rlike(_INTEGER_TEXT), text.try_cast("bigint"))
    if kind == "number":
        return text.try_cast("double")
    return F.try_to_timestamp(text)


def parsed_op(column):
    """A string op column parsed per row: 1 for a value reading as +1 ("1", "+1", "1.0"), -1 for −1, 0 for
    any other number, null for non-numbers (every value but ±1 drops the event)."""
    from pyspark.sql import functions as F

    value = F.trim(column).try_cast("double")
    return F.when(value == 1.0, F.lit(1)).when(value == -1.0, F.lit(-1)).when(value.isNotNull(), F.lit(0)).cast("int")


def parse_event_columns(df, *, time_col: str | None, op_col: str, time_kind: str):
    """``df`` with its STRING ``time_col`` / ``op_col`` replaced by their parsed values (columns of other
    types kept). Returns (the frame, a condition over ``df``'s columns true on rows holding an unparsable
    value, for ``--bad-rows fail``; None when no column was parsed)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    bad = None
    out = df
    for name, parse in ((time_col, lambda c: parsed_time(c, time_kind)), (op_col, parsed_op)):
        if not name or name not in df.columns or not isinstance(df.schema[name].dataType, StringType):
            continue
        raw = F.col(name)
        value = parse(raw)
        # empty text is missing, not malformed
        unparsed = raw.isNotNull() & (F.length(F.trim(raw)) > 0) & value.isNull()
        bad = unparsed if bad is None else bad | unparsed
        out = out.withColumn(name, value)
    return out, bad


def check_values_parse(df, bad, source: str) -> None:
    """--bad-rows fail: refuse the input (before anything is spent) if a time or op value does not parse.
    The refusal reveals that such a value exists (never how many or which)."""
    if bad is None:
        return
    with spark_job(f"checking that every time and op value of {source!r} parses (--bad-rows fail)"):
        found = df.where(bad).limit(1).count() > 0
    if found:
        raise InputError(
            f"a time or op value of {source!r} does not parse (--bad-rows fail; which one is not shown); "
            "fix the input, or use --bad-rows drop to drop such events."
        )
